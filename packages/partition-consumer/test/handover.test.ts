import { PARTITIONS, type Request, type RequestStore } from '@q/store';
import { describe, expect, it } from 'vitest';
import { Consumer } from '../src/index.js';
import { idInPartition, plus, requests, useTestStore } from './helpers.js';

const TTL = 10_000;
const DRAIN = 5_000; // below the TTL, so a peer that stays quiet over the drain timeout keeps its leases
let store: RequestStore;

useTestStore('pc_handover', 8, (t) => ({ store } = t));

const consumer = (queue: string, owner: string) => new Consumer(store, queue, owner, { leaseTtlMs: TTL, drainTimeoutMs: DRAIN });
const range = (a: number, b: number) => Array.from({ length: b - a }, (_, i) => a + i);
const completion = (r: Request) => ({ id: r.id, token: r.token, attempt: r.attempt, route: 'out', payload: r.id });

/** Consumers `<q>-a` and `<q>-b` of queue `q`; `a` has rebalanced at `t0` (alone, it owns every partition). */
async function twoConsumers(q: string): Promise<{ q: string; a: Consumer; b: Consumer; t0: Date }> {
  const a = consumer(q, `${q}-a`);
  const b = consumer(q, `${q}-b`);
  const t0 = await store.now();
  await a.rebalance(t0);
  return { q, a, b, t0 };
}

/** One request per partition, polled by `c`: 64 in flight. */
async function busyEverywhere(c: Consumer, q: string, now: Date): Promise<Request[]> {
  await store.enqueue(
    requests(
      q,
      range(0, PARTITIONS).map((p) => idInPartition(`${q}-busy`, p)),
    ),
  );
  const rows = await c.poll(now, 100);
  expect(rows).toHaveLength(PARTITIONS);
  return rows;
}

describe('hand-over', () => {
  it('waits for in-flight work: drains the highest 32, releases each when acked, the rest at the drain timeout', async () => {
    const { q, a, b, t0 } = await twoConsumers('ho');
    const rows = await busyEverywhere(a, q, t0);
    const byPartition = new Map(rows.map((r) => [r.partition, r]));

    await b.rebalance(t0); // joins: 2 members, nothing free yet
    expect(b.inspect().active).toEqual([]);
    await a.rebalance(plus(t0, 100)); // share 32: every partition has 1 in flight → ties → highest first
    expect(a.inspect().active).toEqual(range(0, 32));
    expect(a.inspect().draining).toEqual(range(32, 64));

    // Acking the work of partition 40 releases it at the next beat; b takes it.
    expect(await a.ack([completion(byPartition.get(40) as Request)])).toEqual([true]);
    await a.rebalance(plus(t0, 200));
    expect(a.inspect().draining).toEqual(range(32, 64).filter((p) => p !== 40));
    await b.rebalance(plus(t0, 200));
    expect(b.inspect().active).toEqual([40]);
    expect(b.inspect().leases[0]?.epoch).toBe(2);

    // Meanwhile new requests go to the right owner: 40 → b, 10 → a, 50 (draining at a) → nobody.
    const fresh = requests(q, [idInPartition('fresh', 40), idInPartition('fresh', 10), idInPartition('fresh', 50)]);
    await store.enqueue(fresh);
    expect((await b.poll(plus(t0, 300), 10)).map((r) => r.id)).toEqual([fresh[0]?.id]);
    expect((await a.poll(plus(t0, 300), 10)).map((r) => r.id)).toEqual([fresh[1]?.id]);

    // At the drain timeout the rest are released even though work is in flight.
    await a.rebalance(plus(t0, 100 + DRAIN));
    expect(a.inspect().draining).toEqual([]);
    expect(a.inspect().active).toEqual(range(0, 32));
    await b.rebalance(plus(t0, 100 + DRAIN));
    expect(b.inspect().active).toEqual(range(32, 64));
    // b redelivers what a left in flight there (reset on acquire), plus the new partition-50 request.
    const redelivered = await b.poll(plus(t0, 100 + DRAIN), 100);
    expect(redelivered.map((r) => r.id).sort()).toEqual(
      [
        ...range(32, 64)
          .filter((p) => p !== 40)
          .map((p) => byPartition.get(p)?.id),
        fresh[2]?.id,
      ].sort(),
    );
    // a's ack after the release is fenced; b's is not.
    const late = byPartition.get(50) as Request;
    expect(await a.ack([completion(late)])).toEqual([false]);
    expect(await b.ack([completion(redelivered.find((r) => r.id === late.id) as Request)])).toEqual([true]);
    await Promise.all([a.close(), b.close()]);
  });

  it("takes a dead peer's partitions after the lease TTL and redelivers its work; the late ack is fenced", async () => {
    const { q, a, b, t0 } = await twoConsumers('dead');
    const rows = await busyEverywhere(a, q, t0);
    await b.rebalance(plus(t0, 100));
    expect(b.inspect().active).toEqual([]); // a's leases are live
    // a dies (no more heartbeats). Before the TTL nothing moves; after it b takes everything.
    await b.rebalance(plus(t0, TTL - 100));
    expect(b.inspect().active).toEqual([]);
    await b.rebalance(plus(t0, TTL + 1));
    expect(b.inspect().active).toEqual(range(0, 64));
    expect(b.inspect().leases.every((l) => l.epoch === 2)).toBe(true);
    const again = await b.poll(plus(t0, TTL + 1), 100);
    expect(again.map((r) => r.id).sort()).toEqual(rows.map((r) => r.id).sort());
    expect(await a.ack(rows.slice(0, 3).map(completion))).toEqual([false, false, false]);
    expect((await b.ack(again.map(completion))).every(Boolean)).toBe(true);
    expect(await store.resultDepth('out')).toBeGreaterThan(0);
    await b.close();
  });

  it('stop() drains then releases everything; acks still work', async () => {
    const { q, a, b, t0 } = await twoConsumers('stop');
    await b.rebalance(t0);
    await store.enqueue(
      requests(
        q,
        [0, 1, 2, 3].map((p) => idInPartition('stop', p)),
      ),
    );
    const rows = await a.poll(t0, 10);
    expect(rows.map((r) => r.partition).sort()).toEqual([0, 1, 2, 3]);

    a.stop();
    await a.rebalance(plus(t0, 100)); // non-member, share 0: idle partitions released at once
    expect(a.inspect().active).toEqual([]);
    expect(a.inspect().draining).toEqual([0, 1, 2, 3]);
    await b.rebalance(plus(t0, 100)); // alone now: share 64, takes the 60 free ones
    expect(b.inspect().active).toEqual(range(4, 64));

    expect(await a.ack(rows.slice(0, 2).map(completion))).toEqual([true, true]); // a draining owner can ack
    await a.rebalance(plus(t0, 200));
    expect(a.inspect().draining).toEqual(
      rows
        .slice(2)
        .map((r) => r.partition)
        .sort(),
    );
    await a.rebalance(plus(t0, 100 + DRAIN)); // the rest go at the drain timeout
    expect(a.inspect().leases).toEqual([]);
    await b.rebalance(plus(t0, 100 + DRAIN));
    expect(b.inspect().active).toEqual(range(0, 64));
    const redelivered = await b.poll(plus(t0, 100 + DRAIN), 10);
    expect(redelivered.map((r) => r.id).sort()).toEqual(
      rows
        .slice(2)
        .map((r) => r.id)
        .sort(),
    );
    await Promise.all([a.close(), b.close()]);
  });

  it('when the share grows back, draining partitions are undrained instead of re-acquired', async () => {
    const { q, a, b, t0 } = await twoConsumers('grow');
    await busyEverywhere(a, q, t0);
    await b.rebalance(t0);
    await a.rebalance(plus(t0, 100));
    expect(a.inspect().draining).toEqual(range(32, 64));
    await b.close(); // b leaves: a is alone again
    await a.rebalance(plus(t0, 200));
    expect(a.inspect().active).toEqual(range(0, 64));
    expect(a.inspect().draining).toEqual([]);
    expect(a.inspect().leases.every((l) => l.epoch === 1 && l.inFlight === 1)).toBe(true); // no epoch bump
    // Dispatch works again on the undrained partitions.
    await store.enqueue(requests(q, [idInPartition('grow-fresh', 60)]));
    expect(await a.poll(plus(t0, 300), 10)).toHaveLength(1);
    await a.close();
  });

  it('close() hands over at once: peers take the partitions without waiting for the TTL and redeliver', async () => {
    const { q, a, b, t0 } = await twoConsumers('close');
    const rows = await busyEverywhere(a, q, t0);
    await b.rebalance(t0);
    await a.close();
    expect(a.inspect().leases).toEqual([]);
    await expect(a.poll(t0, 1)).rejects.toMatchObject({ code: 'CLOSED' });
    await expect(a.rebalance(t0)).rejects.toMatchObject({ code: 'CLOSED' });
    await b.rebalance(plus(t0, 100)); // well within a's lease TTL
    expect(b.inspect().active).toEqual(range(0, 64));
    const again = await b.poll(plus(t0, 100), 100);
    expect(again.map((r) => r.id).sort()).toEqual(rows.map((r) => r.id).sort());
    expect(await a.ack(rows.slice(0, 1).map(completion))).toEqual([false]);
    await b.close();
  });
});
