// maintenance.purge (enqueued by the schedule akerdock.purge the workers set at start) and notify.send.
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isQError, migrate } from '@q/schema';
import { createTestSchema, sleep, type TestSchema } from '@q/testing';
import { startWorkerApp, type WorkerApp } from '../src/app.js';
import { PURGE_SCHEDULE_NAME } from '../src/config.js';
import type { PurgeResult } from '../src/handlers/purge.js';
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
  it('is the schedule akerdock.purge: set by the processes at start, one job per slot across them, purging old finished jobs', async () => {
    const pool = schema.pool();
    // Two finished jobs, one finished 40 days ago (moved back through the database), one just now.
    const { rows } = await pool.query<{ id: number }>(
      `INSERT INTO q_jobs (uuid, queue, job_type, status, finished_at)
       VALUES (gen_random_uuid(), 'default', 'old.one', 'succeeded', now() - interval '40 days'),
              (gen_random_uuid(), 'default', 'new.one', 'succeeded', now())
       RETURNING id`,
    );
    expect(rows.length).toBe(2);

    // Two processes with the same per-second pattern: both upsert the schedule, both fire it.
    for (let i = 0; i < 2; i++) {
      apps.push(await startWorkerApp(testConfig(schema.dsn, ['--queues', 'maintenance', '--purge-cron', '* * * * * *', '--purge-after', '30d'])));
    }
    const [info] = await (apps[0] as WorkerApp).queue.schedules();
    expect(info).toMatchObject({
      name: PURGE_SCHEDULE_NAME,
      cron: '* * * * * *',
      timezone: 'UTC',
      type: 'maintenance.purge',
      queue: 'maintenance',
    });

    type PurgeRow = { status: string; result: PurgeResult | null; steps: Array<{ name: string; status: string }>; slot: string };
    const purges = await waitFor('three purges to finish', async () => {
      const { rows: r } = await pool.query<PurgeRow>(
        `SELECT status, result, steps, payload->>'scheduledFor' AS slot FROM q_jobs_all WHERE job_type = 'maintenance.purge' ORDER BY id`,
      );
      return r.filter((p) => p.status === 'succeeded').length >= 3 ? r : undefined;
    });
    // One job per slot although two schedulers fire: the slots are distinct, whole seconds.
    const slots = purges.map((p) => p.slot);
    expect(new Set(slots).size).toBe(slots.length);
    for (const slot of slots) expect(slot).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000Z$/);
    const done = purges.filter((p) => p.status === 'succeeded');
    // The old job is purged once, by one run; the others find nothing that old.
    expect(done.reduce((n, p) => n + (p.result?.jobs_purged ?? 0), 0)).toBe(1);
    const purged = done.find((p) => p.result?.jobs_purged === 1);
    expect(purged?.result).toEqual({ jobs_purged: 1, results_expired: 0, quota_reaped: 0 });
    expect(purged?.steps.map((s) => `${s.name}:${s.status}`)).toEqual([
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

  it('runs one at a time: a purge that finds another running (the advisory lock held) skips, scheduled or not', async () => {
    const app = apps[0] as WorkerApp;
    const holder = await schema.pool().connect();
    try {
      // The lock a running purge holds on this schema.
      await holder.query(`SELECT pg_advisory_lock(hashtextextended(current_schema() || '/akerdock.purge', 0))`);
      const locked = (await holder.query<{ t: Date }>(`SELECT clock_timestamp() AS t`)).rows[0]?.t;
      const busy = await app.queue.enqueue({ queue: 'maintenance', type: 'maintenance.purge', payload: { older_than_days: 0 } });
      await waitFor('the skipped purge', async () => ((await statusOf(busy.uuid)) === 'succeeded' ? true : undefined));
      const job = await app.queue.get(busy.uuid);
      expect(job?.result).toEqual({ jobs_purged: 0, results_expired: null, quota_reaped: null, skipped: 'another maintenance.purge is running' });
      expect(job?.steps?.map((st) => `${st.name}:${st.status}`)).toEqual(['purge:skipped']);
      // A job of the per-second schedule enqueued while the lock is held skips too.
      const scheduled = await waitFor('a scheduled purge enqueued after the lock, finished', async () => {
        const { rows } = await holder.query<{ result: PurgeResult }>(
          `SELECT result FROM q_jobs_all WHERE job_type = 'maintenance.purge' AND payload ? 'scheduledFor'
             AND created_at > $1::timestamptz AND status = 'succeeded' LIMIT 1`,
          [locked],
        );
        return rows[0];
      });
      expect(scheduled.result.skipped).toBe('another maintenance.purge is running');
    } finally {
      await holder.query(`SELECT pg_advisory_unlock_all()`);
      holder.release();
    }
    const free = await app.queue.enqueue({ queue: 'maintenance', type: 'maintenance.purge', payload: { older_than_days: 0 } });
    await waitFor('the purge', async () => ((await statusOf(free.uuid)) === 'succeeded' ? true : undefined));
    expect((await app.queue.get(free.uuid))?.result).toMatchObject({ results_expired: 0, quota_reaped: 0 });
    expect((await app.queue.get(free.uuid))?.result).not.toHaveProperty('skipped');
  });

  it('is left alone by a process that does not consume maintenance, removed by one with purge off', async () => {
    const queue = (apps[0] as WorkerApp).queue;
    const names = async () => (await queue.schedules()).map((s) => s.name);
    const notify = await startWorkerApp(testConfig(schema.dsn, ['--queues', 'notify', '--purge-cron', 'off']));
    await notify.stop();
    expect(await names()).toEqual([PURGE_SCHEDULE_NAME]);

    const off = await startWorkerApp(testConfig(schema.dsn, ['--queues', 'maintenance', '--purge-cron', 'off']));
    apps.push(off);
    expect(await names()).toEqual([]);
    // No slot is enqueued any more (those already enqueued still run).
    const count = async () =>
      Number((await schema.pool().query<{ n: string }>(`SELECT count(*) AS n FROM q_jobs_all WHERE job_type = 'maintenance.purge'`)).rows[0]?.n);
    const before = await count();
    await sleep(2_500);
    expect(await count()).toBe(before);
  });

  it('refuses at start a --purge-cron the scheduler cannot read, as a CONFIG error naming the flag', async () => {
    const err: unknown = await startWorkerApp(testConfig(schema.dsn, ['--queues', 'maintenance', '--purge-cron', '61 * * * *'])).then(
      (a) => {
        apps.push(a);
        return new Error('started');
      },
      (e: unknown) => e,
    );
    expect(isQError(err, 'CONFIG')).toBe(true);
    expect((err as Error).message).toMatch(/^--purge-cron: schedule: cron must be a cron pattern/);
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
