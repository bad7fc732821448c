// Admission before a request gets a handler slot: the queue's budget gate sizes each poll
// (n = floor(batch_size × budget), docs/design/dispatcher.md#handling-one-request), and requests whose quota key is known to be
// saturated are put back (deferred) at dispatch instead of being handed to a handler.
//
// Why at dispatch: the queue is served earliest deadline first, so a throttled tenant with an
// earlier-deadline backlog would otherwise fill every handler slot with requests that can only
// wait at its gate and then go back to the head of the queue, and the other tenants' requests
// behind them would get no service (head-of-line blocking). Here such requests never occupy a
// slot and are parked for a growing while, so the scan reaches admissible work within a poll.
import type { Request, Store } from '@q/store';
import type { GateConfig, QueueConfig } from '../config/schema.js';
import { parseEnvelope } from '../formats.js';
import type { Gate } from '../gates/gates.js';
import type { GateMetrics } from '../gates/metrics.js';
import { errInfo, type Logger } from '../logger.js';
import type { DispatcherMetrics } from '../metrics.js';

/** How long a key refused by the shared quota counts as saturated here, ms. */
const REFUSED_FOR_MS = 1000;
/** Fewest and most rows looked at per dispatch round, and rounds per poll. */
const MIN_SCAN = 64;
const MAX_SCAN = 1000;
const MAX_ROUNDS = 4;

/**
 * This process's view of the quota keys: slots it holds, and keys the shared quota refused
 * lately. A hint only (other dispatchers hold slots too): the quota itself still decides.
 */
export class KeyLoad {
  readonly #held = new Map<string, number>();
  readonly #refusedAt = new Map<string, number>();
  /** Per key: admitted requests of this process waiting at its gate for a slot. */
  readonly #waiting = new Map<string, number>();
  /** Per key: the next free return time (Unix s, fractional) of its parked requests, and their pace. */
  readonly #cursor = new Map<string, { at: number; perSecond: number }>();
  /** Per key: how long a slot is held here, ms (moving average of the releases). */
  readonly #holdMs = new Map<string, number>();

  acquired(key: string): void {
    this.#held.set(key, (this.#held.get(key) ?? 0) + 1);
  }

  /** A slot of `key` came free after being held `heldMs` (absent: not timed). */
  released(key: string, heldMs?: number): void {
    if (heldMs !== undefined && Number.isFinite(heldMs) && heldMs >= 0) {
      const avg = this.#holdMs.get(key);
      this.#holdMs.set(key, avg === undefined ? heldMs : 0.8 * avg + 0.2 * heldMs);
      if (this.#holdMs.size > 100_000) this.#holdMs.clear(); // bounded: a hint, not state
    }
    const n = (this.#held.get(key) ?? 1) - 1;
    if (n <= 0) this.#held.delete(key);
    else this.#held.set(key, n);
    this.#refusedAt.delete(key); // a slot came free: worth asking again
  }

  refused(key: string): void {
    this.#refusedAt.set(key, Date.now());
  }

  /**
   * What `limit` slots of `key` get through per second at the hold time measured here (0 before
   * the first timed release): the pace its parked requests must come back at to keep them busy.
   */
  capacity(key: string, limit: number): number {
    const ms = this.#holdMs.get(key);
    return ms === undefined ? 0 : (limit * 1000) / Math.max(1, ms);
  }

  held(key: string): number {
    return this.#held.get(key) ?? 0;
  }

  waitStarted(key: string): void {
    this.#waiting.set(key, (this.#waiting.get(key) ?? 0) + 1);
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
   * True when one more request of `key` (after `planned` admitted in this poll) would only add
   * to the waiting. A concurrency key admits up to `2 × limit` requests beyond its `limit` slots —
   * two waiters per slot, woken the moment a slot is released here — so the key keeps its slots
   * busy between polls (one waiter a slot left them idle more than half the time: each turnover
   * costs a release and an acquire round trip, and new waiters come only with a poll), while it
   * takes at most `3 × limit` handler slots from the other keys (also when other dispatchers
   * hold its slots: then all of them wait).
   * A rate key counts as saturated for a while after the shared quota refused it.
   */
  saturated(key: string, gate: GateConfig, planned: number): boolean {
    if (gate.kind === 'concurrency') return this.held(key) + this.waiting(key) + planned >= 3 * gate.limit;
    const at = this.#refusedAt.get(key);
    return at !== undefined && Date.now() - at < REFUSED_FOR_MS;
  }

  /**
   * When (Unix s) to let a parked request of saturated `key` come back. Requests of one key
   * come back at most `perSecond` a second, from a second from now on: a big backlog of one key
   * is spread out ahead, so a scan meets only a few of its requests at a time and reaches the
   * other keys' work within a poll, while the key still gets enough back to keep its slots busy.
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

/** Options of {@link admissionStore}. */
export interface AdmissionOptions {
  queue: QueueConfig;
  batchSize: number;
  /** The queue's budget gate (sizes each poll); absent: the whole batch. */
  gate?: Gate;
  load: KeyLoad;
  metrics: DispatcherMetrics;
  gateMetrics?: GateMetrics;
  logger: Logger;
}

/** The quota keys of a request under `gates` (a request without the attribute is not gated). */
export function quotaKeys(gates: GateConfig[], metadata: Record<string, string> | undefined): Array<{ key: string; gate: GateConfig }> {
  const out: Array<{ key: string; gate: GateConfig }> = [];
  for (const g of gates) {
    if (g.gating_mode === 'classifying') continue; // never blocks: nothing to wait for
    const value = metadata?.[g.attribute];
    if (value) out.push({ key: `${g.prefix}${g.attribute}:${value}`, gate: g });
  }
  return out;
}

/**
 * A view of `store` whose `dispatch` applies the admission above; every other method is the
 * store's own. Handed to the partition worker, so the requests it tracks are exactly the
 * admitted ones (the others are back to pending before `dispatch` returns; if putting them
 * back fails, `dispatch` rejects and the consumer reconciles them on its next rebalance).
 */
export function admissionStore(store: Store, opts: AdmissionOptions): Store {
  const dispatch = async (queue: string, owner: string, now: Date, limit: number): Promise<Request[]> => {
    let n = limit;
    if (opts.gate) {
      const budget = await opts.gate.budget();
      opts.gateMetrics?.budget(budget);
      n = Math.min(n, Math.floor(opts.batchSize * budget));
      if (n <= 0) {
        if (await store.hasRequests(queue).catch(() => false)) opts.metrics.gateDecision('gate_closed');
        return [];
      }
    }
    if (!opts.queue.gates.some((g) => g.gating_mode !== 'classifying')) return store.dispatch(queue, owner, now, n);
    return filtered(store, opts, queue, owner, now, n);
  };
  return new Proxy(store, {
    get(target, prop) {
      if (prop === 'dispatch') return dispatch;
      const v: unknown = Reflect.get(target, prop, target);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

/**
 * Requests of a saturated key let back per second: enough to refill its slots twice over — at
 * the slot hold time measured here for a concurrency key (a slot turning over every 250 ms until
 * one was timed), twice a rate limit's pace — and at least 16. Returning them slower than the
 * key's slots turn over starved the key itself: `pnpm demo` fell from 127 to about 70 results/s
 * when parking came in, its 8-slot tenants turning over every 50 ms, not every 250 ms.
 * Exported for tests.
 */
export function returnRate(g: GateConfig, key: string, load: KeyLoad): number {
  if (g.kind !== 'concurrency') return Math.max(16, Math.ceil((2 * g.limit * 1000) / g.window_ms));
  return Math.max(16, 4 * g.limit, Math.ceil(2 * load.capacity(key, g.limit)));
}

async function filtered(store: Store, opts: AdmissionOptions, queue: string, owner: string, now: Date, n: number): Promise<Request[]> {
  const admitted: Request[] = [];
  const planned = new Map<string, number>();
  const bumped = new Set<string>();
  // The first round reads a few rows per free slot; each further round (only while slots are
  // left) twice as many. Starting at 256 rows made every poll dispatch and park hundreds of rows
  // of saturated keys that a smaller scan never touches, most of a poll's cost in `pnpm demo`.
  let scan = Math.min(MAX_SCAN, Math.max(n * 4, MIN_SCAN));
  const nowSec = Math.floor(now.getTime() / 1000);
  for (let round = 0; round < MAX_ROUNDS && admitted.length < n; round++) {
    const rows = await store.dispatch(queue, owner, now, scan);
    const parked = new Map<number, Request[]>();
    const surplus: Request[] = [];
    for (const r of rows) {
      const env = parseEnvelope(r.envelope);
      // Unparsable, cancelled or expired requests are answered at once by the handler.
      const keys = env && !r.cancelled && r.deadline > nowSec ? quotaKeys(opts.queue.gates, env.data.metadata) : [];
      const full = keys.find(({ key, gate }) => opts.load.saturated(key, gate, planned.get(key) ?? 0));
      if (full) {
        if (!bumped.has(full.key)) {
          bumped.add(full.key);
          opts.metrics.gateDecision('quota_exhausted');
        }
        // Never parked past its deadline: it is answered then.
        const at = Math.min(opts.load.parkAt(full.key, returnRate(full.gate, full.key, opts.load)), Math.max(nowSec + 1, r.deadline));
        parked.set(at, [...(parked.get(at) ?? []), r]);
        continue;
      }
      if (admitted.length >= n) {
        surplus.push(r);
        continue;
      }
      admitted.push(r);
      for (const { key, gate } of keys) if (gate.kind === 'concurrency') planned.set(key, (planned.get(key) ?? 0) + 1);
    }
    try {
      // One statement per return second, sent together: in sequence they held up the poll
      // (and with it every admission) for as many round trips as there were seconds.
      await Promise.all([...parked].map(([at, list]) => store.defer(owner, list, at)));
      // Admissible rows beyond this poll go back at once, keeping their deadline order.
      if (surplus.length > 0) await store.undispatch(owner, surplus);
    } catch (err) {
      opts.logger.warn({ queue, ...errInfo(err) }, 'admission: putting requests back failed; reconciling');
      throw err;
    }
    if (rows.length < scan) break; // nothing more is due
    scan = Math.min(MAX_SCAN, scan * 2);
  }
  return admitted;
}
