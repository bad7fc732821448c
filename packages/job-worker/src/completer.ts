import { QError, QErrorCode, classifyFailure, isQError } from '@q/schema';
import type { JobOutcome, JobStore } from '@q/store/jobs';
import { errorFields, type Logger } from './logger.js';
import { sleep } from './timers.js';

const MAX_BATCH = 1_000;
/** First delay before an outcome write is tried again after a transient failure; it doubles. */
const RETRY_MIN_MS = 25;
/** Longest delay between two tries of an outcome write. */
const RETRY_MAX_MS = 1_000;

/**
 * An outcome whose write hit `statement_timeout` this many times in a row, and that carries at
 * least {@link LARGE_OUTCOME_CHARS} of result, timeline or error, cannot be written in time: it is
 * replaced by its submitter's `refused` fallback (a failed attempt saying why, without the value).
 */
const TIMEOUTS_BEFORE_REFUSAL = 2;
/** See {@link TIMEOUTS_BEFORE_REFUSAL}: a small outcome that times out waits on a lock, not on its size. */
const LARGE_OUTCOME_CHARS = 1 << 20;

/**
 * Where the completer reports outcome-write failures (the worker's failure watch, as operation
 * `complete`): `failed` returns how long to wait before trying again, or null when the worker
 * stops (the outcome is then dropped).
 */
export interface OutcomeFailures {
  failed(err: unknown): number | null;
  succeeded(): void;
}

/** An outcome waiting to be written, and how to tell its submitter the result. */
export interface PendingOutcome {
  outcome: JobOutcome;
  /** False once the lease is known lost: the outcome is then dropped (reported not written). */
  held: () => boolean;
  /** Told once whether the outcome was written; `fenced`: the store refused it for its lease token. */
  resolve: (written: boolean, fenced?: boolean) => void;
  /**
   * A write of this outcome failed without a reply (it may have committed): a later write that
   * finds the lease gone while it is still held by this process's clock means that one did.
   */
  maybeWritten?: boolean;
  /**
   * What to write instead when the store refuses this outcome with `INVALID_ARGUMENT` (`problem`
   * is its message), tried once; absent: the outcome is not written.
   */
  refused?: ((problem: string) => JobOutcome) | undefined;
}

/**
 * Batches attempt outcomes: one write of its own is in flight at a time, and everything
 * submitted meanwhile goes into the next statement. While `deferred()` holds, it writes nothing
 * itself: the worker's claim loop is about to {@link Completer.take} the outcomes and write them
 * in its complete-and-claim round trip; the worker calls {@link Completer.kick} when that stops
 * being so.
 *
 * Every write is fenced by its lease token, so a write that failed on a transient error
 * (connection loss, a lock timeout, …) is tried again with backoff for as long as its lease is
 * held — the worker keeps renewing it meanwhile — and dropped once the lease is known lost. A
 * batch that fails on any other error is retried one outcome at a time, so one bad row cannot
 * lose the others; one the store refuses as `INVALID_ARGUMENT` is replaced by its submitter's
 * `refused` fallback (a failed attempt saying why). An outcome whose lease is known lost is never
 * sent, and a statement never carries two outcomes of one job. Writes never use a caller's abort
 * signal: a draining worker still records what finished.
 */
export class Completer {
  readonly #store: JobStore;
  readonly #logger: Logger;
  readonly #deferred: () => boolean;
  #queue: PendingOutcome[] = [];
  #flushing = false;

  readonly #failures: OutcomeFailures | undefined;

  constructor(store: JobStore, logger: Logger, deferred: () => boolean = () => false, failures?: OutcomeFailures) {
    this.#store = store;
    this.#logger = logger;
    this.#deferred = deferred;
    this.#failures = failures;
  }

  /** A write of outcomes succeeded (by the completer or the claim loop's round trip). */
  succeeded(): void {
    this.#failures?.succeeded();
  }

  /** Queues an outcome; resolves true once written, false when fenced, dropped or not writable. */
  submit(outcome: JobOutcome, held: () => boolean = () => true, refused?: (problem: string) => JobOutcome): Promise<boolean> {
    return new Promise((resolve) => this.submitWith(outcome, held, resolve, refused));
  }

  /**
   * {@link submit} with a callback instead of a promise: `done` is called once, with true once
   * written, false when fenced, dropped or not writable (should it throw, the error is logged and
   * every other outcome of its batch is still told). A worker records every attempt this way: an
   * outcome waits a round trip or two to be written, and a promise (with the suspended functions
   * awaiting it) per waiting outcome was a measurable part of a short job's garbage.
   */
  submitWith(
    outcome: JobOutcome,
    held: () => boolean,
    done: (written: boolean, fenced?: boolean) => void,
    refused?: (problem: string) => JobOutcome,
  ): void {
    this.#queue.push({ outcome, held, resolve: done, refused });
    this.kick();
  }

  /** Outcomes waiting (not being written). */
  get pending(): number {
    return this.#queue.length;
  }

  /** Starts writing what waits, unless deferred or already writing. */
  kick(): void {
    if (this.#flushing || this.#queue.length === 0 || this.#deferred()) return;
    this.#flushing = true;
    void this.#flush();
  }

  /**
   * Hands up to `max` waiting outcomes to a caller that writes them in one statement; it must
   * then {@link settle} or {@link restore} them. Outcomes whose lease is lost are dropped here.
   */
  take(max = MAX_BATCH): PendingOutcome[] {
    const batch: PendingOutcome[] = [];
    const ids = new Set<number>();
    const rest: PendingOutcome[] = [];
    for (const p of this.#queue) {
      if (!p.held()) this.#report(p, false);
      else if (batch.length < max && !ids.has(p.outcome.id)) {
        ids.add(p.outcome.id);
        batch.push(p);
      } else rest.push(p);
    }
    this.#queue = rest;
    return batch;
  }

  /** Reports the caller's write of taken outcomes (`written[i]` for `taken[i]`). */
  settle(taken: readonly PendingOutcome[], written: readonly boolean[]): void {
    taken.forEach((p, i) => this.#report(p, written[i] === true, written[i] !== true));
  }

  /**
   * Gives back taken outcomes whose write failed: they are written now, on their own (retried if
   * need be). `replyLost`: the failed statement may have committed them.
   */
  restore(taken: readonly PendingOutcome[], replyLost = false): void {
    if (taken.length === 0) return;
    if (replyLost) for (const p of taken) p.maybeWritten = true;
    void this.#write([...taken]);
  }

  /**
   * Tells `p`'s submitter whether its outcome was written. A submitter's callback that throws must
   * not leave the rest of its batch untold, nor the completer's state half updated: its error is
   * logged and the others go on.
   */
  #report(p: PendingOutcome, written: boolean, fenced = false): void {
    try {
      p.resolve(written, fenced);
    } catch (err) {
      try {
        this.#logger.error({ ...errorFields(err), job_id: p.outcome.id }, 'job outcome callback failed');
      } catch {
        // The logger itself fails: the error is raised outside, as an uncaught exception.
        queueMicrotask(() => {
          throw err;
        });
      }
    }
  }

  /**
   * Whether an outcome found fenced was in fact written by an earlier write whose reply was lost:
   * its lease is still held by this process's clock (given up a guard period before it could
   * lapse, so nobody reaped it), so the only write that can have taken it is that one.
   */
  #committedBefore(p: PendingOutcome): boolean {
    if (p.maybeWritten !== true || !p.held()) return false;
    this.#logger.info({ job_id: p.outcome.id }, 'job outcome found written by a write whose reply was lost');
    return true;
  }

  async #flush(): Promise<void> {
    // The flag is cleared in the same tick as the final check, so a submit can never slip in
    // between and wait for a flush that is not coming (a deferred one is kicked by the worker).
    try {
      while (this.#queue.length > 0 && !this.#deferred()) {
        const batch = this.take();
        if (batch.length > 0) await this.#write(batch);
      }
    } finally {
      this.#flushing = false;
    }
  }

  async #write(batch: PendingOutcome[]): Promise<void> {
    let timeouts = 0;
    for (let attempt = 0; ; attempt++) {
      batch = batch.filter((p) => p.held() || (this.#report(p, false), false));
      if (batch.length === 0) return;
      try {
        const written = await this.#store.complete(batch.map((p) => p.outcome));
        this.#failures?.succeeded();
        batch.forEach((p, i) => {
          const ok = written[i] === true || this.#committedBefore(p);
          this.#report(p, ok, !ok);
        });
        return;
      } catch (err) {
        if (replyLost(err)) for (const p of batch) p.maybeWritten = true;
        timeouts = isStatementTimeout(err) ? timeouts + 1 : 0;
        if (timeouts > 0 && batch.length > 1) {
          // One large outcome may be what takes the statement past the timeout: alone, the others fit.
          await this.#writeOneByOne(batch, err);
          return;
        }
        const [p] = batch;
        if (p && timeouts >= TIMEOUTS_BEFORE_REFUSAL && p.refused && outcomeChars(p.outcome) >= LARGE_OUTCOME_CHARS) {
          // Retried, it would time out again while holding the row lock the lease renewal waits
          // for, until the lease lapsed and the handler ran again: the attempt ends as a failure.
          const problem = `its write exceeded statement_timeout ${timeouts} times (${(outcomeChars(p.outcome) / 2 ** 20).toFixed(1)} MiB)`;
          this.#logger.error(
            { ...errorFields(err), job_id: p.outcome.id },
            'job outcome too large to write within statement_timeout, recording a failed attempt instead',
          );
          await this.#write([{ outcome: p.refused(problem), held: p.held, resolve: p.resolve }]);
          return;
        }
        // Persistent (a revoked grant, a missing table: however the store wrapped it), classified
        // like a claim failure: loud and, repeated, it stops the worker; retried meanwhile (the
        // lease is kept renewed). Never retried silently for as long as the lease holds.
        if (p && this.#failures && classifyFailure(err).kind === 'persistent') {
          const retryMs = this.#failures.failed(err);
          if (retryMs === null) {
            // The worker stops: these outcomes are not recorded (their leases lapse unrenewed).
            for (const q of batch) this.#report(q, false);
            return;
          }
          await sleep(retryMs);
          continue;
        }
        if (!isTransient(err)) {
          await this.#writeOneByOne(batch, err);
          return;
        }
        if (attempt === 0) {
          if (this.#failures) this.#failures.failed(err);
          else this.#logger.warn({ ...errorFields(err), outcomes: batch.length }, 'outcome write failed, retrying while the leases are held');
        }
        await sleep(Math.min(RETRY_MIN_MS * 2 ** attempt, RETRY_MAX_MS) * (0.5 + Math.random()));
      }
    }
  }

  /** After a non-transient failure (or a timeout of a batch): each outcome on its own, so only a bad one is lost. */
  async #writeOneByOne(batch: PendingOutcome[], err: unknown): Promise<void> {
    const [p] = batch;
    if (batch.length === 1 && p) {
      if (p.refused && isQError(err, QErrorCode.INVALID_ARGUMENT)) {
        this.#logger.warn({ ...errorFields(err), job_id: p.outcome.id }, 'job outcome refused by the store, recording a failed attempt instead');
        await this.#write([{ outcome: p.refused(err.message), held: p.held, resolve: p.resolve }]);
        return;
      }
      this.#logger.error({ ...errorFields(err), job_id: p.outcome.id }, 'could not record job outcome');
      this.#report(p, false);
      return;
    }
    this.#logger.warn(errorFields(err), 'batched outcome write failed, writing one by one');
    for (const p of batch) await this.#write([p]);
  }
}

/**
 * Whether a statement failed without a reply from the server (a connection lost mid-statement):
 * it may have committed. An error with a SQLSTATE came from the server, which rolled it back.
 */
export function replyLost(err: unknown): boolean {
  return isTransient(err) && classifyFailure(err).sqlState === undefined;
}

/** Whether `err` (or its cause) is a statement cancelled by `statement_timeout`. */
function isStatementTimeout(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const { code, message } = e as { code?: unknown; message?: unknown };
    if (code === '57014') return typeof message === 'string' && /statement timeout/.test(message);
  }
  return false;
}

/** Characters of the values an outcome writes (result, timeline, error): what its write's time grows with. */
function outcomeChars(o: JobOutcome): number {
  let n = 'error' in o && typeof o.error === 'string' ? o.error.length : 0;
  if (o.steps) n += JSON.stringify(o.steps).length;
  if (o.status === 'succeeded' && o.result !== undefined) n += JSON.stringify(o.result)?.length ?? 0;
  return n;
}

// SQLSTATE classes worth another try: connection exceptions, transaction rollbacks (serialization
// failure, deadlock), insufficient resources, operator intervention (shutdown, cancel), system errors.
const TRANSIENT_CLASSES = new Set(['08', '40', '53', '57', '58']);
// Lock not available (lock_timeout), object in use.
const TRANSIENT_CODES = new Set(['55P03', '55006']);

/**
 * Whether a failed write may succeed if tried again: a connection-level failure, or a Postgres
 * error that says so; not a bad argument or a data error (those fail every time).
 */
export function isTransient(err: unknown): boolean {
  if (err instanceof QError) {
    if (err.code === QErrorCode.CONNECTION) return true;
    if (err.code === QErrorCode.INVALID_ARGUMENT || err.code === QErrorCode.CLOSED) return false;
    // Another code wrapping a driver error: that error tells.
    return err.cause !== undefined && !(err.cause instanceof QError) && isTransient(err.cause);
  }
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) {
    return TRANSIENT_CLASSES.has(code.slice(0, 2)) || TRANSIENT_CODES.has(code);
  }
  // No SQLSTATE: a socket failure (ECONNRESET, "Connection terminated unexpectedly", a connect
  // timeout) is; a driver or programming error ("Invalid string length") is not.
  if (typeof code === 'string' && /^E[A-Z]+$/.test(code)) return true;
  return err instanceof Error && /connect|terminat|timeout|timed out|socket/i.test(err.message);
}
