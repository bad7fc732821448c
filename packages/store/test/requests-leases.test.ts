import { describe, expect, it } from 'vitest';
import { stampOf, type Completion, type Request } from '../src/index.js';
import { ALL, at, idInPartition, req, waitFor, useTestStore } from './requests/helpers.js';

const t = useTestStore({ resetQueue: 'q' });

const T0 = 1_000_000; // Unix s of the test's clock
const TTL = 10_000;

function done(r: Request, payload = 'ok'): Completion {
  return { ...stampOf(r), route: 'out', payload };
}

async function requestRow(id: string): Promise<{ dispatch_epoch: string; dispatch_attempt: string } | undefined> {
  const { rows } = await t.schema.pool().query('SELECT dispatch_epoch, dispatch_attempt FROM q_requests WHERE id = $1', [id]);
  return rows[0];
}

describe('partition leases', () => {
  it('first acquire gives epoch 1; a live lease is never taken, not even by its owner', async () => {
    const leases = await t.store.acquirePartitions('q', 'a', at(T0), TTL, 3);
    expect(leases).toEqual([0, 1, 2].map((p) => ({ partition: p, epoch: 1, draining: false })));
    expect(await t.store.acquirePartitions('q', 'a', at(T0), TTL, 64)).toHaveLength(61);
    expect(await t.store.acquirePartitions('q', 'b', at(T0 + 5), TTL, 64)).toEqual([]);
    expect(await t.store.acquirePartitions('q', 'a', at(T0 + 5), TTL, 64)).toEqual([]);
  });

  it('partitionOwners groups a queue’s partitions by owner: counts, draining, epochs, lease liveness', async () => {
    expect(await t.store.partitionOwners('nobody')).toEqual([]);
    await t.store.acquirePartitions('q', 'a', await t.store.now(), 60_000, 3);
    await t.store.setDraining('q', 'a', [1], true);
    await t.store.acquirePartitions('q', 'b', at(T0), TTL, 2); // its lease lapsed long ago
    expect(await t.store.partitionOwners('q')).toEqual([
      { owner: '', partitions: 59, draining: 0, minEpoch: 0, maxEpoch: 0, live: false },
      { owner: 'a', partitions: 3, draining: 1, minEpoch: 1, maxEpoch: 1, live: true },
      { owner: 'b', partitions: 2, draining: 0, minEpoch: 1, maxEpoch: 1, live: false },
    ]);
  });

  it('ensurePartitions is idempotent and per queue', async () => {
    await t.store.ensurePartitions('q');
    await t.store.ensurePartitions('other');
    const { rows } = await t.schema.pool().query('SELECT queue, count(*)::int AS n FROM q_partitions GROUP BY queue ORDER BY queue');
    expect(rows).toEqual([
      { queue: 'other', n: 64 },
      { queue: 'q', n: 64 },
    ]);
  });

  it('lapse → takeover bumps the epoch, redelivers, and fences every write of the old owner', async () => {
    await t.store.acquirePartitions('q', 'old', at(T0), TTL, 64);
    const ids = ['x', 'y', 'z', 'w'];
    await t.store.enqueue(ids.map((id) => req(id)));
    const stale = await t.store.dispatch('q', 'old', at(T0), 10);
    expect(stale).toHaveLength(4);
    // The lease lapses (old stops heartbeating); new takes every partition over.
    const later = at(T0 + 11);
    const taken = await t.store.acquirePartitions('q', 'new', later, TTL, 64);
    expect(taken).toHaveLength(64);
    expect(taken.every((l) => l.epoch === 2)).toBe(true);
    // Stale rows are not in new's current-epoch in-flight set, and not pending until reset.
    expect(await t.store.inFlight('q', 'new')).toEqual([]);
    expect(await t.store.dispatch('q', 'new', later, 10)).toEqual([]);
    await t.store.resetStale('q', 'new');
    const redelivered = await t.store.dispatch('q', 'new', later, 10);
    expect(redelivered.map((r) => r.id).sort()).toEqual([...ids].sort());
    expect(redelivered.every((r) => r.epoch === 2)).toBe(true);
    // Every write of the old owner is fenced: ack, retry, undispatch, defer.
    expect(
      await t.store.ack(
        'old',
        stale.map((r) => done(r)),
      ),
    ).toEqual([false, false, false, false]);
    expect(await t.store.retry('old', stampOf(stale[0]!), T0, '{}')).toBe(false);
    await t.store.undispatch('old', stale.map(stampOf));
    await t.store.defer('old', stale.map(stampOf), T0 + 100);
    // ... even with the new attempts: old no longer owns the partitions.
    expect(
      await t.store.ack(
        'old',
        redelivered.map((r) => done(r)),
      ),
    ).toEqual([false, false, false, false]);
    await t.store.undispatch('old', redelivered.map(stampOf));
    expect((await t.store.inFlight('q', 'new')).length).toBe(4);
    expect(
      await t.store.ack(
        'new',
        redelivered.map((r) => done(r)),
      ),
    ).toEqual([true, true, true, true]);
    expect(await t.store.resultDepth('out')).toBe(4);
  });

  it('the old owner is fenced even before the new owner resets its rows', async () => {
    await t.store.acquirePartitions('q', 'old', at(T0), TTL, 64);
    await t.store.enqueue([req('x')]);
    const [r] = await t.store.dispatch('q', 'old', at(T0), 1);
    await t.store.acquirePartitions('q', 'new', at(T0 + 11), TTL, 64);
    expect(await t.store.ack('old', [done(r!)])).toEqual([false]);
    expect(await requestRow('x')).toBeDefined();
  });

  it("the same owner's release and re-acquire fences its own earlier ack", async () => {
    const p = idInPartition('one', 1);
    await t.store.acquirePartitions('q', 'a', at(T0), TTL, 64);
    await t.store.enqueue([req(p)]);
    const [r] = await t.store.dispatch('q', 'a', at(T0), 1);
    await t.store.releasePartitions('q', 'a', [1]);
    const [again] = await t.store.acquirePartitions('q', 'a', at(T0), TTL, 1);
    expect(again).toEqual({ partition: 1, epoch: 2, draining: false });
    expect(await t.store.ack('a', [done(r!)])).toEqual([false]);
    // Its own undispatch still works (no epoch check): the exact attempt names the dispatch.
    await t.store.resetStale('q', 'a', [1]);
    const [r2] = await t.store.dispatch('q', 'a', at(T0), 1);
    expect(r2!.epoch).toBe(2);
    expect(await t.store.ack('a', [done(r2!)])).toEqual([true]);
  });

  it('an own lapsed lease can be re-taken, bumping the epoch', async () => {
    await t.store.acquirePartitions('q', 'a', at(T0), TTL, 64);
    const again = await t.store.acquirePartitions('q', 'a', at(T0 + 11), TTL, 64);
    expect(again).toHaveLength(64);
    expect(again.every((l) => l.epoch === 2)).toBe(true);
  });

  it('release is fenced to the owner and immediate', async () => {
    await t.store.acquirePartitions('q', 'a', at(T0), TTL, 2);
    await t.store.releasePartitions('q', 'b', [0, 1]); // not b's: nothing happens
    expect(await t.store.acquirePartitions('q', 'b', at(T0), TTL, 64).then((ls) => ls.map((l) => l.partition))).toEqual(ALL.slice(2));
    await t.store.releasePartitions('q', 'a', [0]);
    const [l] = await t.store.acquirePartitions('q', 'b', at(T0), TTL, 64);
    expect(l).toEqual({ partition: 0, epoch: 2, draining: false });
    expect((await t.store.heartbeat('q', 'a', at(T0), TTL, true)).leases.map((x) => x.partition)).toEqual([1]);
  });

  it('leave releases everything and drops membership at once', async () => {
    await t.store.heartbeat('q', 'a', at(T0), TTL, true);
    await t.store.heartbeat('q', 'b', at(T0), TTL, true);
    await t.store.acquirePartitions('q', 'a', at(T0), TTL, 64);
    await t.store.leave('q', 'a');
    expect((await t.store.heartbeat('q', 'b', at(T0), TTL, true)).members).toBe(1);
    expect(await t.store.acquirePartitions('q', 'b', at(T0), TTL, 64)).toHaveLength(64);
  });
});

describe('heartbeat and membership', () => {
  it('renews leases so they are not taken, and reports them sorted', async () => {
    await t.store.acquirePartitions('q', 'a', at(T0), TTL, 3);
    const hb = await t.store.heartbeat('q', 'a', at(T0 + 8), TTL, true);
    expect(hb.leases.map((l) => l.partition)).toEqual([0, 1, 2]);
    expect(hb.members).toBe(1);
    // Without the renewal the leases would have lapsed at T0+10; now they last to T0+18.
    const others = await t.store.acquirePartitions('q', 'b', at(T0 + 12), TTL, 64);
    expect(others.map((l) => l.partition)).toEqual(ALL.slice(3));
    expect(await t.store.acquirePartitions('q', 'b', at(T0 + 19), TTL, 64).then((ls) => ls.map((l) => l.partition))).toEqual([0, 1, 2]);
  });

  it('counts members per queue; a non-member renews but does not count; lapsed members disappear', async () => {
    expect((await t.store.heartbeat('q', 'a', at(T0), TTL, true)).members).toBe(1);
    expect((await t.store.heartbeat('q', 'b', at(T0), TTL, true)).members).toBe(2);
    expect((await t.store.heartbeat('other', 'c', at(T0), TTL, true)).members).toBe(1);
    // b withdraws: it still renews its leases but no longer counts.
    await t.store.acquirePartitions('q', 'b', at(T0), TTL, 2);
    const withdrawing = await t.store.heartbeat('q', 'b', at(T0 + 1), TTL, false);
    expect(withdrawing.members).toBe(1);
    expect(withdrawing.leases).toHaveLength(2);
    expect((await t.store.heartbeat('q', 'a', at(T0 + 2), TTL, true)).members).toBe(1);
    // a lapses: a new member alone sees itself only.
    expect((await t.store.heartbeat('q', 'd', at(T0 + 13), TTL, true)).members).toBe(1);
    const { rows } = await t.schema.pool().query(`SELECT owner FROM q_dispatchers WHERE queue = 'q' ORDER BY owner`);
    expect(rows).toEqual([{ owner: 'd' }]);
  });

  it('a lapsed lease nobody took is still renewed by its owner', async () => {
    await t.store.acquirePartitions('q', 'a', at(T0), TTL, 1);
    const hb = await t.store.heartbeat('q', 'a', at(T0 + 60), TTL, true);
    expect(hb.leases).toEqual([{ partition: 0, epoch: 1, draining: false }]);
    expect(await t.store.acquirePartitions('q', 'b', at(T0 + 61), TTL, 1).then((ls) => ls[0]?.partition)).toBe(1);
  });
});

describe('resetStale', () => {
  /**
   * Requests in partitions 1 and 2 dispatched by `a`, whose partitions `release` it then gave back
   * and took again (up to `reacquire`): their stamps are of the old epoch.
   */
  async function staleRows(release: number[], reacquire: number): Promise<[string, string]> {
    const p1 = idInPartition('one', 1);
    const p2 = idInPartition('two', 2);
    await t.store.acquirePartitions('q', 'a', at(T0), TTL, 64);
    await t.store.enqueue([req(p1), req(p2)]);
    await t.store.dispatch('q', 'a', at(T0), 10);
    await t.store.releasePartitions('q', 'a', release);
    await t.store.acquirePartitions('q', 'a', at(T0), TTL, reacquire);
    return [p1, p2];
  }

  it('touches only stale-epoch rows of the listed partitions, never current ones', async () => {
    const [p1, p2] = await staleRows([1, 2], 2);
    await t.store.resetStale('q', 'a', []); // none
    await t.store.resetStale('q', 'a', [2]);
    expect(Number((await requestRow(p1))!.dispatch_epoch)).toBe(1);
    expect(Number((await requestRow(p2))!.dispatch_epoch)).toBe(0);
    // Another owner cannot reset a's partitions.
    await t.store.resetStale('q', 'b');
    expect(Number((await requestRow(p1))!.dispatch_epoch)).toBe(1);
    await t.store.resetStale('q', 'a');
    expect(Number((await requestRow(p1))!.dispatch_epoch)).toBe(0);
    // A current-epoch stamp is left alone.
    const fresh = await t.store.dispatch('q', 'a', at(T0), 10);
    await t.store.resetStale('q', 'a');
    expect((await t.store.inFlight('q', 'a')).length).toBe(fresh.length);
  });

  it('skips rows another transaction holds and never blocks on them', async () => {
    const [p1, p2] = await staleRows(ALL, 64);
    const holder = await t.schema.pool().connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM q_requests WHERE id = $1 FOR UPDATE', [p1]);
      await t.store.resetStale('q', 'a'); // returns although p1 is locked
      expect(Number((await requestRow(p2))!.dispatch_epoch)).toBe(0);
      expect(Number((await requestRow(p1))!.dispatch_epoch)).toBe(1);
      await holder.query('COMMIT');
    } finally {
      holder.release();
    }
    await t.store.resetStale('q', 'a');
    await waitFor(async () => Number((await requestRow(p1))!.dispatch_epoch) === 0);
  });
});
