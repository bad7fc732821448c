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
  groups: true,
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
      async enqueueOne(i, group) {
        await boss.send(QUEUE, { i } satisfies NoopPayload, group === undefined ? {} : { group: { id: group } });
      },
      async enqueueBatch(from, n, group) {
        await boss.insert(
          QUEUE,
          Array.from({ length: n }, (_, k) => ({
            data: { i: from + k } satisfies NoopPayload,
            ...(group ? { group: { id: group(from + k) } } : {}),
          })),
        );
      },
      waiting: () => count(`state IN ('created', 'retry', 'active')`),
      completed: () => count(`state = 'completed'`),
      async startWorkers(opts: WorkerStart) {
        const work = opts.work;
        const batchSize = opts.batchSize ?? 100;
        if (opts.batchSize !== undefined && opts.concurrency % opts.batchSize !== 0)
          throw new Error(`pg-boss: ${opts.concurrency} jobs in flight are not whole batches of ${opts.batchSize}`);
        await boss.work<NoopPayload>(
          QUEUE,
          {
            // Also for latency: a fetch returns what is there at once, and after a short batch a
            // worker waits for a notification (batchSize 1 would wait out the poll after each job:
            // it ignores burstWhenBatchFull).
            batchSize,
            localConcurrency: opts.batchSize === undefined ? opts.concurrency : opts.concurrency / opts.batchSize,
            pollingIntervalSeconds: 0.5,
            notifyPollingIntervalSeconds: 0.5,
            burstWhenBatchFull: true,
            // Its fleet-wide limit (counted in the database), not `localGroupConcurrency` (this process only).
            ...(opts.groupConcurrency === undefined ? {} : { groupConcurrency: opts.groupConcurrency }),
          },
          work
            ? // Every job of a fetched batch is active (held) at once: each runs its work concurrently.
              async (jobs) => {
                await Promise.all(
                  jobs.map(async (job) => {
                    opts.handle(job.data);
                    await work(job.data);
                  }),
                );
              }
            : async (jobs) => {
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
