import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { isQError } from '@q/schema';
import { partitionOf, stampOf, type NewRequest } from '../src/index.js';
import { ALL, at, idInPartition, req, token, useTestStore } from './requests/helpers.js';

const t = useTestStore({ resetQueue: 'q' });

const NOW = at(1_000);

async function own(owner = 'a', queue = 'q'): Promise<void> {
  await t.store.ensurePartitions(queue);
  expect(await t.store.acquirePartitions(queue, owner, NOW, 60_000, 64)).toHaveLength(64);
}

async function rows(): Promise<number> {
  const { rows: r } = await t.schema.pool().query<{ n: number }>('SELECT count(*)::int AS n FROM q_requests');
  return r[0]!.n;
}

describe('dispatch', () => {
  it('hands out earliest deadline first and hides in-flight requests', async () => {
    await own();
    await t.store.enqueue([req('late', { deadline: 300 }), req('early', { deadline: 100 }), req('mid', { deadline: 200 })]);
    const first = await t.store.dispatch('q', 'a', NOW, 2);
    expect(first.map((r) => r.id)).toEqual(['early', 'mid']);
    const second = await t.store.dispatch('q', 'a', NOW, 10);
    expect(second.map((r) => r.id)).toEqual(['late']);
    expect(await t.store.dispatch('q', 'a', NOW, 10)).toEqual([]);
    const all = [...first, ...second];
    for (const r of all) {
      expect(r.partition).toBe(partitionOf(r.id));
      expect(r.epoch).toBe(1);
      expect(r.queue).toBe('q');
      expect(r.cancelled).toBe(false);
      expect(Buffer.from(r.payload).toString()).toBe(r.id);
    }
    expect(new Set(all.map((r) => r.attempt)).size).toBe(3);
    expect((await t.store.inFlight('q', 'a')).sort((x, y) => x.attempt - y.attempt)).toEqual(
      all.map(stampOf).sort((x, y) => x.attempt - y.attempt),
    );
  });

  it('keeps submission order for 50 equal deadlines, then a later batch', async () => {
    await own();
    const one = Array.from({ length: 50 }, (_, i) => req(`s-${i}`, { deadline: 500 }));
    const two = Array.from({ length: 10 }, (_, i) => req(`t-${i}`, { deadline: 500 }));
    await t.store.enqueue(one);
    await t.store.enqueue(two);
    const got = await t.store.dispatch('q', 'a', NOW, 100);
    expect(got.map((r) => r.id)).toEqual([...one, ...two].map((r) => r.id));
  });

  it('skips requests not due yet, and other queues', async () => {
    await own();
    await t.store.enqueue([req('now'), req('other', { queue: 'q2' })]);
    const [r] = await t.store.dispatch('q', 'a', NOW, 10);
    expect(await t.store.retry('a', stampOf(r!), 1_060, '{"n":1}')).toBe(true);
    expect(await t.store.dispatch('q', 'a', at(1_059), 10)).toEqual([]);
    const again = await t.store.dispatch('q', 'a', at(1_060), 10);
    expect(again.map((x) => x.id)).toEqual(['now']);
  });

  it('returns binary and empty payloads byte-exact', async () => {
    await own();
    const bin = new Uint8Array(256).map((_, i) => i);
    const odd = new Uint8Array(new Uint8Array([9, 0, 255, 0, 1, 2, 3]).buffer, 1, 4); // a view with an offset
    await t.store.enqueue([req('bin', { payload: bin }), req('empty', { payload: new Uint8Array(0) }), req('view', { payload: odd })]);
    const got = new Map((await t.store.dispatch('q', 'a', NOW, 10)).map((r) => [r.id, r]));
    expect([...got.get('bin')!.payload]).toEqual([...bin]);
    expect(got.get('empty')!.payload).toBeInstanceOf(Uint8Array);
    expect(got.get('empty')!.payload.length).toBe(0);
    expect([...got.get('view')!.payload]).toEqual([0, 255, 0, 1]);
  });

  it('dispatches cancelled requests flagged', async () => {
    await own();
    await t.store.enqueue([req('c'), req('d')]);
    await t.store.cancel(['c']);
    const got = await t.store.dispatch('q', 'a', NOW, 10);
    expect(got.map((r) => [r.id, r.cancelled])).toEqual([
      ['c', true],
      ['d', false],
    ]);
  });

  it('owns nothing → dispatches nothing', async () => {
    await t.store.enqueue([req('x')]);
    expect(await t.store.dispatch('q', 'nobody', NOW, 10)).toEqual([]);
    expect(await t.store.dispatch('q', 'a', NOW, 0)).toEqual([]);
  });

  it('confines two owners to their own partitions (400 requests)', async () => {
    expect(await t.store.acquirePartitions('q', 'a', NOW, 60_000, 32)).toHaveLength(32);
    expect(await t.store.acquirePartitions('q', 'b', NOW, 60_000, 64)).toHaveLength(32);
    const leasesA = (await t.store.heartbeat('q', 'a', NOW, 60_000, true)).leases.map((l) => l.partition);
    const mine = new Set(leasesA);
    await t.store.enqueue(Array.from({ length: 400 }, (_, i) => req(`r-${i}`)));
    const a = await t.store.dispatch('q', 'a', NOW, 1000);
    const b = await t.store.dispatch('q', 'b', NOW, 1000);
    expect(a.length + b.length).toBe(400);
    expect(a.every((r) => mine.has(r.partition))).toBe(true);
    expect(b.every((r) => !mine.has(r.partition))).toBe(true);
    expect(a.length).toBeGreaterThan(0);
    expect(b.length).toBeGreaterThan(0);
  });

  it('a draining partition dispatches nothing; only its owner drains and undrains it', async () => {
    const p0 = idInPartition('drain', 0);
    const p1 = idInPartition('one', 1);
    await own('a');
    await t.store.enqueue([req(p0), req(p1)]);
    await t.store.setDraining('q', 'b', [0], true); // not the owner: no effect
    expect((await t.store.heartbeat('q', 'a', NOW, 60_000, true)).leases[0]).toEqual({ partition: 0, epoch: 1, draining: false });
    await t.store.setDraining('q', 'a', [0], true);
    expect((await t.store.heartbeat('q', 'a', NOW, 60_000, true)).leases[0]!.draining).toBe(true);
    expect((await t.store.dispatch('q', 'a', NOW, 10)).map((r) => r.id)).toEqual([p1]);
    await t.store.setDraining('q', 'b', [0], false); // not the owner: stays draining
    expect(await t.store.dispatch('q', 'a', NOW, 10)).toEqual([]);
    await t.store.setDraining('q', 'a', [0], false);
    expect((await t.store.dispatch('q', 'a', NOW, 10)).map((r) => r.id)).toEqual([p0]);
  });

  it('a draining owner can still ack', async () => {
    await own('a');
    await t.store.enqueue([req('x')]);
    const [r] = await t.store.dispatch('q', 'a', NOW, 1);
    await t.store.setDraining('q', 'a', ALL, true);
    expect(await t.store.ack('a', [{ ...stampOf(r!), route: 'out', payload: 'ok' }])).toEqual([true]);
  });

  it('two dispatchers racing on one owner never hand out a request twice', async () => {
    await own('a');
    await t.store.enqueue(Array.from({ length: 300 }, (_, i) => req(`race-${i}`)));
    const batches = await Promise.all(Array.from({ length: 4 }, () => t.store.dispatch('q', 'a', NOW, 100)));
    const ids = batches.flat().map((r) => r.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.length).toBeLessThanOrEqual(300);
  });
});

describe('enqueue', () => {
  it('inserts 2,005 rows atomically in chunks', async () => {
    const many = Array.from({ length: 2005 }, (_, i) => req(`m-${i}`, { deadline: 2000 + (i % 7) }));
    await t.store.enqueue(many);
    expect(await rows()).toBe(2005);
    const { depth } = await t.store.backlog('q', 0, []);
    expect(depth).toBe(2005);
  });

  it('a duplicate (id, token) in the last chunk leaves nothing behind', async () => {
    const many = Array.from({ length: 2004 }, (_, i) => req(`m-${i}`));
    await t.store.enqueue([many[5]!]);
    const err = await t.store.enqueue([...many.slice(0, 5), ...many.slice(6), { ...many[5]! }]).catch((e: unknown) => e);
    expect(isQError(err, 'DUPLICATE')).toBe(true);
    expect(await rows()).toBe(1);
  });

  it('a duplicate inside one call fails before any statement', async () => {
    const r = req('dup');
    const err = await t.store.enqueue([r, { ...r }]).catch((e: unknown) => e);
    expect(isQError(err, 'DUPLICATE')).toBe(true);
    expect(await rows()).toBe(0);
  });

  it('a missing payload fails the whole call', async () => {
    const bad = { ...req('nopayload'), payload: undefined } as unknown as NewRequest;
    const err = await t.store.enqueue([req('fine'), bad]).catch((e: unknown) => e);
    expect(isQError(err, 'INVALID_ARGUMENT')).toBe(true);
    expect(await rows()).toBe(0);
  });

  it('ignores caller-provided partition, epoch, attempt and cancelled', async () => {
    await own();
    const sneaky = { ...req('sneaky'), partition: 99, epoch: 7, attempt: 7, cancelled: true } as NewRequest;
    await t.store.enqueue([sneaky]);
    const [r] = await t.store.dispatch('q', 'a', NOW, 1);
    expect(r).toMatchObject({ partition: partitionOf('sneaky'), epoch: 1, cancelled: false });
    expect(r!.attempt).not.toBe(7);
  });

  it('a new generation of an id is a separate request', async () => {
    await own();
    await t.store.enqueue([req('gen', { token: token() }), req('gen', { token: token() })]);
    expect(await t.store.dispatch('q', 'a', NOW, 10)).toHaveLength(2);
  });
});

describe('RequestStore.open on this schema', () => {
  it('sees rows committed by another connection', async () => {
    const c = new pg.Client({ connectionString: t.schema.dsn });
    await c.connect();
    try {
      await t.store.enqueue([req('seen')]);
      const { rows: r } = await c.query('SELECT id FROM q_requests');
      expect(r).toEqual([{ id: 'seen' }]);
    } finally {
      await c.end();
    }
  });
});
