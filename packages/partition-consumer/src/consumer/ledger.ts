// The consumer's bookkeeping (docs/design/requests.md#consumer-bookkeeping): the partitions it
// holds, the work it dispatched and has not settled, and the work it gave up on: the rules of
// counting (epochs, attempts), with no I/O.
import type { Lease, Request, Stamp } from '@q/store';

/** A held partition as this consumer sees it. */
export interface PartitionState {
  epoch: number;
  acquiredAtMs: number;
  draining: boolean;
  drainSinceMs: number;
  inFlight: number;
}

interface Tracked extends Stamp {
  partition: number;
  epoch: number;
}

// Postgres text cannot hold NUL, so it cannot occur inside an id or a token.
const keyString = (k: { id: string; token: string }): string => `${k.id}\u0000${k.token}`;

/** Sorts partition numbers ascending. */
export const ascending = (a: number, b: number): number => a - b;

/** Leases, in-flight work and orphans of one consumer. */
export class Ledger {
  #leases = new Map<number, PartitionState>();
  readonly #inflight = new Map<string, Tracked>();
  readonly #orphans = new Map<string, Stamp>();
  /** Set when a dispatch's outcome is unknown: the next rebalance returns untracked dispatches to pending. */
  reconcile = false;

  /** The held partitions (the rebalance edits their states in place). */
  get leases(): Map<number, PartitionState> {
    return this.#leases;
  }

  /** Every held partition, ascending, with the work dispatched under its current epoch. */
  leaseList(): Array<{ partition: number; epoch: number; draining: boolean; inFlight: number }> {
    return [...this.#leases.keys()].sort(ascending).map((partition) => {
      const st = this.#leases.get(partition) as PartitionState;
      return { partition, epoch: st.epoch, draining: st.draining, inFlight: st.inFlight };
    });
  }

  /** The tracked stamps (dispatched, outcome not written or abandoned yet). */
  tracked(): Stamp[] {
    return [...this.#inflight.values()].map((t) => ({ id: t.id, token: t.token, attempt: t.attempt }));
  }

  /** Mirrors the leases the database says are held; returns the partitions lost since last time. */
  syncLeases(held: Lease[], nowMs: number): number[] {
    const next = new Map<number, PartitionState>();
    for (const l of held) {
      const cur = this.#leases.get(l.partition);
      const st = cur && cur.epoch === l.epoch ? cur : this.freshState(l, nowMs);
      if (l.draining && !st.draining) st.drainSinceMs = nowMs;
      st.draining = l.draining;
      next.set(l.partition, st);
    }
    const lost = [...this.#leases.keys()].filter((p) => !next.has(p));
    this.#leases = next;
    return lost;
  }

  /**
   * State of a lease seen for the first time at this epoch. Its in-flight count is normally 0;
   * it is recounted from the tracked stamps in case a dispatch ran before the lease was known
   * locally (an acquire whose reply was lost).
   */
  freshState(l: Lease, nowMs: number): PartitionState {
    let inFlight = 0;
    for (const t of this.#inflight.values()) if (t.partition === l.partition && t.epoch === l.epoch) inFlight++;
    return { epoch: l.epoch, acquiredAtMs: nowMs, draining: l.draining, drainSinceMs: l.draining ? nowMs : 0, inFlight };
  }

  /** Tracks a dispatched request (a re-dispatch replaces its older attempt). */
  track(r: Request): void {
    const k = keyString(r);
    const prev = this.#inflight.get(k);
    if (prev) this.#untrack(k, prev);
    this.#orphans.delete(k);
    this.#inflight.set(k, { id: r.id, token: r.token, attempt: r.attempt, partition: r.partition, epoch: r.epoch });
    const st = this.#leases.get(r.partition);
    if (st && st.epoch === r.epoch) st.inFlight++;
  }

  /** Forgets `s` only if it is the tracked attempt: an older attempt's outcome never forgets a newer one. */
  done(s: Stamp): void {
    const k = keyString(s);
    const t = this.#inflight.get(k);
    if (t && t.attempt === s.attempt) this.#untrack(k, t);
  }

  /** Moves the tracked attempt `s` to the orphans (returned to pending by the next rebalance or close). */
  abandon(s: Stamp): void {
    const k = keyString(s);
    const t = this.#inflight.get(k);
    if (!t || t.attempt !== s.attempt) return;
    this.#orphans.set(k, { id: t.id, token: t.token, attempt: t.attempt });
    this.#untrack(k, t);
  }

  /** The abandoned stamps still to be returned to pending. */
  orphans(): Stamp[] {
    return [...this.#orphans.values()];
  }

  /** `stamps` were returned to pending; a newer abandon of the same request (after a re-dispatch) stays for the next round. */
  orphansReturned(stamps: Stamp[]): void {
    for (const s of stamps) {
      const k = keyString(s);
      if (this.#orphans.get(k)?.attempt === s.attempt) this.#orphans.delete(k);
    }
  }

  /** The stamps among `stamps` that are not the tracked attempt. */
  untracked(stamps: Stamp[]): Stamp[] {
    return stamps.filter((s) => this.#inflight.get(keyString(s))?.attempt !== s.attempt);
  }

  #untrack(k: string, t: Tracked): void {
    this.#inflight.delete(k);
    const st = this.#leases.get(t.partition);
    // A stale outcome never uncounts work dispatched under a newer epoch.
    if (st && st.epoch === t.epoch && st.inFlight > 0) st.inFlight--;
  }
}
