// The maintenance leadership as a lease row (issue 18): owner, expiry on the database clock,
// a fencing epoch that rises on every change of owner and never falls, fenced maintenance rounds.
import { QError } from '@q/schema';
import { createTestSchema, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { JobStore, MAINTENANCE_LEADERSHIP, type LeaderLease } from '../src/index.js';

let schema: TestSchema;
let store: JobStore;

beforeAll(async () => {
  schema = await createTestSchema('lead');
  store = await JobStore.open(schema.dsn, { maxConns: 6 });
});
afterAll(async () => {
  await store?.close();
  await schema?.drop();
});
beforeEach(async () => {
  await store.pool.query('TRUNCATE q_jobs, q_jobs_archive, q_jobs_idempotency_keys, q_leader_leases');
});

const row = async () =>
  (
    await store.pool.query<{ owner: string; epoch: string; live: boolean }>(
      `SELECT owner, epoch::text, expires_at > clock_timestamp() AS live FROM q_leader_leases WHERE name = $1`,
      [MAINTENANCE_LEADERSHIP],
    )
  ).rows[0];

/** Makes `lease` expire now (as the database clock sees it) without its holder knowing. */
const expire = (lease: LeaderLease) =>
  store.pool.query(`UPDATE q_leader_leases SET expires_at = clock_timestamp() - interval '1 ms' WHERE name = $1`, [lease.name]);

describe('leader lease', () => {
  it('one owner at a time: a second owner gets null while the lease is live; the holder re-acquires at the same epoch', async () => {
    const a = await store.acquireLeadership('a', 10_000);
    expect(a).toMatchObject({ name: MAINTENANCE_LEADERSHIP, owner: 'a', epoch: 1 });
    expect(await store.acquireLeadership('b', 10_000)).toBeNull();
    const again = await store.acquireLeadership('a', 10_000);
    expect(again?.epoch).toBe(1);
    const results = await Promise.all(['c', 'd', 'e', 'f'].map((o) => store.acquireLeadership(o, 10_000)));
    expect(results.every((r) => r === null)).toBe(true);
    expect(await row()).toMatchObject({ owner: 'a', epoch: '1', live: true });
  });

  it('of many concurrent bidders on a free lease exactly one wins', async () => {
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => store.acquireLeadership(`w${i}`, 10_000)));
    const winners = results.filter((r) => r !== null);
    expect(winners).toHaveLength(1);
    expect((await row())?.owner).toBe(winners[0]!.owner);
  });

  it('an expired lease is taken over with epoch + 1; the old holder can neither renew, release nor maintain', async () => {
    const a = (await store.acquireLeadership('a', 10_000))!;
    await expire(a);
    const b = (await store.acquireLeadership('b', 10_000))!;
    expect(b.epoch).toBe(a.epoch + 1);
    expect(await store.renewLeadership(a, 10_000)).toBeNull();
    expect(await store.releaseLeadership(a)).toBe(false);
    expect(await store.maintainAsLeader(a, 10_000)).toBeNull();
    expect(await row()).toMatchObject({ owner: 'b', epoch: String(b.epoch), live: true });
  });

  it('a release expires the row in place: the next owner takes over at once and the epoch keeps rising', async () => {
    const a = (await store.acquireLeadership('a', 60_000))!;
    expect(await store.releaseLeadership(a)).toBe(true);
    expect((await row())?.live).toBe(false);
    const b = (await store.acquireLeadership('b', 60_000))!;
    expect(b.epoch).toBe(2);
    await store.releaseLeadership(b);
    expect((await store.acquireLeadership('a', 60_000))!.epoch).toBe(3);
  });

  it('renewing extends the expiry on the database clock', async () => {
    const a = (await store.acquireLeadership('a', 1_000))!;
    const r = (await store.renewLeadership(a, 60_000))!;
    expect(r.epoch).toBe(a.epoch);
    expect(r.expiresAt.getTime() - a.expiresAt.getTime()).toBeGreaterThan(50_000);
  });

  it("maintainAsLeader reaps and promotes for the holder; a deposed holder's round writes nothing", async () => {
    const [job] = await store.enqueue([{ queue: 'default', type: 't' }]);
    await store.claim({ queues: ['default'], workerId: 'x', limit: 1, leaseMs: 60_000 });
    await store.pool.query(`UPDATE q_jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, [job!.id]);
    const a = (await store.acquireLeadership('a', 10_000))!;
    await expire(a);
    const b = (await store.acquireLeadership('b', 10_000))!;
    expect(await store.maintainAsLeader(a, 10_000)).toBeNull();
    expect((await store.getById(job!.id))?.status).toBe('leased'); // fenced: nothing reaped by A
    const done = (await store.maintainAsLeader(b, 10_000))!;
    expect(done.lease.epoch).toBe(b.epoch);
    expect(done.reaped.map((r) => r.id)).toEqual([job!.id]);
    expect(done.promoted).toBe(1);
    expect((await store.getById(job!.id))?.status).toBe('queued');
  });

  it('a round holds the lease row: a takeover bid waits for it and then sees the renewed lease', async () => {
    const a = (await store.acquireLeadership('a', 300))!;
    const client = await store.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query(`UPDATE q_leader_leases SET renewed_at = renewed_at WHERE name = $1`, [a.name]);
      await new Promise((r) => setTimeout(r, 400)); // the lease expires while its row is locked
      const bid = store.acquireLeadership('b', 10_000);
      await new Promise((r) => setTimeout(r, 200));
      await client.query(`UPDATE q_leader_leases SET expires_at = clock_timestamp() + interval '10 s' WHERE name = $1`, [a.name]);
      await client.query('COMMIT');
      expect(await bid).toBeNull();
    } finally {
      client.release();
    }
  });

  it('a bid that waited for a stopped holder’s row lock gets a lease timed from its takeover, not from its wait', async () => {
    const a = (await store.acquireLeadership('a', 300))!;
    const client = await store.pool.connect();
    try {
      // A holder stopped mid-round: its renewal is made, never committed, and rolled back at last.
      await client.query('BEGIN');
      await client.query(`UPDATE q_leader_leases SET renewed_at = clock_timestamp() WHERE name = $1`, [a.name]);
      const bid = store.acquireLeadership('b', 1_000);
      await new Promise((r) => setTimeout(r, 1_200)); // longer than the bid's whole lease
      const { rows: at } = await client.query<{ now: Date }>('SELECT clock_timestamp() AS now');
      const releasedAfter = at[0]!.now.getTime(); // the bid cannot have taken over before this
      await client.query('ROLLBACK');
      const b = (await bid)!;
      expect(b).toMatchObject({ owner: 'b', epoch: a.epoch + 1 });
      // Timed from the start of its wait, it would have expired before the holder let go.
      expect(b.expiresAt.getTime()).toBeGreaterThanOrEqual(releasedAfter + 1_000);
      const { rows } = await store.pool.query<{ acquired_at: Date }>(`SELECT acquired_at FROM q_leader_leases WHERE name = $1`, [a.name]);
      expect(rows[0]!.acquired_at.getTime()).toBeGreaterThanOrEqual(releasedAfter);
    } finally {
      client.release();
    }
  });

  it('refuses bad arguments with INVALID_ARGUMENT before any statement', async () => {
    for (const call of [
      () => store.acquireLeadership('', 1_000),
      () => store.acquireLeadership('a', 0),
      () => store.acquireLeadership('a', 2 ** 31),
      () => store.renewLeadership({ name: MAINTENANCE_LEADERSHIP, owner: 'a', epoch: 0, expiresAt: new Date() }, 1_000),
      () => store.maintainAsLeader({ name: '', owner: 'a', epoch: 1, expiresAt: new Date() }, 1_000),
    ]) {
      let err: unknown;
      try {
        await call();
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(QError);
      expect((err as QError).code).toBe('INVALID_ARGUMENT');
    }
  });
});
