// The batch driver keeps only a window of a batch's lines on the request queue (issue 43): the
// rest is enqueued as results come in. A batch cancelled or expired with lines never enqueued
// still reports every line, each custom_id exactly once in its error file. Real Postgres; no
// dispatcher runs, so nothing is answered and the enqueued lines stay pending.
import { RequestStore, type Batch } from '@q/store';
import { createTestSchema, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BatchMetrics } from '../src/batch/batch-metrics.js';
import { BatchDriver } from '../src/batch/driver.js';
import { loadConfig } from '../src/config/load.js';
import { silentLogger } from '../src/logger.js';

const LINES = 1200; // three pages of 500
let schema: TestSchema;
let store: RequestStore;

beforeAll(async () => {
  schema = await createTestSchema('batchwin');
  store = await RequestStore.open(schema.dsn, { maxConns: 3 });
}, 60_000);

afterAll(async () => {
  await store?.close();
  await schema?.drop();
});

function driver(): BatchDriver {
  const queue = loadConfig({ env: {}, document: { queues: [{ queue_name: 'win', igw_base_url: 'http://127.0.0.1:9' }] } }).queues[0]!;
  return new BatchDriver({
    store,
    queue,
    tenantAttributes: ['tenant'],
    owner: 'd1',
    intervalMs: 1000,
    leaseMs: 60_000,
    logger: silentLogger,
    metrics: new BatchMetrics(undefined),
    ahead: 1,
  });
}

async function newBatch(windowSeconds: number): Promise<Batch> {
  const text = Array.from({ length: LINES }, (_, i) =>
    JSON.stringify({ custom_id: `w-${i}`, method: 'POST', url: '/v1/chat/completions', body: { model: 'm', messages: [] } }),
  ).join('\n');
  const file = await store.batches.uploadFile(
    { tenant: 'acme', purpose: 'batch', filename: 'in.jsonl' },
    (async function* () {
      yield Buffer.from(text);
    })(),
  );
  return (await store.batches.createBatch({
    tenant: 'acme',
    inputFileId: file.id,
    endpoint: '/v1/chat/completions',
    queue: 'win',
    completionWindow: '24h',
    windowSeconds,
  }))!;
}

async function pendingInQueue(): Promise<number> {
  const { rows } = await schema.pool().query<{ n: string }>(`SELECT count(*) AS n FROM q_requests WHERE queue = 'win' AND cancelled = 0`);
  return Number(rows[0]!.n);
}

async function errorIds(b: Batch): Promise<string[]> {
  const got = (await store.batches.getBatch('acme', b.id))!;
  let text = '';
  for await (const chunk of (await store.batches.readFile('acme', got.errorFileId!))!) text += Buffer.from(chunk).toString('utf8');
  return text
    .trim()
    .split('\n')
    .map((l) => (JSON.parse(l) as { custom_id: string }).custom_id);
}

describe('batch driver: a window of lines on the request queue', () => {
  it('enqueues a page ahead only; a cancel still reports every line once as batch_cancelled', async () => {
    const b = await newBatch(3600);
    const d = driver();
    await d.round(); // validating → in_progress
    await d.round(); // one page enqueued
    await d.round(); // nothing answered: no more
    expect(await pendingInQueue()).toBe(500);
    expect((await store.batches.getBatch('acme', b.id))!.status).toBe('in_progress');
    await store.batches.cancelBatch('acme', b.id);
    await d.round();
    const done = (await store.batches.getBatch('acme', b.id))!;
    expect(done.status).toBe('cancelled');
    expect(done.failed).toBe(LINES);
    const ids = await errorIds(b);
    expect(ids).toHaveLength(LINES);
    expect(new Set(ids).size).toBe(LINES);
    expect(await pendingInQueue()).toBe(0); // the enqueued ones were cancelled, the rest never enqueued
  });

  it('a batch past its window with lines never enqueued: every line once as batch_expired', async () => {
    await schema.pool().query(`UPDATE q_requests SET cancelled = 1 WHERE queue = 'win'`);
    const b = await newBatch(1);
    const d = driver();
    await d.round();
    await d.round();
    await new Promise((r) => setTimeout(r, 2100));
    await d.round();
    const done = (await store.batches.getBatch('acme', b.id))!;
    expect(done.status).toBe('expired');
    expect(done.failed).toBe(LINES);
    const ids = await errorIds(b);
    expect(ids).toHaveLength(LINES);
    expect(new Set(ids).size).toBe(LINES);
  });
});
