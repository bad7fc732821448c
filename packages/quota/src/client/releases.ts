import { errorFields, type Logger } from '../logger.js';
import type { QuotaStore } from '../store.js';
import type { Holder, Holders } from './holders.js';

/** The store call releases need. */
export type ReleaseBackend = Pick<QuotaStore, 'releaseQuotaSlots'>;

/**
 * Queued releases, flushed asynchronously with one statement per holder. A failed release is
 * never retried — its reply may have been lost after it committed, and a second one would free
 * slots twice —; the holder is retired instead, and deleting it frees whatever it still holds.
 */
export class ReleaseQueue {
  readonly #store: ReleaseBackend;
  readonly #holders: Holders;
  readonly #log: Logger;
  #pending = new Map<Holder, Map<string, number>>();
  #waiters: Array<() => void> = [];
  #running: Promise<void> | undefined;

  constructor(store: ReleaseBackend, holders: Holders, log: Logger) {
    this.#store = store;
    this.#holders = holders;
    this.#log = log;
  }

  /** Queues `count` slots of `key` held by `holder`; resolves once flushed (never rejects). */
  enqueue(holder: Holder, key: string, count: number): Promise<void> {
    let keys = this.#pending.get(holder);
    if (!keys) this.#pending.set(holder, (keys = new Map()));
    keys.set(key, (keys.get(key) ?? 0) + count);
    return new Promise<void>((resolve) => {
      this.#waiters.push(resolve);
      this.#running ??= this.#loop();
    });
  }

  /** Resolves once every queued release has been flushed. */
  async idle(): Promise<void> {
    while (this.#running) await this.#running;
  }

  async #loop(): Promise<void> {
    try {
      // Releases made in the same tick share the first statement.
      await Promise.resolve();
      while (this.#pending.size > 0) {
        const batch = this.#pending;
        const waiters = this.#waiters;
        this.#pending = new Map();
        this.#waiters = [];
        await Promise.all([...batch].map(([holder, keys]) => this.#flush(holder, keys)));
        for (const w of waiters) w();
      }
    } finally {
      // Synchronous with the last empty check: a later enqueue starts a new loop.
      this.#running = undefined;
    }
  }

  async #flush(holder: Holder, keys: Map<string, number>): Promise<void> {
    const total = [...keys.values()].reduce((a, b) => a + b, 0);
    try {
      await this.#store.releaseQuotaSlots(holder.name, [...keys.keys()], [...keys.values()]);
    } catch (err) {
      this.#log.warn({ holder: holder.name, ...errorFields(err) }, 'quota release failed: retiring its holder');
      this.#holders.retire(holder, 'release failed');
    } finally {
      this.#holders.unhold(holder, total);
    }
  }
}
