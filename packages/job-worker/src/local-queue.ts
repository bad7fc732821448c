import { at } from '@q/schema/internal';
import { claimOrder } from '@q/store/jobs';
import type { Execution } from './execution.js';

/**
 * The jobs a worker holds leased ahead of its free slots, not yet started, in claim order
 * (priority DESC, run_at, id). A slot that frees up takes the head at once, without a round trip.
 *
 * It holds up to about a thousand jobs and turns them all over every few milliseconds when jobs
 * are short, so its operations are linear at most: `shift` moves a head index instead of the
 * array, and `push` merges a claim's jobs (already in claim order) into the waiting ones.
 */
export class LocalQueue {
  #items: Execution[] = [];
  /** Index of the first waiting item; the ones before it were taken. */
  #head = 0;

  /** Jobs waiting. */
  get length(): number {
    return this.#items.length - this.#head;
  }

  /**
   * Adds a claim's executions, in claim order. A claim never returns a job ahead of one queued
   * earlier in claim order except by priority or run_at: the queue is kept in claim order across
   * rounds.
   */
  push(executions: readonly Execution[]): void {
    if (executions.length === 0) return;
    const incoming = isSorted(executions) ? executions : [...executions].sort(byClaimOrder);
    const waiting = this.#items.slice(this.#head);
    this.#head = 0;
    if (waiting.length === 0 || byClaimOrder(at(waiting, waiting.length - 1), at(incoming, 0)) <= 0) {
      waiting.push(...incoming);
      this.#items = waiting;
      return;
    }
    // Merge two sorted runs; on a tie the job already waiting stays first.
    const merged: Execution[] = new Array<Execution>(waiting.length + incoming.length);
    let i = 0;
    let j = 0;
    let k = 0;
    while (i < waiting.length && j < incoming.length) {
      merged[k++] = byClaimOrder(at(incoming, j), at(waiting, i)) < 0 ? at(incoming, j++) : at(waiting, i++);
    }
    while (i < waiting.length) merged[k++] = at(waiting, i++);
    while (j < incoming.length) merged[k++] = at(incoming, j++);
    this.#items = merged;
  }

  /** The next job to start, or undefined. */
  shift(): Execution | undefined {
    if (this.#head >= this.#items.length) return undefined;
    const e = this.#items[this.#head];
    this.#head++;
    if (this.#head === this.#items.length) {
      this.#items = [];
      this.#head = 0;
    }
    return e;
  }

  /** Drops `e` if it is still waiting here; false if it had started (or was never queued). */
  remove(e: Execution): boolean {
    if (e.state !== 'buffered') return false;
    const i = this.#items.indexOf(e, this.#head);
    if (i >= 0) this.#items.splice(i, 1);
    return true;
  }

  /** Removes up to `n` jobs from the tail (the last in claim order), returning them. */
  takeLast(n: number): Execution[] {
    return n <= 0 ? [] : this.#items.splice(Math.max(this.#head, this.#items.length - n));
  }

  /** Empties the queue, returning what waited (to give back on stop). */
  takeAll(): Execution[] {
    const left = this.#items.slice(this.#head);
    this.#items = [];
    this.#head = 0;
    return left;
  }
}

function byClaimOrder(a: Execution, b: Execution): number {
  return claimOrder(a.job, b.job);
}

function isSorted(items: readonly Execution[]): boolean {
  for (let i = 1; i < items.length; i++) if (byClaimOrder(at(items, i - 1), at(items, i)) > 0) return false;
  return true;
}
