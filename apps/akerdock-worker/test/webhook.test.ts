// webhook.deliver end to end: real worker, real Postgres, a real HTTP receiver on loopback.
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestSchema, type TestSchema } from '@q/testing';
import { startWorkerApp, type WorkerApp } from '../src/app.js';
import type { JobJson } from '../src/api/job-json.js';
import { verifyWebhook } from '../src/signing.js';
import { api, SECRET, testConfig, waitFor } from './helpers.js';
import { startReceiver, type Receiver } from './receiver.js';

let schema: TestSchema;
let app: WorkerApp;
let receiver: Receiver;
let gone = true; // /gone answers 410 until the test "fixes" the endpoint

/** Deterministic 20 %: the first attempt of keys whose hash byte is < 51 of 256 gets a 503. */
const unlucky = (key: string) => (createHash('sha1').update(key).digest()[0] as number) % 5 === 0;

beforeAll(async () => {
  schema = await createTestSchema('akw_webhook');
  receiver = await startReceiver(({ path, headers, seen }) => {
    if (path === '/gone') return gone ? 410 : 200;
    const key = String(headers['idempotency-key']);
    return seen === 0 && unlucky(key) ? 503 : 200;
  });
  app = await startWorkerApp(testConfig(schema.dsn, ['--concurrency', '16', '--retry-base', '50ms', '--queues', 'webhook']));
});
afterAll(async () => {
  await app?.stop();
  await receiver?.close();
  await schema?.drop();
});

const count = async (status: string) => {
  const { rows } = await schema
    .pool()
    .query<{ n: number }>(`SELECT count(*)::int AS n FROM q_jobs_all WHERE job_type = 'webhook.deliver' AND status = $1`, [status]);
  return rows[0]?.n ?? 0;
};

describe('webhook.deliver', () => {
  it('delivers 1,000 webhooks through 20 % first-attempt 503s, each signed and carrying its idempotency key', async () => {
    const N = 1_000;
    const jobs = await app.queue.enqueueMany(
      Array.from({ length: N }, (_, i) => ({
        queue: 'webhook',
        type: 'webhook.deliver',
        payload: { url: `${receiver.url}/hook`, body: { event: 'order.paid', seq: i } },
      })),
    );
    await waitFor('1,000 deliveries', async () => (await count('succeeded')) >= N, 100_000);
    expect(await count('dead_letter')).toBe(0);

    const uuids = new Set(jobs.map((j) => j.uuid));
    const delivered = receiver.deliveries.filter((d) => d.path === '/hook' && d.status === 200);
    const refused = receiver.deliveries.filter((d) => d.path === '/hook' && d.status === 503);
    // Every job reached the receiver with a 2xx; duplicates (if any) are recognisable by their key.
    expect(new Set(delivered.map((d) => d.headers['idempotency-key'])).size).toBe(N);
    for (const d of [...delivered, ...refused]) {
      expect(uuids.has(String(d.headers['idempotency-key']))).toBe(true);
      expect(verifyWebhook(SECRET, d.body, String(d.headers['x-q-signature']))).toBe(true);
    }
    const expected503 = jobs.filter((j) => unlucky(j.uuid)).length;
    expect(refused.length).toBe(expected503);
    expect(expected503).toBeGreaterThan(N * 0.12);
    expect(expected503).toBeLessThan(N * 0.28);
    // The retried ones were retried with the same key and body, as attempt 2.
    for (const d of refused) {
      const all = receiver.byKey.get(String(d.headers['idempotency-key'])) ?? [];
      expect(all.map((x) => x.status)).toEqual([503, 200]);
      expect(all[1]?.body).toBe(d.body);
      expect(all.map((x) => x.headers['x-q-delivery-attempt'])).toEqual(['1', '2']);
    }
    // Bodies are the payload's body, byte for byte as signed.
    const seqs = delivered.map((d) => (JSON.parse(d.body) as { seq: number }).seq).sort((a, b) => a - b);
    expect(seqs).toEqual(Array.from({ length: N }, (_, i) => i));

    const sample = (await api(app.url, 'GET', `/jobs/${jobs.find((j) => unlucky(j.uuid))?.uuid}`)).json as JobJson;
    expect(sample).toMatchObject({ status: 'succeeded', attempt: 2, result: { status: 200, attempt: 2 }, error: null });
    expect(sample.steps).toEqual([expect.objectContaining({ name: 'deliver', status: 'succeeded' })]);
  }, 150_000);

  it('dead-letters at once on 410, and a retry from the dead letter delivers and links back', async () => {
    const job = await app.queue.enqueue({ queue: 'webhook', type: 'webhook.deliver', payload: { url: `${receiver.url}/gone`, body: { a: 1 } } });
    const dead = await waitFor('dead letter', async () => {
      const j = (await api(app.url, 'GET', `/jobs/${job.uuid}`)).json as JobJson;
      return j.status === 'dead_letter' ? j : undefined;
    });
    expect(dead).toMatchObject({ attempt: 1, max_attempts: 5, error: { message: expect.stringMatching(/HTTP 410/) } });
    expect(dead.steps).toEqual([expect.objectContaining({ name: 'deliver', status: 'failed', message: expect.stringMatching(/HTTP 410/) })]);
    expect(receiver.byKey.get(job.uuid)?.length).toBe(1);

    gone = false;
    const retry = await api(app.url, 'POST', `/jobs/${job.uuid}/retry`);
    expect(retry.status).toBe(202);
    const { job_uuid: newUuid, status_url: statusUrl } = retry.json as { job_uuid: string; status_url: string };
    expect(statusUrl).toBe(`/jobs/${newUuid}`);
    const done = await waitFor('retried delivery', async () => {
      const j = (await api(app.url, 'GET', statusUrl)).json as JobJson;
      return j.status === 'succeeded' ? j : undefined;
    });
    expect(done).toMatchObject({ retry_of_id: dead.id, type: 'webhook.deliver', payload: dead.payload, attempt: 1 });
    expect(receiver.byKey.get(newUuid)?.map((d) => d.status)).toEqual([200]);
    expect((await api(app.url, 'GET', `/jobs/${job.uuid}`)).json).toMatchObject({ status: 'dead_letter' });
    // Forget closes a dead letter; it is no longer retryable.
    const forgot = await api(app.url, 'POST', `/jobs/${job.uuid}/forget`);
    expect(forgot).toMatchObject({ status: 200, json: { status: 'cancelled' } });
    expect((await api(app.url, 'POST', `/jobs/${job.uuid}/retry`)).status).toBe(409);
  });

  it('dead-letters a malformed payload without sending anything', async () => {
    const before = receiver.deliveries.length;
    const job = await app.queue.enqueue({ queue: 'webhook', type: 'webhook.deliver', payload: { url: 'file:///etc/passwd' } });
    await waitFor('dead letter', async () => ((await app.queue.get(job.uuid))?.status === 'dead_letter' ? true : undefined));
    expect((await app.queue.get(job.uuid))?.attempt).toBe(1);
    expect(receiver.deliveries.length).toBe(before);
  });
});
