// Issue #14 items 18 (the shared outcome check), 23 (writes too large for one statement) and 25
// (RequestStore.open with bad telemetry providers) for RequestStore.
import { randomBytes } from 'node:crypto';
import { isQError } from '@q/schema';
import { useStore, type TestSchema } from '@q/testing';
import { describe, expect, it } from 'vitest';
import {
  MAX_VALUE_BYTES,
  RequestStore,
  checkCompletion,
  checkEnvelope,
  checkUnixSeconds,
  stampOf,
  type Completion,
  type OpenOptions,
} from '../src/index.js';
import { req } from './requests/helpers.js';

let schema: TestSchema;
let store: RequestStore;
useStore(RequestStore, { prefix: 'slimits', maxConns: 2 }, async (t) => {
  ({ schema, store } = t);
  await store.ensurePartitions('q');
  const now = await store.now();
  await store.acquirePartitions('q', 'me', now, 3_600_000, 64);
});

async function errorOf(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => undefined,
    (e: unknown) => e,
  );
}

const MB = 1_000_000;

describe('writes larger than one statement can carry', () => {
  it('enqueue splits a batch whose payloads add up to 280 MB (560 M characters as hex) and stores all of it', async () => {
    const big = Array.from({ length: 2 }, (_, i) => req(`big-${i}`, { payload: Buffer.alloc(140 * MB, 0x61 + i) }));
    await store.enqueue(big);
    const { rows } = await schema
      .pool()
      .query<{ id: string; n: string; first: string }>(
        `SELECT id, octet_length(payload) AS n, get_byte(payload, 0) AS first FROM q_requests WHERE id LIKE 'big-%' ORDER BY id`,
      );
    expect(rows.map((r) => [r.id, Number(r.n), Number(r.first)])).toEqual([
      ['big-0', 140 * MB, 0x61],
      ['big-1', 140 * MB, 0x62],
    ]);
    await schema.pool().query(`DELETE FROM q_requests WHERE id LIKE 'big-%'`);
  });

  it('ack splits results that add up to 540 MB into one transaction, in order', async () => {
    await store.enqueue([req('r-0'), req('r-1'), req('r-2')]);
    const rows = await store.dispatch('q', 'me', await store.now(), 10);
    expect(rows).toHaveLength(3);
    const large = 'x'.repeat(180 * MB);
    const completions: Completion[] = rows
      .sort((a, b) => a.id.localeCompare(b.id))
      .map((r, i) => ({ ...stampOf(r), route: 'big-out', payload: i === 1 ? `${large.slice(1)}"` : large }));
    expect(await store.ack('me', completions)).toEqual([true, true, true]);
    const { rows: res } = await schema
      .pool()
      .query<{ id: string; n: string }>(`SELECT id, length(payload) AS n FROM q_results WHERE route = 'big-out' ORDER BY seq`);
    expect(res.map((r) => [r.id, Number(r.n)])).toEqual([
      ['r-0', 180 * MB],
      ['r-1', 180 * MB],
      ['r-2', 180 * MB],
    ]);
    await schema.pool().query(`DELETE FROM q_results WHERE route = 'big-out'`);
  });

  it('one value over MAX_VALUE_BYTES is INVALID_ARGUMENT naming its size, before any statement', async () => {
    const size = MAX_VALUE_BYTES + 44 * MB; // 300 MB
    const huge = Buffer.alloc(size, 1);
    const e1 = await errorOf(store.enqueue([req('ok'), req('huge', { payload: huge })]));
    expect(isQError(e1, 'INVALID_ARGUMENT'), String(e1)).toBe(true);
    expect((e1 as Error).message).toContain(`requests[1] (envelope + payload) is ${size + 2} bytes`);
    expect((e1 as Error).message).toContain(String(MAX_VALUE_BYTES));

    const text = 'x'.repeat(size);
    const e2 = await errorOf(store.ack('me', [{ id: 'a', token: 't', attempt: 1, route: 'r', payload: text }]));
    expect(isQError(e2, 'INVALID_ARGUMENT'), String(e2)).toBe(true);
    expect((e2 as Error).message).toContain(`completions[0].payload is ${size} bytes`);
    const e3 = await errorOf(store.retry('me', { id: 'a', token: 't', attempt: 1 }, 0, text));
    expect(isQError(e3, 'INVALID_ARGUMENT'), String(e3)).toBe(true);
    expect((e3 as Error).message).toContain(`envelope is ${size} bytes`);
    // Nothing was written.
    const { rows } = await schema.pool().query<{ n: string }>(`SELECT count(*) AS n FROM q_requests WHERE id IN ('ok', 'huge')`);
    expect(Number(rows[0]?.n)).toBe(0);
  });
});

describe('the shared outcome checks', () => {
  const C: Completion = { id: 'i', token: 't', attempt: 1, route: 'r', payload: 'p' };
  const bad: Array<[string, unknown]> = [
    ['fractional expiresAt', { ...C, expiresAt: 1.5 }],
    ['route with NUL', { ...C, route: 'a\u0000b' }],
    ['route over 2,048 bytes', { ...C, route: 'é'.repeat(1025) }],
    ['payload with a lone surrogate', { ...C, payload: 'x\ud800y' }],
    ['not an object', null],
  ];

  it.each(bad)('checkCompletion rejects a %s exactly as RequestStore.ack does', async (_name, c) => {
    const direct = (() => {
      try {
        checkCompletion(c, 'completions[0]');
        return undefined;
      } catch (err) {
        return err;
      }
    })();
    const viaAck = await errorOf(store.ack('me', [c as Completion]));
    expect(isQError(direct, 'INVALID_ARGUMENT'), String(direct)).toBe(true);
    expect((direct as Error).message).toBe((viaAck as Error).message);
  });

  it('checkCompletion normalises a valid completion; checkEnvelope and checkUnixSeconds match retry', async () => {
    expect(checkCompletion(C)).toEqual({ ...C, expiresAt: 0 });
    expect(checkEnvelope('{"a":1}')).toBe('{"a":1}');
    expect(checkUnixSeconds(12)).toBe(12);
    expect(() => checkEnvelope('a\u0000')).toThrow(/envelope contains a NUL/);
    expect(() => checkUnixSeconds(1.5)).toThrow(/notBefore must be a non-negative integer/);
    const viaRetry = await errorOf(store.retry('me', { id: 'a', token: 't', attempt: 1 }, 1.5, '{}'));
    expect((viaRetry as Error).message).toBe('retry: notBefore must be a non-negative integer');
  });
});

describe('RequestStore.open with bad telemetry providers', () => {
  async function backends(app: string): Promise<number> {
    const { rows } = await schema.pool().query<{ n: string }>('SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = $1', [app]);
    return Number(rows[0]?.n);
  }

  const cases: Array<[string, Partial<OpenOptions>]> = [
    ['tracerProvider without getTracer', { tracerProvider: {} as never }],
    ['tracerProvider a string', { tracerProvider: 'otel' as never }],
    ['meterProvider without getMeter', { meterProvider: { getTracer: () => undefined } as never }],
    ['applicationName with NUL', { applicationName: 'a\u0000b' }],
  ];

  it.each(cases)('%s → INVALID_ARGUMENT, and no pool is left open', async (_name, bad) => {
    const app = `q-badopt-${randomBytes(4).toString('hex')}`;
    const err = await errorOf(RequestStore.open(schema.dsn, { applicationName: app, maxConns: 1, ...bad }));
    expect(isQError(err, 'INVALID_ARGUMENT'), String(err)).toBe(true);
    await new Promise((r) => setTimeout(r, 100));
    expect(await backends(app)).toBe(0);
  });
});
