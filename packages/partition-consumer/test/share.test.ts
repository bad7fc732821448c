import type { Attributes, MeterProvider } from '@opentelemetry/api';
import { METRIC } from '@q/otel';
import { PARTITIONS, type RequestStore } from '@q/store';
import { describe, expect, it } from 'vitest';
import { Consumer } from '../src/index.js';
import { ids, plus, requests, useTestStore } from './helpers.js';

const TTL = 30_000;
let store: RequestStore;

useTestStore('pc_share', 8, (t) => ({ store } = t));

const consumer = (queue: string, owner: string) => new Consumer(store, queue, owner, { leaseTtlMs: TTL, drainTimeoutMs: 60_000 });

describe('share of partitions', () => {
  it('one consumer owns all 64 partitions and acks everything it polls', async () => {
    const q = 'solo';
    const c = consumer(q, 'solo-a');
    const t0 = await store.now();
    await c.rebalance(t0);
    expect(c.inspect().active).toEqual(Array.from({ length: PARTITIONS }, (_, i) => i));
    expect(c.inspect().leases.every((l) => l.epoch === 1 && !l.draining)).toBe(true);

    await store.enqueue(requests(q, ids('solo', 300)));
    const rows = await c.poll(t0, 1000);
    expect(rows).toHaveLength(300);
    expect(c.inspect().tracked).toHaveLength(300);
    expect(c.inspect().leases.reduce((n, l) => n + l.inFlight, 0)).toBe(300);

    const ok = await c.ack(rows.map((r) => ({ id: r.id, token: r.token, attempt: r.attempt, route: 'out', payload: r.id })));
    expect(ok.every(Boolean)).toBe(true);
    expect(c.inspect().tracked).toHaveLength(0);
    expect(c.inspect().leases.reduce((n, l) => n + l.inFlight, 0)).toBe(0);
    expect(await store.hasRequests(q)).toBe(false);
    expect(await store.resultDepth('out')).toBe(300);
    await c.close();
  });

  it('three consumers converge within four rounds to 20–22 partitions each; every request is polled by exactly one', async () => {
    const q = 'trio';
    const cs = ['a', 'b', 'c'].map((n) => consumer(q, `trio-${n}`));
    let now = await store.now();
    for (let round = 1; round <= 4; round++) {
      for (const c of cs) await c.rebalance(now);
      now = plus(now, 1000);
    }
    const owned = cs.map((c) => c.inspect().active);
    for (const a of owned) {
      expect(a.length).toBeGreaterThanOrEqual(20);
      expect(a.length).toBeLessThanOrEqual(22);
    }
    const all = owned.flat().sort((x, y) => x - y);
    expect(all).toEqual(Array.from({ length: PARTITIONS }, (_, i) => i)); // all covered, none twice
    expect(cs.every((c) => c.inspect().draining.length === 0)).toBe(true);

    await store.enqueue(requests(q, ids('trio', 1000)));
    const polled = await Promise.all(cs.map((c) => c.poll(now, 2000)));
    const seen = polled.flat().map((r) => r.id);
    expect(seen).toHaveLength(1000);
    expect(new Set(seen).size).toBe(1000);
    polled.forEach((rows, i) => {
      const mine = new Set(owned[i]);
      expect(rows.every((r) => mine.has(r.partition))).toBe(true);
    });
    await Promise.all(cs.map((c) => c.close()));
  });

  it('70 consumers: 64 own one partition each and 6 stay idle', async () => {
    const q = 'crowd';
    const cs = Array.from({ length: 70 }, (_, i) => consumer(q, `crowd-${i}`));
    let now = await store.now();
    for (let round = 1; round <= 3; round++) {
      for (const c of cs) await c.rebalance(now);
      now = plus(now, 1000);
    }
    const counts = cs.map((c) => c.inspect().active.length + c.inspect().draining.length);
    expect(counts.filter((n) => n === 1)).toHaveLength(64);
    expect(counts.filter((n) => n === 0)).toHaveLength(6);
    const all = cs.flatMap((c) => c.inspect().active).sort((x, y) => x - y);
    expect(all).toEqual(Array.from({ length: PARTITIONS }, (_, i) => i));
    for (const c of cs) await c.close();
  });
});

/** A meter provider that only collects observable-gauge callbacks, enough to read the gauge. */
function gaugeReader(): { provider: MeterProvider; read(name: string): Promise<Array<{ value: number; attributes?: Attributes }>> } {
  type Cb = (r: { observe(v: number, a?: Attributes): void }) => void | Promise<void>;
  const callbacks = new Map<string, Set<Cb>>();
  const meter = {
    createObservableGauge(name: string) {
      const set = callbacks.get(name) ?? new Set<Cb>();
      callbacks.set(name, set);
      return { addCallback: (cb: Cb) => set.add(cb), removeCallback: (cb: Cb) => set.delete(cb) };
    },
  };
  return {
    provider: { getMeter: () => meter } as unknown as MeterProvider,
    async read(name) {
      const out: Array<{ value: number; attributes?: Attributes }> = [];
      for (const cb of callbacks.get(name) ?? []) await cb({ observe: (value, attributes) => out.push({ value, attributes }) });
      return out;
    },
  };
}

describe('telemetry', () => {
  it('reports partitions owned by state from the first rebalance until close', async () => {
    const metrics = gaugeReader();
    const c = new Consumer(store, 'gauge', 'gauge-a', { leaseTtlMs: TTL, drainTimeoutMs: 1000, meterProvider: metrics.provider });
    expect(await metrics.read(METRIC.partitionsOwned)).toEqual([]);
    await c.rebalance(await store.now());
    expect(await metrics.read(METRIC.partitionsOwned)).toEqual([
      { value: 64, attributes: { queue: 'gauge', state: 'active' } },
      { value: 0, attributes: { queue: 'gauge', state: 'draining' } },
    ]);
    await c.close();
    expect(await metrics.read(METRIC.partitionsOwned)).toEqual([]);
  });
});
