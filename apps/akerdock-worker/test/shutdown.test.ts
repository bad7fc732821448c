// SIGTERM on a real worker process while two deliveries are in flight: the one that finishes
// within the drain timeout is recorded; the one still running at the timeout goes back to the queue.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestSchema, type TestSchema } from '@q/testing';
import type { JobJson } from '../src/api/job-json.js';
import { api, SECRET, TOKEN, waitFor } from './helpers.js';
import { startReceiver, type Receiver } from './receiver.js';
import { spawnWorker } from './spawn.js';

let schema: TestSchema;
let receiver: Receiver;
const held = new Map<string, (status: number) => void>();

beforeAll(async () => {
  schema = await createTestSchema('akw_stop');
  // Holds every request until the test answers it (by path).
  receiver = await startReceiver(({ path }) => new Promise<number>((resolve) => held.set(path, resolve)));
});
afterAll(async () => {
  for (const answer of held.values()) answer(200);
  await receiver?.close();
  await schema?.drop();
});

const row = async (uuid: string) => {
  const { rows } = await schema
    .pool()
    .query<{ status: string; attempt: number; steps: unknown; result: unknown }>(
      'SELECT status, attempt, steps, result FROM q_jobs_all WHERE uuid = $1',
      [uuid],
    );
  return rows[0];
};

describe('graceful shutdown', () => {
  it('records a delivery that finishes during the drain and gives back one that does not', async () => {
    const w = spawnWorker(
      [
        '--dsn',
        schema.dsn,
        '--listen',
        '127.0.0.1:0',
        '--queues',
        'webhook',
        '--concurrency',
        '2',
        '--shutdown-timeout',
        '4s',
        '--purge-interval',
        '0',
        '--log-level',
        'info',
      ],
      { AKERDOCK_ADMIN_TOKEN: TOKEN, AKERDOCK_WEBHOOK_SECRET: SECRET },
    );
    try {
      const url = String((await w.line('akerdock-worker started', 120_000)).url);
      const jobs: Record<string, JobJson> = {};
      for (const path of ['/finishes', '/hangs']) {
        const r = await api(url, 'POST', '/jobs', {
          body: { queue: 'webhook', type: 'webhook.deliver', payload: { url: `${receiver.url}${path}` } },
        });
        expect(r.status).toBe(201);
        jobs[path] = r.json as JobJson;
      }
      await waitFor('both deliveries to reach the receiver', () => held.size === 2);
      w.child.kill('SIGTERM');
      await w.line('draining: no new jobs, waiting for running ones');
      expect((await api(url, 'GET', '/readyz', { token: null })).status).toBe(503);
      expect((await row(jobs['/finishes']?.uuid as string))?.status).toBe('running');
      held.get('/finishes')?.(200); // answers during the drain; /hangs never does
      expect(await w.exited).toBe(0);

      expect(await row(jobs['/finishes']?.uuid as string)).toMatchObject({
        status: 'succeeded',
        attempt: 1,
        result: { status: 200, attempt: 1 },
        steps: [expect.objectContaining({ name: 'deliver', status: 'succeeded' })],
      });
      const hung = await row(jobs['/hangs']?.uuid as string);
      expect(hung?.status).toBe('queued');
      expect(hung?.attempt).toBe(0); // the attempt was given back, not burnt
      expect(w.lines.some((l) => l.msg === 'drained')).toBe(true);
    } finally {
      w.child.kill('SIGKILL');
    }
  }, 150_000);
});
