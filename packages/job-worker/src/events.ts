import { invalidArgument } from '@q/schema';
import type { Job } from '@q/store/jobs';
import type { WorkerFailure } from './failure-watch.js';
import { errorFields, type Logger } from './logger.js';

/**
 * Why a worker learned that an attempt's lease is lost:
 * - `fenced`: a renewal or the outcome write found the lease token gone (the lease lapsed and
 *   the job was reaped, or it was cancelled meanwhile);
 * - `unrenewed`: renewals kept failing until a sixth of the lease was left;
 * - `reclaimed`: this worker claimed the job again under a new lease (the old one lapsed).
 */
export type LeaseLostReason = 'fenced' | 'unrenewed' | 'reclaimed';

/**
 * The events of a {@link Worker} (and of the worker `JobQueue.work` runs) and what each listener
 * is given. Each `job:*` event fires once per attempt it describes; the outcome events fire once
 * the outcome is written (committed), never for an attempt whose write was fenced or given back.
 */
export interface WorkerEventMap {
  /** A handler is about to be called for an attempt (`job.attempt` counts from 1). */
  'job:start': { job: Job };
  /** The attempt succeeded and its result is recorded. */
  'job:success': { job: Job; result: unknown; durationMs: number };
  /**
   * The attempt failed and the job waits `retryDelayMs` for its next attempt (recorded). `error`
   * is the message, as `Job.lastError` reads it.
   */
  'job:retry': { job: Job; error: string; retryDelayMs: number; durationMs: number };
  /**
   * The handler snoozed the job (`ctx.snooze`, `JobSnoozeError`) and it is recorded: the job
   * waits `delayMs` (until `until`, on the database clock) without using an attempt. A snooze
   * past `maxSnoozes` is a `job:dead-letter` instead.
   */
  'job:snoozed': { job: Job; delayMs: number; until: Date; durationMs: number };
  /** The attempt failed and the job went to the dead letter (recorded). */
  'job:dead-letter': { job: Job; error: string; durationMs: number };
  /**
   * The worker learned that the attempt's lease is lost: its handler's signal is aborted and
   * nothing more is recorded for it (another attempt owns the job, or will).
   */
  'job:lease-lost': { job: Job; reason: LeaseLostReason };
  /** A database failure of one of the worker's loops: what `WorkerOptions.onError` is given. */
  error: WorkerFailure;
  /**
   * The last attempt this worker held has settled (its outcome written or fenced, or the job
   * given back): its local queue and in-flight set are both empty. Fires each time that becomes
   * so, not once per worker; it says this worker is idle for now, not that no job is due (its
   * next claim may already be under way).
   */
  drained: { workerId: string };
}

/** A worker event's name. */
export type WorkerEventName = keyof WorkerEventMap;

/** A listener of event `E`: its return value is ignored, a rejected promise is logged. */
export type WorkerEventListener<E extends WorkerEventName> = (event: WorkerEventMap[E]) => void | Promise<void>;

/** What has events: `on(event, listener)` returns the function that removes that listener. */
export interface WorkerEventSource {
  /**
   * Calls `listener` for every `event` from now on, synchronously where the worker reaches that
   * point. A listener that throws or rejects is logged (once per failure, at warn level, by the
   * worker's logger) and never affects the job or the worker. Returns the unsubscribe function
   * (calling it again does nothing).
   */
  on<E extends WorkerEventName>(event: E, listener: WorkerEventListener<E>): () => void;
}

const NAMES: ReadonlySet<string> = new Set<WorkerEventName>([
  'job:start',
  'job:success',
  'job:retry',
  'job:snoozed',
  'job:dead-letter',
  'job:lease-lost',
  'error',
  'drained',
]);

/** Throws `INVALID_ARGUMENT` unless `event` is a worker event and `listener` a function. */
export function checkListener(event: unknown, listener: unknown): void {
  if (typeof event !== 'string' || !NAMES.has(event)) {
    throw invalidArgument(`on: event must be one of ${[...NAMES].join(', ')} (got ${JSON.stringify(String(event))})`);
  }
  if (typeof listener !== 'function') throw invalidArgument('on: listener must be a function');
}

/**
 * A worker's listeners. `has(event)` is one property read, so the hot path builds no event object
 * (and calls nothing) for an event nobody listens to.
 */
export class WorkerEvents implements WorkerEventSource {
  readonly #logger: Logger;
  readonly #listeners: { [E in WorkerEventName]?: Array<WorkerEventListener<E>> } = {};

  constructor(logger: Logger) {
    this.#logger = logger;
  }

  on<E extends WorkerEventName>(event: E, listener: WorkerEventListener<E>): () => void {
    checkListener(event, listener);
    // Copied on write: a listener that unsubscribes during an emit does not disturb that emit.
    const list = this.#listeners as Record<E, Array<WorkerEventListener<E>> | undefined>;
    list[event] = [...(list[event] ?? []), listener];
    let on = true;
    return () => {
      if (!on) return;
      on = false;
      const rest = (list[event] ?? []).filter((l) => l !== listener);
      list[event] = rest.length > 0 ? rest : undefined;
    };
  }

  /** Whether anyone listens to `event`. */
  has(event: WorkerEventName): boolean {
    return this.#listeners[event] !== undefined;
  }

  /** Calls `event`'s listeners with `payload`; never throws. */
  emit<E extends WorkerEventName>(event: E, payload: WorkerEventMap[E]): void {
    const list = (this.#listeners as Record<E, Array<WorkerEventListener<E>> | undefined>)[event];
    if (list === undefined) return;
    for (const listener of list) {
      try {
        const r = listener(payload);
        if (r !== undefined && typeof (r as Promise<void>).then === 'function') {
          (r as Promise<void>).then(undefined, (err: unknown) => this.#failed(event, err));
        }
      } catch (err) {
        this.#failed(event, err);
      }
    }
  }

  #failed(event: WorkerEventName, err: unknown): void {
    try {
      this.#logger.warn({ ...errorFields(err), event }, `worker event listener for "${event}" threw`);
    } catch {
      // A logger that throws must not break the worker either.
    }
  }
}
