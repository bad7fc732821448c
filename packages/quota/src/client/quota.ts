import { hostname } from 'node:os';
import { QError, QErrorCode, invalidArgument, isQError, migrate, validateDsn, type FailureVerdict } from '@q/schema';
import { FailureTracker, databaseError } from '@q/schema/internal';
import type pg from 'pg';
import { closedError } from '../errors.js';
import { errorFields, silentLogger, type Logger } from '../logger.js';
import type { OpenOptions } from '../options.js';
import { QuotaStore, checkStoreOptions } from '../store.js';
import { MAX_INT4, checkInt, checkLogger, checkName, checkSignal } from '../validate.js';
import { Batcher, type BatchOutcome } from './batcher.js';
import { Holders, type Holder } from './holders.js';
import { ReleaseQueue } from './releases.js';

/** Gives an acquired slot back. Idempotent; resolves once the release is flushed and never rejects. */
export type Release = () => Promise<void>;

/** Options of {@link createQuota}: exactly one of `dsn` and `pool`. */
export interface QuotaOptions extends OpenOptions {
  /** Postgres URL; the client opens (and closes) its own pool. Choose the schema with `schema`. */
  dsn?: string;
  /** A pool you own and close yourself. */
  pool?: pg.Pool;
  /**
   * Lease of the client's holders in ms, renewed every `ttlMs / 3`. A crashed process's slots
   * count until its lease lapses. An integer from 1 000 (shorter leases lapse under ordinary
   * statement and event-loop delays, and a lapsed holder's grants stop counting while still in
   * use) to 2 147 483 647 (Node's longest timer). Default 30 000.
   */
  ttlMs?: number;
  /**
   * How often expired admissions and idle rows are reaped (`reapQuota`), checked at each renewal.
   * An integer from 1 to 2 147 483 647. Default `max(ttlMs, 1000)`.
   */
  reapIntervalMs?: number;
  /** Rows of each kind one reap deletes at most. Default 1000. */
  reapLimit?: number;
  /** Start of holder names (`<prefix>-<8 hex>`). Default the host name. */
  holderPrefix?: string;
  /** Structured logger (pino-compatible). Default silent. */
  logger?: Logger;
  /**
   * Called for every failed statement of the client (acquire, admit, reap) with its class:
   * persistent ones (permission denied, undefined table or function, read-only, prepared
   * statements a pooler lost) are also logged at error level at once.
   */
  onError?: (failure: QuotaFailure) => void;
  /**
   * Identical persistent failures in a row after which the client stops: it closes, and every
   * call rejects with that error instead of retrying (and churning holders) forever. Default 5.
   */
  maxPersistentFailures?: number;
}

/** What a {@link Quota} client reports through `onError`. */
export interface QuotaFailure {
  operation: 'acquire' | 'admit' | 'reap';
  error: QError;
  kind: FailureVerdict['kind'];
  sqlState?: string;
  /** Identical failures in a row so far, this one included. */
  count: number;
  /** True when this failure stopped the client. */
  fatal: boolean;
}

const DEFAULT_TTL_MS = 30_000;
/**
 * Shortest holder lease: renewals every third of it must land before it ends, through pool
 * waits, slow statements and event-loop stalls; at 100 ms, holders lapsed between renewals and
 * other clients were granted slots still in use.
 */
export const MIN_TTL_MS = 1_000;
/** Longest delay a Node timer takes; a longer one fires after 1 ms, over and over. */
export const MAX_TIMER_MS = 2_147_483_647;

/**
 * Creates a {@link Quota} client on `opts.dsn` (its own pool; the `quota` module is migrated
 * unless `migrate: false`) or on `opts.pool` (yours; migrated too unless `migrate: false`).
 */
export async function createQuota(opts: QuotaOptions): Promise<Quota> {
  if (!opts || typeof opts !== 'object') throw invalidArgument('createQuota: options must be an object');
  if ((opts.dsn === undefined) === (opts.pool === undefined)) throw invalidArgument('createQuota: exactly one of dsn and pool must be given');
  // Every option is checked before anything migrates or a pool opens: a refusal leaves nothing behind.
  const ttlMs = checkInt('ttlMs', opts.ttlMs ?? DEFAULT_TTL_MS, MIN_TTL_MS, MAX_TIMER_MS);
  const reapIntervalMs = checkInt('reapIntervalMs', opts.reapIntervalMs ?? Math.max(ttlMs, 1000), 1, MAX_TIMER_MS);
  const reapLimit = checkInt('reapLimit', opts.reapLimit ?? 1000, 1, MAX_INT4);
  const holderPrefix = checkName('holderPrefix', opts.holderPrefix ?? safeHostname());
  const maxPersistentFailures = checkInt('maxPersistentFailures', opts.maxPersistentFailures ?? 5, 1, MAX_INT4);
  if (opts.onError !== undefined && typeof opts.onError !== 'function') throw invalidArgument('createQuota: onError must be a function');
  checkLogger('createQuota', opts.logger);
  if (opts.pool !== undefined && (typeof opts.pool !== 'object' || opts.pool === null || typeof opts.pool.query !== 'function')) {
    throw invalidArgument('createQuota: pool must be a pg.Pool');
  }
  if (opts.dsn !== undefined) validateDsn(opts.dsn);
  checkStoreOptions('createQuota', opts);
  let store: QuotaStore;
  if (opts.pool) {
    if (opts.migrate !== false) await migrate(opts.pool, { modules: ['quota'], ...(opts.schema !== undefined ? { schema: opts.schema } : {}) });
    store = QuotaStore.fromPool(opts.pool, opts);
  } else {
    if (opts.dsn === undefined) throw invalidArgument('createQuota: exactly one of dsn and pool must be given'); // checked above; narrows the type
    store = await QuotaStore.open(opts.dsn, opts);
  }
  return new Quota(store, {
    ttlMs,
    reapIntervalMs,
    reapLimit,
    holderPrefix,
    logger: opts.logger ?? silentLogger,
    ownsStore: true,
    onError: opts.onError,
    maxPersistentFailures,
  });
}

interface Settings {
  ttlMs: number;
  reapIntervalMs: number;
  reapLimit: number;
  holderPrefix: string;
  logger: Logger;
  ownsStore: boolean;
  onError?: (failure: QuotaFailure) => void;
  maxPersistentFailures?: number;
}

/**
 * The quota client most users want: concurrency slots (`acquire`) and sliding-window rate
 * admission (`admit`), shared by every process on the database.
 *
 * It registers and renews its own holder, sends at most one statement per batching key at a
 * time (callers arriving meanwhile share the next one and are served in arrival order),
 * releases grants whose callers gave up, retires a holder on any error and registers a fresh
 * one, and reaps expired rows periodically. It never admits more than a limit.
 */
export class Quota {
  readonly #store: QuotaStore;
  readonly #settings: Settings;
  readonly #log: Logger;
  readonly #holders: Holders;
  readonly #releases: ReleaseQueue;
  // Once closing, a grant in flight is refused: close() deletes the holder, so the slot would stop
  // counting while its caller used it. (An admission in flight is spent either way: it is kept.)
  readonly #slots = new Batcher<Release | null>(() => (this.#closed ? closedError('Quota') : undefined));
  readonly #rates = new Batcher<boolean>();
  #timer: NodeJS.Timeout | undefined;
  #tick: Promise<void> | undefined;
  #upkeep: Promise<void> | undefined;
  #beatAt = performance.now();
  #lastReap = performance.now();
  #closed = false;
  #closing: Promise<void> | undefined;
  readonly #failures: FailureTracker;
  /** Set once persistent failures stopped the client: every call rejects with it. */
  #fatal: QError | undefined;

  /** @internal Use {@link createQuota}. */
  constructor(store: QuotaStore, settings: Settings) {
    this.#store = store;
    this.#settings = settings;
    this.#log = settings.logger;
    this.#holders = new Holders(store, settings.ttlMs, settings.holderPrefix, settings.logger);
    this.#releases = new ReleaseQueue(store, this.#holders, settings.logger);
    this.#failures = new FailureTracker({ maxPersistent: settings.maxPersistentFailures ?? 5 });
    this.#schedule();
  }

  /** The store underneath (for operators and tests). */
  get store(): QuotaStore {
    return this.#store;
  }

  /** Names of this client's holders not yet deleted (the current one and retired ones). */
  get holders(): string[] {
    return this.#holders.names;
  }

  /**
   * Takes one concurrency slot of `key` if fewer than `limit` are in use across all processes.
   * Returns the function that gives it back, or `null` when the key is full (it does not wait).
   * If `signal` aborts first, the promise rejects with its reason and a slot granted meanwhile is
   * released.
   */
  acquire(key: string, limit: number, signal?: AbortSignal): Promise<Release | null> {
    try {
      checkName('key', key);
      checkInt('limit', limit, 0, MAX_INT4);
      checkSignal('acquire', signal);
      if (this.#fatal) throw this.#fatal;
      if (this.#closed) throw closedError('Quota');
      signal?.throwIfAborted();
    } catch (err) {
      return Promise.reject(err);
    }
    return this.#slots.enqueue(`${limit}:${key}`, (n) => this.#acquireBatch(key, limit, n), signal);
  }

  /**
   * Admits one unit of `key` if fewer than `limit` were admitted in the trailing `windowMs`
   * (exact sliding window, database clock). If `signal` aborts first, the promise rejects with its
   * reason (an admission granted meanwhile is spent).
   */
  admit(key: string, limit: number, windowMs: number, signal?: AbortSignal): Promise<boolean> {
    try {
      checkName('key', key);
      checkInt('limit', limit, 0, MAX_INT4);
      checkInt('windowMs', windowMs, 1);
      checkSignal('admit', signal);
      if (this.#fatal) throw this.#fatal;
      if (this.#closed) throw closedError('Quota');
      signal?.throwIfAborted();
    } catch (err) {
      return Promise.reject(err);
    }
    return this.#rates.enqueue(`${limit}:${windowMs}:${key}`, (n) => this.#admitBatch(key, limit, windowMs, n), signal);
  }

  /**
   * Stops renewing and reaping, refuses new calls (`CLOSED`), lets statements in flight finish —
   * acquires in flight then reject with `CLOSED` and their slots are given back —, flushes
   * releases, deletes this client's holders (their slots stop counting at once) and closes the
   * pool it opened. Idempotent.
   */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    await this.#tick;
    await this.#upkeep;
    const closed = closedError('Quota');
    this.#slots.rejectQueued(closed);
    this.#rates.rejectQueued(closed);
    await Promise.all([this.#slots.idle(), this.#rates.idle()]);
    await this.#releases.idle();
    await this.#holders.deleteAll();
    if (this.#settings.ownsStore) await this.#store.close();
  }

  async #acquireBatch(key: string, limit: number, n: number): Promise<BatchOutcome<Release | null>> {
    let retried = false;
    for (;;) {
      // Never register a fresh holder for a client that is closing.
      if (this.#closed) throw closedError('Quota');
      let h: Holder;
      try {
        h = await this.#holders.live();
      } catch (err) {
        throw this.#failed('acquire', err); // registering the holder failed
      }
      if (h.retired) continue; // retired while we resumed: never grant on it
      this.#holders.hold(h, 1);
      let granted: number;
      try {
        granted = await this.#store.acquireQuotaSlots(h.name, key, n, limit);
      } catch (err) {
        // The grant may have committed with its reply lost: only deleting the holder frees it.
        this.#holders.retire(h, isQError(err, QErrorCode.QUOTA_HOLDER_LAPSED) ? 'lapsed' : 'acquire failed');
        this.#holders.unhold(h, 1);
        if (isQError(err, QErrorCode.QUOTA_HOLDER_LAPSED) && !retried) {
          retried = true;
          continue;
        }
        throw this.#failed('acquire', err);
      }
      this.#failures.success();
      this.#holders.hold(h, granted);
      this.#holders.unhold(h, 1);
      return {
        granted,
        grant: () => this.#releaseOnce(h, key),
        refusal: null,
        unused: (count) => void this.#releases.enqueue(h, key, count),
      };
    }
  }

  async #admitBatch(key: string, limit: number, windowMs: number, n: number): Promise<BatchOutcome<boolean>> {
    let granted: number;
    try {
      granted = await this.#store.admitQuota(key, n, limit, windowMs);
    } catch (err) {
      throw this.#failed('admit', err);
    }
    this.#failures.success();
    return { granted, grant: () => true, refusal: false, unused: () => undefined };
  }

  #releaseOnce(h: Holder, key: string): Release {
    let released: Promise<void> | undefined;
    // Once closing, the holder is about to be deleted, which frees the slot anyway.
    return () => (released ??= this.#closing ? Promise.resolve() : this.#releases.enqueue(h, key, 1));
  }

  /**
   * Renewals run at a fixed rate, every third of the TTL counted from the start of the previous
   * one, so a slow renewal does not push the next one back; reaping runs beside them, never in
   * their way.
   */
  #schedule(): void {
    if (this.#closed) return;
    const every = Math.floor(this.#settings.ttlMs / 3);
    const delay = Math.max(0, this.#beatAt + every - performance.now());
    this.#timer = setTimeout(() => {
      this.#beatAt = performance.now();
      this.#tick = this.#heartbeat().finally(() => {
        this.#tick = undefined;
        this.#schedule();
      });
    }, delay);
    // Background upkeep never keeps a process alive on its own.
    this.#timer.unref();
  }

  async #heartbeat(): Promise<void> {
    try {
      await this.#holders.heartbeat();
    } catch (err) {
      this.#log.warn(errorFields(err), 'quota heartbeat failed');
    }
    if (!this.#closed) this.#upkeep ??= this.#reap().finally(() => (this.#upkeep = undefined));
  }

  /** Reaps other processes' holders that lapsed more than a TTL ago, and every `reapIntervalMs` expired rows. */
  async #reap(): Promise<void> {
    try {
      await this.#holders.reap();
    } catch (err) {
      this.#log.warn(errorFields(err), 'quota holder reap failed');
    }
    if (this.#closed || performance.now() - this.#lastReap < this.#settings.reapIntervalMs) return;
    this.#lastReap = performance.now();
    try {
      const changed = await this.#store.reapQuota(this.#settings.reapLimit);
      if (changed > 0) this.#log.debug({ changed }, 'quota reaped');
    } catch (err) {
      this.#failed('reap', err);
    }
  }

  /**
   * Classifies a failed statement: logs it (error level when persistent), reports it, and stops
   * the client after `maxPersistentFailures` identical persistent ones. Returns the error to throw.
   */
  #failed(operation: QuotaFailure['operation'], err: unknown): unknown {
    if (this.#closed && !this.#fatal) return err;
    const v = this.#failures.observe(err);
    const error = err instanceof QError ? err : databaseError(operation, err);
    const fatal = v.stop && !this.#fatal;
    const fields = { ...errorFields(error), operation, kind: v.kind, reason: v.reason, sqlstate: v.sqlState, count: v.count };
    if (v.kind === 'persistent') this.#log.error(fields, fatal ? 'persistent quota failure, client stopping' : 'persistent quota failure');
    else this.#log.warn(fields, `quota ${operation} failed`);
    try {
      this.#settings.onError?.({ operation, error, kind: v.kind, sqlState: v.sqlState, count: v.count, fatal });
    } catch (cbErr) {
      this.#log.warn(errorFields(cbErr), 'onError callback threw');
    }
    if (!fatal) return err;
    this.#fatal = new QError(
      error.code === QErrorCode.CONNECTION ? QErrorCode.CONFIG : error.code,
      `quota client stopped after ${v.count} identical ${operation} failures: ${v.reason}: ${error.message}`,
      { cause: error },
    );
    void this.close().catch(() => undefined);
    return this.#fatal;
  }
}

function safeHostname(): string {
  try {
    return hostname() || 'quota';
  } catch {
    return 'quota';
  }
}
