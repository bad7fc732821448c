// The rebalance algorithm (docs/design/requests.md#rebalance-algorithm): settle orphans and
// unknown dispatches, heartbeat, mirror the leases, redeliver stale work, hand over drained
// partitions and move towards the share. The Consumer calls it, one call at a time.
import { PARTITIONS, type RequestStore } from '@q/store';
import { joinErrors } from '../errors.js';
import type { Logger } from '../logger.js';
import { ascending, type Ledger, type PartitionState } from './ledger.js';

/** What the rebalance steps work with. */
export interface RebalanceDeps {
  store: RequestStore;
  queue: string;
  owner: string;
  ttlMs: number;
  drainTimeoutMs: number;
  log: Logger;
  ledger: Ledger;
  /** Whether the consumer was stopped; read at each step, as `stop()` may come mid-rebalance. */
  isStopping: () => boolean;
  /** Called once the partition rows exist (the first successful seeding). */
  onSeeded: () => void;
}

/** Runs the rebalance steps of one consumer; callers serialise the calls. */
export class Rebalancer {
  readonly #d: RebalanceDeps;
  #seeded = false;
  #beats = 0;

  constructor(deps: RebalanceDeps) {
    this.#d = deps;
  }

  /** Rebalances that reached the heartbeat. */
  get beats(): number {
    return this.#beats;
  }

  /**
   * One rebalance at `now`; once stopping, it withdraws membership and sets the share to 0. Errors
   * of the orphan/reconcile steps do not stop it; they are thrown (joined) at the end.
   */
  async run(now: Date): Promise<void> {
    const { store, queue, owner, ttlMs, ledger } = this.#d;
    const nowMs = now.getTime();
    // 1. Partition rows exist (once; retried next time on error).
    if (!this.#seeded) {
      await store.ensurePartitions(queue);
      this.#seeded = true;
      this.#d.onSeeded();
    }
    // 2. Settle what this consumer could not: abandoned work, unknown dispatches.
    const errors: unknown[] = [];
    try {
      await this.undispatchOrphans();
    } catch (err) {
      errors.push(err);
    }
    try {
      await this.#reconcileInFlight();
    } catch (err) {
      errors.push(err);
    }
    // 3. Heartbeat: membership (withdrawn once stopped) and lease renewal.
    try {
      const beat = await store.heartbeat(queue, owner, now, ttlMs, !this.#d.isStopping());
      // 4. Mirror what the database says is held.
      for (const p of ledger.syncLeases(beat.leases, nowMs)) this.#d.log.warn({ queue, partition: p }, 'partition lost');
      // 5. Redeliver rows left in flight under older epochs.
      this.#beats++;
      if (this.#beats % 10 !== 0) {
        const recent = [...ledger.leases].filter(([, st]) => nowMs - st.acquiredAtMs < 2 * ttlMs).map(([p]) => p);
        if (recent.length > 0) await store.resetStale(queue, owner, recent.sort(ascending));
      } else {
        await store.resetStale(queue, owner);
      }
      // 6. Hand over drained partitions.
      await this.#releaseDrained(nowMs);
      // 7–9. Move towards the share.
      await this.#moveTowardsShare(now, beat.members);
    } catch (err) {
      // Steps 3–9 stop at their first error; earlier step errors are reported with it.
      throw joinErrors([...errors, err], 'rebalance');
    }
    const err = joinErrors(errors, 'rebalance');
    if (err) throw err;
  }

  /** Returns abandoned work to pending. */
  async undispatchOrphans(): Promise<void> {
    const { store, owner, ledger } = this.#d;
    const stamps = ledger.orphans();
    if (stamps.length === 0) return;
    await store.undispatch(owner, stamps);
    ledger.orphansReturned(stamps);
  }

  async #reconcileInFlight(): Promise<void> {
    const { store, queue, owner, ledger, log } = this.#d;
    if (!ledger.reconcile) return;
    const stamps = await store.inFlight(queue, owner);
    const unknown = ledger.untracked(stamps);
    if (unknown.length > 0) {
      await store.undispatch(owner, unknown);
      log.info({ queue, count: unknown.length }, 'untracked dispatches returned to pending');
    }
    ledger.reconcile = false;
  }

  async #moveTowardsShare(now: Date, members: number): Promise<void> {
    const { store, queue, owner, ttlMs, ledger, log } = this.#d;
    const leases = ledger.leases;
    const nowMs = now.getTime();
    const target = this.#d.isStopping() ? 0 : Math.ceil(PARTITIONS / Math.max(1, members));
    const active: number[] = [];
    const draining: number[] = [];
    for (const [p, st] of [...leases].sort((a, b) => a[0] - b[0])) (st.draining ? draining : active).push(p);

    if (active.length < target) {
      let need = target - active.length;
      // Undrain before acquiring: keeps work where it is and needs no epoch bump.
      const undrain = draining.slice(0, Math.min(need, draining.length));
      if (undrain.length > 0) {
        await store.setDraining(queue, owner, undrain, false);
        for (const p of undrain) {
          const st = leases.get(p);
          if (st) {
            st.draining = false;
            st.drainSinceMs = 0;
          }
        }
        need -= undrain.length;
      }
      if (need > 0) {
        const got = await store.acquirePartitions(queue, owner, now, ttlMs, need);
        for (const l of got) leases.set(l.partition, ledger.freshState(l, nowMs));
        if (got.length > 0) {
          log.info({ queue, partitions: got.map((l) => l.partition) }, 'partitions acquired');
          // Redeliver what the previous owner left in flight.
          await store.resetStale(queue, owner, got.map((l) => l.partition).sort(ascending));
        }
      }
    } else if (active.length > target) {
      // Fewest in flight first (they hand over soonest), ties to the highest partition.
      const surplus = active
        .map((p) => ({ p, n: (leases.get(p) as PartitionState).inFlight }))
        .sort((a, b) => a.n - b.n || b.p - a.p)
        .slice(0, active.length - target)
        .map((c) => c.p)
        .sort(ascending);
      await store.setDraining(queue, owner, surplus, true);
      for (const p of surplus) {
        const st = leases.get(p);
        if (st) {
          st.draining = true;
          st.drainSinceMs = nowMs;
        }
      }
      log.info({ queue, partitions: surplus, target }, 'partitions draining');
      await this.#releaseDrained(nowMs);
    }
  }

  async #releaseDrained(nowMs: number): Promise<void> {
    const { store, queue, owner, drainTimeoutMs, ledger, log } = this.#d;
    const done = [...ledger.leases]
      .filter(([, st]) => st.draining && (st.inFlight === 0 || nowMs - st.drainSinceMs >= drainTimeoutMs))
      .map(([p]) => p)
      .sort(ascending);
    if (done.length === 0) return;
    await store.releasePartitions(queue, owner, done);
    for (const p of done) ledger.leases.delete(p);
    log.info({ queue, partitions: done }, 'partitions released');
  }
}
