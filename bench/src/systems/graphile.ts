import { Logger, makeWorkerUtils, run, type Runner, type WorkerUtils } from 'graphile-worker';
import { benchPool, closeAll } from '../pg.js';
import { QUEUE, type JobHarness, type JobSystem, type NoopPayload, type WorkerStart } from './jobs.js';

const silent = new Logger(() => () => undefined);

/**
 * graphile-worker 0.18, tuned per its performance docs: a `localQueue` (jobs fetched and locked
 * in batches, handed to workers from memory) and batched completions (`completeJobBatchDelay`,
 * `failJobBatchDelay`). The latency mode uses its defaults (no local queue: its docs note the
 * local queue delays new jobs), waking on its built-in LISTEN/NOTIFY.
 */
export const graphileWorker: JobSystem = {
  name: 'graphile-worker',
  async open(dsn, poolSize): Promise<JobHarness> {
    const utils: WorkerUtils = await makeWorkerUtils({ connectionString: dsn, logger: silent });
    try {
      await utils.migrate();
    } catch (err) {
      await Promise.resolve(utils.release()).catch(() => undefined);
      throw err;
    }
    const probe = benchPool(dsn, 1, 'graphile-worker probe');
    let runner: Runner | undefined;
    // graphile-worker deletes completed jobs: completed = enqueued here − still stored.
    let enqueued = 0;
    const count = async (sql: string): Promise<number> => {
      const r = await probe.query<{ n: string }>(sql);
      return Number(r.rows[0]?.n ?? 0);
    };
    return {
      async enqueueOne(i) {
        await utils.addJob(QUEUE, { i } satisfies NoopPayload);
        enqueued++;
      },
      async enqueueBatch(from, n) {
        await utils.addJobs(Array.from({ length: n }, (_, k) => ({ identifier: QUEUE, payload: { i: from + k } satisfies NoopPayload })));
        enqueued += n;
      },
      // Completed jobs are deleted, so what remains is what waits (or runs).
      waiting: () => count('SELECT count(*) AS n FROM graphile_worker._private_jobs'),
      completed: async () => enqueued - (await count('SELECT count(*) AS n FROM graphile_worker._private_jobs')),
      async startWorkers(opts: WorkerStart) {
        const throughput = opts.mode === 'throughput';
        runner = await run({
          connectionString: dsn,
          concurrency: opts.concurrency,
          maxPoolSize: poolSize,
          noHandleSignals: true,
          pollInterval: 500,
          logger: silent,
          taskList: {
            [QUEUE]: async (payload) => {
              opts.handle(payload as NoopPayload);
            },
          },
          preset: {
            worker: throughput
              ? { localQueue: { size: 500 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 }
              : { completeJobBatchDelay: -1, failJobBatchDelay: -1 },
          },
        });
      },
      async close() {
        await closeAll(
          () => runner?.stop() ?? Promise.resolve(),
          async () => utils.release(),
          () => probe.end(),
        );
      },
    };
  },
};
