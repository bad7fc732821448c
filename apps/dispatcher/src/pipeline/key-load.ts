// This process's view of the quota keys (docs/design/dispatcher.md#admission): slots held here,
// requests on their way to a slot, slots kept for the next held request of their key, and the
// measured hold time that paces a key's parked requests. Shared by the admission of every queue
// and by the handlers' quota gates.
import type { GateConfig } from '../config/schema.js';

/** How long a key refused by the shared quota counts as saturated here, ms. */
const REFUSED_FOR_MS = 1000;
/** How long a request handed to a handler counts against its key before the handler took a slot. */
const TRANSIT_MS = 1000;
/** How long a slot kept for the next held request of its key waits to be taken, ms. */
const SPARE_MS = 250;
/**
 * How many times in a row one slot is handed over in process before it goes back to the shared
 * quota: other dispatchers with requests of the same key get their turn at one turnover in this
 * many, instead of never while this process has a backlog of the key.
 */
const MAX_HANDOVERS = 8;

/**
 * This process's view of the quota keys: slots it holds, requests on their way to a slot, and
 * keys the shared quota refused lately. A hint only (other dispatchers hold slots too): the quota
 * itself still decides.
 */
export class KeyLoad {
  readonly #held = new Map<string, number>();
  readonly #refusedAt = new Map<string, number>();
  /** Per key: admitted requests of this process waiting at its gate for a slot. */
  readonly #waiting = new Map<string, number>();
  /** Per key: when requests were handed to a handler that has not yet taken (or waited for) a slot. */
  readonly #transit = new Map<string, number[]>();
  /** Per key: the next free return time (Unix s, fractional) of its parked requests, and their pace. */
  readonly #cursor = new Map<string, { at: number; perSecond: number }>();
  /** Per key: how long a slot is held here, ms (moving average of the releases). */
  readonly #holdMs = new Map<string, number>();
  readonly #onRelease = new Set<(key: string) => void>();
  /** Per key: requests held back by admission in this process, waiting for a slot of it. */
  readonly #demand = new Map<string, number>();
  /** Per key: slots released by a finished request and kept for the next request of the key. */
  readonly #spare = new Map<string, Array<{ release: () => unknown; timer: NodeJS.Timeout }>>();
  /** Per acquired slot (its release function): how many times it was handed over in process. */
  readonly #handovers = new WeakMap<() => unknown, number>();

  acquired(key: string): void {
    this.#held.set(key, (this.#held.get(key) ?? 0) + 1);
    this.#arrived(key);
  }

  /** A slot of `key` came free after being held `heldMs` (absent: not timed). */
  released(key: string, heldMs?: number): void {
    this.#timed(key, heldMs);
    this.#drop(key);
    this.#refusedAt.delete(key); // a slot came free: worth asking again
    for (const fn of this.#onRelease) fn(key);
  }

  #timed(key: string, heldMs: number | undefined): void {
    if (heldMs === undefined || !Number.isFinite(heldMs) || heldMs < 0) return;
    const avg = this.#holdMs.get(key);
    this.#holdMs.set(key, avg === undefined ? heldMs : 0.8 * avg + 0.2 * heldMs);
    if (this.#holdMs.size > 100_000) this.#holdMs.clear(); // bounded: a hint, not state
  }

  #drop(key: string): void {
    const n = (this.#held.get(key) ?? 1) - 1;
    if (n <= 0) this.#held.delete(key);
    else this.#held.set(key, n);
  }

  /** Admission holds `delta` more (or fewer) requests of `key` back, waiting for one of its slots. */
  demand(key: string, delta: number): void {
    const n = (this.#demand.get(key) ?? 0) + delta;
    if (n <= 0) this.#demand.delete(key);
    else this.#demand.set(key, n);
  }

  /**
   * A request finished with a slot of `key` held `heldMs`: when requests of the key are held back
   * here, the slot is kept (not given back to the shared quota) for the next of them to take
   * within `keepMs` — handing a slot over in process costs no release and no acquire round trip,
   * which left a slot idle for both (and for the poll between them) at every turnover. Returns
   * false when nobody here wants it, or it was handed over `MAX_HANDOVERS` times in a row: then
   * the caller releases it.
   */
  keep(key: string, release: () => unknown, heldMs: number, keepMs = SPARE_MS): boolean {
    if (!this.#demand.has(key)) return false;
    const n = this.#handovers.get(release) ?? 0;
    if (n >= MAX_HANDOVERS) return false; // its turn to go back to the shared quota
    this.#handovers.set(release, n + 1);
    this.#timed(key, heldMs);
    this.#drop(key);
    const list = this.#spare.get(key) ?? [];
    if (list.length === 0) this.#spare.set(key, list);
    const entry = {
      release,
      // Not taken in time: back to the shared quota.
      timer: setTimeout(() => {
        const i = list.indexOf(entry);
        if (i < 0) return;
        list.splice(i, 1);
        if (list.length === 0 && this.#spare.get(key) === list) this.#spare.delete(key);
        void Promise.resolve()
          .then(release)
          .catch(() => undefined) // a failed release retires the holder inside Quota
          .then(() => {
            this.#refusedAt.delete(key);
            for (const fn of this.#onRelease) fn(key);
          });
      }, keepMs),
    };
    entry.timer.unref();
    list.push(entry);
    for (const fn of this.#onRelease) fn(key);
    return true;
  }

  /** A slot of `key` kept by {@link keep}, now the caller's (it calls {@link acquired}); undefined: none. */
  take(key: string): (() => unknown) | undefined {
    const list = this.#spare.get(key);
    const entry = list?.shift();
    if (list?.length === 0) this.#spare.delete(key);
    if (!entry) return undefined;
    clearTimeout(entry.timer);
    return entry.release;
  }

  /** Gives every kept slot back to the shared quota (at a stop). */
  async releaseKept(): Promise<void> {
    const all = [...this.#spare.values()].flat();
    this.#spare.clear();
    for (const e of all) clearTimeout(e.timer);
    await Promise.all(
      all.map((e) =>
        Promise.resolve()
          .then(e.release)
          .catch(() => undefined),
      ),
    );
  }

  /** Calls `fn` with the key of every slot released here; returns the unsubscribe. */
  onRelease(fn: (key: string) => void): () => void {
    this.#onRelease.add(fn);
    return () => this.#onRelease.delete(fn);
  }

  refused(key: string): void {
    this.#refusedAt.set(key, Date.now());
  }

  /**
   * What `limit` slots of `key` get through per second at the hold time measured here (0 before
   * the first timed release).
   */
  capacity(key: string, limit: number): number {
    const ms = this.#holdMs.get(key);
    return ms === undefined ? 0 : (limit * 1000) / Math.max(1, ms);
  }

  held(key: string): number {
    return this.#held.get(key) ?? 0;
  }

  /** A request of `key` was handed to a handler: it counts against the key until it takes a slot. */
  handed(key: string): void {
    const list = this.#transit.get(key);
    if (list) list.push(Date.now());
    else this.#transit.set(key, [Date.now()]);
  }

  /** Requests of `key` handed over in the last second that have not reached its gate yet. */
  inTransit(key: string): number {
    const list = this.#transit.get(key);
    if (!list) return 0;
    const old = Date.now() - TRANSIT_MS;
    while (list.length > 0 && (list[0] as number) < old) list.shift(); // ended before its gate
    if (list.length === 0) this.#transit.delete(key);
    return list.length;
  }

  #arrived(key: string): void {
    const list = this.#transit.get(key);
    list?.shift();
    if (list?.length === 0) this.#transit.delete(key);
  }

  waitStarted(key: string): void {
    this.#waiting.set(key, (this.#waiting.get(key) ?? 0) + 1);
    this.#arrived(key);
  }

  waitEnded(key: string): void {
    const n = (this.#waiting.get(key) ?? 1) - 1;
    if (n <= 0) this.#waiting.delete(key);
    else this.#waiting.set(key, n);
  }

  waiting(key: string): number {
    return this.#waiting.get(key) ?? 0;
  }

  /**
   * True when one more request of `key` (after `planned` admitted in this poll) could only wait:
   * for a concurrency key, its `limit` slots are held here, or taken by requests on their way to
   * them, or requests of this process already wait for one (other dispatchers hold the rest). A
   * rate key counts as saturated for a while after the shared quota refused it.
   */
  saturated(key: string, gate: GateConfig, planned: number): boolean {
    if (gate.kind === 'concurrency') return this.held(key) + this.waiting(key) + this.inTransit(key) + planned >= gate.limit;
    const at = this.#refusedAt.get(key);
    return at !== undefined && Date.now() - at < REFUSED_FOR_MS;
  }

  /**
   * When (Unix s) to let a parked request of saturated `key` come back. Requests of one key
   * come back at most `perSecond` a second, from a second from now on: a big backlog of one key
   * is spread out ahead, so a scan meets only a few of its requests at a time and reaches the
   * other keys' work within a poll.
   */
  parkAt(key: string, perSecond: number): number {
    const now = Date.now() / 1000;
    const prev = this.#cursor.get(key);
    // The requests parked ahead were spread at the pace known then: at a faster pace they take
    // less time, so the cursor moves closer (else the first, slow guesses would push the whole
    // backlog of a key far ahead for good).
    const ahead = prev ? Math.max(0, prev.at - now) * Math.min(1, prev.perSecond / perSecond) : 0;
    const c = Math.max(now + ahead, now + 1);
    this.#cursor.set(key, { at: c + 1 / perSecond, perSecond });
    if (this.#cursor.size > 100_000) this.#cursor.clear(); // bounded: a hint, not state
    return Math.floor(c);
  }
}
