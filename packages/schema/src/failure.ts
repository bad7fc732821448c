// A worker, runner or quota client that keeps retrying an error no retry can fix looks alive
// while doing nothing (a read-only role made `Worker.run()` loop silently forever). Every
// long-running loop of q sorts its failures with this one classifier: persistent ones are logged at
// error level at once and, after a bounded number of identical ones, stop the loop with that
// error; transient ones (a failover, a lost connection, a serialization failure) keep being
// retried with backoff.

/** How a failure of a database call should be treated by a loop that retries. */
export type FailureKind = 'persistent' | 'transient';

/** What {@link classifyFailure} found. */
export interface FailureClass {
  /** `persistent`: retrying the same call cannot succeed until an operator acts. */
  kind: FailureKind;
  /** The SQLSTATE found on the error or its causes, if any. */
  sqlState?: string;
  /** A short, stable description of the cause (never the server's message: it can quote values). */
  reason: string;
}

// Exact SQLSTATEs no retry fixes. Permission, missing objects, a read-only server or role,
// and prepared statements a transaction pooler lost or mixed up.
const PERSISTENT: Readonly<Record<string, string>> = {
  '42501': 'permission denied (missing grant)',
  '42P01': 'undefined table (schema not migrated, or the wrong schema)',
  '42883': 'undefined function (schema not migrated, or the wrong schema)',
  '3F000': 'schema does not exist',
  '25006': 'read-only transaction (read-only role, replica or default_transaction_read_only)',
  '26000': 'prepared statement does not exist (transaction pooler: use pooler: "transaction")',
  '42P05': 'prepared statement already exists (transaction pooler: use pooler: "transaction")',
  '28000': 'invalid authorization',
  '28P01': 'password authentication failed',
  '3D000': 'database does not exist',
  '0A000': 'feature not supported',
};

// Classes and SQLSTATEs a retry can fix: connection exceptions (08), serialization and deadlock
// (40), insufficient resources (53: too many connections, out of memory), operator intervention
// (57: admin shutdown, crash shutdown, cannot connect now, statement or lock timeouts), lock not
// available (55P03), and PgBouncer's own errors (08P01 protocol violation carries its messages).
const TRANSIENT_CLASSES = ['08', '40', '53', '57', '58'];
const TRANSIENT: Readonly<Record<string, string>> = {
  '55P03': 'lock not available',
  '55006': 'object in use',
  '25P03': 'idle-in-transaction timeout',
};
const TRANSIENT_NODE = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'ENOTFOUND']);

/**
 * Sorts a failure of a database call (a `pg` error, a `QError` wrapping one as its `cause`, a
 * socket error) into `persistent` or `transient`. Anything unrecognised is `transient`: stopping
 * a loop on an unknown error would turn a blip into an outage; an unknown error that repeats is
 * still logged at each occurrence by the loops.
 */
export function classifyFailure(err: unknown): FailureClass {
  for (let e: unknown = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code !== 'string') continue;
    if (/^[0-9A-Z]{5}$/.test(code)) {
      const persistent = PERSISTENT[code];
      if (persistent) return { kind: 'persistent', sqlState: code, reason: persistent };
      const transient = TRANSIENT[code];
      if (transient) return { kind: 'transient', sqlState: code, reason: transient };
      if (TRANSIENT_CLASSES.includes(code.slice(0, 2)))
        return { kind: 'transient', sqlState: code, reason: `SQLSTATE class ${code.slice(0, 2)}` };
      return { kind: 'transient', sqlState: code, reason: 'unrecognised SQLSTATE' };
    }
    if (TRANSIENT_NODE.has(code)) return { kind: 'transient', reason: `socket error ${code}` };
  }
  return { kind: 'transient', reason: 'connection or unknown error' };
}

/** Options of {@link FailureTracker}. */
export interface FailureTrackerOptions {
  /** Identical persistent failures in a row after which {@link FailureTracker.observe} says stop. Default 5. */
  maxPersistent?: number;
}

/** What {@link FailureTracker.observe} decided about one failure. */
export interface FailureVerdict extends FailureClass {
  /** Identical failures in a row so far, this one included. */
  count: number;
  /** True when the loop should stop with this error now. */
  stop: boolean;
  /** True the first time this failure is seen in a row (log it at error level once at least). */
  first: boolean;
}

/** Default of {@link FailureTrackerOptions.maxPersistent}. */
export const DEFAULT_MAX_PERSISTENT_FAILURES = 5;

/**
 * Counts identical failures in a row (same kind and SQLSTATE/reason); any success resets it. A
 * loop calls {@link FailureTracker.observe} on each failure and {@link FailureTracker.success} on
 * each success, and stops when the verdict says so. Only persistent failures ever stop a loop.
 */
export class FailureTracker {
  readonly #max: number;
  #key: string | undefined;
  #count = 0;

  constructor(opts: FailureTrackerOptions = {}) {
    const max = opts.maxPersistent ?? DEFAULT_MAX_PERSISTENT_FAILURES;
    if (!Number.isInteger(max) || max < 1) throw new RangeError('maxPersistent must be a positive integer');
    this.#max = max;
  }

  /** Records one failure and returns what to do about it. */
  observe(err: unknown): FailureVerdict {
    const c = classifyFailure(err);
    const key = `${c.kind}/${c.sqlState ?? c.reason}`;
    this.#count = key === this.#key ? this.#count + 1 : 1;
    this.#key = key;
    return { ...c, count: this.#count, first: this.#count === 1, stop: c.kind === 'persistent' && this.#count >= this.#max };
  }

  /** A call succeeded: the run of identical failures is over. */
  success(): void {
    this.#key = undefined;
    this.#count = 0;
  }
}
