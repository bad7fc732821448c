import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { memoryLogger, spawnTs, useJobStore, waitFor, type Exit, type TestSchema, type TsProcess } from '@q/testing';
import { afterEach } from 'vitest';
import { JobStore, type Job, type LeasedJob, type OpenOptions } from '@q/store';
import { JobQueue, KNOWN_QUEUES, Worker, type WorkerFailure, type WorkerOptions } from '../src/index.js';

export { memoryLogger, waitFor } from '@q/testing';

const here = path.dirname(fileURLToPath(import.meta.url));
const repoRoot = path.resolve(here, '../../..');

/** A worker process running test/fixtures/worker-process.ts, with its output collected. */
export interface WorkerProcess {
  child: TsProcess['child'];
  output(): string;
  exited: Promise<Exit>;
}

/** Starts a fixture (default the fixture worker) in a real child process; resolves once it printed `ready`. */
export async function spawnWorker(env: Record<string, string>, fixture = 'worker-process.ts'): Promise<WorkerProcess> {
  const p = spawnTs(path.join(here, 'fixtures', fixture), { cwd: repoRoot, env });
  const proc = { child: p.child, output: p.output, exited: p.exited };
  await Promise.race([
    waitFor(() => p.output().includes('ready'), 60_000),
    p.exited.then((e) => {
      throw new Error(`worker process exited early (${JSON.stringify(e)}): ${p.output()}`);
    }),
  ]);
  return proc;
}

/** A worker a test started: stopped by {@link stopWorkersAfterEach}. */
export interface RunningWorker {
  worker: Worker;
  ac: AbortController;
  run: Promise<void>;
}

/**
 * Registers an `afterEach` that runs `cleanups` (newest first), then aborts every worker in `running`,
 * waits for its run and its jobs (5 s), and empties `running`.
 */
export function stopWorkersAfterEach(running: RunningWorker[], cleanups: Array<() => Promise<void> | void> = []): void {
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
    for (const r of running) r.ac.abort();
    await Promise.all(
      running.map(async (r) => {
        await r.run;
        await r.worker.wait(5_000);
      }),
    );
    running.length = 0;
  });
}

/**
 * Starts `new Worker(store, { queues: ['default'], maintenanceIntervalMs: 100, pollIntervalMs: 100, ...opts })`,
 * lets `setup` register its handlers, runs it, and adds it to `running` (see {@link stopWorkersAfterEach}).
 */
export function startTestWorker(
  store: JobStore,
  running: RunningWorker[],
  opts: Partial<WorkerOptions> & Pick<WorkerOptions, 'concurrency'>,
  setup: (w: Worker) => void,
): RunningWorker {
  const worker = new Worker(store, { queues: ['default'], maintenanceIntervalMs: 100, pollIntervalMs: 100, ...opts });
  setup(worker);
  const ac = new AbortController();
  const r = { worker, ac, run: worker.run(ac.signal) };
  running.push(r);
  return r;
}

/** Starts a worker on the file's store (or on `on`) with the file's defaults overridden by `opts`. */
export type StartWorker = (opts: Partial<WorkerOptions>, setup: (w: Worker) => void, on?: JobStore) => RunningWorker;

/** What {@link useWorkerTests} gives a test file. */
export interface WorkerTests {
  /** A {@link startTestWorker} with the file's defaults (then `opts`) on the file's store or on `on`. */
  startWorker: StartWorker;
  /** The workers stopped after each test; a test that builds its own worker adds it here. */
  running: RunningWorker[];
}

/**
 * Registers the lifecycle of an in-process worker test file: a store on a fresh schema (8
 * connections, `q_jobs` emptied before each test) and a queue on it, handed to `onOpen`, and
 * {@link stopWorkersAfterEach} with `cleanups`.
 */
export function useWorkerTests(
  prefix: string,
  defaults: Partial<WorkerOptions> & Pick<WorkerOptions, 'concurrency'>,
  onOpen: (t: { schema: TestSchema; store: JobStore; queue: JobQueue }) => void,
  cleanups: Array<() => Promise<void> | void> = [],
): WorkerTests {
  const running: RunningWorker[] = [];
  let store: JobStore | undefined;
  useJobStore(JobStore, { prefix, maxConns: 8, truncate: ['q_jobs', 'q_jobs_archive', 'q_jobs_idempotency_keys'] }, (t) => {
    store = t.store;
    onOpen({ schema: t.schema, store: t.store, queue: new JobQueue(t.store, { knownQueues: [...KNOWN_QUEUES] }) });
  });
  stopWorkersAfterEach(running, cleanups);
  const startWorker: StartWorker = (opts, setup, on) => {
    if (!store) throw new Error('the store is opened in beforeAll: start workers inside a test');
    return startTestWorker(on ?? store, running, { ...defaults, ...opts }, setup);
  };
  return { startWorker, running };
}

/** A `waitFor` check: the job `uuid` once it is in `status`. */
export function jobInStatus(store: JobStore, uuid: string, status: Job['status']): () => Promise<Job | undefined> {
  return async () => {
    const j = await store.get(uuid);
    return j?.status === status ? j : undefined;
  };
}

/**
 * A worker on a store of its own on `dsn` (`store`: its open options, default 2 connections),
 * logging to memory and collecting what it reports through `onError`: queue `default`,
 * concurrency 1, polling every 100 ms, maintenance every minute, unless `opts` says otherwise.
 */
export async function workerOnOwnStore(dsn: string, store: OpenOptions, opts: Partial<WorkerOptions> = {}) {
  const own = await JobStore.open(dsn, { maxConns: 2, ...store });
  const logger = memoryLogger();
  const failures: WorkerFailure[] = [];
  const worker = new Worker(own, {
    queues: ['default'],
    concurrency: 1,
    logger,
    pollIntervalMs: 100,
    maintenanceIntervalMs: 60_000,
    onError: (f) => failures.push(f),
    ...opts,
  });
  return { store: own, logger, failures, worker };
}

/** Lets the lease on job `uuid` lapse (through the database clock, without waiting) and reaps it. */
export async function lapseLease(store: JobStore, uuid: string): Promise<void> {
  await store.pool.query(`UPDATE q_jobs SET lease_expires_at = now() - interval '1 second' WHERE uuid = $1`, [uuid]);
  await store.reapExpired();
}

/** {@link lapseLease}, then the job is due again and worker `new` claims it: returns that claim's job (undefined if it took none). */
export async function leaseTakenOver(store: JobStore, uuid: string): Promise<LeasedJob | undefined> {
  await lapseLease(store, uuid);
  await store.promoteDue();
  const [fresh] = await store.claim({ queues: ['default'], workerId: 'new', limit: 1, leaseMs: 60_000 });
  return fresh;
}
