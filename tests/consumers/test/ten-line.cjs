/* eslint-disable @typescript-eslint/no-require-imports -- require() is what this CommonJS consumer tests */
// The README's first example ("I want a job queue"), as a new CommonJS project writes it.
const { JobQueue } = require('@q/job-worker');

async function main() {
  const queue = await JobQueue.open(process.env.DATABASE_URL); // creates its tables on first use
  queue.work('email.send', async (job) => {
    const { to } = job.payload;
    return { delivered: to }; // stored as the job's result; a throw retries with backoff
  });
  const job = await queue.enqueue({ type: 'email.send', payload: { to: 'a@example.com' } });
  while ((await queue.get(job.uuid))?.status !== 'succeeded') await new Promise((r) => setTimeout(r, 50));
  const done = await queue.get(job.uuid);
  await queue.close(); // stops claiming, lets jobs in flight finish and records them
  console.log(JSON.stringify({ kind: 'cjs', status: done.status, result: done.result }));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
