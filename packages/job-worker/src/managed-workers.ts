import type { Counter, Tracer } from '@opentelemetry/api';
import type { JobMetrics } from '@q/otel';
import { QError, QErrorCode, invalidArgument } from '@q/schema';
import { checkName } from '@q/schema/internal';
import { checkClaimGroups, type GroupLimit, type JobStore } from '@q/store/jobs';
import { checkListener, type WorkerEventListener, type WorkerEventName, type WorkerEventSource } from './events.js';
import { errorFields, type Logger } from './logger.js';
import { Worker, type HandlerFunc, type WorkerOptions } from './worker.js';

/** Options of `JobQueue.work`. */
export interface WorkOptions {
  /**
   * Jobs of this queue run at once, all types together: one worker serves every type of a queue,
   * and the first `work` call on the queue sets it (default {@link DEFAULT_WORK_CONCURRENCY}, 10).
   * A later call for the same queue may leave it out or repeat it; a different value is
   * `INVALID_ARGUMENT` (use another queue for types that need their own concurrency).
   */
  concurrency?: number;
  /** The queue to serve. Default `default`, the queue `enqueue` uses when none is given. */
  queue?: string;
  /**
   * Per-group limits of the queue's worker (see `WorkerOptions.limits`; a rule's `type` narrows
   * it to one type). Per queue, like `concurrency`: the first `work` call on the queue that gives
   * them sets them (else `worker.limits` of `JobQueue.open`); a later call may repeat them or
   * leave them out, and different ones are `INVALID_ARGUMENT`.
   */
  limits?: readonly GroupLimit[];
}

/**
 * Where the worker of one queue of an opened `JobQueue` is (see `JobQueue.health`):
 * - `running`: it claims and runs jobs (from `work`'s next turn of the event loop on);
 * - `stopped`: it stopped on `error` — `maxPersistentFailures` identical persistent database
 *   failures in a row (a revoked grant, a dropped schema, a read-only role). It is not restarted:
 *   `work` for its queue is refused; fix the cause, then close the queue and open a new one;
 * - `closed`: {@link JobQueue.close} stopped it.
 */
export interface WorkerHealth {
  queue: string;
  state: 'running' | 'stopped' | 'closed';
  /** The job types registered on the queue. */
  types: string[];
  /** Why a `stopped` worker stopped. */
  error?: QError;
}

/** What `JobQueueOpenOptions.onWorkerStopped` is told: which queue's worker stopped, and why. */
export interface WorkerStopped {
  queue: string;
  error: QError;
}

/** Worker settings every worker of an opened queue shares (see {@link WorkerOptions}). */
export type ManagedWorkerOptions = Omit<WorkerOptions, 'queues' | 'concurrency' | 'logger' | 'metrics' | 'tracer' | 'workerId'>;

/** Default `concurrency` of `JobQueue.work`. */
export const DEFAULT_WORK_CONCURRENCY = 10;

interface Running {
  worker: Worker;
  concurrency: number;
  /** Whether `concurrency` was given (by the first `work` call, named in a conflict). */
  concurrencyGiven: boolean;
  /** The per-group limits its worker holds (absent: none). */
  limits: readonly GroupLimit[] | undefined;
  /** The type of the `work` call that started the worker. */
  firstType: string;
  types: string[];
  abort: AbortController;
  run: Promise<void>;
  /** Set when the worker stopped on a persistent failure. */
  error?: QError;
}

/** A queue `work` registered handlers for while no worker starts (`startWorkers: false`): `drain` runs them. */
export interface ManualQueue {
  handlers: Map<string, HandlerFunc>;
  /** Listeners given to the event source `work` returned, attached to every worker `drain` runs. */
  listeners: Array<{ event: WorkerEventName; listener: WorkerEventListener<WorkerEventName> }>;
}

/**
 * The workers a `JobQueue.open` queue starts: one {@link Worker} per queue, holding the handlers of
 * every type registered for it, started on the next turn of the event loop (so handlers
 * registered together are all known before its first claim) and drained by {@link close}. It also
 * watches enqueues: a job sent to a queue that no worker here serves and that was not declared
 * served elsewhere is counted (`q.jobs.unserved_enqueues`) and warned about once per queue.
 */
export class ManagedWorkers {
  readonly #store: JobStore;
  readonly #logger: Logger;
  readonly #metrics: JobMetrics | undefined;
  readonly #tracer: Tracer | undefined;
  readonly #defaults: ManagedWorkerOptions;
  readonly #declared: ReadonlySet<string>;
  readonly #unserved: Counter;
  readonly #warned = new Set<string>();
  readonly #workers = new Map<string, Running>();
  #closing: Promise<void> | undefined;

  constructor(
    store: JobStore,
    opts: {
      logger: Logger;
      metrics?: JobMetrics;
      tracer?: Tracer;
      defaults: ManagedWorkerOptions;
      declared: readonly string[];
      unserved: Counter;
      onWorkerStopped?: ((stopped: WorkerStopped) => void) | undefined;
      startWorkers?: boolean;
    },
  ) {
    if (opts.startWorkers === false) this.#manual = new Map();
    this.#store = store;
    this.#logger = opts.logger;
    this.#metrics = opts.metrics;
    this.#tracer = opts.tracer;
    this.#defaults = opts.defaults;
    this.#declared = new Set(opts.declared);
    this.#unserved = opts.unserved;
    this.#onStopped = opts.onWorkerStopped;
  }

  readonly #onStopped: ((stopped: WorkerStopped) => void) | undefined;
  /** Set when no worker starts (`startWorkers: false`): the handlers and listeners by queue. */
  readonly #manual: Map<string, ManualQueue> | undefined;

  /** The queues registered while no worker starts, or undefined when `work` starts workers. */
  manual(): ReadonlyMap<string, ManualQueue> | undefined {
    return this.#manual;
  }

  /** The options every worker of this queue is built with (less queues, concurrency and id). */
  workerOptions(): ManagedWorkerOptions & Pick<WorkerOptions, 'logger' | 'metrics' | 'tracer'> {
    return {
      ...this.#defaults,
      logger: this.#logger,
      ...(this.#metrics ? { metrics: this.#metrics } : {}),
      ...(this.#tracer ? { tracer: this.#tracer } : {}),
    };
  }

  /** Each queue's worker: running, stopped (and why) or closed. */
  health(): WorkerHealth[] {
    return [...this.#workers].map(([queue, w]) => ({
      queue,
      state: w.error ? 'stopped' : this.#closing ? 'closed' : 'running',
      types: [...w.types],
      ...(w.error ? { error: w.error } : {}),
    }));
  }

  /**
   * Serves jobs of `type` on `opts.queue` with `handler`, starting that queue's worker if needed;
   * returns that worker's events.
   */
  work(type: string, handler: HandlerFunc, opts: WorkOptions = {}): WorkerEventSource {
    if (this.#closing) throw new QError(QErrorCode.CLOSED, 'work: the queue is closed');
    checkName('work', 'type', type);
    if (typeof handler !== 'function') throw invalidArgument('work: handler must be a function');
    if (typeof opts !== 'object' || opts === null) throw invalidArgument('work: options must be an object');
    const queue = opts.queue === undefined ? 'default' : checkName('work', 'queue', opts.queue);
    const concurrency = opts.concurrency ?? DEFAULT_WORK_CONCURRENCY;
    if (!Number.isInteger(concurrency) || concurrency < 1) throw invalidArgument('work: concurrency must be a positive integer');
    if (opts.limits !== undefined) checkClaimGroups({ limits: opts.limits }, 'work');
    if (this.#manual) return this.#register(this.#manual, queue, type, handler);
    const existing = this.#workers.get(queue);
    if (existing) {
      if (existing.error) {
        throw new QError(
          QErrorCode.INVALID_STATE,
          `work: the worker of queue "${queue}" stopped on a persistent failure and is not restarted (${existing.error.message}): fix the cause, then close this JobQueue and open a new one`,
          { cause: existing.error },
        );
      }
      if (opts.concurrency !== undefined && opts.concurrency !== existing.concurrency) {
        const set = existing.concurrencyGiven
          ? `set by work("${existing.firstType}", …, { concurrency: ${existing.concurrency} })`
          : `the default (${DEFAULT_WORK_CONCURRENCY}), taken by work("${existing.firstType}", …) without a concurrency`;
        throw invalidArgument(
          `work: concurrency ${opts.concurrency} for type "${type}" conflicts with queue "${queue}"'s concurrency ${existing.concurrency}, ${set}: concurrency is per queue (one worker serves all its types); give the same value or none, or serve "${type}" on a queue of its own ({ queue })`,
        );
      }
      if (opts.limits !== undefined && !sameLimits(opts.limits, existing.limits)) {
        throw invalidArgument(
          `work: limits must be the same for every type of queue "${queue}" (one worker serves them all; type "${type}" gave others than those set when it started, by work("${existing.firstType}", …) or worker.limits): give the same or none, or narrow a rule to a type with { type }`,
        );
      }
      existing.worker.register(type, handler);
      existing.types.push(type);
      return events(existing.worker);
    }
    const limits = opts.limits ?? this.#defaults.limits;
    const worker = new Worker(this.#store, {
      ...this.#defaults,
      ...(limits === undefined ? {} : { limits }),
      // One scheduler per process is enough (each tick reads every due schedule): the first worker's.
      ...(this.#workers.size > 0 ? { schedules: false } : {}),
      queues: [queue],
      concurrency,
      logger: this.#logger,
      ...(this.#metrics ? { metrics: this.#metrics } : {}),
      ...(this.#tracer ? { tracer: this.#tracer } : {}),
    });
    worker.register(type, handler);
    const abort = new AbortController();
    const entry: Running = {
      worker,
      concurrency,
      concurrencyGiven: opts.concurrency !== undefined,
      limits,
      firstType: type,
      types: [type],
      abort,
      run: Promise.resolve(),
    };
    entry.run = new Promise<void>((resolve) => setImmediate(resolve)).then(() =>
      worker.run(abort.signal).catch((err: unknown) => this.#stopped(entry, queue, err)),
    );
    this.#workers.set(queue, entry);
    return events(worker);
  }

  /** `work` while no worker starts: the handler is kept for `drain`, and so are the listeners. */
  #register(manual: Map<string, ManualQueue>, queue: string, type: string, handler: HandlerFunc): WorkerEventSource {
    let entry = manual.get(queue);
    if (!entry) manual.set(queue, (entry = { handlers: new Map(), listeners: [] }));
    entry.handlers.set(type, handler);
    const { listeners } = entry;
    return {
      on: (event, listener) => {
        checkListener(event, listener);
        const item = { event, listener: listener as WorkerEventListener<WorkerEventName> };
        listeners.push(item);
        return () => {
          const at = listeners.indexOf(item);
          if (at >= 0) listeners.splice(at, 1);
        };
      },
    };
  }

  /** A worker's run rejected: remembered (health, `work` refuses), logged, and reported. */
  #stopped(entry: Running, queue: string, err: unknown): void {
    const error =
      err instanceof QError ? err : new QError(QErrorCode.INVALID_STATE, `worker of queue "${queue}" stopped: ${String(err)}`, { cause: err });
    entry.error = error;
    this.#logger.error(
      { ...errorFields(error), queue },
      `the worker of queue "${queue}" stopped and is not restarted: its jobs wait until a new JobQueue serves the queue`,
    );
    try {
      this.#onStopped?.({ queue, error });
    } catch (cbErr) {
      this.#logger.warn(errorFields(cbErr), 'onWorkerStopped callback threw');
    }
  }

  /** Records an enqueue of `n` jobs to `queue`: counted and warned about (once) when nobody serves it. */
  enqueued(queue: string, n: number): void {
    if (n === 0 || this.#workers.has(queue) || this.#declared.has(queue)) return;
    this.#unserved.add(n, { queue });
    if (this.#warned.has(queue)) return;
    this.#warned.add(queue);
    this.#logger.warn(
      { queue },
      `enqueued to queue "${queue}", which no worker of this process serves: call work(type, handler, { queue }) or, if another process serves it, declare it in JobQueue.open's queues option`,
    );
  }

  /**
   * Stops every worker claiming, waits up to `timeoutMs` for jobs in flight to finish and their
   * outcomes to be recorded (later ones go back to the queue, see `Worker.wait`). Idempotent.
   */
  close(timeoutMs: number): Promise<void> {
    this.#closing ??= (async () => {
      const all = [...this.#workers.values()];
      for (const w of all) w.abort.abort();
      await Promise.all(all.map((w) => w.run));
      await Promise.all(all.map((w) => w.worker.wait(timeoutMs)));
    })();
    return this.#closing;
  }
}

/** The events of `worker`, without its run and wait (the queue runs and drains it). */
function events(worker: Worker): WorkerEventSource {
  return { on: (event, listener) => worker.on(event, listener) };
}

/** Whether two lists of limits are the same rules (functions compared by identity). */
function sameLimits(a: readonly GroupLimit[], b: readonly GroupLimit[] | undefined): boolean {
  if (b === undefined || a.length !== b.length) return a.length === 0 && (b === undefined || b.length === 0);
  return a.every((r, i) => {
    const o = b[i];
    return (
      o !== undefined &&
      r.queue === o.queue &&
      r.type === o.type &&
      r.concurrency === o.concurrency &&
      r.rate?.limit === o.rate?.limit &&
      r.rate?.windowMs === o.rate?.windowMs
    );
  });
}
