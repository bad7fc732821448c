// A job worker process behind PgBouncer (transaction mode). Env: Q_DSN, Q_WORKER_ID. Prints
// "ready", then one JSON line per maintenance/failure log record and per job run. SIGTERM drains.
import { Worker, type Logger } from '@q/job-worker';
import { JobStore } from '@q/store';

const id = process.env.Q_WORKER_ID ?? 'w';
const print = (level: string) => (fields: Record<string, unknown>, msg?: string) => {
  if (level === 'error' || (msg && /maintenance|failed/.test(msg))) {
    console.log(JSON.stringify({ level, msg, epoch: fields.epoch, sqlstate: fields.sqlstate, err: fields.err }));
  }
};
const logger: Logger = { debug: () => undefined, info: print('info'), warn: print('warn'), error: print('error') };
const store = await JobStore.open(process.env.Q_DSN ?? '', { maxConns: 4, pooler: 'transaction', applicationName: `q-pool-${id}` });
const worker = new Worker(store, { queues: ['pooled'], concurrency: 4, workerId: id, logger, maintenanceIntervalMs: 200 });
worker.register('p', async (job) => {
  console.log(JSON.stringify({ ran: job.uuid, attempt: job.attempt }));
  return { by: id };
});
const ac = new AbortController();
process.once('SIGTERM', () => {
  ac.abort();
  void (async () => {
    await worker.wait(5_000);
    await store.close();
    console.log('drained');
    process.exit(0);
  })();
});
const running = worker.run(ac.signal).catch((err: unknown) => {
  console.log(JSON.stringify({ level: 'fatal', msg: (err as Error).message }));
});
console.log(`ready notifies=${String(store.notifies)}`);
await running;
