// The test-kit example of the README ("Testing your handlers"), as a user writes it: imports from
// the package's public entries only. Kept in step with the README by hand; the suite runs it.
import { JobQueue, defineJob, silentLogger } from '@q/job-worker';
import { assertEnqueued, drain, runHandler } from '@q/job-worker/testing';
import { createTestSchema, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';

// What the application defines (src/jobs.ts in a real project).
const chargeCard = defineJob<{ orderId: number; cents: number }, { receipt: string }>({ type: 'card.charge' });
const sendReceipt = defineJob<{ orderId: number; receipt: string }>({ type: 'email.receipt' });

let calls = 0;
function serve(queue: JobQueue): void {
  chargeCard.work(queue, async (job) => {
    // The payment provider times out twice before it answers.
    if (++calls < 3) throw new Error('provider timeout');
    const receipt = `r-${job.payload.orderId}`;
    await sendReceipt.enqueue(queue, { orderId: job.payload.orderId, receipt });
    return { receipt };
  });
  sendReceipt.work(queue, async () => undefined);
}

// The test.
let schema: TestSchema;
let queue: JobQueue;

beforeAll(async () => {
  schema = await createTestSchema('jwexample');
  // startWorkers: false — no job runs until the test drains the queue.
  queue = await JobQueue.open(schema.dsn, { logger: silentLogger, startWorkers: false });
  serve(queue);
});
afterAll(async () => {
  await queue?.close();
  await schema?.drop();
});

it('charges the card (retrying through timeouts) and then sends the receipt', async () => {
  await chargeCard.enqueue(queue, { orderId: 7, cents: 1_250 });

  const outcomes = await drain(queue); // retries run at once, and so does the job the handler enqueued

  expect(outcomes.map((o) => [o.type, o.status, o.attempts])).toEqual([
    ['card.charge', 'succeeded', 3],
    ['email.receipt', 'succeeded', 1],
  ]);
  expect(outcomes[0]!.errors).toEqual(['provider timeout', 'provider timeout']);
  await assertEnqueued(queue, { type: sendReceipt, payload: { orderId: 7, receipt: 'r-7' } });
});

it('runs one handler alone, with a fake context and no database', async () => {
  const run = await runHandler(
    async (job: { payload: { cents: number } }, { steps }) => {
      await steps.start('convert');
      await steps.succeed();
      return job.payload.cents / 100;
    },
    { cents: 1_250 },
  );
  expect(run).toMatchObject({ status: 'succeeded', result: 12.5 });
  expect(run.steps.map((s) => s.name)).toEqual(['convert']);
});
