// README example: a producer enqueues a job, a worker runs it with a step timeline.
//   DATABASE_URL=postgres://… npx tsx examples/jobs-producer-worker.ts
import { JobQueue, Worker } from '@q/job-worker';
import { JobStore, type Job } from '@q/store';

export async function main(dsn = process.env.DATABASE_URL): Promise<Job> {
  if (!dsn) throw new Error('set DATABASE_URL');
  const store = await JobStore.open(dsn); // migrates the jobs table into the DSN's schema
  try {
    // Producer: enqueue once; the idempotency key makes a second enqueue return the same job.
    const queue = new JobQueue(store, { knownQueues: ['default', 'deploy'] });
    const job = await queue.enqueue({
      queue: 'deploy',
      type: 'app.deploy',
      payload: { app: 'shop', version: '1.4.2' },
      idempotencyKey: 'deploy-shop-1.4.2',
      lockKey: 'deploy:app:shop', // one deploy of this app at a time
    });

    // Worker: runs handlers, recording each step so operators can follow along.
    const worker = new Worker(store, { queues: ['deploy'], concurrency: 4 });
    worker.register('app.deploy', async (j, { signal, steps }) => {
      const { app, version } = j.payload as { app: string; version: string };
      await steps.start('pull image');
      signal.throwIfAborted(); // lease lost, cancelled or shutting down: stop here
      await steps.succeed(`${app}:${version}`);
      await steps.skip('migrate database', 'no pending migrations');
      await steps.start('switch traffic');
      await steps.succeed();
      return { url: `https://${app}.example.com` };
    });

    const stop = new AbortController();
    const running = worker.run(stop.signal);
    try {
      // Resolves once the job finished (succeeded, dead letter or cancelled): woken by NOTIFY.
      return await queue.waitFor(job.uuid, { timeoutMs: 30_000 });
    } finally {
      stop.abort(); // stop claiming…
      await running;
      await worker.wait(10_000); // …and let jobs in flight finish and record their outcome
    }
  } finally {
    await store.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const job = await main();
  console.log(job.status, JSON.stringify(job.result));
  for (const s of job.steps) console.log(`  ${s.status.padEnd(9)} ${s.name}${s.message ? ` — ${s.message}` : ''}`);
}
