import { randomUUID } from 'node:crypto';
import { expect, it } from 'vitest';
import { jobUuid, uuidTail } from '../src/jobs/uuid.js';

it("a job uuid carries its id in its first 60 bits, then version 8, then the random uuid's last 62 bits", () => {
  const random = randomUUID();
  for (const id of [1, 4_095, 4_096, 123_456_789, Number.MAX_SAFE_INTEGER]) {
    const u = jobUuid(id, random);
    expect(u).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(parseInt(u.slice(0, 8) + u.slice(9, 13) + u.slice(15, 18), 16)).toBe(id);
    expect(uuidTail(u)).toBe(uuidTail(random));
  }
  // They sort as their ids do (as text and as Postgres' uuid order), whatever their random part.
  const ids = [1, 2, 15, 16, 4_095, 4_096, 1_000_000, 2 ** 40, Number.MAX_SAFE_INTEGER];
  const made = ids.map((id) => jobUuid(id, randomUUID()));
  expect([...made].sort()).toEqual(made);
  // Within one id, they differ in the random part.
  expect(new Set(Array.from({ length: 10_000 }, () => jobUuid(7, randomUUID()))).size).toBe(10_000);
});
