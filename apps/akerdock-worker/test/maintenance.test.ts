// maintenance.purge (scheduled by the worker under a lock key) and notify.send.
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '@q/schema';
import { createTestSchema, type TestSchema } from '@q/testing';
import { startWorkerApp, type WorkerApp } from '../src/app.js';
import { createLogger } from '../src/logger.js';
import { verifyWebhook } from '../src/signing.js';
import { SECRET, testConfig, waitFor } from './helpers.js';
import { startReceiver, type Receiver } from './receiver.js';

let schema: TestSchema;
let receiver: Receiver;
const apps: WorkerApp[] = [];
const logLines: Array<Record<string, unknown>> = [];
const sink = new Writable({
  write(chunk: Buffer, _enc, done) {
    for (const l of chunk.toString().split('\n').filter(Boolean)) logLines.push(JSON.parse(l) as Record<string, unknown>);
    done();
  },
});

beforeAll(async () => {
  schema = await createTestSchema('akw_maint');
  await migrate(schema.pool(), { modules: ['jobs', 'requests', 'quota'] });
  receiver = await startReceiver(() => 200);
});
afterAll(async () => {
  for (const a of apps) await a.stop();
  await receiver?.close();
  await schema?.drop();
});

const statusOf = async (uuid: string) => (await apps[0]?.queue.get(uuid))?.status;

describe('maintenance.purge', () => {
  it('is scheduled once per interval across processes and purges old finished jobs', async () => {
    const pool = schema.pool();
    // Two finished jobs, one finished 40 days ago (moved back through the database), one just now.
    const { rows } = await pool.query<{ id: number }>(
      `INSERT INTO q_jobs (uuid, queue, job_type, status, finished_at)
       VALUES (gen_random_uuid(), 'default', 'old.one', 'succeeded', now() - interval '40 days'),
              (gen_random_uuid(), 'default', 'new.one', 'succeeded', now())
       RETURNING id`,
    );
    expect(rows.length).toBe(2);

    // Two processes with the same (long) interval: one job for the slot, run by one of them.
    for (let i = 0; i < 2; i++) {
      apps.push(await startWorkerApp(testConfig(schema.dsn, ['--queues', 'maintenance', '--purge-interval', '1h', '--purge-after', '30d'])));
    }
    const purge = await waitFor('the purge to finish', async () => {
      const { rows: r } = await pool.query<{
        uuid: string;
        status: string;
        result: Record<string, unknown>;
        steps: Array<{ name: string; status: string }>;
        lock_key: string;
      }>(`SELECT uuid, status, result, steps, lock_key FROM q_jobs_all WHERE job_type = 'maintenance.purge'`);
      return r.length === 1 && r[0]?.status === 'succeeded' ? r : undefined;
    });
    expect(purge[0]).toMatchObject({
      lock_key: 'maintenance:purge',
      result: { jobs_purged: 1, results_expired: 0, quota_reaped: 0 },
    });
    expect(purge[0]?.steps.map((s) => `${s.name}:${s.status}`)).toEqual([
      'purge finished jobs:succeeded',
      'expire results:succeeded',
      'reap quota:succeeded',
    ]);
    const { rows: left } = await pool.query<{ job_type: string }>(`SELECT job_type FROM q_jobs_all WHERE job_type IN ('old.one', 'new.one')`);
    expect(left.map((r) => r.job_type)).toEqual(['new.one']);
  });

  it('honours older_than_days in the payload and refuses a bad one at once', async () => {
    const app = apps[0] as WorkerApp;
    const ok = await app.queue.enqueue({
      queue: 'maintenance',
      type: 'maintenance.purge',
      payload: { older_than_days: 0 },
      lockKey: 'maintenance:purge',
    });
    await waitFor('purge', async () => ((await statusOf(ok.uuid)) === 'succeeded' ? true : undefined));
    const bad = await app.queue.enqueue({ queue: 'maintenance', type: 'maintenance.purge', payload: { older_than_days: 'soon' } });
    await waitFor('dead letter', async () => ((await statusOf(bad.uuid)) === 'dead_letter' ? true : undefined));
    expect((await app.queue.get(bad.uuid))?.attempt).toBe(1);
  });
});

describe('notify.send', () => {
  it('writes a log line when no URL is configured', async () => {
    const app = await startWorkerApp(testConfig(schema.dsn, ['--queues', 'notify']), { logger: createLogger('info', sink) });
    apps.push(app);
    const job = await app.queue.enqueue({
      queue: 'notify',
      type: 'notify.send',
      payload: { subject: 'Backup done', message: 'plan 7 ok', channel: 'ops' },
    });
    await waitFor('notification', async () => ((await app.queue.get(job.uuid))?.status === 'succeeded' ? true : undefined));
    expect(logLines.find((l) => l.msg === 'notification')).toMatchObject({
      job_uuid: job.uuid,
      notification: { subject: 'Backup done', message: 'plan 7 ok', channel: 'ops' },
    });
    await app.stop(); // the next test's worker must be the only notify consumer
  });

  it('POSTs to the notification URL, signed', async () => {
    const app = await startWorkerApp(testConfig(schema.dsn, ['--queues', 'notify', '--notify-url', `${receiver.url}/notify`]));
    apps.push(app);
    const job = await app.queue.enqueue({ queue: 'notify', type: 'notify.send', payload: { message: 'hello' } });
    await waitFor('notification', async () => ((await app.queue.get(job.uuid))?.status === 'succeeded' ? true : undefined));
    const d = receiver.byKey.get(job.uuid)?.[0];
    expect(JSON.parse(d?.body ?? '{}')).toEqual({ job_uuid: job.uuid, message: 'hello' });
    expect(verifyWebhook(SECRET, d?.body ?? '', String(d?.headers['x-q-signature']))).toBe(true);
  });
});
