import { randomBytes } from 'node:crypto';
import { errorFields, type Logger } from '../logger.js';
import type { QuotaStore } from '../store.js';

/** The store calls holders need. */
export type HolderBackend = Pick<QuotaStore, 'registerQuotaHolder' | 'renewQuotaHolder' | 'deleteQuotaHolder' | 'reapQuotaHolders'>;

/** One registered holder of this process. */
export interface Holder {
  readonly name: string;
  /** Statements in flight + grants outstanding + releases not yet flushed. */
  known: number;
  /** Never used for new grants; deleted once `known` is 0. */
  retired: boolean;
  /** Its lease lapsed (renew said no): its slots no longer count anywhere. */
  lapsed: boolean;
  deleting: boolean;
  /** `performance.now()` when the last successful renewal (or the registration) was sent. */
  renewedAt: number;
}

/**
 * The holders of one `Quota` client: one current holder, registered lazily, plus retired ones
 * that still have grants outstanding. A holder is retired on any error of a statement made on
 * its behalf (its real slot count is then unknown), and deleted — which frees whatever it may
 * hold — only when nothing it holds is outstanding.
 */
export class Holders {
  readonly #store: HolderBackend;
  readonly #ttlMs: number;
  readonly #prefix: string;
  readonly #log: Logger;
  readonly #all = new Set<Holder>();
  readonly #deletions = new Set<Promise<void>>();
  #current: Holder | undefined;
  #registering: Promise<Holder> | undefined;

  constructor(store: HolderBackend, ttlMs: number, prefix: string, log: Logger) {
    this.#store = store;
    this.#ttlMs = ttlMs;
    this.#prefix = prefix;
    this.#log = log;
  }

  /**
   * The current live holder, registering a fresh one when there is none. Callers must check
   * `retired` again synchronously before using it (it may be retired while they resume).
   */
  async live(): Promise<Holder> {
    for (;;) {
      const h = this.#current;
      if (h && !h.retired) return h;
      this.#registering ??= this.#register().finally(() => {
        this.#registering = undefined;
      });
      const got = await this.#registering;
      if (!got.retired) return got;
    }
  }

  /** Counts `n` more things outstanding on `h` (in-flight statements, grants). */
  hold(h: Holder, n: number): void {
    h.known += n;
  }

  /** Counts `n` things of `h` as finished; a retired holder with nothing left is deleted. */
  unhold(h: Holder, n: number): void {
    h.known -= n;
    this.#maybeDelete(h);
  }

  /** Never use `h` for new grants again; delete it once nothing it holds is outstanding. */
  retire(h: Holder, reason: string): void {
    if (!h.retired) this.#log.debug({ holder: h.name, reason }, 'quota holder retired');
    h.retired = true;
    if (this.#current === h) this.#current = undefined;
    this.#maybeDelete(h);
  }

  /**
   * Renews every holder not yet deleted (retired ones too: their outstanding grants must keep
   * counting), retires holders that lapsed or could not be renewed for a whole TTL, and retries
   * failed deletions.
   */
  async heartbeat(): Promise<void> {
    await Promise.all(
      [...this.#all]
        .filter((h) => !h.deleting && !h.lapsed)
        .map(async (h) => {
          // The new lease runs from when the database ran the renewal: no earlier than this.
          const sentAt = performance.now();
          try {
            if (await this.#store.renewQuotaHolder(h.name, this.#ttlMs)) {
              h.renewedAt = sentAt;
              return;
            }
            h.lapsed = true;
            if (h.known > 0) {
              this.#log.warn(
                { holder: h.name, outstanding: h.known },
                'quota holder lapsed with grants in use: limits may be exceeded until they are released',
              );
            }
            this.retire(h, 'lapsed');
          } catch (err) {
            if (performance.now() - h.renewedAt >= this.#ttlMs) this.retire(h, 'renew failing for a whole ttl');
            this.#log.warn({ holder: h.name, ...errorFields(err) }, 'quota holder renewal failed');
          }
        }),
    );
    for (const h of this.#all) this.#maybeDelete(h);
  }

  /** Reaps other processes' holders that lapsed more than a TTL ago. */
  async reap(): Promise<void> {
    await this.#store.reapQuotaHolders(this.#ttlMs);
  }

  /** Deletes every holder (close): their slots stop counting at once. */
  async deleteAll(): Promise<void> {
    await this.#registering?.catch(() => undefined);
    for (const h of this.#all) {
      h.retired = true;
      h.known = 0;
      this.#maybeDelete(h);
    }
    this.#current = undefined;
    while (this.#deletions.size > 0) await Promise.allSettled([...this.#deletions]);
  }

  /** Holders not yet deleted (for tests and diagnostics). */
  get names(): string[] {
    return [...this.#all].map((h) => h.name);
  }

  async #register(): Promise<Holder> {
    const name = `${this.#prefix}-${randomBytes(4).toString('hex')}`;
    const sentAt = performance.now();
    // A name is single-use: whatever happens to this registration, it is never registered again.
    await this.#store.registerQuotaHolder(name, this.#ttlMs);
    const h: Holder = { name, known: 0, retired: false, lapsed: false, deleting: false, renewedAt: sentAt };
    this.#all.add(h);
    this.#current = h;
    this.#log.debug({ holder: name }, 'quota holder registered');
    return h;
  }

  #maybeDelete(h: Holder): void {
    if (!h.retired || h.known > 0 || h.deleting || !this.#all.has(h)) return;
    h.deleting = true;
    const p = this.#store.deleteQuotaHolder(h.name).then(
      () => {
        this.#all.delete(h);
      },
      (err: unknown) => {
        // Retried by the next heartbeat; until then its slots still count (never too few).
        h.deleting = false;
        this.#log.warn({ holder: h.name, ...errorFields(err) }, 'quota holder delete failed');
      },
    );
    this.#deletions.add(p);
    void p.finally(() => this.#deletions.delete(p));
  }
}
