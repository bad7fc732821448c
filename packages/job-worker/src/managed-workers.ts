import type { Counter, Tracer } from '@opentelemetry/api';
import type { JobMetrics } from '@q/otel';
import { QError, QErrorCode, checkName, invalidArgument } from '@q/schema';
import type { JobStore } from '@q/store/jobs';
import { errorFields, type Logger } from './logger.js';
import { Worker, type HandlerFunc, type WorkerOptions } from './worker.js';

/** Options of `JobQueue.work`. */
export interface WorkOptions {
  /**
   * Jobs of this queue run at once. The first `work` call on a queue sets it (one worker serves
   * every type of a queue); a later call with a different value is `INVALID_ARGUMENT`. Default 10.
   */
  concurrency?: number;
  /** The queue to serve. Default `default`, the queue `enqueue` uses when none is given. */
  queue?: string;
}

/** Worker settings every worker of an opened queue shares (see {@link WorkerOptions}). */
export type ManagedWorkerOptions = Omit<WorkerOptions, 'queues' | 'concurrency' | 'logger' | 'metrics' | 'tracer' | 'workerId'>;

/** Default `concurrency` of `JobQueue.work`. */
export const DEFAULT_WORK_CONCURRENCY = 10;

interface Running {
  worker: Worker;
  concurrency: number;
  abort: AbortController;
  run: Promise<void>;
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
    },
  ) {
    this.#store = store;
    this.#logger = opts.logger;
    this.#metrics = opts.metrics;
    this.#tracer = opts.tracer;
    this.#defaults = opts.defaults;
    this.#declared = new Set(opts.declared);
    this.#unserved = opts.unserved;
  }

  /** Serves jobs of `type` on `opts.queue` with `handler`, starting that queue's worker if needed. */
  work(type: string, handler: HandlerFunc, opts: WorkOptions = {}): void {
    if (this.#closing) throw new QError(QErrorCode.CLOSED, 'work: the queue is closed');
    checkName('work', 'type', type);
    if (typeof handler !== 'function') throw invalidArgument('work: handler must be a function');
    if (typeof opts !== 'object' || opts === null) throw invalidArgument('work: options must be an object');
    const queue = opts.queue === undefined ? 'default' : checkName('work', 'queue', opts.queue);
    const concurrency = opts.concurrency ?? DEFAULT_WORK_CONCURRENCY;
    if (!Number.isInteger(concurrency) || concurrency < 1) throw invalidArgument('work: concurrency must be a positive integer');
    const existing = this.#workers.get(queue);
    if (existing) {
      if (opts.concurrency !== undefined && opts.concurrency !== existing.concurrency) {
        throw invalidArgument(`work: queue "${queue}" already runs with concurrency ${existing.concurrency}`);
      }
      existing.worker.register(type, handler);
      return;
    }
    const worker = new Worker(this.#store, {
      ...this.#defaults,
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
    const run = new Promise<void>((resolve) => setImmediate(resolve)).then(() =>
      worker.run(abort.signal).catch((err: unknown) => {
        this.#logger.error({ ...errorFields(err), queue }, 'worker stopped on an error');
      }),
    );
    this.#workers.set(queue, { worker, concurrency, abort, run });
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
