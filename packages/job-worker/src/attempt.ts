import type { Span, Tracer } from '@opentelemetry/api';
import type { JobMetrics } from '@q/otel';
import {
  joinErrorStack,
  progressJson,
  splitErrorText,
  type FlowNode,
  type FlowParent,
  type Job,
  type JobLease,
  type JobOutcome,
  type SnoozeResult,
} from '@q/store/jobs';
import type { Completer } from './completer.js';
import { DeadLetterError, JobAbortedError, JobSnoozeError, checkSnoozeMs } from './errors.js';
import type { WorkerEvents } from './events.js';
import type { Execution } from './execution.js';
import { errorFields, firstLine, logsAt, type Logger } from './logger.js';
import type { HandlerContext, HandlerFunc } from './options.js';
import { payloadTraceparent, withTraceparent } from './payload-traceparent.js';
import { endFailed, endSnoozed, linkFlowParents, runInSpan, startProcessSpan } from './process-span.js';
import type { StepRecorder } from './step-recorder.js';
import { failureOutcome, failureStack, refusedOutcome, storableOutcome, storableText } from './retry-policy.js';

/** How an attempt tells its worker where it is. */
export interface AttemptHooks {
  /** The handler settled (or will never run): free its slot. */
  free(e: Execution): void;
  /** The attempt is over: forget it. */
  settle(e: Execution): void;
  /** The lease was given up unrenewed and nothing runs under it any more: give the job back. */
  giveUp(e: Execution): Promise<void>;
  /** The outcome write found the lease token gone: the lease is lost. */
  fenced(e: Execution): void;
}

/** What running attempts needs from the worker: fixed for its life. */
export interface AttemptConfig {
  handlers: ReadonlyMap<string, HandlerFunc>;
  completer: Completer;
  logger: Logger;
  metrics: JobMetrics | undefined;
  tracer: Tracer | undefined;
  retryBaseMs: number;
  workerId: string;
  /** Told how long each handler ran (sizes an adaptive local queue). */
  handlerTime?: (ms: number) => void;
  /** The worker's event listeners. */
  events: WorkerEvents;
  /** Writes a snooze (the store's, fenced by the lease token). */
  snooze: (lease: JobLease, delayMs: number, maxSnoozes: number) => Promise<SnoozeResult>;
  /** Snoozes a job may take before the next dead-letters it. */
  maxSnoozes: number;
  /** Reads the parents of a flow node (the store's `flows.parents`), for `ctx.parents`. */
  parents: (job: Job) => Promise<Record<string, FlowParent>>;
  /** Adds nodes to the flow of the job holding the lease (the store's `flows.addNodes`; null: fenced), for `ctx.flow.add`. */
  addFlowNodes: (lease: JobLease, nodes: readonly FlowNode[]) => Promise<Record<string, Job> | null>;
  /**
   * Records a traced flow node's span and reads its parents' (the store's `flows.recordSpan`), so
   * the span links to its parents' spans. Optional: without it a flow node's span has no such links.
   */
  recordFlowSpan?: (lease: JobLease, traceparent: string) => Promise<string[]>;
}

/**
 * A handler's second argument. The signal and the step recorder are made when the handler first
 * reads them (an AbortController and a recorder per job were a measurable share of a no-op job's
 * cost); a signal aborted before it is read is aborted when made. A class, so a job costs one
 * small object, not an object literal with two getter closures.
 */
class AttemptContext implements HandlerContext {
  readonly #e: Execution;
  readonly #c: Pick<AttemptConfig, 'parents' | 'addFlowNodes'>;
  #parents: Promise<Record<string, FlowParent>> | undefined;

  constructor(e: Execution, c: Pick<AttemptConfig, 'parents' | 'addFlowNodes'>) {
    this.#e = e;
    this.#c = c;
  }

  get flow(): { add(nodes: readonly FlowNode[]): Promise<Record<string, Job>> } {
    const { job } = this.#e;
    return {
      add: async (nodes) => {
        // Added nodes continue the flow's trace, as the nodes inserted with it (JobQueue.flow).
        const tp = payloadTraceparent(job.payload);
        const withTrace =
          tp === undefined || !Array.isArray(nodes)
            ? nodes
            : nodes.map((n: FlowNode) =>
                n && typeof n === 'object' && n.request === undefined ? { ...n, payload: withTraceparent(n.payload, tp) } : n,
              );
        const added = await this.#c.addFlowNodes(job, withTrace);
        if (added === null) throw new JobAbortedError('lease_lost');
        return added;
      },
    };
  }

  // Lazily, one read per attempt: most jobs are in no flow, and most handlers never ask.
  get parents(): Promise<Record<string, FlowParent>> {
    return (this.#parents ??= this.#c.parents(this.#e.job));
  }

  get signal(): AbortSignal {
    return this.#e.controller.signal;
  }

  get steps(): StepRecorder {
    return this.#e.recorder;
  }

  // Getters returning arrow functions, so `{ snooze, progress }` destructured from the context
  // work as the signal and the steps do; the function is made only when read.
  get snooze(): (delayMs: number) => never {
    return (delayMs) => {
      const ms = checkSnoozeMs('snooze', delayMs);
      // Recorded before the throw: the attempt ends snoozed even if the handler swallows the error.
      this.#e.snoozeMs ??= ms;
      throw new JobSnoozeError(ms);
    };
  }

  get progress(): (value: unknown) => Promise<void> {
    return (value) => {
      // Checked and copied now: a bad value throws here, and a later change to the object is
      // not what a coalesced write sends.
      const json = progressJson('progress', value);
      return this.#e.progress.report(json === null ? null : JSON.parse(json));
    };
  }
}

/** The log fields naming one attempt of `job` on worker `workerId`. */
export function jobFields(job: Job, workerId: string): Record<string, unknown> {
  return { job_uuid: job.uuid, job_type: job.type, attempt: job.attempt, worker_id: workerId };
}

/** The message of an error as stored (without the stack kept after it), as `Job.lastError` reads. */
function message(stored: string): string {
  return splitErrorText(stored).message ?? '';
}

/** Why a handler failed, as stored, and whether it asked for the dead letter. */
interface HandlerFailure {
  error: string;
  deadLetter: boolean;
}

function handlerFailure(err: unknown): HandlerFailure {
  // Postgres text holds no NUL and UTF-8 no lone surrogate: replaced, so the error is kept. The
  // stack (frames only, bounded) is stored with it, split off again when the job is read.
  const message = storableText(err instanceof Error ? err.message : String(err));
  return { error: joinErrorStack(message, failureStack(err)), deadLetter: err instanceof DeadLetterError };
}

/**
 * Runs attempts: the handler (in a `q.jobs.process` span when traced), the outcome it comes to
 * (see retry-policy.ts), its metrics, and the fenced write of that outcome with the final
 * timeline.
 */
export class AttemptRunner {
  readonly #c: AttemptConfig;
  readonly #hooks: AttemptHooks;

  constructor(config: AttemptConfig, hooks: AttemptHooks) {
    this.#c = config;
    this.#hooks = hooks;
  }

  /** Runs `e`'s handler and records its outcome; settles `e` at the end. */
  async execute(e: Execution): Promise<void> {
    const { job } = e;
    const c = this.#c;
    const handler = c.handlers.get(job.type);
    if (!handler) {
      const msg = `no handler registered for job type "${job.type}"`;
      this.#hooks.free(e);
      this.#record(e, storableOutcome(e, failureOutcome(e, msg, c.retryBaseMs), c.retryBaseMs), undefined, msg, () => this.#hooks.settle(e));
      return;
    }
    if (c.events.has('job:start')) c.events.emit('job:start', { job });
    const started = performance.now();
    let outcome: JobOutcome;
    let error: string | undefined;
    const ctx = new AttemptContext(e, c);
    let span: Span | undefined;
    let snoozeMs: number | undefined;
    try {
      // Untraced (the default), the handler is called directly: no wrapper per job.
      let result: unknown;
      if (c.tracer === undefined) result = await handler(job, ctx);
      else {
        span = startProcessSpan(c.tracer, job);
        if (job.flow !== undefined && c.recordFlowSpan !== undefined) await linkFlowParents(span, e.lease, c.recordFlowSpan, c.logger);
        result = await runInSpan(span, handler, job, ctx);
        if (e.snoozeMs !== undefined) endSnoozed(span, e.snoozeMs);
        else span.end();
      }
      snoozeMs = e.snoozeMs;
      outcome = { ...e.lease, status: 'succeeded', result };
    } catch (err) {
      snoozeMs = e.snoozeMs ?? (err instanceof JobSnoozeError ? err.delayMs : undefined);
      if (span !== undefined) {
        if (snoozeMs !== undefined) endSnoozed(span, snoozeMs);
        else endFailed(span, err);
      }
      const failure = handlerFailure(err);
      error = failure.error;
      outcome = failureOutcome(e, error, c.retryBaseMs, failure.deadLetter);
    }
    c.handlerTime?.(performance.now() - started);
    // The last progress reported is written before the outcome (only a handler that reported any waits).
    if (e.progressReporter !== undefined) await e.progressReporter.settle();
    this.#hooks.free(e);
    if (snoozeMs !== undefined && !e.cancelRequested) {
      this.#snooze(e, snoozeMs, (performance.now() - started) / 1000);
      return;
    }
    if (e.cancelRequested) outcome = { ...e.lease, status: 'cancelled', ...(error !== undefined ? { error } : {}) };
    outcome = storableOutcome(e, outcome, c.retryBaseMs);
    if ('error' in outcome && outcome.error !== undefined) error = outcome.error;
    const status = outcome.status === 'retry_wait' ? 'failed' : outcome.status;
    const seconds = (performance.now() - started) / 1000;
    // Not awaited: this function's frame ends here instead of waiting out the write.
    this.#record(e, outcome, status, error, () => this.#hooks.settle(e), seconds);
  }

  /**
   * Writes the outcome with the final timeline, unless the job was given back by a drain or its
   * lease is known lost (then someone else owns the job, or soon will: nothing is recorded).
   * Resolves once the outcome is written or known not to be (and a lease given up unrenewed has
   * been handed back).
   */
  record(e: Execution, outcome: JobOutcome, status: string | undefined, error: string | undefined): Promise<void> {
    return new Promise((resolve) => this.#record(e, outcome, status, error, resolve));
  }

  /**
   * {@link record}, calling `then` once where record resolves. The attempt counts in
   * `q.jobs.completed` (and its `seconds` in `q.jobs.duration.seconds`) only once its outcome is
   * written: a stale run, fenced by its lost lease, finished nothing.
   */
  #record(e: Execution, outcome: JobOutcome, status: string | undefined, error: string | undefined, then: () => void, seconds?: number): void {
    if (e.released) return then();
    const c = this.#c;
    const finish = (written: boolean, fenced?: boolean): void => {
      // Known lost before this write (nothing was sent), or learned from it (fenced).
      const lostBefore = e.leaseLost;
      try {
        if (written) this.#emitRecorded(e, outcome, error, seconds);
        else if (fenced === true && !lostBefore) this.#hooks.fenced(e);
        if (written && status !== undefined && c.metrics) {
          const attrs = { 'job.type': e.job.type, 'job.status': status };
          c.metrics.completed.add(1, attrs);
          if (seconds !== undefined) c.metrics.duration.record(seconds, attrs);
        }
        // The fields are built only for a line the logger writes (routine lines are info).
        if (written) this.#logRecorded(e, outcome, status, error);
        else
          c.logger.warn(
            jobFields(e.job, c.workerId),
            lostBefore
              ? 'job outcome not recorded: its lease was lost'
              : fenced === true
                ? 'job outcome not recorded: the write was fenced (the lease was lost: the job was reaped or taken over meanwhile)'
                : 'job outcome not recorded: the write failed (see the error logged with it) or the worker stopped',
          );
      } finally {
        // Even should the log line throw: the attempt is over either way.
        if (!written && e.unrenewed) void this.#hooks.giveUp(e).finally(then);
        else then();
      }
    };
    if (e.leaseLost) return finish(false);
    // Should the store still refuse the outcome when it is written (a timeline over 64 MiB), a
    // failed attempt saying why is recorded instead, without the timeline.
    const submitted = outcome;
    const steps = e.steps;
    c.completer.submitWith(
      steps === undefined ? outcome : { ...outcome, steps },
      () => e.held,
      finish,
      (problem) => {
        outcome = refusedOutcome(e, submitted, problem, c.retryBaseMs);
        if ('error' in outcome) error = outcome.error;
        return outcome;
      },
    );
  }

  /**
   * Writes a snooze (see `JobStore.snooze`) unless the job was given back by a drain or its lease
   * is known lost, then settles `e`. A snooze past `maxSnoozes` is recorded as a dead letter.
   */
  #snooze(e: Execution, delayMs: number, seconds: number): void {
    const settle = (): void => this.#hooks.settle(e);
    if (e.released) return settle();
    const c = this.#c;
    const fields = jobFields(e.job, c.workerId);
    const notRecorded = (why: string): void => {
      c.logger.warn(fields, `job snooze not recorded: ${why}`);
      if (e.unrenewed) void this.#hooks.giveUp(e).finally(settle);
      else settle();
    };
    if (e.leaseLost) return notRecorded('its lease was lost');
    c.snooze(e.lease, delayMs, c.maxSnoozes).then(
      (r) => {
        try {
          this.#snoozed(e, r, delayMs, seconds);
        } finally {
          if (r.status === 'fenced') notRecorded('the write was fenced (the lease was lost: the job was reaped or taken over meanwhile)');
          else settle();
        }
      },
      (err: unknown) => {
        c.logger.error(
          { ...fields, ...errorFields(err) },
          'job snooze not recorded: the write failed; the lease will lapse and the job run again',
        );
        if (e.unrenewed) void this.#hooks.giveUp(e).finally(settle);
        else settle();
      },
    );
  }

  /** The events, metrics and log line of a written snooze. */
  #snoozed(e: Execution, r: SnoozeResult, delayMs: number, seconds: number): void {
    const { events, logger, metrics, workerId, maxSnoozes } = this.#c;
    const { job } = e;
    const durationMs = seconds * 1000;
    if (r.status === 'fenced') {
      if (!e.leaseLost) this.#hooks.fenced(e);
      return;
    }
    if (metrics) metrics.completed.add(1, { 'job.type': job.type, 'job.status': r.status });
    const fields = jobFields(job, workerId);
    switch (r.status) {
      case 'snoozed':
        if (events.has('job:snoozed')) events.emit('job:snoozed', { job, delayMs, until: r.runAt, durationMs });
        if (logsAt(logger, 'info')) logger.info({ ...fields, snooze_ms: Math.round(delayMs), snoozes: r.snoozes }, 'job snoozed');
        break;
      case 'dead_letter': {
        const error = `snoozed more than ${maxSnoozes} times`;
        if (events.has('job:dead-letter')) events.emit('job:dead-letter', { job, error, durationMs });
        logger.error({ ...fields, err: { message: error } }, 'job dead-lettered');
        break;
      }
      default:
        if (logsAt(logger, 'info')) logger.info({ ...fields, status: r.status }, 'job cancelled');
    }
  }

  /** The event of a recorded outcome, when anyone listens to it (a cancel has none). */
  #emitRecorded(e: Execution, outcome: JobOutcome, error: string | undefined, seconds: number | undefined): void {
    const { events } = this.#c;
    const durationMs = seconds === undefined ? 0 : seconds * 1000;
    const { job } = e;
    switch (outcome.status) {
      case 'succeeded':
        if (events.has('job:success')) events.emit('job:success', { job, result: outcome.result, durationMs });
        break;
      case 'retry_wait':
        if (events.has('job:retry'))
          events.emit('job:retry', { job, error: message(error ?? outcome.error), retryDelayMs: outcome.retryDelayMs, durationMs });
        break;
      case 'dead_letter':
        if (events.has('job:dead-letter')) events.emit('job:dead-letter', { job, error: message(error ?? outcome.error), durationMs });
        break;
      default:
    }
  }

  /** The log line of a recorded outcome. */
  #logRecorded(e: Execution, outcome: JobOutcome, status: string | undefined, error: string | undefined): void {
    const { logger, workerId } = this.#c;
    if (!logsAt(logger, outcome.status === 'succeeded' || outcome.status === 'cancelled' ? 'info' : 'warn')) return;
    const fields = jobFields(e.job, workerId);
    switch (outcome.status) {
      case 'succeeded':
        logger.info(fields, 'job succeeded');
        break;
      case 'retry_wait':
        logger.warn(
          { ...fields, err: { message: firstLine(error ?? '') }, retry_in_ms: Math.round(outcome.retryDelayMs) },
          'job attempt failed, will retry',
        );
        break;
      case 'dead_letter':
        logger.error({ ...fields, err: { message: firstLine(error ?? '') } }, 'job dead-lettered');
        break;
      default:
        logger.info({ ...fields, status }, 'job cancelled');
    }
  }
}
