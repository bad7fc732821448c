import type { TestSchema } from '@q/testing';
import type { Request, RequestStore } from '@q/store';
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { Consumer } from '../src/index.js';
import { idInPartition, plus, requests, unix, useTestStore, waitFor } from './helpers.js';

const TTL = 10_000;
let schema: TestSchema;
let store: RequestStore;
let db: pg.Pool;

useTestStore('pc_book', 6, (t) => {
  ({ schema, store } = t);
  db = schema.pool();
});

/**
 * Waits until some backend waits for a lock on this file's q_requests (the db pool's search_path
 * is the test schema), applying `apply` (an SQL expression of their `pid`) to the waiting ones.
 */
async function onceWaitingOnRequests(apply = 'pid'): Promise<void> {
  const waiting = `SELECT DISTINCT pid FROM pg_locks WHERE relation = 'q_requests'::regclass AND NOT granted`;
  await waitFor(async () => (await db.query(`SELECT ${apply} FROM (${waiting}) w`)).rows.length > 0);
}

/**
 * Runs `fn` while another session holds the locks `statements` take (in one open transaction),
 * then commits that transaction, whether `fn` succeeded or not.
 */
async function whileLocked(statements: Array<string | [string, unknown[]]>, fn: () => Promise<void>): Promise<void> {
  const locker = await db.connect();
  try {
    await locker.query('BEGIN');
    for (const st of statements) await (typeof st === 'string' ? locker.query(st) : locker.query(st[0], st[1]));
    await fn();
  } finally {
    await locker.query('COMMIT');
    locker.release();
  }
}

/** A consumer `owner` of `queue`, rebalanced (alone) at `t0`, then requests `ids` enqueued on `queue`. */
async function rebalanced(queue: string, owner: string, ids: string[] = []): Promise<{ c: Consumer; t0: Date }> {
  const c = consumer(queue, owner);
  const t0 = await store.now();
  await c.rebalance(t0);
  if (ids.length > 0) await store.enqueue(requests(queue, ids));
  return { c, t0 };
}

const consumer = (queue: string, owner: string) => new Consumer(store, queue, owner, { leaseTtlMs: TTL, drainTimeoutMs: 5_000 });
const stamp = (r: Request) => ({ id: r.id, token: r.token, attempt: r.attempt });
const completion = (r: Request, attempt = r.attempt) => ({ id: r.id, token: r.token, attempt, route: 'out', payload: r.id });
const inFlightOf = (c: Consumer, p: number) => c.inspect().leases.find((l) => l.partition === p)?.inFlight;

async function rowState(id: string): Promise<{ epoch: number; notBefore: number; envelope: string } | undefined> {
  const { rows } = await db.query<{ dispatch_epoch: string; not_before: string; envelope: string }>(
    'SELECT dispatch_epoch, not_before, envelope FROM q_requests WHERE id = $1',
    [id],
  );
  const r = rows[0];
  return r && { epoch: Number(r.dispatch_epoch), notBefore: Number(r.not_before), envelope: r.envelope };
}

describe('bookkeeping', () => {
  it('abandoned work is redelivered by the next rebalance; undispatch at once; retry and defer at notBefore', async () => {
    const q = 'redeliver';
    const { c, t0 } = await rebalanced(q, 'rd-a');
    const [abandoned, undispatched, retried, deferred] = ['ab', 'un', 're', 'de'].map((p) => idInPartition(p, 5)) as string[];
    await store.enqueue(requests(q, [abandoned, undispatched, retried, deferred] as string[]));
    const rows = await c.poll(t0, 10);
    const row = (id: string) => rows.find((r) => r.id === id) as Request;
    expect(inFlightOf(c, 5)).toBe(4);

    c.abandon(stamp(row(abandoned as string)));
    c.abandon({ ...stamp(row(abandoned as string)), attempt: 1 }); // an untracked attempt: ignored
    expect(inFlightOf(c, 5)).toBe(3);
    expect((await rowState(abandoned as string))?.epoch).toBeGreaterThan(0); // still in flight until the rebalance

    await c.undispatch([stamp(row(undispatched as string))]);
    expect(await c.retry(stamp(row(retried as string)), unix(t0) + 30, '{"retry":1}')).toBe(true);
    await c.defer([stamp(row(deferred as string))], unix(t0) + 60);
    expect(inFlightOf(c, 5)).toBe(0);
    expect(c.inspect().tracked).toEqual([]);

    // Before the rebalance only the undispatched one is pending and due.
    expect((await c.poll(t0, 10)).map((r) => r.id)).toEqual([undispatched]);
    await c.rebalance(plus(t0, 1000));
    expect((await c.poll(plus(t0, 1000), 10)).map((r) => r.id)).toEqual([abandoned]);
    const later = await c.poll(plus(t0, 31_000), 10);
    expect(later.map((r) => r.id)).toEqual([retried]);
    expect(later[0]?.envelope).toBe('{"retry":1}');
    expect((await c.poll(plus(t0, 61_000), 10)).map((r) => r.id)).toEqual([deferred]);
    await c.close();
  });

  it('a poll whose outcome is unknown is reconciled on the next rebalance; tracked work is left alone', async () => {
    const q = 'unknown';
    const { c, t0 } = await rebalanced(q, 'unk-a', ['kept']);
    const [kept] = await c.poll(t0, 10);
    expect(kept?.id).toBe('kept');
    await store.enqueue(requests(q, ['lost-1', 'lost-2']));

    // Block the dispatch behind a table lock, abort the poll, then let the dispatch commit.
    await whileLocked(['LOCK TABLE q_requests IN ACCESS EXCLUSIVE MODE'], async () => {
      const ac = new AbortController();
      const polling = c.poll(t0, 10, ac.signal);
      await onceWaitingOnRequests();
      ac.abort(new Error('gave up'));
      await expect(polling).rejects.toThrow('gave up');
    });
    await waitFor(async () => (await rowState('lost-1'))?.epoch !== 0 && (await rowState('lost-2'))?.epoch !== 0);
    expect(c.inspect().tracked.map((s) => s.id)).toEqual(['kept']);

    await c.rebalance(plus(t0, 1000)); // reconcile: untracked current-epoch stamps go back to pending
    expect((await rowState('lost-1'))?.epoch).toBe(0);
    expect((await rowState('lost-2'))?.epoch).toBe(0);
    expect((await rowState('kept'))?.epoch).toBeGreaterThan(0); // tracked work untouched
    expect(await c.ack([completion(kept as Request)])).toEqual([true]);
    expect((await c.poll(plus(t0, 1000), 10)).map((r) => r.id).sort()).toEqual(['lost-1', 'lost-2']);
    await c.close();
  });

  it('a poll that fails on a dropped connection marks for reconciliation and rebalance recovers', async () => {
    const q = 'dropped';
    const { c, t0 } = await rebalanced(q, 'drop-a', ['d-1']);
    await whileLocked(['LOCK TABLE q_requests IN ACCESS EXCLUSIVE MODE'], async () => {
      const polling = c.poll(t0, 10);
      polling.catch(() => undefined);
      await onceWaitingOnRequests('pg_terminate_backend(pid)');
      await expect(polling).rejects.toThrow();
    });
    await c.rebalance(plus(t0, 1000));
    expect((await c.poll(plus(t0, 1000), 10)).map((r) => r.id)).toEqual(['d-1']);
    await c.close();
  });

  it('a re-dispatched request is handed out again and counted once', async () => {
    const q = 'twice';
    const { c, t0 } = await rebalanced(q, 'tw-a', ['twice']);
    const [first] = await c.poll(t0, 10);
    // Its retry was written but the reply never reached the consumer (store call made directly).
    expect(await store.retry('tw-a', stamp(first as Request), 0, '{}')).toBe(true);
    const [second] = await c.poll(t0, 10);
    expect(second?.id).toBe('twice');
    expect(second?.attempt).toBeGreaterThan(first?.attempt as number);
    expect(c.inspect().tracked).toEqual([stamp(second as Request)]);
    expect(inFlightOf(c, 51)).toBe(1);
    // The older attempt's outcome forgets nothing.
    expect(await c.ack([completion(first as Request)])).toEqual([false]);
    c.abandon(stamp(first as Request));
    expect(c.inspect().tracked).toEqual([stamp(second as Request)]);
    expect(inFlightOf(c, 51)).toBe(1);
    expect(await c.ack([completion(second as Request)])).toEqual([true]);
    expect(inFlightOf(c, 51)).toBe(0);
    await c.close();
  });

  it("stale outcomes after a lease bounce keep the new epoch's counts", async () => {
    const q = 'bounce';
    const { c, t0 } = await rebalanced(q, 'bo-a');
    const p = 27;
    const old = idInPartition('old', p);
    const young = idInPartition('young', p);
    await store.enqueue(requests(q, [old], unix(t0) + 7200));
    const [r1] = await c.poll(t0, 1);
    expect(r1?.epoch).toBe(1);
    // The partition bounces: released behind the consumer's back, re-acquired at epoch 2.
    await store.releasePartitions(q, 'bo-a', [p]);
    await c.rebalance(plus(t0, 1000));
    expect(c.inspect().leases.find((l) => l.partition === p)).toMatchObject({ epoch: 2, inFlight: 0 });
    // New work under epoch 2 (earlier deadline, so it is picked before the reset `old`).
    await store.enqueue(requests(q, [young], unix(t0) + 3600));
    const [r2] = await c.poll(plus(t0, 1000), 1);
    expect(r2?.id).toBe(young);
    expect(inFlightOf(c, p)).toBe(1);
    // The stale outcome of epoch 1 is fenced and does not uncount epoch 2's work.
    expect(await c.ack([completion(r1 as Request)])).toEqual([false]);
    expect(inFlightOf(c, p)).toBe(1);
    expect(c.inspect().tracked).toEqual([stamp(r2 as Request)]);
    await c.close();
  });

  it('every 10th beat resets stale stamps of all owned partitions, not only recently acquired ones', async () => {
    const q = 'tenth';
    const c = consumer(q, 'te-a');
    let now = await store.now();
    await c.rebalance(now); // beat 1
    const p = 7;
    const stuck = idInPartition('stuck', p);
    await store.enqueue(requests(q, [stuck]));
    const [r] = await c.poll(now, 1);
    expect(r?.epoch).toBe(1);

    // Bounce the partition while the row is locked, so the reset on acquire skips it.
    await whileLocked([['SELECT 1 FROM q_requests WHERE id = $1 FOR UPDATE', [stuck]]], async () => {
      await store.releasePartitions(q, 'te-a', [p]);
      now = plus(now, 1000);
      await c.rebalance(now); // beat 2: re-acquired at epoch 2, reset skipped the locked row
    });
    expect(c.inspect().beats).toBe(2);
    expect(c.inspect().leases.find((l) => l.partition === p)?.epoch).toBe(2);
    expect((await rowState(stuck))?.epoch).toBe(1); // stale stamp left in flight

    // Beats 3..9, all more than 2 × TTL after the acquire: only recent partitions are reset (none).
    now = plus(now, 2 * TTL);
    for (let beat = 3; beat <= 9; beat++) {
      await c.rebalance(now);
      now = plus(now, 1000);
    }
    expect(c.inspect().beats).toBe(9);
    expect((await rowState(stuck))?.epoch).toBe(1);
    await c.rebalance(now); // beat 10: full reset
    expect(c.inspect().beats).toBe(10);
    expect((await rowState(stuck))?.epoch).toBe(0);
    expect((await c.poll(now, 1)).map((x) => x.id)).toEqual([stuck]);
    await c.close();
  });

  it('rejects bad arguments with INVALID_ARGUMENT before any statement', async () => {
    expect(() => new Consumer(store, '', 'o', { leaseTtlMs: 1000, drainTimeoutMs: 0 })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
    );
    expect(() => new Consumer(store, 'q', '', { leaseTtlMs: 1000, drainTimeoutMs: 0 })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
    );
    expect(() => new Consumer(store, 'q', 'o', { leaseTtlMs: 0, drainTimeoutMs: 0 })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
    );
    expect(() => new Consumer(store, 'q', 'o', { leaseTtlMs: 10, drainTimeoutMs: -1 })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
    );
    const c = consumer('args', 'args-a');
    await expect(c.poll(new Date(NaN), 1)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(c.poll(new Date(), -1)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(c.rebalance(new Date(NaN))).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(c.ack('nope' as never)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(await c.poll(new Date(), 0)).toEqual([]);
    await c.close();
  });
});
