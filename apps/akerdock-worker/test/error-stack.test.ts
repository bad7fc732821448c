// A failed attempt's stack (issue 34 item 16): kept with its error, shown by the admin API and
// by `q-jobs get`, without the message's payload.
import { JobQueue, silentLogger } from '@q/job-worker';
import { createTestSchema, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startWorkerApp, type WorkerApp } from '../src/app.js';
import type { JobJson } from '../src/api/job-json.js';
import { runCli } from '../src/cli/q-jobs.js';
import { api, testConfig, TOKEN, waitFor } from './helpers.js';

let schema: TestSchema;
let app: WorkerApp;
let failing: JobQueue;
let uuid: string;

// A named function, so its frame is recognisable in the stored stack.
function renderInvoice(payload: unknown): never {
  throw new Error(`cannot render invoice for ${JSON.stringify(payload)}`);
}

beforeAll(async () => {
  schema = await createTestSchema('akw_stack');
  app = await startWorkerApp(testConfig(schema.dsn, ['--queues', 'notify']));
  failing = await JobQueue.open(schema.dsn, { maxConns: 2, logger: silentLogger, worker: { pollIntervalMs: 100 } });
  failing.work('invoice.render', async (job) => renderInvoice(job.payload), { queue: 'invoices' });
  const job = await failing.enqueue({ queue: 'invoices', type: 'invoice.render', payload: { card: '4111-SECRET' }, maxAttempts: 1 });
  uuid = job.uuid;
  await waitFor('the job dead-lettered', async () => ((await failing.get(uuid))?.status === 'dead_letter' ? true : undefined), 20_000);
});
afterAll(async () => {
  await failing?.close();
  await app?.stop();
  await schema?.drop();
});

it('get() keeps the message as lastError and the stack frames, without the payload, as lastErrorStack', async () => {
  const job = await failing.get(uuid);
  expect(job?.lastError).toBe('cannot render invoice for {"card":"4111-SECRET"}');
  expect(job?.lastErrorStack).toMatch(/^at renderInvoice \(.*error-stack\.test\.ts:\d+:\d+\)/);
  expect(job?.lastErrorStack).not.toContain('SECRET');
  expect(job?.lastErrorStack?.length).toBeLessThanOrEqual(4_096 + 2);
});

it('the admin API shows error.stack', async () => {
  const r = await api(app.url, 'GET', `/jobs/${uuid}`);
  expect(r.status).toBe(200);
  const json = r.json as JobJson;
  expect(json.error).toMatchObject({ code: 'dead_letter', message: 'cannot render invoice for {"card":"4111-SECRET"}' });
  expect(json.error?.stack).toMatch(/^at renderInvoice /);
});

it('q-jobs get prints the stack under the fields, one frame a line', async () => {
  let stdout = '';
  const code = await runCli(
    ['get', uuid],
    { AKERDOCK_API_URL: app.url, AKERDOCK_ADMIN_TOKEN: TOKEN },
    { out: (t) => (stdout += `${t}\n`), err: () => undefined },
  );
  expect(code).toBe(0);
  expect(stdout).toMatch(/\nstack\n {4}at renderInvoice \(/);
});
