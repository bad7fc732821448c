// JobStore.waitFor: every wait of a store shares one LISTEN connection on the "finished" channel
// and one read of the waited jobs per wake-up. Wake-ups: a notification (any statement that
// archived jobs of this schema, see migration 0009), the listener (re)connecting, a new waiter,
// and a poll: every POLL_MS while the listener is down or cannot exist (a transaction pooler),
// every SAFETY_POLL_MS while it is up (a notification lost with a connection cut is caught there).
import { QError, QErrorCode, invalidArgument } from '@q/schema';
import { toJob, type JobRow } from './row.js';
import type { JobListener, JobListenerHandlers } from './listener.js';
import type { Job, JobStatus } from './types.js';
import { checkUuid } from './validate.js';
import { closedError } from './ops/context.js';

/** Options of {@link JobStore.waitFor}. */
export interface WaitForOptions {
  /** Give up after this many milliseconds: the wait rejects with a `QError` of code `TIMEOUT`. None by default. */
  timeoutMs?: number;
  /** Stops waiting when aborted: the wait rejects with the signal's reason. */
  signal?: AbortSignal;
}

/** The statuses a job ends in: {@link JobStore.waitFor} resolves once the job has one. */
export const FINISHED_STATUSES: readonly JobStatus[] = ['succeeded', 'dead_letter', 'cancelled'];

const POLL_MS = 1_000;
const SAFETY_POLL_MS = 10_000;
/** The listener stays up this long after the last wait ends, so waits one after another share it. */
const IDLE_CLOSE_MS = 30_000;
/** setTimeout's longest delay. */
const MAX_TIMEOUT_MS = 2_147_483_647;

interface Waiter {
  uuid: string;
  resolve(job: Job): void;
  reject(err: unknown): void;
}

/** What the waiters need of their store. */
export interface FinishWaitersHost {
  /** Reads the current rows of these jobs (live or archived; none for a job that does not exist). */
  read(uuids: readonly string[]): Promise<JobRow[]>;
  /** Opens a listener on the finished channel (never connecting where the store cannot listen). */
  listen(handlers: JobListenerHandlers): JobListener;
  /** Whether the store can listen at all (false behind a transaction pooler without `listenDsn`). */
  readonly notifies: boolean;
}

/** The waits of one store (see the file comment). */
export class FinishWaiters {
  readonly #host: FinishWaitersHost;
  readonly #waiting = new Map<string, Set<Waiter>>();
  #listener: JobListener | undefined;
  #pollTimer: NodeJS.Timeout | undefined;
  #idleTimer: NodeJS.Timeout | undefined;
  #reading: Promise<void> | undefined;
  #again = false;
  #closed = false;

  constructor(host: FinishWaitersHost) {
    this.#host = host;
  }

  /** {@link JobStore.waitFor}: checks the input, then waits. */
  wait(uuid: string, opts: WaitForOptions = {}): Promise<Job> {
    const key = checkUuid(uuid, 'waitFor: uuid').toLowerCase();
    if (typeof opts !== 'object' || opts === null) throw invalidArgument('waitFor: options must be an object');
    const { timeoutMs, signal } = opts;
    if (timeoutMs !== undefined && (!Number.isInteger(timeoutMs) || timeoutMs < 0 || timeoutMs > MAX_TIMEOUT_MS)) {
      throw invalidArgument(`waitFor: timeoutMs must be an integer between 0 and ${MAX_TIMEOUT_MS}`);
    }
    if (signal !== undefined && !(signal instanceof AbortSignal)) throw invalidArgument('waitFor: signal must be an AbortSignal');
    if (this.#closed) return Promise.reject(closedError());
    if (signal?.aborted) return Promise.reject(signal.reason);

    return new Promise<Job>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const onAbort = () => settle(() => reject(signal?.reason));
      const settle = (fn: () => void) => {
        if (!this.#remove(waiter)) return;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        fn();
      };
      const waiter: Waiter = {
        uuid: key,
        resolve: (job) => settle(() => resolve(job)),
        reject: (err) => settle(() => reject(err)),
      };
      if (timeoutMs !== undefined) {
        timer = setTimeout(
          () => settle(() => reject(new QError(QErrorCode.TIMEOUT, `waitFor: job ${key} did not finish within ${timeoutMs} ms`))),
          timeoutMs,
        );
      }
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#add(waiter);
      this.#wake();
    });
  }

  /** Rejects every wait (`CLOSED`) and closes the listener. */
  async close(): Promise<void> {
    this.#closed = true;
    for (const set of [...this.#waiting.values()]) for (const w of [...set]) w.reject(closedError());
    clearTimeout(this.#pollTimer);
    clearTimeout(this.#idleTimer);
    await this.#stopListening();
  }

  #add(w: Waiter): void {
    clearTimeout(this.#idleTimer);
    this.#idleTimer = undefined;
    let set = this.#waiting.get(w.uuid);
    if (!set) this.#waiting.set(w.uuid, (set = new Set()));
    set.add(w);
    if (!this.#listener && this.#host.notifies) {
      this.#listener = this.#host.listen({
        onNotification: () => undefined,
        onFinished: () => this.#wake(),
        // Notifications may have been missed while it was down.
        onConnected: () => {
          this.#wake();
          this.#schedulePoll();
        },
        onError: () => this.#schedulePoll(),
      });
      void this.#listener.start();
    }
    this.#schedulePoll();
  }

  /** Removes a waiter; false when it had settled already. */
  #remove(w: Waiter): boolean {
    const set = this.#waiting.get(w.uuid);
    if (!set?.delete(w)) return false;
    if (set.size === 0) this.#waiting.delete(w.uuid);
    if (this.#waiting.size === 0) {
      clearTimeout(this.#pollTimer);
      this.#pollTimer = undefined;
      if (this.#listener && !this.#closed) {
        clearTimeout(this.#idleTimer);
        this.#idleTimer = setTimeout(() => void this.#stopListening(), IDLE_CLOSE_MS);
        this.#idleTimer.unref();
      }
    }
    return true;
  }

  async #stopListening(): Promise<void> {
    const listener = this.#listener;
    this.#listener = undefined;
    await listener?.close();
  }

  #schedulePoll(): void {
    clearTimeout(this.#pollTimer);
    if (this.#waiting.size === 0 || this.#closed) return;
    const ms = this.#listener?.connected ? SAFETY_POLL_MS : POLL_MS;
    this.#pollTimer = setTimeout(() => {
      this.#wake();
      this.#schedulePoll();
    }, ms);
  }

  /** Reads the waited jobs, once at a time: a wake-up during a read asks for one more read after it. */
  #wake(): void {
    if (this.#reading) {
      this.#again = true;
      return;
    }
    this.#reading = this.#read().finally(() => {
      this.#reading = undefined;
      if (this.#again && this.#waiting.size > 0) {
        this.#again = false;
        this.#wake();
      }
    });
  }

  async #read(): Promise<void> {
    this.#again = false;
    const uuids = [...this.#waiting.keys()];
    if (uuids.length === 0 || this.#closed) return;
    let rows: JobRow[];
    try {
      rows = await this.#host.read(uuids);
    } catch (err) {
      // A lost connection is waited out (the next poll reads again); anything else (a revoked
      // grant, a dropped schema) will not mend by itself, and every wait hears of it.
      if (err instanceof QError && err.code === QErrorCode.CONNECTION) return;
      for (const set of [...this.#waiting.values()]) for (const w of [...set]) w.reject(err);
      return;
    }
    const found = new Map<string, Job>();
    for (const row of rows) {
      const job = toJob(row);
      found.set(job.uuid.toLowerCase(), job);
    }
    for (const uuid of uuids) {
      const job = found.get(uuid);
      const set = this.#waiting.get(uuid);
      if (!set) continue;
      if (job === undefined) {
        for (const w of [...set]) w.reject(new QError(QErrorCode.NOT_FOUND, `waitFor: no job has uuid ${uuid} (never enqueued, or purged)`));
      } else if (FINISHED_STATUSES.includes(job.status)) {
        for (const w of [...set]) w.resolve(job);
      }
    }
  }
}
