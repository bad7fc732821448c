import { Logger, makeWorkerUtils, run, type Runner, type WorkerUtils } from 'graphile-worker';
import { benchPool, closeAll } from '../pg.js';
import { QUEUE, type BatchWorkerStart, type JobHarness, type JobSystem, type NoopPayload, type WorkerStart } from './jobs.js';

const silent = new Logger(() => () => undefined);

/** graphile-worker has no groups (its named queues run their jobs one at a time): refuse one. */
function noGroups(group: unknown): void {
  if (group !== undefined) throw new Error('graphile-worker has no job groups');
}

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
      async enqueueOne(i, group) {
        noGroups(group);
        await utils.addJob(QUEUE, { i } satisfies NoopPayload);
        enqueued++;
      },
      async enqueueBatch(from, n, group) {
        noGroups(group);
        await utils.addJobs(Array.from({ length: n }, (_, k) => ({ identifier: QUEUE, payload: { i: from + k } satisfies NoopPayload })));
        enqueued += n;
      },
      // Completed jobs are deleted, so what remains is what waits (or runs).
      waiting: () => count('SELECT count(*) AS n FROM graphile_worker._private_jobs'),
      completed: async () => enqueued - (await count('SELECT count(*) AS n FROM graphile_worker._private_jobs')),
      async startWorkers(opts: WorkerStart) {
        noGroups(opts.groupConcurrency);
        const throughput = opts.mode === 'throughput';
        const work = opts.work;
        runner = await run({
          connectionString: dsn,
          concurrency: opts.concurrency,
          maxPoolSize: poolSize,
          noHandleSignals: true,
          pollInterval: 500,
          logger: silent,
          taskList: {
            [QUEUE]: work
              ? async (payload) => {
                  opts.handle(payload as NoopPayload);
                  await work(payload as NoopPayload);
                }
              : async (payload) => {
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

/**
 * graphile-worker's batch jobs: a job whose payload is an array is one call with the array, so
 * `batchSize` items are enqueued as one job (the batching happens when jobs are added, not when
 * they are fetched). Counts are of items, not of job rows. One batch job per call of
 * `startBatchWorkers`' handler; `concurrency` = `batches`.
 */
export function graphileBatchJobs(batchSize: number): JobSystem {
  return {
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
      let enqueued = 0;
      const itemsLeft = async (): Promise<number> => {
        const r = await probe.query<{ n: string | null }>(
          'SELECT coalesce(sum(json_array_length(payload)), 0) AS n FROM graphile_worker._private_jobs',
        );
        return Number(r.rows[0]?.n ?? 0);
      };
      const unsupported = (): never => {
        throw new Error('graphile-worker batch jobs: only the batch scenarios use this system');
      };
      return {
        enqueueOne: async () => unsupported(),
        async enqueueBatch(from, n, group) {
          noGroups(group);
          const jobs = [];
          for (let at = 0; at < n; at += batchSize) {
            const items = Array.from({ length: Math.min(batchSize, n - at) }, (_, k) => ({ i: from + at + k }) satisfies NoopPayload);
            jobs.push({ identifier: QUEUE, payload: items });
          }
          await utils.addJobs(jobs);
          enqueued += n;
        },
        waiting: itemsLeft,
        completed: async () => enqueued - (await itemsLeft()),
        startWorkers: async () => unsupported(),
        async startBatchWorkers(opts: BatchWorkerStart) {
          if (opts.batchSize !== batchSize)
            throw new Error(`graphile-worker batch jobs: enqueued in batches of ${batchSize}, not ${opts.batchSize}`);
          runner = await run({
            connectionString: dsn,
            concurrency: opts.batches,
            maxPoolSize: poolSize,
            noHandleSignals: true,
            pollInterval: 500,
            logger: silent,
            taskList: {
              [QUEUE]: async (payload) => {
                for (const item of payload as NoopPayload[]) opts.handle(item);
              },
            },
            preset: { worker: { localQueue: { size: 4 * opts.batches }, completeJobBatchDelay: 0, failJobBatchDelay: 0 } },
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
}
