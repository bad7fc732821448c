import type { TracerProvider } from '@opentelemetry/api';
import { benchPool, closeAll } from '../pg.js';
import { QUEUE, type JobHarness, type JobSystem, type NoopPayload } from './jobs.js';
import { loadJobStore, loadJobWorker, loadJobWorkerBatch, loadOtel, missing, need, type QJobQueue, type QWorker } from './q-api.js';

/**
 * `q`: `JobQueue` producer and `Worker` consumer of `@q/job-worker` on the `@q/store` job table,
 * with the Worker's DEFAULT options (its adaptive local queue), as a new user writes it.
 */
export function qJobs(name = 'q', tracerProvider?: () => TracerProvider): JobSystem {
  return {
    name,
    groups: true,
    skip: () => missing(loadJobStore, loadJobWorker, loadOtel),
    async open(dsn, poolSize): Promise<JobHarness> {
      const { JobStore } = await need(loadJobStore);
      const { JobQueue, Worker } = await need(loadJobWorker);
      const { qTracer } = await need(loadOtel);
      const tp = tracerProvider?.();
      const store = await JobStore.open(dsn, { maxConns: poolSize, ...(tp ? { tracerProvider: tp } : {}) });
      const queue: QJobQueue = new JobQueue(store, { knownQueues: [QUEUE] });
      const probe = benchPool(dsn, 1, `${name} probe`);
      const count = async (statuses: string[]): Promise<number> => {
        const r = await probe.query<{ n: string }>('SELECT count(*) AS n FROM q_jobs_all WHERE status::text = ANY($1::text[])', [statuses]);
        return Number(r.rows[0]?.n ?? 0);
      };
      let worker: QWorker | undefined;
      let running: Promise<void> | undefined;
      const abort = new AbortController();
      return {
        async enqueueOne(i, group) {
          await queue.enqueue({ queue: QUEUE, type: 'noop', payload: { i } satisfies NoopPayload, ...(group === undefined ? {} : { group }) });
        },
        async enqueueBatch(from, n, group) {
          await queue.enqueueMany(
            Array.from({ length: n }, (_, k) => ({
              queue: QUEUE,
              type: 'noop',
              payload: { i: from + k } satisfies NoopPayload,
              ...(group ? { group: group(from + k) } : {}),
            })),
          );
        },
        // One count per partial index of the unfinished states (each predicate exactly), so the
        // probe reads those indexes, not the table's history.
        waiting: async () => {
          const r = await probe.query<{ n: string }>(
            `SELECT (SELECT count(*) FROM q_jobs WHERE status = 'queued')
                  + (SELECT count(*) FROM q_jobs WHERE status IN ('leased', 'running'))
                  + (SELECT count(*) FROM q_jobs WHERE status IN ('scheduled', 'retry_wait')) AS n`,
          );
          return Number(r.rows[0]?.n ?? 0);
        },
        completed: () => count(['succeeded']),
        async startWorkers(opts) {
          const tracer = tp ? qTracer(tp) : undefined;
          worker = new Worker(store, {
            queues: [QUEUE],
            concurrency: opts.concurrency,
            ...(tracer ? { tracer } : {}),
            ...(opts.groupConcurrency === undefined ? {} : { limits: [{ concurrency: opts.groupConcurrency }] }),
          });
          const work = opts.work;
          // The no-op handler stays as it was without `work`: the drains measure it.
          worker.register(
            'noop',
            work
              ? async (job) => {
                  const p = job.payload as NoopPayload;
                  opts.handle(p);
                  await work(p);
                  return null;
                }
              : async (job) => {
                  opts.handle(job.payload as NoopPayload);
                  return null;
                },
          );
          running = worker.run(abort.signal);
        },
        // workMany's handler on a Worker: each job keeps its own row, lease and outcome; a batch is
        // how the function is called. Jobs in flight: `batches` full batches.
        async startBatchWorkers(opts) {
          const { batchHandler } = await need(loadJobWorkerBatch);
          worker = new Worker(store, { queues: [QUEUE], concurrency: opts.batches * opts.batchSize });
          worker.register(
            'noop',
            batchHandler(
              async (items) => {
                for (const item of items) opts.handle(item.job.payload as NoopPayload);
              },
              { batchSize: opts.batchSize },
            ),
          );
          running = worker.run(abort.signal);
        },
        async close() {
          abort.abort();
          await closeAll(
            async () => {
              await running;
              await worker?.wait(10_000);
            },
            () => store.close(),
            () => probe.end(),
          );
        },
      };
    },
  };
}
