import { PgBoss } from 'pg-boss';
import { benchPool, closeAll } from '../pg.js';
import { QUEUE, type JobHarness, type BatchWorkerStart, type JobSystem, type NoopPayload, type WorkerStart } from './jobs.js';

/**
 * pg-boss 12, tuned as its docs suggest for throughput: `batchSize` 100 per fetch,
 * `localConcurrency` = the scenario's concurrency, the shortest polling interval (0.5 s) and
 * `burstWhenBatchFull` (fetch again at once while batches come back full). LISTEN/NOTIFY is on
 * (queue `notify: true`) so idle workers wake at once. The same settings serve the latency
 * scenario. Maintenance/scheduling are off (no timers competing during a run).
 */
export const pgBoss: JobSystem = {
  name: 'pg-boss',
  async open(dsn, poolSize): Promise<JobHarness> {
    const boss = new PgBoss({
      connectionString: dsn,
      max: poolSize,
      supervise: false,
      schedule: false,
      useListenNotify: true,
    });
    boss.on('error', (err: unknown) => process.stderr.write(`pg-boss error: ${String(err)}\n`));
    await boss.start();
    try {
      await boss.createQueue(QUEUE, { notify: true });
    } catch (err) {
      await boss.stop({ graceful: false, close: true }).catch(() => undefined);
      throw err;
    }
    const probe = benchPool(dsn, 1, 'pg-boss probe');
    const count = async (where: string): Promise<number> => {
      const r = await probe.query<{ n: string }>(`SELECT count(*) AS n FROM pgboss.job WHERE name = $1 AND ${where}`, [QUEUE]);
      return Number(r.rows[0]?.n ?? 0);
    };
    return {
      async enqueueOne(i) {
        await boss.send(QUEUE, { i } satisfies NoopPayload);
      },
      async enqueueBatch(from, n) {
        await boss.insert(
          QUEUE,
          Array.from({ length: n }, (_, k) => ({ data: { i: from + k } satisfies NoopPayload })),
        );
      },
      waiting: () => count(`state IN ('created', 'retry', 'active')`),
      completed: () => count(`state = 'completed'`),
      async startWorkers(opts: WorkerStart) {
        await boss.work<NoopPayload>(
          QUEUE,
          {
            // Also for latency: a fetch returns what is there at once, and after a short batch a
            // worker waits for a notification (batchSize 1 would wait out the poll after each job).
            batchSize: 100,
            localConcurrency: opts.concurrency,
            pollingIntervalSeconds: 0.5,
            notifyPollingIntervalSeconds: 0.5,
            burstWhenBatchFull: true,
          },
          async (jobs) => {
            for (const job of jobs) opts.handle(job.data);
          },
        );
      },
      // Its handler already takes a batch (`batchSize` per fetch); `localConcurrency` fetch loops.
      async startBatchWorkers(opts: BatchWorkerStart) {
        await boss.work<NoopPayload>(
          QUEUE,
          {
            batchSize: opts.batchSize,
            localConcurrency: opts.batches,
            pollingIntervalSeconds: 0.5,
            notifyPollingIntervalSeconds: 0.5,
            burstWhenBatchFull: true,
          },
          async (jobs) => {
            for (const job of jobs) opts.handle(job.data);
          },
        );
      },
      async close() {
        await closeAll(
          () => boss.stop({ graceful: true, close: true, timeout: 10_000 }),
          () => probe.end(),
        );
      },
    };
  },
};
