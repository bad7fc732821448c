// Issue 37 (a): the worker binds its admin port before it claims a job. On a busy port it ends
// with one stderr line naming the port and exit status 1, and the queue is left as it was.
import net from 'node:net';
import { JobQueue, silentLogger } from '@q/job-worker';
import { createTestSchema, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { TOKEN } from './helpers.js';
import { spawnWorker } from './spawn.js';

let schema: TestSchema;
let queue: JobQueue;
let busy: net.Server;
let port: number;

beforeAll(async () => {
  schema = await createTestSchema('akw_order');
  queue = await JobQueue.open(schema.dsn, { maxConns: 2, logger: silentLogger });
  busy = net.createServer();
  await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
  port = (busy.address() as net.AddressInfo).port;
});
afterAll(async () => {
  await new Promise((resolve) => busy?.close(resolve));
  await queue?.close();
  await schema?.drop();
});

it('a busy --listen port: exit 1, one stderr line naming the port, no "store is closed" warnings, the job still queued', async () => {
  const job = await queue.enqueue({ queue: 'notify', type: 'notify.send', payload: { to: 'ops', text: 'hi' } });
  const w = spawnWorker(
    ['--dsn', schema.dsn, '--listen', `127.0.0.1:${port}`, '--admin-token', TOKEN, '--queues', 'notify', '--purge-interval', '0'],
    {},
  );
  expect(await w.exited).toBe(1);
  const err = w.stderr();
  expect(err).toBe(
    `akerdock-worker: could not start: cannot listen on 127.0.0.1:${port}: the address is already in use ` +
      '(another process holds the port; pick another with --listen)\n',
  );
  expect(w.lines.filter((l) => l.level === 40 || l.level === 50)).toEqual([]);
  expect(JSON.stringify(w.lines)).not.toContain('store is closed');
  expect(await queue.get(job.uuid)).toMatchObject({ status: 'queued', attempt: 0 });
}, 60_000);
