import { memoryLogger } from '@q/testing';
import type { Request, RequestStore } from '@q/store';
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { runPartitionWorker, type Outcome, type PartitionWorkerOptions, type PartitionWorkerStats } from '../src/index.js';
import { idInPartition, ids, requests, runnerOptions, runUntil, useRunnerStore, waitFor } from './helpers.js';

let store: RequestStore;
let db: pg.Pool;
const unhandled = useRunnerStore('pc_runner', (t) => ({ store, db } = t));

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const unixNow = () => Math.floor(Date.now() / 1000);

async function count(sql: string, params: unknown[]): Promise<number> {
  const { rows } = await db.query<{ n: string }>(sql, params);
  return Number(rows[0]?.n ?? 0);
}
const results = (route: string) => count('SELECT count(*) AS n FROM q_results WHERE route = $1', [route]);
const left = (queue: string) => count('SELECT count(*) AS n FROM q_requests WHERE queue = $1', [queue]);

/** A logger that keeps every line. */
describe('runPartitionWorker', () => {
  it('handles every request once with bounded concurrency, batches acks, and stops cleanly', async () => {
    const q = 'rw-basic';
    await store.enqueue(requests(q, ids('basic', 400)));
    let running = 0;
    let peak = 0;
    const seen = new Map<string, number>();
    const log = memoryLogger();
    const stats = await runUntil(
      store,
      q,
      async (req: Request, signal: AbortSignal) => {
        expect(signal).toBeInstanceOf(AbortSignal);
        running++;
        peak = Math.max(peak, running);
        seen.set(req.id, (seen.get(req.id) ?? 0) + 1);
        await sleep(2);
        running--;
        return { result: { route: 'rw-basic-out', payload: JSON.stringify({ id: req.id }) } };
      },
      async () => (await results('rw-basic-out')) === 400,
      { owner: 'worker-one', logger: log, ackBatchSize: 16 },
    );
    expect(stats).toMatchObject({ owner: 'worker-one', dispatched: 400, acked: 400, fenced: 0, abandoned: 0, failed: 0 });
    expect(peak).toBeLessThanOrEqual(8);
    expect([...seen.values()].every((n) => n === 1)).toBe(true);
    expect(await left(q)).toBe(0);
    // Closed: nothing held, no membership.
    expect(await count(`SELECT count(*) AS n FROM q_partitions WHERE queue = $1 AND owner <> ''`, [q])).toBe(0);
    expect(await count('SELECT count(*) AS n FROM q_dispatchers WHERE queue = $1', [q])).toBe(0);
    expect(log.lines.some((l) => l.msg === 'partition worker stopped')).toBe(true);
    expect(JSON.stringify(log.lines)).not.toContain('"basic-'); // no request ids or payloads in routine logs
  });

  it('writes a partial ack batch as soon as no handler is left running, not after ackFlushMs', async () => {
    const q = 'rw-idle-flush';
    await store.enqueue(requests(q, ids('idle', 5)));
    const stats = await runUntil(
      store,
      q,
      async (req) => ({ result: { route: 'rw-idle-flush-out', payload: req.id } }),
      async () => (await results('rw-idle-flush-out')) === 5,
      {
        ackBatchSize: 8,
        ackFlushMs: 600_000, // a timer flush would come long after the wait below gives up
      },
    );
    expect(stats).toMatchObject({ dispatched: 5, acked: 5, fenced: 0, abandoned: 0 });
    expect(await left(q)).toBe(0);
  });

  it('applies retry, defer and handler failures, then finishes', async () => {
    const q = 'rw-outcomes';
    await store.enqueue(requests(q, ['retry-me', 'defer-me', 'throw-me', 'junk-me']));
    const calls = new Map<string, Request[]>();
    const stats = await runUntil(
      store,
      q,
      async (req): Promise<Outcome> => {
        const seen = calls.get(req.id) ?? [];
        seen.push(req);
        calls.set(req.id, seen);
        const first = seen.length === 1;
        if (req.id === 'retry-me' && first) return { retryAt: 0, envelope: '{"retries":1}' };
        if (req.id === 'defer-me' && first) return { defer: unixNow() + 1 };
        if (req.id === 'throw-me' && first) throw new Error('boom');
        if (req.id === 'junk-me' && first) return { nonsense: true } as unknown as Outcome;
        return { result: { route: 'rw-outcomes-out', payload: req.envelope, expiresAt: unixNow() + 3600 } };
      },
      async () => (await results('rw-outcomes-out')) === 4,
      { errorRetryDelayMs: 0 },
    );
    expect(stats).toMatchObject({ acked: 4, retried: 3, deferred: 1, failed: 2, abandoned: 0 });
    expect(calls.get('retry-me')?.[1]?.envelope).toBe('{"retries":1}');
    expect(calls.get('throw-me')?.[1]?.envelope).toBe('{"id":"throw-me"}');
    expect(calls.get('defer-me')?.length).toBe(2);
    expect(await left(q)).toBe(0);
  });

  it('a handler that keeps answering invalidly runs maxHandlerFailures times, then failureResult answers it once (issue 35 item 1)', async () => {
    const q = 'rw-bounded';
    const past = unixNow() - 5;
    await store.enqueue([...requests(q, ['bad-ttl']), ...requests(q, ['late'], past)]);
    const calls = new Map<string, number>();
    const told: Array<[string, number, string]> = [];
    const ac = new AbortController();
    const done = runPartitionWorker({
      ...runnerOptions(store, q, ac, async (req) => {
        calls.set(req.id, (calls.get(req.id) ?? 0) + 1);
        // What a dispatcher built from a foreign envelope's `result_ttl_seconds: 1e300`.
        return { result: { route: 'rw-bounded-out', payload: req.id, expiresAt: 1e300 } };
      }),
      errorRetryDelayMs: 100,
      maxHandlerFailures: 3,
      failureResult: (req, f) => {
        told.push([req.id, f.failures, f.reason]);
        return { route: 'rw-bounded-out', payload: `gave up on ${req.id}` };
      },
    });
    await waitFor(async () => (await results('rw-bounded-out')) === 2, 20_000);
    await sleep(1500); // time for more runs, if any were still coming
    ac.abort();
    const stats = await done;
    // Three runs of the request with a far deadline (1, then 1 s apart: rounded up to whole seconds);
    // one of the request already past its deadline: a failure after the deadline is the last.
    expect(Object.fromEntries(calls)).toEqual({ 'bad-ttl': 3, late: 1 });
    expect(told).toEqual(
      expect.arrayContaining([
        ['bad-ttl', 3, 'no valid outcome: result.expiresAt must be a non-negative number of Unix seconds'],
        ['late', 1, 'no valid outcome: result.expiresAt must be a non-negative number of Unix seconds'],
      ]),
    );
    const { rows } = await db.query<{ payload: string }>(`SELECT payload FROM q_results WHERE route = 'rw-bounded-out' ORDER BY payload`);
    expect(rows.map((r) => r.payload)).toEqual(['gave up on bad-ttl', 'gave up on late']);
    expect(stats).toMatchObject({ failed: 4, acked: 2, retried: 2, setAside: 0 });
    expect(await left(q)).toBe(0);
  });

  it('without failureResult a request that keeps failing is set aside: pending, never dispatched again, counted', async () => {
    const q = 'rw-aside';
    await store.enqueue(requests(q, ['throws']));
    let calls = 0;
    const log = memoryLogger();
    const stats = await runUntil(
      store,
      q,
      async () => {
        calls++;
        throw new Error('always');
      },
      async () => (await count(`SELECT count(*) AS n FROM q_requests WHERE queue = $1 AND not_before = $2`, [q, Number.MAX_SAFE_INTEGER])) === 1,
      { errorRetryDelayMs: 0, maxHandlerFailures: 2, logger: log },
      20_000,
    );
    expect(calls).toBe(2);
    expect(stats).toMatchObject({ failed: 2, retried: 1, setAside: 1, acked: 0 });
    expect(await left(q)).toBe(1);
    expect(log.lines.some((l) => l.level === 'error' && /set aside/.test(l.msg ?? ''))).toBe(true);
  });

  // What a stop does to the handlers in flight, once all of them have started: it waits for them
  // and writes their results, or (stopTimeoutMs passed) aborts them and puts their requests back.
  const stops: Array<{
    name: string;
    q: string;
    prefix: string;
    n: number;
    handle: PartitionWorkerOptions['handle'];
    options: Partial<PartitionWorkerOptions>;
    stats: Partial<PartitionWorkerStats>;
    written: number;
    putBack: number;
  }> = [
    {
      name: 'graceful stop waits for work in flight and writes its results before closing',
      q: 'rw-graceful',
      prefix: 'graceful',
      n: 6,
      handle: async (req) => {
        await sleep(400);
        return { result: { route: 'rw-graceful-out', payload: req.id } };
      },
      options: { concurrency: 6 },
      stats: { dispatched: 6, acked: 6, abandoned: 0 },
      written: 6,
      putBack: 0,
    },
    {
      name: 'a stop that times out aborts the handlers and puts their requests back',
      q: 'rw-timeout',
      prefix: 'timeout',
      n: 3,
      handle: (_req, signal) => new Promise<Outcome>((_, reject) => signal.addEventListener('abort', () => reject(signal.reason))),
      options: { stopTimeoutMs: 200 },
      stats: { dispatched: 3, acked: 0, undispatched: 3 },
      written: 0,
      putBack: 3,
    },
  ];
  for (const { name, q, prefix, n, handle, options, stats, written, putBack } of stops) {
    it(name, async () => {
      await store.enqueue(requests(q, ids(prefix, n)));
      let started = 0;
      const got = await runUntil(
        store,
        q,
        (req, signal) => {
          started++;
          return handle(req, signal);
        },
        () => started === n,
        options,
      );
      expect(got).toMatchObject(stats);
      expect(await results(`${q}-out`)).toBe(written);
      expect(await left(q)).toBe(putBack);
      expect(await count('SELECT count(*) AS n FROM q_requests WHERE queue = $1 AND dispatch_epoch = 0', [q])).toBe(putBack);
    });
  }

  it('two workers share the queue; a handler whose partition moved is aborted and its late result fenced', async () => {
    const q = 'rw-pair';
    // One request per partition, so every partition is busy and the hand-over has to wait.
    await store.enqueue(
      requests(
        q,
        Array.from({ length: 64 }, (_, p) => idInPartition('pair', p)),
      ),
    );
    const acA = new AbortController();
    const acB = new AbortController();
    const aborted: string[] = [];
    // a holds everything and sits on its work; b joins, a's stop times out, b redelivers.
    const a = runPartitionWorker({
      ...runnerOptions(
        store,
        q,
        acA,
        (req, signal) =>
          new Promise<Outcome>((resolve) =>
            signal.addEventListener('abort', () => {
              aborted.push(req.id);
              // Ignores the abort and answers anyway: the write must be refused.
              resolve({ result: { route: 'rw-pair-out', payload: 'late' } });
            }),
          ),
      ),
      owner: 'pair-a',
      concurrency: 64,
      batchSize: 64,
      drainTimeoutMs: 600,
      stopTimeoutMs: 10_000,
    });
    await waitFor(async () => (await count(`SELECT count(*) AS n FROM q_requests WHERE queue = $1 AND dispatch_epoch > 0`, [q])) === 64);
    const b = runPartitionWorker({
      ...runnerOptions(store, q, acB, async (req) => ({ result: { route: 'rw-pair-out', payload: req.id } })),
      owner: 'pair-b',
    });
    // a drains half its partitions to b; after the drain timeout b redelivers their work.
    await waitFor(async () => (await results('rw-pair-out')) >= 32);
    acA.abort();
    const statsA = await a; // a's remaining handlers are aborted only if their partitions move: its stop waits
    await waitFor(async () => (await results('rw-pair-out')) === 64);
    acB.abort();
    const statsB = await b;
    expect(await left(q)).toBe(0);
    expect(await count(`SELECT count(*) AS n FROM q_results WHERE route = 'rw-pair-out' AND payload = 'late'`, [])).toBe(statsA.acked);
    expect(statsA.fenced).toBeGreaterThanOrEqual(32);
    expect(aborted.length).toBeGreaterThanOrEqual(32);
    expect(statsA.acked + statsB.acked).toBe(64);
  });

  it('rejects invalid options with INVALID_ARGUMENT', async () => {
    const ac = new AbortController();
    const ok = runnerOptions(store, 'rw-bad', ac, async () => ({ defer: 0 }));
    await expect(runPartitionWorker({ ...ok, concurrency: 0 })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(runPartitionWorker({ ...ok, queue: '' })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(runPartitionWorker({ ...ok, handle: undefined as never })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(runPartitionWorker({ ...ok, signal: undefined as never })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });

  it('left no unhandled rejection behind', () => {
    expect(unhandled).toEqual([]);
  });
  it('pollWake starts the next poll at once instead of after the poll interval (and must be a function)', async () => {
    const q = 'rw-pollwake';
    const ac = new AbortController();
    let wake: (() => void) | undefined;
    const handled = new Map<string, number>();
    const done = runPartitionWorker({
      ...runnerOptions(store, q, ac, async (req) => {
        handled.set(req.id, Date.now());
        return { result: { route: 'rw-pollwake-out', payload: '{}' } };
      }),
      // A poll that finds nothing waits 20 s: only the wake-up can bring the request in time.
      pollIntervalMs: 20_000,
      pollWake: (w) => (wake = w),
    });
    try {
      await waitFor(
        async () => wake !== undefined && (await count('SELECT count(*) AS n FROM q_partitions WHERE queue = $1 AND owner IS NOT NULL', [q])) > 0,
        10_000,
      );
      await sleep(300); // its first polls found nothing: it sleeps out the interval
      await store.enqueue(requests(q, ['woken']));
      const t0 = Date.now();
      wake?.();
      await waitFor(() => handled.has('woken'), 5_000);
      expect((handled.get('woken') as number) - t0).toBeLessThan(3_000);
    } finally {
      ac.abort();
      await done;
    }
    const bad = new AbortController();
    bad.abort();
    await expect(
      runPartitionWorker({ ...runnerOptions(store, q, bad, async () => ({ retryAt: 0 })), pollWake: 'soon' as unknown as () => void }),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: 'runPartitionWorker: pollWake must be a function' });
  });
});
