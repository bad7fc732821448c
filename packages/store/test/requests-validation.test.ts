import { isQError } from '@q/schema';
import { describe, expect, it, vi } from 'vitest';
import type { Completion, NewRequest, Stamp } from '../src/index.js';
import { at, req, useTestStore } from './requests/helpers.js';

const t = useTestStore({ maxConns: 1 });

const NOW = at(1_000);
const S: Stamp = { id: 'i', token: 't', attempt: 1 };
const C: Completion = { ...S, route: 'r', payload: 'p' };
const BAD_NUMBERS = [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '3' as unknown as number];

/** Each case must throw INVALID_ARGUMENT without sending any statement. */
const cases: Array<[string, () => Promise<unknown>]> = [
  ['enqueue: not an array', () => t.store.enqueue('x' as unknown as NewRequest[])],
  ['enqueue: empty id', () => t.store.enqueue([req('')])],
  ['enqueue: empty token', () => t.store.enqueue([req('a', { token: '' })])],
  ['enqueue: empty queue', () => t.store.enqueue([req('a', { queue: '' })])],
  ['enqueue: envelope not a string', () => t.store.enqueue([req('a', { envelope: 3 as unknown as string })])],
  ['enqueue: payload a string', () => t.store.enqueue([req('a', { payload: 'abc' as unknown as Uint8Array })])],
  ['enqueue: null entry', () => t.store.enqueue([req('a'), null as unknown as NewRequest])],
  ...BAD_NUMBERS.map((d): [string, () => Promise<unknown>] => [
    `enqueue: deadline ${String(d)}`,
    () => t.store.enqueue([req('ok'), req('a', { deadline: d })]),
  ]),
  ...BAD_NUMBERS.map((n): [string, () => Promise<unknown>] => [`dispatch: limit ${String(n)}`, () => t.store.dispatch('q', 'a', NOW, n)]),
  ['dispatch: empty queue', () => t.store.dispatch('', 'a', NOW, 1)],
  ['dispatch: empty owner', () => t.store.dispatch('q', '', NOW, 1)],
  ['dispatch: invalid Date', () => t.store.dispatch('q', 'a', new Date(Number.NaN), 1)],
  ['dispatch: now not a Date', () => t.store.dispatch('q', 'a', 1000 as unknown as Date, 1)],
  ['ensurePartitions: empty queue', () => t.store.ensurePartitions('')],
  ['acquirePartitions: negative ttl', () => t.store.acquirePartitions('q', 'a', NOW, -1, 1)],
  ['acquirePartitions: fractional limit', () => t.store.acquirePartitions('q', 'a', NOW, 1000, 0.5)],
  ['acquirePartitions: empty owner', () => t.store.acquirePartitions('q', '', NOW, 1000, 1)],
  ['heartbeat: member not boolean', () => t.store.heartbeat('q', 'a', NOW, 1000, 1 as unknown as boolean)],
  ['heartbeat: NaN ttl', () => t.store.heartbeat('q', 'a', NOW, Number.NaN, true)],
  ['releasePartitions: partition 64', () => t.store.releasePartitions('q', 'a', [1, 64])],
  ['releasePartitions: partition -1', () => t.store.releasePartitions('q', 'a', [-1])],
  ['setDraining: partition 1.5', () => t.store.setDraining('q', 'a', [1.5], true)],
  ['setDraining: draining not boolean', () => t.store.setDraining('q', 'a', [1], 'yes' as unknown as boolean)],
  ['resetStale: partition 99', () => t.store.resetStale('q', 'a', [99])],
  ['leave: empty owner', () => t.store.leave('q', '')],
  ['inFlight: empty queue', () => t.store.inFlight('', 'a')],
  ['ack: empty owner', () => t.store.ack('', [C])],
  ['ack: empty id', () => t.store.ack('a', [C, { ...C, id: '' }])],
  ['ack: empty route', () => t.store.ack('a', [{ ...C, route: '' }])],
  ['ack: negative attempt', () => t.store.ack('a', [{ ...C, attempt: -1 }])],
  ['ack: fractional expiresAt', () => t.store.ack('a', [{ ...C, expiresAt: 1.5 }])],
  ['ack: payload not a string', () => t.store.ack('a', [{ ...C, payload: 1 as unknown as string }])],
  ['undispatch: empty token', () => t.store.undispatch('a', [{ ...S, token: '' }])],
  ['undispatch: NaN attempt', () => t.store.undispatch('a', [{ ...S, attempt: Number.NaN }])],
  ['defer: negative notBefore', () => t.store.defer('a', [S], -5)],
  ['defer: fractional notBefore', () => t.store.defer('a', [S], 1.25)],
  ['retry: NaN notBefore', () => t.store.retry('a', S, Number.NaN, '{}')],
  ['retry: empty owner', () => t.store.retry('', S, 1, '{}')],
  ['retry: envelope not a string', () => t.store.retry('a', S, 1, undefined as unknown as string)],
  ['cancel: not an array', () => t.store.cancel('id' as unknown as string[])],
  ['cancel: id not a string', () => t.store.cancel([3 as unknown as string])],
  ['cancelledKeys: empty id', () => t.store.cancelledKeys([{ id: '', token: 't' }])],
  ['popResults: empty route', () => t.store.popResults('', 1, 1)],
  ['popResults: negative limit', () => t.store.popResults('r', 1, -1)],
  ['popResults: fractional now', () => t.store.popResults('r', 1.5, 1)],
  ['expireResults: NaN limit', () => t.store.expireResults(1, Number.NaN)],
  ['resultDepth: empty route', () => t.store.resultDepth('')],
  ['backlog: negative window', () => t.store.backlog('q', 1, [10, -1])],
  ['backlog: windows not an array', () => t.store.backlog('q', 1, 5 as unknown as number[])],
  ['hasRequests: empty queue', () => t.store.hasRequests('')],
];

describe('bad input', () => {
  it.each(cases)('%s → INVALID_ARGUMENT before any statement', async (_name, call) => {
    const query = vi.spyOn(t.store.pool, 'query');
    const connect = vi.spyOn(t.store.pool, 'connect');
    try {
      const err = await call().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(isQError(err, 'INVALID_ARGUMENT'), String(err)).toBe(true);
      expect(query).not.toHaveBeenCalled();
      expect(connect).not.toHaveBeenCalled();
    } finally {
      query.mockRestore();
      connect.mockRestore();
    }
  });

  it('wrote nothing', async () => {
    expect(await t.store.backlog('q', 0, [])).toEqual({ depth: 0, cancelled: 0, expiring: [] });
  });

  it('RequestStore.open rejects bad options', async () => {
    const err = await import('../src/index.js')
      .then(({ RequestStore }) => RequestStore.open(t.schema.dsn, { maxConns: Number.NaN }))
      .catch((e: unknown) => e);
    expect(isQError(err, 'INVALID_ARGUMENT')).toBe(true);
  });

  it('RequestStore.open: maxConns 0, -1 or 2.5 is INVALID_ARGUMENT naming it (a non-positive cap used to mean 10), before a pool opens', async () => {
    const { RequestStore } = await import('../src/index.js');
    for (const maxConns of [-1, 0, 2.5]) {
      const err = await RequestStore.open('postgres://nobody@127.0.0.1:1/none', { maxConns }).catch((e: unknown) => e);
      expect(isQError(err, 'INVALID_ARGUMENT'), String(err)).toBe(true);
      expect((err as Error).message).toBe(`RequestStore.open: maxConns must be an integer >= 1, got ${maxConns}`);
    }
  });

  it('retry names its one stamp `stamp`, not `stamps[0]`', async () => {
    const err = await t.store.retry('a', null as unknown as typeof S, 1, '{}').catch((e: unknown) => e);
    expect((err as Error).message).toBe('retry: stamp must be an object');
    const bad = await t.store.retry('a', { ...S, id: '' }, 1, '{}').catch((e: unknown) => e);
    expect((bad as Error).message).toBe('retry: stamp.id must be a non-empty string');
  });

  it('empty batches send no statement', async () => {
    const query = vi.spyOn(t.store.pool, 'query');
    try {
      await t.store.enqueue([]);
      expect(await t.store.ack('a', [])).toEqual([]);
      await t.store.undispatch('a', []);
      await t.store.defer('a', [], 5);
      await t.store.cancel([]);
      expect(await t.store.cancelledKeys([])).toEqual([]);
      await t.store.releasePartitions('q', 'a', []);
      await t.store.setDraining('q', 'a', [], true);
      await t.store.resetStale('q', 'a', []);
      expect(await t.store.dispatch('q', 'a', NOW, 0)).toEqual([]);
      expect(query).not.toHaveBeenCalled();
    } finally {
      query.mockRestore();
    }
  });
});
