import { afterAll, beforeAll, expect, it } from 'vitest';
import { at, openTestStore, req, type TestStore } from './requests/helpers.js';

let t: TestStore;
beforeAll(async () => {
  t = await openTestStore();
});
afterAll(() => t.close());

it('enqueue → dispatch → ack → popResults', async () => {
  const { store } = t;
  await store.ensurePartitions('q');
  const leases = await store.acquirePartitions('q', 'a', at(100), 30_000, 64);
  expect(leases).toHaveLength(64);
  await store.enqueue([req('x'), req('y', { deadline: 5 })]);
  const got = await store.dispatch('q', 'a', at(100), 10);
  expect(got.map((r) => r.id)).toEqual(['y', 'x']);
  expect(await store.inFlight('q', 'a')).toHaveLength(2);
  const acks = await store.ack('a', got.map((r) => ({ id: r.id, token: r.token, attempt: r.attempt, route: 'out', payload: r.id })));
  expect(acks).toEqual([true, true]);
  const res = await store.popResults('out', 100, 10);
  expect(res.map((r) => r.payload)).toEqual(['y', 'x']);
});
