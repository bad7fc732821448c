import { claimOrder } from '@q/store';
import type { Execution } from './execution.js';

/**
 * The jobs a worker holds leased ahead of its free slots, not yet started, in claim order
 * (priority DESC, run_at, id). A slot that frees up takes the head at once, without a round trip.
 */
export class LocalQueue {
  #items: Execution[] = [];

  /** Jobs waiting. */
  get length(): number {
    return this.#items.length;
  }

  /**
   * Appends a claim's executions. A claim never returns a job ahead of one queued earlier in
   * claim order except by priority or run_at: the queue is kept in claim order across rounds.
   */
  push(executions: readonly Execution[]): void {
    const before = this.#items.length;
    this.#items.push(...executions);
    if (before > 0 && executions.length > 0) this.#items.sort((a, b) => claimOrder(a.job, b.job));
  }

  /** The next job to start, or undefined. */
  shift(): Execution | undefined {
    return this.#items.shift();
  }

  /** Drops `e` if it is still waiting here; false if it had started (or was never queued). */
  remove(e: Execution): boolean {
    if (e.state !== 'buffered') return false;
    const i = this.#items.indexOf(e);
    if (i >= 0) this.#items.splice(i, 1);
    return true;
  }

  /** Removes up to `n` jobs from the tail (the last in claim order), returning them. */
  takeLast(n: number): Execution[] {
    return n <= 0 ? [] : this.#items.splice(Math.max(0, this.#items.length - n));
  }

  /** Empties the queue, returning what waited (to give back on stop). */
  takeAll(): Execution[] {
    const left = this.#items;
    this.#items = [];
    return left;
  }
}
