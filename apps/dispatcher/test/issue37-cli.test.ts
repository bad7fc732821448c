// Issue 37 (d) as real `q-dispatcher` processes: submit warns about a queue no dispatcher has
// served and refuses an id twice in one input; a partial cancel exits 1 naming what it missed;
// status counts cancelled requests apart from pending; results --peek leaves the results in place.
import { describe, expect, it } from 'vitest';
import { useCliFixture } from './cli-harness.js';

const f = useCliFixture();
const deadline = () => Math.floor(Date.now() / 1000) + 600;
const line = (id: string) => JSON.stringify({ id, deadline: deadline(), payload: { id } });
const count = async (sql: string, values: unknown[] = []) => Number((await f.schema.pool().query<{ n: string }>(sql, values)).rows[0]!.n);

describe('q-dispatcher submit', () => {
  it('warns on stderr (exit 0, written) when no dispatcher has served the queue; not once one has', async () => {
    const env = { Q_DSN: f.schema.dsn };
    const unserved = f.startCli(['submit', '--queue', 'nobody37', '--route', 'out37', '--file', f.tmpFile('u.jsonl', `${line('u-1')}\n`)], env);
    expect(await unserved.exit).toBe(0);
    expect(unserved.out()).toContain('submitted 1 requests to queue nobody37');
    expect(unserved.err()).toBe(
      'q-dispatcher: warning: no dispatcher has served queue "nobody37" in this database yet; ' +
        'the requests wait until `q-dispatcher run` serves it (check --queue and --dsn)\n',
    );
    expect(await count(`SELECT count(*) AS n FROM q_requests WHERE queue = 'nobody37'`)).toBe(1);

    // What a starting dispatcher does: create the partitions and lease them (epoch 1).
    await f.store.ensurePartitions('served37');
    expect(await f.store.acquirePartitions('served37', 'd-37', new Date(), 60_000, 64)).toHaveLength(64);
    const served = f.startCli(['submit', '--queue', 'served37', '--route', 'out37', '--file', f.tmpFile('s.jsonl', `${line('s-1')}\n`)], env);
    expect(await served.exit).toBe(0);
    expect(served.err()).toBe('');
  }, 120_000);

  it('an id twice in one file: exit 2 naming the ids and their lines, nothing written', async () => {
    const file = f.tmpFile('dup.jsonl', [line('d-1'), line('d-2'), line('d-1'), line('d-3'), '', line('d-2')].join('\n') + '\n');
    const p = f.startCli(['submit', '--queue', 'dup37', '--route', 'out37', '--file', file], { Q_DSN: f.schema.dsn });
    expect(await p.exit).toBe(2);
    expect(p.err()).toBe('q-dispatcher: submit: duplicate request id(s): "d-1" (lines 1, 3), "d-2" (lines 2, 6); nothing was submitted\n');
    expect(await count(`SELECT count(*) AS n FROM q_requests WHERE queue = 'dup37'`)).toBe(0);
  }, 60_000);
});

describe('q-dispatcher cancel and status', () => {
  it('a partial cancel exits 1 naming the ids it missed; a full one 0; status counts the cancelled apart', async () => {
    const env = { Q_DSN: f.schema.dsn };
    const file = f.tmpFile('c.jsonl', ['k-1', 'k-2', 'k-3'].map(line).join('\n') + '\n');
    expect(await f.startCli(['submit', '--queue', 'cancel37', '--route', 'out37c', '--file', file], env).exit).toBe(0);

    const partial = f.startCli(['cancel', 'k-1', 'k-404'], env);
    expect(await partial.exit).toBe(1);
    expect(partial.out()).toContain('cancelled 1 of 2 request id(s)');
    expect(partial.err()).toBe('q-dispatcher: cancel: not cancelled: "k-404" (unknown, or already cancelled)\n');
    const full = f.startCli(['cancel', 'k-2'], env);
    expect(await full.exit).toBe(0);
    expect(full.err()).toBe('');

    const st = f.startCli(['status', '--queue', 'cancel37', '--route', 'out37c', '--json'], env);
    expect(await st.exit).toBe(0);
    expect(JSON.parse(st.out())[0]).toMatchObject({ queue: 'cancel37', backlog: 1, cancelled: 2, expiring: { '3600s': 1 } });
    const human = f.startCli(['status', '--queue', 'cancel37', '--route', 'out37c'], env);
    expect(await human.exit).toBe(0);
    expect(human.out()).toMatch(/^ {2}backlog {12}1 pending\n {2}cancelled {10}2 \(not answered by a dispatcher yet\)$/m);
  }, 120_000);
});

describe('q-dispatcher results --peek', () => {
  it('prints the results the next pop returns and leaves them; the pop then takes them', async () => {
    const env = { Q_DSN: f.schema.dsn };
    const now = Date.now();
    const expired = Math.floor(now / 1000) - 10;
    await f.schema.pool().query(
      `INSERT INTO q_results (route, id, request_token, payload, expires_at, created_at)
       VALUES ('peek37', 'p-1', 't1', $1, 0, $3), ('peek37', 'p-2', 't2', $2, 0, $3), ('peek37', 'p-old', 't3', $2, $4, $3)`,
      [
        JSON.stringify({ id: 'p-1', status_code: 200, payload: '{"n":1}' }),
        JSON.stringify({ id: 'p-2', status_code: 200, payload: '{"n":2}' }),
        now,
        expired,
      ],
    );
    const peek = f.startCli(['results', '--route', 'peek37', '--peek'], env);
    expect(await peek.exit).toBe(0);
    const peeked = peek.out().trim().split('\n');
    expect(peeked.map((l) => (JSON.parse(l) as { id: string }).id)).toEqual(['p-1', 'p-2']);
    expect(await count(`SELECT count(*) AS n FROM q_results WHERE route = 'peek37'`)).toBe(3);

    const pop = f.startCli(['results', '--route', 'peek37'], env);
    expect(await pop.exit).toBe(0);
    expect(pop.out().trim().split('\n')).toEqual(peeked);
    expect(await count(`SELECT count(*) AS n FROM q_results WHERE route = 'peek37'`)).toBe(0);

    const both = f.startCli(['results', '--route', 'peek37', '--peek', '--follow'], env);
    expect(await both.exit).toBe(2);
  }, 120_000);
});
