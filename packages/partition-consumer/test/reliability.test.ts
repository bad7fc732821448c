// Issue #14 for the consumer and runner: items 10, 18, 20, 25 and the lease bounce ("Also").
import { memoryLogger } from '@q/testing';
import type { RequestStore } from '@q/store';
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { Consumer, runPartitionWorker, type Outcome, type PartitionWorkerOptions } from '../src/index.js';
import { idInPartition, ids, requests, runnerOptions, runUntil, useRunnerStore, waitFor } from './helpers.js';

let store: RequestStore;
let db: pg.Pool;
const unhandled = useRunnerStore('pc_rel', (t) => ({ store, db } = t));

async function resultsOf(route: string): Promise<Array<{ id: string; payload: string; expires_at: string }>> {
  const { rows } = await db.query<{ id: string; payload: string; expires_at: string }>(
    'SELECT id, payload, expires_at FROM q_results WHERE route = $1 ORDER BY id',
    [route],
  );
  return rows;
}
const left = async (queue: string) =>
  Number((await db.query<{ n: string }>('SELECT count(*) AS n FROM q_requests WHERE queue = $1', [queue])).rows[0]?.n);

async function errorOf(f: () => unknown): Promise<unknown> {
  try {
    await f();
    return undefined;
  } catch (err) {
    return err;
  }
}

describe('bad outcomes fail alone (item 18)', () => {
  it('a result the store would refuse fails its own request only; its ack batch is written', async () => {
    const q = 'rel-bad-results';
    const good = ids('good', 4);
    const bad = { 'bad-nul': { route: 'a\u0000b' }, 'bad-long': { route: 'r'.repeat(3000) }, 'bad-surrogate': { payload: 'x\ud800' } } as const;
    await store.enqueue(requests(q, [...good, ...Object.keys(bad), 'frac']));
    const calls = new Map<string, number>();
    const log = memoryLogger();
    const expiresAt = Date.now() / 1000 + 3600.25;
    const stats = await runUntil(
      store,
      q,
      async (req): Promise<Outcome> => {
        const n = (calls.get(req.id) ?? 0) + 1;
        calls.set(req.id, n);
        const over = n === 1 ? (bad as Record<string, { route?: string; payload?: string }>)[req.id] : undefined;
        if (req.id === 'frac') return { result: { route: 'rel-bad-out', payload: req.id, expiresAt } };
        return { result: { route: 'rel-bad-out', payload: `ok ${req.id}`, ...over } };
      },
      async () => (await resultsOf('rel-bad-out')).length === 8,
      { logger: log, errorRetryDelayMs: 0, ackFlushMs: 50 },
      8_000,
    );
    // Every good request ran once; each bad one once more (the retry of a failed handler).
    for (const id of [...good, 'frac']) expect(calls.get(id), id).toBe(1);
    for (const id of Object.keys(bad)) expect(calls.get(id), id).toBe(2);
    expect(stats).toMatchObject({ acked: 8, failed: 3, retried: 3, abandoned: 0, fenced: 0 });
    const rows = await resultsOf('rel-bad-out');
    // A fractional expiresAt is rounded up, not refused.
    expect(Number(rows.find((r) => r.id === 'frac')?.expires_at)).toBe(Math.ceil(expiresAt));
    expect(await left(q)).toBe(0);
    const reasons = log.lines.filter((l) => l.msg === 'handler returned no valid outcome').map((l) => String(l.fields.reason));
    expect(reasons.sort()).toEqual([
      'ack: result.payload contains a lone UTF-16 surrogate',
      'ack: result.route contains a NUL character',
      'ack: result.route is longer than 2048 bytes',
    ]);
    expect(log.lines.some((l) => l.msg === 'ack failed; requests abandoned for redelivery')).toBe(false);
  });

  it('a retry envelope the store would refuse fails alone instead of looping through abandon', async () => {
    const q = 'rel-bad-envelope';
    await store.enqueue(requests(q, ['env']));
    let calls = 0;
    const stats = await runUntil(
      store,
      q,
      async (req): Promise<Outcome> => {
        calls++;
        if (calls === 1) return { retryAt: 0, envelope: 'x\u0000' };
        return { result: { route: 'rel-env-out', payload: req.envelope } };
      },
      async () => (await resultsOf('rel-env-out')).length === 1,
      { errorRetryDelayMs: 0 },
      8_000,
    );
    expect(stats).toMatchObject({ acked: 1, failed: 1, retried: 1, abandoned: 0 });
    expect(calls).toBe(2);
    expect((await resultsOf('rel-env-out'))[0]?.payload).toBe('{"id":"env"}'); // the envelope was kept
  });
});

describe('fractional retryAt and defer (item 20)', () => {
  it('are rounded up and written, not refused and redelivered at once', async () => {
    const q = 'rel-fraction';
    await store.enqueue(requests(q, ['retry-frac', 'defer-frac']));
    const seen = new Map<string, number[]>();
    const asked = new Map<string, number>();
    const stats = await runUntil(
      store,
      q,
      async (req): Promise<Outcome> => {
        const times = seen.get(req.id) ?? [];
        times.push(Date.now());
        seen.set(req.id, times);
        if (times.length === 1) {
          const at = Date.now() / 1000 + 1.2;
          asked.set(req.id, at);
          return req.id === 'retry-frac' ? { retryAt: at, envelope: '{"n":1}' } : { defer: at };
        }
        return { result: { route: 'rel-frac-out', payload: req.envelope } };
      },
      async () => (await resultsOf('rel-frac-out')).length === 2,
      {},
      10_000,
    );
    expect(stats).toMatchObject({ acked: 2, retried: 1, deferred: 1, failed: 0, abandoned: 0 });
    for (const id of ['retry-frac', 'defer-frac']) {
      const times = seen.get(id) ?? [];
      expect(times, id).toHaveLength(2);
      expect(times[1]!, id).toBeGreaterThanOrEqual((asked.get(id) ?? 0) * 1000);
    }
    expect((await resultsOf('rel-frac-out')).find((r) => r.id === 'retry-frac')?.payload).toBe('{"n":1}');
  });
});

describe('bad arguments are INVALID_ARGUMENT (items 10 and 25)', () => {
  const consumer = (queue = 'rel-args', owner = 'o', opts: Record<string, unknown> = {}) =>
    new Consumer(store, queue, owner, { leaseTtlMs: 1000, drainTimeoutMs: 0, ...opts });

  it('Consumer: abandon of a non-stamp, NUL in names, over-long timers, bad providers', async () => {
    const c = consumer();
    const t0 = await store.now();
    await c.rebalance(t0);
    await store.enqueue(requests('rel-args', ['held']));
    const [held] = await c.poll(t0, 1);
    const stamp = { id: held!.id, token: held!.token, attempt: held!.attempt };
    const bad: Array<[string, () => unknown]> = [
      ['abandon(null)', () => c.abandon(null as never)],
      ['abandon(stamp, undefined)', () => c.abandon(stamp, undefined as never)],
      ['abandon({ id })', () => c.abandon({ id: 'x' } as never)],
      ['queue with NUL', () => consumer('a\u0000b')],
      ['owner with NUL', () => consumer('q', 'o\u0000')],
      ['queue over 2,048 bytes', () => consumer('q'.repeat(2049))],
      ['leaseTtlMs 3·2^31', () => consumer('q', 'o', { leaseTtlMs: 3 * 2 ** 31 })],
      ['leaseTtlMs 2^31', () => consumer('q', 'o', { leaseTtlMs: 2 ** 31 })],
      ['drainTimeoutMs 2^31', () => consumer('q', 'o', { drainTimeoutMs: 2 ** 31 })],
      ['tracerProvider {}', () => consumer('q', 'o', { tracerProvider: {} })],
      ['meterProvider 1', () => consumer('q', 'o', { meterProvider: 1 })],
      ['logger {}', () => consumer('q', 'o', { logger: {} })],
    ];
    for (const [name, call] of bad) {
      const err = await errorOf(call);
      expect(err, name).toMatchObject({ code: 'INVALID_ARGUMENT' });
    }
    // The valid stamp given with a bad one was not abandoned; the longest valid timer is accepted.
    expect(c.inspect().tracked).toEqual([stamp]);
    expect(() => consumer('q', 'o', { leaseTtlMs: 2 ** 31 - 1, drainTimeoutMs: 2 ** 31 - 1 })).not.toThrow();
    c.abandon(stamp);
    expect(c.inspect().tracked).toEqual([]);
    await c.close();
  });

  it('Consumer.retry(null) names its argument `stamp` (it used to say stamps[0])', async () => {
    const c = consumer();
    try {
      for (const v of [null, undefined, { id: 'x' }]) {
        const err = await errorOf(() => c.retry(v as never, 1, '{}'));
        expect(err).toMatchObject({ code: 'INVALID_ARGUMENT', message: 'Consumer.retry: stamp must be a stamp { id, token, attempt }' });
      }
    } finally {
      await c.close();
    }
  });

  it('runPartitionWorker: NUL in the queue, durations of 2^31 ms or more, bad providers', async () => {
    const ac = new AbortController();
    ac.abort(); // nothing may start even if the options were accepted
    const ok = runnerOptions(store, 'rel-args-w', ac, async () => ({ defer: 0 }));
    const bad: Array<[string, Partial<PartitionWorkerOptions>]> = [
      ['queue with NUL', { queue: 'a\u0000' }],
      ['owner with a lone surrogate', { owner: '\udc00' }],
      ['leaseTtlMs 3·2^31', { leaseTtlMs: 3 * 2 ** 31 }],
      ['drainTimeoutMs 2^31', { drainTimeoutMs: 2 ** 31 }],
      ['pollIntervalMs 2^31', { pollIntervalMs: 2 ** 31 }],
      ['ackFlushMs 2^31', { ackFlushMs: 2 ** 31 }],
      ['stopTimeoutMs 2^31', { stopTimeoutMs: 2 ** 31 }],
      ['errorRetryDelayMs 2^32', { errorRetryDelayMs: 2 ** 32 }],
      ['tracerProvider {}', { tracerProvider: {} as never }],
      ['meterProvider "x"', { meterProvider: 'x' as never }],
    ];
    for (const [name, over] of bad) {
      const err = await errorOf(() => runPartitionWorker({ ...ok, ...over }));
      expect(err, name).toMatchObject({ code: 'INVALID_ARGUMENT' });
    }
    await expect(runPartitionWorker({ ...ok, leaseTtlMs: 2 ** 31 - 1, pollIntervalMs: 2 ** 31 - 1 })).resolves.toMatchObject({ dispatched: 0 });
  });
});

describe('a partition that bounces back while its handler runs ("Also")', () => {
  it('the old handler is aborted even though the rebalance that saw the loss failed; its late result is fenced', async () => {
    const q = 'rel-bounce';
    const victim = idInPartition('victim', 0);
    const poison = idInPartition('poison', 1);
    await store.enqueue(requests(q, [victim, poison]));
    const log = memoryLogger();
    const victimCalls: Array<{ signal: AbortSignal; abortedAt?: number; startedAt: number }> = [];
    let releasePoison!: () => void;
    const poisonGate = new Promise<void>((r) => (releasePoison = r));
    let poisonCalls = 0;
    const ac = new AbortController();
    const done = runPartitionWorker({
      ...runnerOptions(store, q, ac, async (req, signal): Promise<Outcome> => {
        if (req.id === poison) {
          poisonCalls++;
          if (poisonCalls === 1) {
            await poisonGate;
            return { retryAt: 0 };
          }
          return { result: { route: 'rel-bounce-out', payload: 'poison ok' } };
        }
        const call: { signal: AbortSignal; abortedAt?: number; startedAt: number } = { signal, startedAt: Date.now() };
        victimCalls.push(call);
        if (victimCalls.length > 1) return { result: { route: 'rel-bounce-out', payload: 'fresh' } };
        // Ignores nothing: waits for its abort, then answers anyway (that write must be fenced).
        return new Promise<Outcome>((resolve) =>
          signal.addEventListener('abort', () => {
            call.abortedAt = Date.now();
            resolve({ result: { route: 'rel-bounce-out', payload: 'late' } });
          }),
        );
      }),
      owner: 'bounce-a',
      logger: log,
    });
    await waitFor(() => victimCalls.length === 1 && poisonCalls === 1);
    // A real fault: every write of the poison row fails. Its retry is abandoned, and from then on
    // each rebalance fails at its end (the orphan cannot be returned to pending).
    await db.query(`CREATE FUNCTION rel_fault() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'injected fault'; END $$`);
    await db.query(`CREATE TRIGGER rel_fault BEFORE UPDATE ON q_requests FOR EACH ROW WHEN (OLD.id = '${poison}') EXECUTE FUNCTION rel_fault()`);
    try {
      releasePoison();
      await waitFor(() => log.lines.some((l) => l.msg === 'rebalance failed; retrying next beat'), 10_000);
      // Another owner takes partition 0 (as if bounce-a's lease had lapsed) for about one lease TTL.
      const now = await store.now();
      const stolen = await store.acquirePartitions(q, 'thief', new Date(now.getTime() + 1700), 0, 1);
      expect(stolen.map((l) => l.partition)).toEqual([0]);
      // bounce-a learns at its next heartbeat that partition 0 is gone: its handler must stop,
      // although that rebalance fails later on.
      await waitFor(() => victimCalls[0]?.abortedAt !== undefined, 3_000);
    } finally {
      await db.query('DROP TRIGGER IF EXISTS rel_fault ON q_requests');
      await db.query('DROP FUNCTION IF EXISTS rel_fault()');
    }
    // The thief's lease lapses, bounce-a takes partition 0 back (a newer epoch) and runs the victim again.
    await waitFor(async () => (await resultsOf('rel-bounce-out')).length === 2, 15_000);
    ac.abort();
    const stats = await done;
    const rows = await resultsOf('rel-bounce-out');
    expect(rows.map((r) => r.payload).sort()).toEqual(['fresh', 'poison ok']);
    expect(victimCalls).toHaveLength(2);
    // Never two handlers of the victim at once: the first was aborted before the second started.
    expect(victimCalls[0]!.abortedAt!).toBeLessThanOrEqual(victimCalls[1]!.startedAt);
    expect(stats.fenced).toBeGreaterThanOrEqual(1); // the late result
    expect(await left(q)).toBe(0);
  });
});

describe('afterwards', () => {
  it('left no unhandled rejection behind', () => {
    expect(unhandled).toEqual([]);
  });
});
