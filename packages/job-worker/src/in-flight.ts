import type { Execution } from './execution.js';

/**
 * The attempts a worker has in flight, and the callers waiting for them to settle. An attempt is
 * tracked twice over: by lease token (a stale attempt stays until it settles, so a drain waits for
 * it) and as the latest attempt of its job (cancel notifications name the job, not the lease).
 */
export class InFlight {
  /** Every attempt in flight, by lease token. */
  readonly #byLease = new Map<string, Execution>();
  /** The latest attempt of each job in flight. */
  readonly #latest = new Map<number, Execution>();
  /** Callers of {@link InFlight.whenDrained} waiting for the last attempt to settle. */
  #drainWaiters: Array<() => void> = [];

  /** How many attempts are in flight. */
  get size(): number {
    return this.#byLease.size;
  }

  /** The latest attempt of job `id`, if one is in flight. */
  latest(id: number): Execution | undefined {
    return this.#latest.get(id);
  }

  /** Tracks `e` as the latest attempt of its job. */
  add(e: Execution): void {
    this.#byLease.set(e.job.leaseToken, e);
    this.#latest.set(e.job.id, e);
  }

  /** Forgets `e`; returns true (after waking the drain waiters) when nothing is left in flight. */
  forget(e: Execution): boolean {
    this.#byLease.delete(e.job.leaseToken);
    if (this.#latest.get(e.job.id) === e) this.#latest.delete(e.job.id);
    if (this.#byLease.size > 0) return false;
    for (const resolve of this.#drainWaiters.splice(0)) resolve();
    return true;
  }

  /** The attempts whose lease is still ours (to renew). */
  held(): Execution[] {
    return [...this.#byLease.values()].filter((e) => e.held);
  }

  /** The attempts whose handler has not finished (running, or prefetched and not started). */
  unfinished(): Execution[] {
    return [...this.#byLease.values()].filter((e) => e.state === 'running' || e.state === 'buffered');
  }

  /** Resolves once nothing is in flight. */
  whenDrained(): Promise<void> {
    if (this.#byLease.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#drainWaiters.push(resolve));
  }
}
