import { expect, it } from 'vitest';
import { jobUuid, uuidTail, uuidV7 } from '../src/jobs/uuid.js';

const V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

it('job uuids are version 7: the creation millisecond first, then random bits', () => {
  const at = Date.UTC(2026, 11, 1, 12, 0, 0, 123);
  const id = uuidV7(at);
  expect(id).toMatch(V7);
  expect(parseInt(id.slice(0, 8) + id.slice(9, 13), 16)).toBe(at);
  // Later milliseconds sort after earlier ones (as text and as Postgres' uuid order).
  const ids = [0, 1, 2, 1_000, 86_400_000].map((d) => uuidV7(at + d));
  expect([...ids].sort()).toEqual(ids);
  // Within one millisecond they differ in the random bits.
  const same = new Set(Array.from({ length: 10_000 }, () => uuidV7(at)));
  expect(same.size).toBe(10_000);
  for (const u of same) expect(u).toMatch(V7);
  // The time part follows every change of millisecond, back and forth (it is formatted once per one).
  for (const t of [at, at + 1, at, at + 65_536, at]) expect(parseInt(uuidV7(t).slice(0, 8) + uuidV7(t).slice(9, 13), 16)).toBe(t);
});

it("a job uuid carries its id in its first 60 bits, then version 8, then the random uuid's last 62 bits", () => {
  const random = uuidV7();
  for (const id of [1, 4_095, 4_096, 123_456_789, Number.MAX_SAFE_INTEGER]) {
    const u = jobUuid(id, random);
    expect(u).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(parseInt(u.slice(0, 8) + u.slice(9, 13) + u.slice(15, 18), 16)).toBe(id);
    expect(uuidTail(u)).toBe(uuidTail(random));
  }
  // They sort as their ids do (as text and as Postgres' uuid order).
  const ids = [1, 2, 15, 16, 4_095, 4_096, 1_000_000, 2 ** 40];
  const made = ids.map((id) => jobUuid(id, uuidV7()));
  expect([...made].sort()).toEqual(made);
});
