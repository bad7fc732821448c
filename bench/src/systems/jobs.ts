/** A no-op job's payload: its index, so a run can prove each job ran exactly once. */
export interface NoopPayload {
  i: number;
}

/** How the workers of a job system are started. */
export interface WorkerStart {
  concurrency: number;
  /** `throughput`: the system's best documented throughput settings; `latency`: its low-latency ones. */
  mode: 'throughput' | 'latency';
  /** Called at the start of each job's handler. */
  handle(payload: NoopPayload): void;
  /**
   * The job's work, awaited by its handler after `handle` (default none: a no-op job). The jobs
   * of a fetched batch each run it, concurrently: all of them are claimed and held at once.
   */
  work?(payload: NoopPayload): Promise<void>;
  /**
   * Jobs of one group that may run at once across every worker (systems with groups only;
   * default: no limit). Jobs enqueued without a group are not limited.
   */
  groupConcurrency?: number;
  /**
   * Jobs per fetch of a system that fetches in batches (pg-boss). Default: 100 per fetch in
   * `concurrency` fetch loops (the drains' settings). When set, `concurrency` counts jobs in
   * flight: `concurrency / batchSize` loops, each running its batch's jobs at once.
   */
  batchSize?: number;
}

/** How batch workers are started: `batches` calls in flight, each with up to `batchSize` jobs. */
export interface BatchWorkerStart {
  batches: number;
  batchSize: number;
  /** Called for each job of a batch, at the start of the batch's handler. */
  handle(payload: NoopPayload): void;
}

/** One job system opened on a run's database: the operations the job scenarios need. */
export interface JobHarness {
  /**
   * Enqueues one job (one round trip / transaction per call where the system allows), in `group`
   * if given (systems with groups only: the others throw).
   */
  enqueueOne(i: number, group?: string): Promise<void>;
  /**
   * Enqueues jobs `from…from+count-1` with the system's batch API, job `i` in group `group(i)` if
   * given (systems with groups only: the others throw).
   */
  enqueueBatch(from: number, count: number, group?: (i: number) => string): Promise<void>;
  /** Jobs stored and not yet completed (verifies enqueue counts). */
  waiting(): Promise<number>;
  /** Jobs durably completed. */
  completed(): Promise<number>;
  startWorkers(opts: WorkerStart): Promise<void>;
  /** Starts workers whose handler takes a batch of jobs (systems with a batch API only). */
  startBatchWorkers?(opts: BatchWorkerStart): Promise<void>;
  /** Stops workers and closes every connection. */
  close(): Promise<void>;
}

/** A job system the job scenarios compare. */
export interface JobSystem {
  name: string;
  /** Whether its jobs can carry a group (`enqueue…(…, group)`, `groupConcurrency`). */
  groups?: boolean;
  /** A reason not to run, or undefined. */
  skip?(): Promise<string | undefined>;
  /** Opens on a fresh database and installs the system's schema (not timed). */
  open(dsn: string, poolSize: number, opts?: { traced?: boolean }): Promise<JobHarness>;
}

/** The queue/task name every job scenario uses. */
export const QUEUE = 'bench';
