import type { Tracer } from '@opentelemetry/api';
import type { JobMetrics } from '@q/otel';
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { invalidArgument } from '@q/schema';
import { LOGGER_METHODS, checkName, checkOptionalFunction, checkOptionalMethods } from '@q/schema/internal';
import { DEFAULT_MAX_SNOOZES, checkClaimGroups, type FlowNode, type FlowParent, type GroupLimit, type Job } from '@q/store/jobs';
import { MAX_PERSISTENT_FAILURES, type WorkerFailure } from './failure-watch.js';
import { LEASE_DURATION_MS, RETRY_BASE_MS } from './constants.js';
import { defaultLogger, type Logger } from './logger.js';
import type { StepRecorder } from './step-recorder.js';
import { timerOption } from './timers.js';
import type { WorkerSchedulerOptions } from './scheduler.js';

/** Shortest lease accepted: its renewal and watch timers stay well above the timer resolution. */
const MIN_LEASE_MS = 100;
/** Default poll interval of a store without notifications: the worst-case wake-up latency. */
const POLL_WITHOUT_LISTEN_MS = 250;

/**
 * What a handler gets besides the job: an abort signal, the attempt's step timeline, its
 * progress and the way to snooze it.
 */
export interface HandlerContext {
  /**
   * Aborted when the job's lease is lost, when the job is cancelled, or when a drain times out;
   * `signal.reason` is a {@link JobAbortedError}. The lease counts as lost when a renewal finds it
   * taken, when this worker claims the job again (its lease lapsed), or when renewals kept failing
   * until a sixth of the lease was left (so the handler can stop before anyone else may claim the
   * job). Not aborted when the worker merely stops claiming: a job that finishes within the drain
   * timeout is recorded.
   */
  signal: AbortSignal;
  steps: StepRecorder;
  /**
   * Snoozes the job: it goes back to waiting and runs again in `delayMs` (0: at once, behind the
   * jobs already queued), without using an attempt. Throws a {@link JobSnoozeError}, so
   * `return ctx.snooze(ms)` (or a bare call) ends the handler there; the attempt ends snoozed
   * even if the handler catches that error and returns or throws something else. Past the
   * worker's `maxSnoozes` snoozes (default 100) the job is dead-lettered instead; a requested
   * cancel wins. `delayMs` must be finite, from 0 to 100 years: else a `QError`
   * `INVALID_ARGUMENT` is thrown and nothing is recorded (the attempt fails with it unless the
   * handler catches it).
   */
  snooze(delayMs: number): never;
  /**
   * Reports the job's progress: a finite number or a small JSON value (at most 8 KiB of JSON;
   * else a `QError` `INVALID_ARGUMENT` is thrown at once), stored on the job (`Job.progress`,
   * kept across attempts and after it finishes). Writes are coalesced: the first at once, then
   * at most one per 250 ms per job with the latest value; the last value reported is always
   * written before the attempt's outcome. Resolves once the value (or a later one) is durable;
   * rejects with a {@link JobAbortedError} (`lease_lost`) when the lease is lost (the write was
   * fenced), or with the store's error when the write failed. A call not awaited never becomes
   * an unhandled rejection.
   */
  progress(value: unknown): Promise<void>;
  /**
   * The parents of a flow node (see `JobQueue.flow`), by ref: each one's status, result and last
   * error message. Read from the database on first access, in one statement, and kept for the
   * attempt (a job that does not read it costs nothing); `{}` for a job outside flows or a root.
   * A parent whose failure the edge's policy `continue` let through is listed with its status
   * `dead_letter` or `cancelled`; one dropped by `ignore` is not listed.
   */
  readonly parents: Promise<Record<string, FlowParent>>;
  /**
   * Fan-out at run time: `flow.add(nodes)` adds nodes to this node's flow (as `JobQueue.flow`'s
   * nodes; a node may depend on the new nodes and on nodes already in the flow, this one
   * included) and resolves with their jobs by ref. Fenced by the lease: rejects with a
   * {@link JobAbortedError} (`lease_lost`) when this run no longer holds the job, and nothing is
   * added; `INVALID_STATE` for a job outside flows.
   */
  readonly flow: { add(nodes: readonly FlowNode[]): Promise<Record<string, Job>> };
}

/**
 * Runs one attempt of a job. Resolve with a result (stored as JSON; non-serialisable → null) or
 * throw/reject to fail the attempt (retried with backoff, dead-lettered after `maxAttempts`; a
 * {@link DeadLetterError} dead-letters it at once).
 * It must be idempotent: a job whose worker died is run again.
 */
export type HandlerFunc = (job: Job, ctx: HandlerContext) => Promise<unknown>;

/** Options of {@link Worker}. */
export interface WorkerOptions {
  /** Queues to claim from (one global order across them: priority DESC, run_at, id). */
  queues: string[];
  /** Jobs run at once: an integer from 1 to {@link MAX_CONCURRENCY} (10,000). */
  concurrency: number;
  /**
   * Structured logger (pino-compatible: `debug`, `info`, `warn`, `error`). Default:
   * {@link defaultLogger}, which writes warnings and errors (persistent failures, lost leases,
   * dead letters) to stderr and nothing for routine work; pass `silentLogger` for none.
   */
  logger?: Logger;
  /** Instruments from `jobMetrics(meterProvider)` of `@q/otel`. Default: none recorded. */
  metrics?: JobMetrics;
  /**
   * Records a `q.jobs.process` span per attempt, linked to the producer's span when the payload
   * carries a W3C `traceparent` (see `JobQueue.enqueue`). Default: none.
   */
  tracer?: Tracer;
  /** First retry delay (doubles per attempt, capped at 5 min). Default 5 s. */
  retryBaseMs?: number;
  /**
   * Lease duration. Every sixth of it, the leases a sixth or more through their time are renewed.
   * Default {@link LEASE_DURATION_MS} (90 s). At least 100 ms and below 2³¹−1 ms, as every timer
   * option.
   */
  leaseDurationMs?: number;
  /** Idle polling interval, the fallback when no notification arrives. Default 1 s. */
  pollIntervalMs?: number;
  /**
   * How often the maintenance holder reaps lapsed leases and promotes due jobs. Default 1 s. A
   * draining worker hands the maintenance over at once.
   */
  maintenanceIntervalMs?: number;
  /** Crashes a job survives; the next one dead-letters it. Default 3. */
  maxResumes?: number;
  /**
   * Snoozes a job may take (`ctx.snooze`, {@link JobSnoozeError}) over its life; the next one
   * dead-letters it (`snoozed more than N times`). An integer from 0 to 2³¹−1. Default 100.
   */
  maxSnoozes?: number;
  /**
   * Called for every database failure of the claim loop or the maintenance (see
   * {@link WorkerFailure}); persistent ones are also logged at error level at once.
   */
  onError?: (failure: WorkerFailure) => void;
  /**
   * Identical persistent failures in a row (permission denied, undefined table, read-only…)
   * after which the worker stops claiming and `run()` rejects with that error. Default 5.
   */
  maxPersistentFailures?: number;
  /**
   * Jobs kept leased ahead of the free slots (a local queue). Default `'auto'`: sized from the
   * measured handler and round-trip times, `2 × concurrency × roundTrip / handler` (at most 128
   * per slot, 1,024 in all; see local-queue-size.ts) — no-op jobs get a deep queue, jobs that take
   * long against a round trip none — so a job waits locally about two round trips at most and an
   * idle worker is never starved. `0`: claim only for free slots. With N > 0 one round trip claims up to `concurrency + N` jobs; a slot that frees up
   * starts the next prefetched job at once, without a round trip, and the finished outcomes and
   * the refill ride on one statement once half the local queue is used up (or 20 ms after an
   * outcome if fewer finish). Prefetched jobs hold real leases (fencing tokens, renewed with the
   * running ones) and are `running` in the table from the claim on, as every job a worker claims
   * is (nothing distinguishes `leased` from `running` for lock keys, reaping or cancel). They are
   * claimed in priority order, but a job enqueued later with a higher priority does not overtake
   * them. On stop every prefetched job not yet started goes back to the queue at once, its
   * attempt given back; a cancel of one ends it `cancelled` without running its handler.
   */
  prefetch?: number | 'auto';
  /** Jobs claimed per statement at most. Default: `concurrency` plus the local queue's size. */
  claimBatchSize?: number;
  /**
   * Worker id stored in `leased_by`: a non-empty string without NUL, at most 2,048 UTF-8 bytes.
   * Default `<hostname>-<pid>-<8 hex>`.
   */
  workerId?: string;
  /**
   * Whether this worker fires the schedules of `JobQueue.schedule` (every worker does by
   * default: no leader, each slot enqueued once however many take part), or how. `false` opts out.
   */
  schedules?: boolean | WorkerSchedulerOptions;
  /**
   * Per-group concurrency limits (jobs enqueued with a `group`), in order: a job takes the first
   * rule matching its queue and type (absent: any). `concurrency` is how many jobs of one group
   * run at once across every worker of the job table, a number or a function of the group (at
   * least 1). A job over its group's limit stays queued, uses no attempt, and does not hold up
   * other groups; a crashed worker's slots free when its leases lapse. Jobs without a group are
   * never limited. Every worker of a queue should have the same rules.
   */
  limits?: readonly GroupLimit[];
  /**
   * Interleave groups within a priority, round-robin, so one group's backlog delays another
   * group's job by at most a claim round. Default true (it applies once jobs with a group are seen).
   */
  fairness?: boolean;
  /** Round-robin weights per group (an integer from 1; absent: 1): weight 3 gets three jobs a round. */
  weights?: Readonly<Record<string, number>>;
}

/** Most jobs a worker runs at once (`concurrency`): more is a mistake, not a setting. */
export const MAX_CONCURRENCY = 10_000;

/** Throws `INVALID_ARGUMENT` unless `v` is absent (→ `dflt`) or a positive finite number. */
export function positive(v: number | undefined, dflt: number, what: string): number {
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) throw invalidArgument(`${what} must be a positive number`);
  return v;
}

/** Throws `INVALID_ARGUMENT` unless `v` is absent (→ `dflt`) or a positive integer. */
export function positiveInt(v: number | undefined, dflt: number, what: string): number {
  if (v === undefined || v === null) return dflt;
  if (!Number.isInteger(v) || v < 1) throw invalidArgument(`${what} must be a positive integer`);
  return v;
}

/** {@link WorkerOptions} checked (`INVALID_ARGUMENT` naming the first bad one) and defaulted. */
export interface ResolvedOptions {
  queues: string[];
  concurrency: number;
  prefetch: number | 'auto';
  /** Jobs per claim statement, or undefined: concurrency plus the local queue's size. */
  batch: number | undefined;
  logger: Logger;
  retryBaseMs: number;
  leaseMs: number;
  pollMs: number;
  maintenanceMs: number;
  maxResumes: number;
  maxSnoozes: number;
  maxPersistentFailures: number;
  workerId: string;
  /** What every claim passes of the group options (checked). */
  groups: { limits?: readonly GroupLimit[]; fair: boolean; weights?: Readonly<Record<string, number>> };
}

/** Checks the object- and function-shaped options (`INVALID_ARGUMENT` naming the first bad one). */
export function checkWorkerObjects(op: string, opts: Partial<WorkerOptions>): void {
  checkOptionalMethods(op, 'logger', opts.logger, LOGGER_METHODS);
  checkOptionalMethods(op, 'tracer', opts.tracer, ['startActiveSpan', 'startSpan']);
  checkOptionalFunction(op, 'onError', opts.onError);
  const m = opts.metrics as Partial<Record<keyof JobMetrics, unknown>> | undefined;
  if (m === undefined) return;
  if (typeof m !== 'object' || m === null) throw invalidArgument(`${op}: metrics must be the instruments of jobMetrics() (@q/otel)`);
  for (const key of ['completed', 'claimed', 'leaseLost'] as const) checkOptionalMethods(op, `metrics.${key}`, m[key] ?? null, ['add']);
  for (const key of ['workerFailures', 'idleRounds'] as const) checkOptionalMethods(op, `metrics.${key}`, m[key], ['add']);
  checkOptionalMethods(op, 'metrics.duration', m.duration ?? null, ['record']);
  checkOptionalMethods(op, 'metrics.flowReleaseLatency', m.flowReleaseLatency, ['record']);
}

/** Checks and defaults a worker's options. */
export function resolveOptions(opts: WorkerOptions, notifies = true): ResolvedOptions {
  if (!opts || typeof opts !== 'object') throw invalidArgument('Worker takes WorkerOptions');
  checkWorkerObjects('Worker', opts);
  const queues = opts.queues;
  if (!Array.isArray(queues) || queues.length === 0) throw invalidArgument('queues must be a non-empty array of queue names');
  for (const q of queues) checkName('Worker', 'queue name', q);
  const concurrency = opts.concurrency;
  // Never rounded or clamped: 0.5 or 0 used to run 1 job at a time without a word.
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > MAX_CONCURRENCY) {
    throw invalidArgument(`Worker: concurrency must be an integer from 1 to ${MAX_CONCURRENCY} (got ${String(concurrency)})`);
  }
  const prefetch = opts.prefetch ?? 'auto';
  if (prefetch !== 'auto' && (!Number.isInteger(prefetch) || prefetch < 0))
    throw invalidArgument("prefetch must be 'auto' or a non-negative integer");
  const maxResumes = opts.maxResumes ?? 3;
  if (!Number.isInteger(maxResumes) || maxResumes < 0) throw invalidArgument('maxResumes must be a non-negative integer');
  const maxSnoozes = opts.maxSnoozes ?? DEFAULT_MAX_SNOOZES;
  if (!Number.isInteger(maxSnoozes) || maxSnoozes < 0 || maxSnoozes > 2_147_483_647) {
    throw invalidArgument('Worker: maxSnoozes must be an integer from 0 to 2147483647');
  }
  if (opts.fairness !== undefined && typeof opts.fairness !== 'boolean') throw invalidArgument('Worker: fairness must be a boolean');
  checkClaimGroups({ limits: opts.limits, weights: opts.weights }, 'Worker');
  return {
    groups: {
      fair: opts.fairness !== false,
      ...(opts.limits === undefined ? {} : { limits: opts.limits }),
      ...(opts.weights === undefined ? {} : { weights: opts.weights }),
    },
    queues: [...new Set(queues)],
    concurrency,
    prefetch,
    batch: opts.claimBatchSize === undefined ? undefined : positiveInt(opts.claimBatchSize, 1, 'claimBatchSize'),
    logger: opts.logger ?? defaultLogger(),
    retryBaseMs: positive(opts.retryBaseMs, RETRY_BASE_MS, 'retryBaseMs'),
    leaseMs: timerOption(opts.leaseDurationMs, LEASE_DURATION_MS, 'leaseDurationMs', MIN_LEASE_MS),
    // Without notifications (a transaction pooler and no listenDsn) polling is all there is.
    pollMs: timerOption(opts.pollIntervalMs, notifies ? 1_000 : POLL_WITHOUT_LISTEN_MS, 'pollIntervalMs'),
    maintenanceMs: timerOption(opts.maintenanceIntervalMs, 1_000, 'maintenanceIntervalMs'),
    maxResumes,
    maxSnoozes,
    maxPersistentFailures: positiveInt(opts.maxPersistentFailures, MAX_PERSISTENT_FAILURES, 'maxPersistentFailures'),
    workerId:
      opts.workerId === undefined ? `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}` : checkName('Worker', 'workerId', opts.workerId),
  };
}
