import { PgBoss } from 'pg-boss';
import { benchPool, closeAll } from '../pg.js';
import { QUEUE, type NoopPayload } from './jobs.js';
import { loadJobStore, loadJobWorker, missing, need, type QWorker } from './q-api.js';

/** A node of a benchmark graph: job `i` (its payload), named `ref`, run after the nodes `dependsOn`. */
export interface FlowNodeSpec {
  ref: string;
  i: number;
  dependsOn: string[];
}

/** How the workers of a flow system are started. */
export interface FlowWorkerStart {
  concurrency: number;
  /** Called at the start of each job's handler. */
  handle(payload: NoopPayload): void;
  /** Called when a job's handler returns (before its success is written). */
  handled(payload: NoopPayload): void;
}

/** One system with job graphs, opened on a run's database. */
export interface FlowHarness {
  /** Inserts the graph with the system's graph API (one call). */
  insert(nodes: readonly FlowNodeSpec[]): Promise<void>;
  startWorkers(opts: FlowWorkerStart): Promise<void>;
  /** Jobs durably completed. */
  completed(): Promise<number>;
  /** Stops workers and closes every connection. */
  close(): Promise<void>;
}

/** A job system the flow scenarios compare. */
export interface FlowSystem {
  name: string;
  skip?(): Promise<string | undefined>;
  open(dsn: string, poolSize: number): Promise<FlowHarness>;
}

/** `q`: `JobQueue.flow` and a `Worker` with its default options (children released by the completing transaction). */
export const qFlows: FlowSystem = {
  name: 'q',
  skip: async () => {
    const gone = await missing(loadJobStore, loadJobWorker);
    if (gone !== undefined) return gone;
    const { JobQueue } = await need(loadJobWorker);
    return typeof (JobQueue.prototype as { flow?: unknown }).flow === 'function' ? undefined : '@q/job-worker has no JobQueue.flow yet';
  },
  async open(dsn, poolSize) {
    const { JobStore } = await need(loadJobStore);
    const { JobQueue, Worker } = await need(loadJobWorker);
    const store = await JobStore.open(dsn, { maxConns: poolSize });
    const queue = new JobQueue(store, { knownQueues: [QUEUE] }) as unknown as {
      flow(input: { nodes: Array<{ ref: string; type: string; queue: string; payload: NoopPayload; dependsOn: string[] }> }): Promise<unknown>;
    };
    const probe = benchPool(dsn, 1, 'q probe');
    let worker: QWorker | undefined;
    let running: Promise<void> | undefined;
    const abort = new AbortController();
    return {
      async insert(nodes) {
        await queue.flow({ nodes: nodes.map((n) => ({ ref: n.ref, type: 'noop', queue: QUEUE, payload: { i: n.i }, dependsOn: n.dependsOn })) });
      },
      async startWorkers(opts) {
        worker = new Worker(store, { queues: [QUEUE], concurrency: opts.concurrency });
        worker.register('noop', async (job) => {
          const p = job.payload as NoopPayload;
          opts.handle(p);
          opts.handled(p);
          return null;
        });
        running = worker.run(abort.signal);
      },
      async completed() {
        const r = await probe.query<{ n: string }>(`SELECT count(*) AS n FROM q_jobs_all WHERE status = 'succeeded'`);
        return Number(r.rows[0]?.n ?? 0);
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

/**
 * pg-boss 12 `flow()`: the same graph, its children released by its background resolver, run
 * every `flowIntervalSeconds` (here 1, the least it allows; its default is 5) by the supervisor,
 * which is therefore on. Workers as in the drains: 100 per fetch, `concurrency` fetch loops,
 * LISTEN/NOTIFY on.
 */
export const pgBossFlows: FlowSystem = {
  name: 'pg-boss',
  async open(dsn, poolSize) {
    const boss = new PgBoss({
      connectionString: dsn,
      max: poolSize,
      supervise: true,
      schedule: false,
      useListenNotify: true,
      flowIntervalSeconds: 1,
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
    return {
      async insert(nodes) {
        await boss.flow(nodes.map((n) => ({ ref: n.ref, name: QUEUE, data: { i: n.i } satisfies NoopPayload, dependsOn: n.dependsOn })));
      },
      async startWorkers(opts) {
        await boss.work<NoopPayload>(
          QUEUE,
          {
            batchSize: 100,
            localConcurrency: opts.concurrency,
            pollingIntervalSeconds: 0.5,
            notifyPollingIntervalSeconds: 0.5,
            burstWhenBatchFull: true,
          },
          async (jobs) => {
            for (const job of jobs) {
              opts.handle(job.data);
              opts.handled(job.data);
            }
          },
        );
      },
      async completed() {
        const r = await probe.query<{ n: string }>(`SELECT count(*) AS n FROM pgboss.job WHERE name = $1 AND state = 'completed'`, [QUEUE]);
        return Number(r.rows[0]?.n ?? 0);
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
