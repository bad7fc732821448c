// Admission before a request gets a handler slot (docs/design/dispatcher.md#admission): the
// queue's budget gate sizes each poll (n = floor(batch_size × budget)), and a request whose quota
// key is saturated here is held back at dispatch instead of being handed to a handler.
//
// Why at dispatch: the queue is served earliest deadline first, so a throttled tenant with an
// earlier-deadline backlog would otherwise fill every handler slot with requests that can only
// wait at its gate, and the other tenants' requests behind them would get no service
// (head-of-line blocking).
//
// Where held back: a concurrency key's requests are kept here, in memory, in deadline order
// (dispatched, so no other dispatcher takes them). A slot of the key released in this process is
// kept for them (KeyLoad.keep) and the poll loop is woken to hand the key's earliest-deadline
// request over: no polling interval, no release and acquire round trip, no trip through the
// table, so the key's slots stay busy, each result costs about one dispatch, and a new urgent
// request of the tenant goes ahead of its backlog. What does not fit in memory (about ten seconds
// of the key's throughput) is parked in the table, coming back a little faster than the key
// consumes it. A rate key refused by the shared quota is parked at twice its limit's pace.
import type { Lease, Request, RequestStore } from '@q/store';
import type { GateConfig, QueueConfig } from '../config/schema.js';
import { parseEnvelope } from '../formats.js';
import type { Gate } from '../gates/gates.js';
import type { GateMetrics } from '../gates/metrics.js';
import { errInfo, type Logger } from '../logger.js';
import type { DispatcherMetrics } from '../metrics.js';
import type { KeyLoad } from './key-load.js';

export { KeyLoad } from './key-load.js';

/** Most rows looked at per dispatch round, and rounds per poll. */
const MAX_SCAN = 1000;
const MAX_ROUNDS = 4;
/**
 * Seconds of a saturated key's throughput held in memory. Parked rows cannot be called back
 * early, so what is held must cover a key that turns out faster than its pace was guessed.
 */
const HELD_SECONDS = 10;
/** Most requests held in memory for one key, and bytes (envelope and payload) for one queue. */
const MAX_HELD_PER_KEY = 2000;
const MAX_HELD_BYTES = 64 * 1024 * 1024;
/** A request handed over this long after its dispatch has its cancelled flag read again. */
const RECHECK_CANCEL_MS = 1000;
/** How often a closed gate looks for requests it can answer without an endpoint call. */
const ANSWER_EVERY_MS = 1000;

/**
 * What a saturated key gets through per second here: for a concurrency key, its slots at the
 * hold time measured here; until a release was timed, 20 × limit (a slot turning over every
 * 50 ms) — a guess too slow would spread the key's backlog out too far ahead to keep it busy
 * (4 × limit kept `pnpm demo`'s tenants 20 % busy), one too fast only parks a few requests twice.
 */
function paceOf(g: GateConfig, key: string, load: KeyLoad): number {
  return Math.max(1, load.capacity(key, g.limit) || 20 * g.limit);
}

/**
 * Requests of a saturated key let back per second from the table. A concurrency key: 1.5 × its
 * pace — the requests held in memory cover the next seconds, a little faster keeps that cover
 * when the key speeds up (the pace is measured, and a parked row cannot be called back early),
 * and much faster would only park them again. A rate key: twice its limit's pace, at least 16.
 * Exported for tests.
 */
export function returnRate(g: GateConfig, key: string, load: KeyLoad): number {
  if (g.kind !== 'concurrency') return Math.max(16, Math.ceil((2 * g.limit * 1000) / g.window_ms));
  return Math.ceil(1.5 * paceOf(g, key, load));
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

/** Options of {@link createAdmission}. */
export interface AdmissionOptions {
  queue: QueueConfig;
  batchSize: number;
  /** The queue's budget gate (sizes each poll); absent: the whole batch. */
  gate?: Gate;
  load: KeyLoad;
  metrics: DispatcherMetrics;
  gateMetrics?: GateMetrics;
  logger: Logger;
  /** The poll interval, ms: the table is scanned at least about this often while held requests are handed out. */
  pollIntervalMs: number;
}

/** The admission of one queue: a store view for its partition worker, and the hooks around it. */
export interface Admission {
  /**
   * A view of the store whose `dispatch` applies the admission; every other method is the
   * store's own. Handed to the partition worker, so the requests it tracks are exactly the
   * admitted ones (parked ones are back to pending before `dispatch` returns; if putting them
   * back fails, `dispatch` rejects and the consumer reconciles them on its next rebalance).
   */
  readonly store: RequestStore;
  /** For the partition worker's `pollWake`: a released slot of a key with held requests polls at once. */
  pollWake(wake: () => void): void;
  /** Returns every held request to pending (at a stop, while the partitions are still ours); holds none after. */
  close(): Promise<void>;
  /** Requests held in memory now (tests, metrics). */
  readonly heldCount: number;
}

interface HeldRequest {
  req: Request;
  /** The key whose line it waits in. */
  key: string;
  /** Its concurrency keys (the one it is held under among them). */
  keys: Array<{ key: string; gate: GateConfig }>;
  /** When it was dispatched, ms. */
  since: number;
  seq: number;
}

/** Creates the admission of `opts.queue` over `store`. */
export function createAdmission(store: RequestStore, opts: AdmissionOptions): Admission {
  return new QueueAdmission(store, opts);
}

class QueueAdmission implements Admission {
  readonly store: RequestStore;
  readonly #base: RequestStore;
  readonly #opts: AdmissionOptions;
  readonly #gated: boolean;
  /** Per concurrency key: its held requests, earliest deadline first (then dispatch order). */
  readonly #byKey = new Map<string, HeldRequest[]>();
  #count = 0;
  #bytes = 0;
  #seq = 0;
  #wake: () => void = () => undefined;
  #timer: NodeJS.Timeout | undefined;
  #lastScanMs = 0;
  #lastAnswerMs = 0;
  #owner: string | undefined;
  #closed = false;
  /** Requests a background scan admitted, handed over at the next poll. */
  readonly #ready: Request[] = [];
  #scanning: Promise<void> | undefined;
  #scanError: Error | undefined;
  #rechecking: Promise<void> | undefined;
  #lastRecheckMs = 0;

  constructor(store: RequestStore, opts: AdmissionOptions) {
    this.#base = store;
    this.#opts = opts;
    this.#gated = opts.queue.gates.some((g) => g.gating_mode !== 'classifying');
    opts.load.onRelease((key) => {
      if (this.#byKey.has(key)) this.#wake();
    });
    const dispatch = (queue: string, owner: string, now: Date, limit: number) => this.#dispatch(queue, owner, now, limit);
    // Held requests live only as long as the lease they were dispatched under: the consumer's
    // heartbeat says which leases are still ours, and a partition released goes with its requests.
    const heartbeat = async (...args: Parameters<RequestStore['heartbeat']>) => {
      const beat = await store.heartbeat(...args);
      await this.#leasesAre(beat.leases);
      return beat;
    };
    const releasePartitions = async (queue: string, owner: string, partitions: number[]) => {
      await this.#giveBack((r) => partitions.includes(r.partition));
      return store.releasePartitions(queue, owner, partitions);
    };
    this.store = new Proxy(store, {
      get(target, prop) {
        if (prop === 'dispatch') return dispatch;
        if (prop === 'heartbeat') return heartbeat;
        if (prop === 'releasePartitions') return releasePartitions;
        const v: unknown = Reflect.get(target, prop, target);
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
  }

  get heldCount(): number {
    return this.#count;
  }

  pollWake(wake: () => void): void {
    this.#wake = wake;
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    await this.#scanning;
    await this.#rechecking;
    const all = this.#forgetHeld();
    all.push(...this.#ready.splice(0));
    await this.#opts.load.releaseKept();
    if (all.length === 0 || this.#owner === undefined) return;
    try {
      await this.#base.undispatch(this.#owner, all);
    } catch (err) {
      // Left stamped under this owner's epoch: whoever takes the partitions next resets them.
      this.#opts.logger.warn({ queue: this.#opts.queue.queue_name, ...errInfo(err) }, 'admission: returning held requests failed');
    }
  }

  async #dispatch(queue: string, owner: string, now: Date, limit: number): Promise<Request[]> {
    const opts = this.#opts;
    this.#owner = owner;
    const nowMs = now.getTime();
    const nowSec = Math.floor(nowMs / 1000);
    // Held requests whose deadline passed are answered now: that takes no slot and no budget.
    const out = this.#takeExpired(nowSec, limit);
    let n = limit - out.length;
    if (opts.gate) {
      const budget = await opts.gate.budget();
      opts.gateMetrics?.budget(budget);
      n = Math.min(n, Math.floor(opts.batchSize * budget));
    }
    if (n <= 0) {
      // The gate is shut, but answers that need no endpoint call (deadline passed, cancelled)
      // are written whatever it says; looked for once a second, since finding cancelled ones
      // reads the whole due backlog.
      for (let i = this.#ready.length - 1; i >= 0 && out.length < limit; i--) {
        const r = this.#ready[i] as Request;
        if (r.cancelled || r.deadline <= nowSec) out.push(...this.#ready.splice(i, 1));
      }
      if (limit > out.length && nowMs - this.#lastAnswerMs >= ANSWER_EVERY_MS) {
        this.#lastAnswerMs = nowMs;
        out.push(...(await this.#base.dispatchAnswerable(queue, owner, now, limit - out.length)));
      }
      if (out.length === 0 && (await this.#base.hasRequests(queue).catch(() => false))) opts.metrics.gateDecision('gate_closed');
      this.#arm(nowMs);
      return out;
    }
    if (!this.#gated) return [...out, ...(await this.#base.dispatch(queue, owner, now, n))];
    // A scan that failed in the background: its outcome is unknown, so the consumer must
    // reconcile — which returns every untracked dispatch to pending, the held ones included.
    const failed = this.#scanError;
    if (failed) {
      this.#scanError = undefined;
      this.#forgetHeld();
      throw failed;
    }
    const ready = this.#ready.splice(0, n);
    out.push(...ready);
    n -= ready.length;
    const handed = this.#handOut(n);
    out.push(...handed);
    n -= handed.length;
    if (nowMs - this.#lastRecheckMs >= RECHECK_CANCEL_MS && this.#count > 0 && !this.#rechecking) {
      this.#lastRecheckMs = nowMs;
      this.#rechecking = this.#recheckCancelled(nowMs).finally(() => (this.#rechecking = undefined));
    }
    // The table is read at least every half poll interval (so other keys' work never waits
    // longer), and whenever there is nothing else to hand over. A poll woken by a released slot
    // that has held requests to hand over does not wait for that read: it runs in the
    // background, and what it admits is handed over at the next poll, which it wakes.
    if (n > 0 && !this.#scanning && (out.length === 0 || nowMs - this.#lastScanMs >= opts.pollIntervalMs / 2)) {
      this.#lastScanMs = nowMs;
      const scan = this.#scan(queue, owner, now, n);
      if (out.length === 0) out.push(...(await scan));
      else {
        this.#scanning = scan
          .then(
            (rows) => {
              this.#ready.push(...rows);
              if (rows.length > 0) this.#wake();
            },
            (err: unknown) => {
              this.#scanError = err instanceof Error ? err : new Error(String(err));
              this.#wake();
            },
          )
          .finally(() => (this.#scanning = undefined));
      }
    }
    this.#arm(nowMs);
    return out;
  }

  /**
   * Keeps in memory only requests dispatched under a lease still held and not draining: those of
   * a draining partition go back to pending (so its hand-over waits for none of them), those of
   * a lost lease are dropped (their new owner redelivers them; a copy handed over here would only
   * be fenced after a wasted call).
   */
  async #leasesAre(leases: Lease[]): Promise<void> {
    const live = new Map(leases.map((l) => [l.partition, l]));
    const stale = (r: Request) => live.get(r.partition)?.epoch !== r.epoch;
    this.#take(stale);
    await this.#giveBack((r) => live.get(r.partition)?.draining === true);
  }

  /** Removes the held and ready requests matching `pred` from memory and returns them. */
  #take(pred: (r: Request) => boolean): Request[] {
    const out: Request[] = [];
    for (const [key, list] of [...this.#byKey]) {
      for (let i = list.length - 1; i >= 0; i--) if (pred((list[i] as HeldRequest).req)) out.push(this.#unhold(key, list, i).req);
    }
    for (let i = this.#ready.length - 1; i >= 0; i--) if (pred(this.#ready[i] as Request)) out.push(...this.#ready.splice(i, 1));
    return out;
  }

  /** Returns the held requests matching `pred` to pending (best effort: else their next owner resets them). */
  async #giveBack(pred: (r: Request) => boolean): Promise<void> {
    const back = this.#take(pred);
    if (back.length === 0 || this.#owner === undefined) return;
    try {
      await this.#base.undispatch(this.#owner, back);
    } catch (err) {
      this.#opts.logger.warn({ queue: this.#opts.queue.queue_name, ...errInfo(err) }, 'admission: returning held requests failed');
    }
  }

  /** Drops every held request from memory and returns them. */
  #forgetHeld(): Request[] {
    const all: Request[] = [];
    for (const [key, list] of this.#byKey) {
      this.#opts.load.demand(key, -list.length);
      for (const h of list) all.push(h.req);
    }
    this.#byKey.clear();
    this.#count = 0;
    this.#bytes = 0;
    return all;
  }

  /** Removes the `i`-th held request of `key`'s line. */
  #unhold(key: string, list: HeldRequest[], i: number): HeldRequest {
    const [h] = list.splice(i, 1) as [HeldRequest];
    this.#count--;
    this.#bytes -= sizeOf(h.req);
    this.#opts.load.demand(key, -1);
    if (list.length === 0 && this.#byKey.get(key) === list) this.#byKey.delete(key);
    return h;
  }

  /** Removes and returns the held requests whose deadline has passed. */
  #takeExpired(nowSec: number, max: number): Request[] {
    const out: Request[] = [];
    for (const [key, list] of [...this.#byKey]) {
      while (out.length < max && list.length > 0 && (list[0] as HeldRequest).req.deadline <= nowSec) out.push(this.#unhold(key, list, 0).req);
    }
    return out;
  }

  /** Up to `n` held requests whose keys have a free slot here, each key's earliest deadline first. */
  #handOut(n: number): Request[] {
    const out: Request[] = [];
    const { load } = this.#opts;
    // Keys in the order of their most urgent held request.
    const keys = [...this.#byKey].sort(([, a], [, b]) => cmp(a[0] as HeldRequest, b[0] as HeldRequest));
    for (const [key, list] of keys) {
      while (out.length < n && list.length > 0) {
        const h = list[0] as HeldRequest;
        if (h.keys.some((k) => load.saturated(k.key, k.gate, 0))) break;
        this.#unhold(key, list, 0);
        for (const k of h.keys) load.handed(k.key);
        out.push(h.req);
      }
    }
    return out;
  }

  /**
   * Held requests may have been cancelled since their dispatch read the flag (the handler trusts
   * that read for a second): read the flag of those held a second or more, once a second, in one
   * statement. Cancelled ones leave their key's line and are handed over at the next poll to be
   * answered (no slot needed).
   */
  async #recheckCancelled(nowMs: number): Promise<void> {
    const stale = [...this.#byKey.values()].flat().filter((h) => nowMs - h.since >= RECHECK_CANCEL_MS);
    if (stale.length === 0) return;
    let cancelled: Set<string>;
    try {
      cancelled = new Set((await this.#base.cancelledKeys(stale.map((h) => h.req))).map((k) => `${k.id}\u0000${k.token}`));
    } catch {
      return; // not known: the handler reads the flag again before a long wait or a late send
    }
    const at = Date.now();
    for (const h of stale) {
      h.since = at;
      if (!cancelled.has(`${h.req.id}\u0000${h.req.token}`)) continue;
      const list = this.#byKey.get(h.key);
      const i = list?.indexOf(h) ?? -1;
      if (!list || i < 0) continue; // handed over meanwhile
      this.#unhold(h.key, list, i);
      this.#ready.push({ ...h.req, cancelled: true });
    }
    if (this.#ready.length > 0) this.#wake();
  }

  /**
   * Holds `r` under concurrency key `key` in deadline order; returns the requests that no longer
   * fit (the latest deadlines of that key, or of this one request when memory is full).
   */
  #hold(r: Request, keys: Array<{ key: string; gate: GateConfig }>, key: string, gate: GateConfig): Request[] {
    if (this.#closed) return [r];
    const h: HeldRequest = { req: r, key, keys, since: Date.now(), seq: this.#seq++ };
    const list = this.#byKey.get(key) ?? [];
    if (list.length === 0) this.#byKey.set(key, list);
    let i = list.length;
    while (i > 0 && cmp(list[i - 1] as HeldRequest, h) > 0) i--;
    list.splice(i, 0, h);
    this.#count++;
    this.#opts.load.demand(key, 1);
    this.#bytes += sizeOf(r);
    // At least 100 requests a slot: the pace is measured, and the first measures (cold
    // connections, a loaded machine) can be far slower than the key's steady state.
    const cap = Math.min(MAX_HELD_PER_KEY, Math.max(100 * gate.limit, Math.ceil(HELD_SECONDS * paceOf(gate, key, this.#opts.load))));
    const out: Request[] = [];
    while (list.length > cap || (this.#bytes > MAX_HELD_BYTES && list.length > 0)) out.push(this.#unhold(key, list, list.length - 1).req);
    return out;
  }

  /** Wakes the poll when the earliest held deadline passes, so it is answered then. */
  #arm(nowMs: number): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    let first = Infinity;
    for (const list of this.#byKey.values()) first = Math.min(first, (list[0] as HeldRequest).req.deadline);
    if (!Number.isFinite(first)) return;
    this.#timer = setTimeout(() => this.#wake(), Math.min(2_147_483_647, Math.max(0, first * 1000 - nowMs + 5)));
    this.#timer.unref();
  }

  /**
   * Reads up to `n` admissible requests from the table. The first round reads exactly `n` rows
   * (with no saturated key, every row is taken: nothing is put back); only when rows were held or
   * parked does a further round read more, four times as many each time.
   */
  async #scan(queue: string, owner: string, now: Date, n: number): Promise<Request[]> {
    const opts = this.#opts;
    const admitted: Request[] = [];
    const bumped = new Set<string>();
    const nowSec = Math.floor(now.getTime() / 1000);
    let scan = Math.min(MAX_SCAN, n);
    for (let round = 0; round < MAX_ROUNDS && admitted.length < n; round++) {
      const rows = await this.#base.dispatch(queue, owner, now, scan);
      const parked = new Map<number, Request[]>();
      const park = (key: string, gate: GateConfig, r: Request) => {
        // Never parked past its deadline: it is answered then.
        const at = Math.min(opts.load.parkAt(key, returnRate(gate, key, opts.load)), Math.max(nowSec + 1, r.deadline));
        parked.set(at, [...(parked.get(at) ?? []), r]);
      };
      const surplus: Request[] = [];
      for (const r of rows) {
        const env = parseEnvelope(r.envelope);
        // Unparsable, cancelled or expired requests are answered at once by the handler.
        const keys = env && !r.cancelled && r.deadline > nowSec ? quotaKeys(opts.queue.gates, env.data.metadata) : [];
        // Each admitted request counts against its keys at once (KeyLoad.handed).
        const full = keys.find(({ key, gate }) => opts.load.saturated(key, gate, 0));
        if (full) {
          if (!bumped.has(full.key)) {
            bumped.add(full.key);
            opts.metrics.gateDecision('quota_exhausted');
          }
          if (full.gate.kind === 'concurrency') {
            const conc = keys.filter((k) => k.gate.kind === 'concurrency');
            for (const p of this.#hold(r, conc, full.key, full.gate)) park(full.key, full.gate, p);
          } else park(full.key, full.gate, r);
          continue;
        }
        if (admitted.length >= n) {
          // Admissible, but beyond this poll: a request of a concurrency key is held for the
          // next polls like a saturated key's (it is handed over as soon as a slot is free).
          // Put back, it would cost two more writes — this scan's dispatch was undone and the
          // next poll's repeated, for most of the rows of a round reading 4× ahead — and its
          // key's finished slots would go back to the shared quota for want of a request here.
          const conc = keys.filter((k) => k.gate.kind === 'concurrency');
          const first = conc[0];
          if (first) for (const p of this.#hold(r, conc, first.key, first.gate)) park(first.key, first.gate, p);
          else surplus.push(r);
          continue;
        }
        admitted.push(r);
        for (const { key, gate } of keys) if (gate.kind === 'concurrency') opts.load.handed(key);
      }
      try {
        // One statement per return second, sent together: in sequence they held up the poll
        // (and with it every admission) for as many round trips as there were seconds.
        await Promise.all([...parked].map(([at, list]) => this.#base.defer(owner, list, at)));
        // Admissible rows beyond this poll without a concurrency key go back at once, keeping their deadline order.
        if (surplus.length > 0) await this.#base.undispatch(owner, surplus);
      } catch (err) {
        opts.logger.warn({ queue, ...errInfo(err) }, 'admission: putting requests back failed; reconciling');
        throw err;
      }
      if (rows.length < scan) return admitted; // nothing more is due
      scan = Math.min(MAX_SCAN, scan * 4);
    }
    // Rounds used up among held and parked rows with more due behind them: poll again at once
    // rather than after a poll interval, until the head of the queue is admissible work again.
    if (admitted.length < n) this.#wake();
    return admitted;
  }
}

function sizeOf(r: Request): number {
  return r.envelope.length + r.payload.length;
}

function cmp(a: HeldRequest, b: HeldRequest): number {
  return a.req.deadline - b.req.deadline || a.seq - b.seq;
}
