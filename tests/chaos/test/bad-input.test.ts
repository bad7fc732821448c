// The bad-input matrix: every library entry point, given malformed, oversized, wrong-type,
// negative, NaN, empty, unicode and injection-shaped values, answers with a typed QError (no
// Postgres error leaking through), writes nothing, and stores odd-but-valid text verbatim.
import { randomBytes } from 'node:crypto';
import { JobQueue } from '@q/job-worker';
import { Consumer } from '@q/partition-consumer';
import { QuotaStore, createQuota } from '@q/quota';
import { QError } from '@q/schema';
import { JobStore, RequestStore, type NewRequest } from '@q/store';
import { createTestSchema, type TestSchema } from '@q/testing';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DSN_PASSWORD,
  MALFORMED_PASSWORD_PARTS,
  PAYLOAD_SECRET,
  databaseNamedByPassword,
  dsnWithPassword,
  malformedPasswordDsns,
} from '../src/index.js';

let schema: TestSchema;
let store: RequestStore;
let jobs: JobStore;
let quota: QuotaStore;
beforeAll(async () => {
  schema = await createTestSchema('badin');
  store = await RequestStore.open(schema.dsn, { maxConns: 4 });
  jobs = await JobStore.open(schema.dsn, { maxConns: 4 });
  quota = await QuotaStore.open(schema.dsn, { maxConns: 4 });
});
afterAll(async () => {
  await store?.close();
  await jobs?.close();
  await quota?.close();
  await schema.drop();
});

const INJECTION = [
  `'); DROP TABLE q_requests; --`,
  `" OR 1=1 --`,
  `$1`,
  `\\x00`,
  `%s%n`,
  `${'$'}{process.env}`,
  `Robert'); DELETE FROM q_jobs;--`,
];
const WEIRD_TEXT = ['日本語', '🙂 emoji', 'ﬁ ligature', 'Ω\u0301 combining', 'tab\tnewline\n', ' leading space', 'x'.repeat(1000)];
const BAD_NUMBERS: unknown[] = [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '3', null, undefined, {}, 2 ** 64];
const BAD_TEXT: unknown[] = ['', null, undefined, 42, {}, [], 'nul\u0000byte', 'x'.repeat(100_000), '\ud800 lone surrogate'];

async function rowCounts(): Promise<Record<string, number>> {
  const { rows } = await store.pool.query<Record<string, number>>(
    `SELECT (SELECT count(*) FROM q_requests)::int AS requests, (SELECT count(*) FROM q_results)::int AS results,
            (SELECT count(*) FROM q_jobs_all)::int AS jobs, (SELECT count(*) FROM q_quota_holders)::int AS holders,
            (SELECT count(*) FROM q_quota_slots)::int AS slots, (SELECT count(*) FROM q_quota_admits)::int AS admits`,
  );
  return rows[0]!;
}

async function expectQError(p: Promise<unknown> | (() => unknown), codes: string[] = ['INVALID_ARGUMENT']): Promise<QError> {
  let err: unknown;
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (e) {
    err = e;
  }
  expect(err, 'expected a QError').toBeInstanceOf(QError);
  expect(codes).toContain((err as QError).code);
  expect((err as QError).message).not.toContain(PAYLOAD_SECRET);
  expect((err as QError).message).not.toContain(DSN_PASSWORD);
  for (const part of MALFORMED_PASSWORD_PARTS) expect((err as QError).message).not.toContain(part);
  return err as QError;
}

function request(over: Partial<Record<keyof NewRequest, unknown>> = {}): NewRequest {
  return {
    id: `r-${randomBytes(4).toString('hex')}`,
    token: randomBytes(8).toString('hex'),
    queue: 'bad-input',
    deadline: Math.floor(Date.now() / 1000) + 600,
    envelope: '{}',
    payload: Buffer.from(PAYLOAD_SECRET),
    ...over,
  } as NewRequest;
}

describe('request queue (RequestStore)', () => {
  it('a bad field anywhere in an enqueue batch fails the whole call with INVALID_ARGUMENT and writes nothing', async () => {
    const before = await rowCounts();
    const badFields: Array<[keyof NewRequest, unknown[]]> = [
      ['id', BAD_TEXT],
      ['token', BAD_TEXT],
      ['queue', BAD_TEXT],
      ['deadline', BAD_NUMBERS],
      ['envelope', [null, undefined, 42, 'nul\u0000byte', '\ud800']],
      ['payload', [null, undefined, 'a string', 42, {}]],
    ];
    for (const [field, values] of badFields) {
      for (const value of values) {
        await expectQError(store.enqueue([request(), request({ [field]: value }), request()]));
      }
    }
    expect(await rowCounts()).toEqual(before);
  });

  it('numbers, partitions and names of every method are checked before any statement', async () => {
    const now = new Date();
    for (const n of BAD_NUMBERS) {
      await expectQError(store.dispatch('q', 'o', now, n as number));
      await expectQError(store.acquirePartitions('q', 'o', now, n as number, 1));
      await expectQError(store.popResults('r', n as number, 10));
      await expectQError(store.expireResults(0, n as number));
      await expectQError(store.backlog('q', 0, [n as number]));
      await expectQError(store.defer('o', [], n as number));
    }
    for (const p of [-1, 64, 1.5, Number.NaN, '1']) {
      await expectQError(store.releasePartitions('q', 'o', [p as number]));
      await expectQError(store.setDraining('q', 'o', [p as number], true));
    }
    for (const name of ['', null, 42]) {
      await expectQError(store.dispatch(name as string, 'o', now, 1));
      await expectQError(store.dispatch('q', name as string, now, 1));
      await expectQError(store.ensurePartitions(name as string));
      await expectQError(store.cancel([name as string]));
    }
    await expectQError(store.dispatch('q', 'o', new Date(Number.NaN), 1));
    await expectQError(store.ack('o', [{ id: 'x', token: 't', attempt: -1, route: 'r', payload: 'p' }]));
    await expectQError(store.ack('o', [{ id: 'x', token: 't', attempt: 1, route: '', payload: 'p' }]));
  });

  it('unicode and injection-shaped ids, tokens, queues and routes are stored verbatim and inert (property)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...INJECTION, ...WEIRD_TEXT),
        fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 }),
        async (odd, random) => {
          const queue = `q-${randomBytes(3).toString('hex')}`;
          const id = `${odd}|${random}`;
          const payload = Buffer.concat([Buffer.from(odd), randomBytes(16)]);
          await store.enqueue([request({ id, token: odd, queue, payload, envelope: odd })]);
          await store.ensurePartitions(queue);
          await store.acquirePartitions(queue, 'owner', await store.now(), 30_000, 64);
          const [got] = await store.dispatch(queue, 'owner', await store.now(), 10);
          expect(got?.id).toBe(id);
          expect(got?.token).toBe(odd);
          expect(got?.envelope).toBe(odd);
          expect(Buffer.from(got!.payload).equals(payload)).toBe(true);
          const [ok] = await store.ack('owner', [{ id, token: odd, attempt: got!.attempt, route: odd, payload: odd }]);
          expect(ok).toBe(true);
          const results = await store.popResults(odd, Math.floor(Date.now() / 1000), 10);
          expect(results.map((r) => [r.id, r.token, r.payload])).toEqual([[id, odd, odd]]);
        },
      ),
      { numRuns: 25 },
    );
    // The tables are intact.
    await store.pool.query('SELECT 1 FROM q_requests LIMIT 1');
  });

  it('RequestStore.open rejects foreign DSNs and never echoes a password', async () => {
    for (const dsn of ['mysql://u:' + DSN_PASSWORD + '@h/db', 'sqlite:///tmp/x.db', '', `host=h password=${DSN_PASSWORD}`, 42]) {
      await expectQError(RequestStore.open(dsn as string), ['UNSUPPORTED_DSN']);
    }
    const unreachable = dsnWithPassword('postgres://u@127.0.0.1:1/db');
    await expectQError(RequestStore.open(unreachable), ['CONNECTION']);
    await expectQError(RequestStore.open(schema.dsn, { maxConns: Number.NaN }));
  });
});

describe('DSNs whose password holds an unescaped reserved character', () => {
  it('RequestStore.open, JobStore.open, QuotaStore.open, createQuota and JobQueue.open never echo any part of the password', async () => {
    for (const dsn of [...malformedPasswordDsns(), databaseNamedByPassword(schema.dsn)]) {
      for (const open of [
        () => RequestStore.open(dsn),
        () => JobStore.open(dsn),
        () => QuotaStore.open(dsn),
        () => createQuota({ dsn, ttlMs: 10_000 }),
        () => JobQueue.open(dsn),
      ]) {
        await expectQError(open, ['UNSUPPORTED_DSN', 'CONNECTION']);
      }
    }
  });

  it('an "@" after the host part is refused before anything connects, whatever server it would reach', async () => {
    const dsn = databaseNamedByPassword(schema.dsn);
    for (const open of [() => RequestStore.open(dsn), () => JobStore.open(dsn), () => QuotaStore.open(dsn), () => JobQueue.open(dsn)]) {
      await expectQError(open, ['UNSUPPORTED_DSN']);
    }
  });

  it('listenDsn is checked as the DSN is, before anything opens (JobStore.open/fromPool, JobQueue.open, RequestStore.open, QuotaStore.open, createQuota)', async () => {
    // Every shape but the blank one, which parses as meant (its connect fails with the host only).
    const shapes = [...malformedPasswordDsns(), databaseNamedByPassword(schema.dsn), 'mysql://u:' + DSN_PASSWORD + '@h/db'].filter(
      (d) => !d.includes(' '),
    );
    for (const listenDsn of shapes) {
      const err = await expectQError(() => JobStore.open(schema.dsn, { listenDsn, maxConns: 1 }), ['UNSUPPORTED_DSN']);
      expect(err.message).toMatch(/^JobStore\.open: listenDsn: /);
      await expectQError(() => JobStore.fromPool(jobs.pool, { listenDsn, migrate: false }), ['UNSUPPORTED_DSN']);
      await expectQError(() => JobQueue.open(schema.dsn, { listenDsn, maxConns: 1 }), ['UNSUPPORTED_DSN']);
      await expectQError(() => RequestStore.open(schema.dsn, { listenDsn, maxConns: 1 }), ['UNSUPPORTED_DSN']);
      await expectQError(() => QuotaStore.open(schema.dsn, { listenDsn, maxConns: 1 }), ['UNSUPPORTED_DSN']);
      await expectQError(() => createQuota({ dsn: schema.dsn, listenDsn, maxConns: 1 }), ['UNSUPPORTED_DSN']);
    }
  });
});

describe('schema names that need quoting', () => {
  // Capitals and a blank: a name used unquoted anywhere is folded or fails to parse. Each entry
  // point migrates into the schema, reopens on it, and works there.
  it('JobStore.open, RequestStore.open, createQuota and JobQueue.open work in a schema "QCaps…" and "q blank …"', async () => {
    const suffix = randomBytes(4).toString('hex');
    for (const name of [`QCaps_${suffix}`, `q blank ${suffix}`]) {
      try {
        const js = await JobStore.open(schema.dsn, { schema: name, maxConns: 2 });
        try {
          expect(js.schema).toBe(name);
          const [job] = await js.enqueue([{ queue: 'quoted', type: 't' }]);
          const [lease] = await js.claim({ queues: ['quoted'], workerId: 'w', limit: 1, leaseMs: 60_000 });
          expect(lease?.id).toBe(job!.id);
        } finally {
          await js.close();
        }
        // Opened again without migrating: the schema is found as created.
        const again = await JobStore.open(schema.dsn, { schema: name, maxConns: 1, migrate: false });
        await again.close();

        const rs = await RequestStore.open(schema.dsn, { schema: name, maxConns: 2 });
        try {
          await rs.enqueue([request({ queue: 'quoted' })]);
        } finally {
          await rs.close();
        }

        const q = await createQuota({ dsn: schema.dsn, schema: name, ttlMs: 10_000, maxConns: 2 });
        try {
          const release = await q.acquire('quoted', 1);
          expect(release).not.toBeNull();
          await release!();
        } finally {
          await q.close();
        }

        const queue = await JobQueue.open(schema.dsn, { schema: name, maxConns: 2 });
        try {
          await queue.enqueue({ type: 't' });
        } finally {
          await queue.close();
        }
        const { rows } = await store.pool.query<{ jobs: number; requests: number }>(
          `SELECT (SELECT count(*) FROM "${name}".q_jobs_all)::int AS jobs, (SELECT count(*) FROM "${name}".q_requests)::int AS requests`,
        );
        expect(rows[0]).toEqual({ jobs: 2, requests: 1 });
      } finally {
        await store.pool.query(`DROP SCHEMA IF EXISTS "${name}" CASCADE`);
      }
    }
  });
});

describe('quota (QuotaStore)', () => {
  it('bad counts, limits, windows and keys are INVALID_ARGUMENT and change nothing', async () => {
    await quota.registerQuotaHolder('bad-input-holder', 60_000);
    const before = await rowCounts();
    for (const n of BAD_NUMBERS) {
      await expectQError(quota.acquireQuotaSlots('bad-input-holder', 'k', n as number, 5));
      await expectQError(quota.acquireQuotaSlots('bad-input-holder', 'k', 1, n as number));
      await expectQError(quota.admitQuota('k', n as number, 5, 1000));
      await expectQError(quota.admitQuota('k', 1, 5, n as number));
      await expectQError(quota.registerQuotaHolder('h', n as number));
      await expectQError(quota.reapQuota(n as number));
    }
    for (const key of ['', null, 42, 'nul\u0000byte']) {
      await expectQError(quota.acquireQuotaSlots('bad-input-holder', key as string, 1, 5));
      await expectQError(quota.admitQuota(key as string, 1, 5, 1000));
    }
    await expectQError(quota.releaseQuotaSlots('bad-input-holder', ['a', 'b'], [1]));
    expect(await rowCounts()).toEqual(before);
  });

  it('injection-shaped keys are stored verbatim and counted on their own', async () => {
    for (const key of INJECTION) {
      expect(await quota.acquireQuotaSlots('bad-input-holder', key, 2, 2)).toBe(2);
      expect(await quota.acquireQuotaSlots('bad-input-holder', key, 1, 2)).toBe(0);
      expect(await quota.admitQuota(key, 3, 3, 60_000)).toBe(3);
    }
    const { rows } = await store.pool.query<{ key: string }>(`SELECT key FROM q_quota_keys WHERE key = ANY($1::text[]) ORDER BY key`, [
      INJECTION,
    ]);
    expect(rows.map((r) => r.key).sort()).toEqual([...INJECTION].sort());
  });
});

describe('job queue (JobQueue)', () => {
  it('payloads that are not JSON, unknown queues and bad numbers fail typed, writing nothing', async () => {
    const queue = new JobQueue(jobs, { knownQueues: ['default', 'task'] });
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    const before = await rowCounts();
    for (const payload of [{ big: 10n }, circular, { fn: () => 1 }, 10n]) {
      const err = await expectQError(queue.enqueue({ type: 't', payload }));
      expect(err.message).toMatch(/payload/);
    }
    await expectQError(queue.enqueue({ type: 't', queue: 'nope' }), ['UNKNOWN_QUEUE']);
    await expectQError(queue.enqueue({ type: 't', queue: `default'; DROP TABLE q_jobs; --` }), ['UNKNOWN_QUEUE']);
    for (const n of [0, -1, 1.5, Number.NaN, '5']) await expectQError(queue.enqueue({ type: 't', maxAttempts: n as number }));
    for (const d of [new Date(Number.NaN), 'tomorrow']) await expectQError(queue.enqueue({ type: 't', runAt: d as Date }));
    await expectQError(queue.enqueueMany([{ type: 'ok' }, { type: 't', payload: { big: 1n } }]));
    for (const limit of [0, 101, -1, 1.5, Number.NaN]) await expectQError(queue.list({ limit }));
    await expectQError(queue.list({ cursor: 'not-a-cursor' }));
    await expectQError(queue.list({ cursor: `'; DROP TABLE q_jobs; --` }));
    await expectQError(queue.purgeFinished(-1));
    for (const odd of ['nul\u0000byte', '\ud800', '']) {
      // An empty type (no worker can be registered for it) and a type Postgres cannot store are refused.
      await expectQError(queue.enqueue({ type: odd }));
      await expectQError(queue.enqueue({ type: 't', idempotencyKey: odd }));
      await expectQError(queue.enqueue({ type: 't', lockKey: odd }));
    }
    await expectQError(queue.enqueue({ type: 't', payload: { s: 'nul\u0000byte' } }));
    await expectQError(queue.enqueue({ type: 't', payload: { s: '\ud800' } }));
    await expectQError(queue.enqueue({ type: 't', idempotencyKey: 'k'.repeat(100_000) }));
    expect(await rowCounts()).toEqual(before);
  });

  it('odd job types, keys and payload strings round-trip verbatim', async () => {
    const queue = new JobQueue(jobs, { knownQueues: ['default'] });
    for (const odd of [...INJECTION, ...WEIRD_TEXT.slice(0, 5)]) {
      const job = await queue.enqueue({ type: odd, payload: { s: odd }, idempotencyKey: `k:${odd}`, lockKey: odd });
      const again = await queue.get(job.uuid);
      expect(again?.type).toBe(odd);
      expect(again?.payload).toEqual({ s: odd });
      expect(again?.idempotencyKey).toBe(`k:${odd}`);
      // A key is held per queue and type: the same type gets the job back, another type a job of its own.
      expect((await queue.enqueue({ type: odd, idempotencyKey: `k:${odd}` })).uuid).toBe(job.uuid);
      expect((await queue.enqueue({ type: 'other', idempotencyKey: `k:${odd}` })).uuid).not.toBe(job.uuid);
    }
    for (const uuid of ['', 'not-a-uuid', `'; DROP TABLE q_jobs; --`]) {
      await expectQError(queue.get(uuid));
      await expectQError(queue.cancel(uuid));
    }
  });
});

describe('partition consumer', () => {
  it('constructor options and poll limits are validated', async () => {
    for (const ttl of [0, -1, Number.NaN, '1000']) {
      await expectQError(() => new Consumer(store, 'q', 'o', { leaseTtlMs: ttl as number, drainTimeoutMs: 1000 }));
    }
    for (const name of ['', null]) await expectQError(() => new Consumer(store, name as string, 'o', { leaseTtlMs: 1000, drainTimeoutMs: 1000 }));
    const c = new Consumer(store, 'bad-input-consumer', 'o', { leaseTtlMs: 1000, drainTimeoutMs: 1000 });
    for (const n of BAD_NUMBERS) await expectQError(c.poll(new Date(), n as number));
    await c.close();
  });
});
