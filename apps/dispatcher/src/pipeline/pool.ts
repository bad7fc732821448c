// Worker pools and merge policies (docs/design/dispatcher.md#components, #gates): a pool has `workers` slots shared
// by its queues; requests of those queues wait here for a slot, and the pool's merge policy picks
// who gets the next one:
// - `random-robin`: a uniformly random queue among those with waiting requests (FIFO inside one);
// - `tier-priority`: strict lanes `classPri × 3 + tierPri` (reserved before overflow/unclassified,
//   interactive < async < batch; unknown → batch), round-robin across queues inside a lane.

/** Merge policies of a pool. */
export type MergePolicy = 'random-robin' | 'tier-priority';

/** Gives a pool slot back. */
export type WorkerRelease = () => void;

interface Waiter {
  queue: string;
  grant: () => void;
}

const TIERS: Record<string, number> = { interactive: 0, async: 1, batch: 2 };

/** The lane of a request under `tier-priority` (0 = first served). */
export function laneOf(labels: Record<string, string>, tierLabel = 'tier'): number {
  const classPri = labels.classification === 'reserved' ? 0 : 1;
  const tierPri = TIERS[labels[tierLabel] ?? ''] ?? 2;
  return classPri * 3 + tierPri;
}

/** One worker pool. */
export class WorkerPool {
  #busy = 0;
  /** lane → queue → FIFO of waiters (random-robin uses lane 0 only). */
  readonly #lanes: Array<Map<string, Waiter[]>> = Array.from({ length: 6 }, () => new Map());
  /** Per lane: the queue served last (round-robin inside a lane). */
  readonly #last: Array<string | undefined> = Array.from({ length: 6 }, () => undefined);

  readonly #random: () => number;

  constructor(
    readonly id: string,
    readonly workers: number,
    readonly policy: MergePolicy = 'random-robin',
    random: () => number = Math.random,
  ) {
    this.#random = random;
  }

  /** Slots in use now. */
  get busy(): number {
    return this.#busy;
  }

  /** Requests waiting for a slot now. */
  get waiting(): number {
    let n = 0;
    for (const lane of this.#lanes) for (const l of lane.values()) n += l.length;
    return n;
  }

  /** Requests of `queue` waiting for a slot now (`…_queue_depth`). */
  waitingFor(queue: string): number {
    let n = 0;
    for (const lane of this.#lanes) n += lane.get(queue)?.length ?? 0;
    return n;
  }

  /**
   * Waits for a slot for a request of `queue` (with its labels, for `tier-priority`). Rejects
   * with `signal.reason` when `signal` aborts first (stop, lease lost), taking nothing.
   */
  acquire(queue: string, labels: Record<string, string>, signal?: AbortSignal): Promise<WorkerRelease> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.#busy < this.workers && this.waiting === 0) return Promise.resolve(this.#take());
    const map = this.#lane(this.policy === 'tier-priority' ? laneOf(labels) : 0);
    return new Promise<WorkerRelease>((resolve, reject) => {
      const w: Waiter = {
        queue,
        grant: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve(this.#take());
        },
      };
      const onAbort = () => {
        const list = map.get(queue);
        const i = list?.indexOf(w) ?? -1;
        if (i >= 0) list?.splice(i, 1);
        if (list?.length === 0) map.delete(queue);
        reject(signal?.reason);
      };
      map.set(queue, [...(map.get(queue) ?? []), w]);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** The waiters of lane `i` (laneOf gives 0–5, one map each). */
  #lane(i: number): Map<string, Waiter[]> {
    const map = this.#lanes[i];
    if (!map) throw new RangeError(`pool: lane must be 0–${this.#lanes.length - 1}, got ${i}`);
    return map;
  }

  #take(): WorkerRelease {
    this.#busy++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.#busy--;
      this.#next()?.grant();
    };
  }

  /** Removes and returns the waiter the policy serves next. */
  #next(): Waiter | undefined {
    for (let lane = 0; lane < this.#lanes.length; lane++) {
      const map = this.#lanes[lane];
      if (!map || map.size === 0) continue;
      const queues = [...map.keys()].sort();
      let q: string;
      if (this.policy === 'random-robin') q = queues[Math.floor(this.#random() * queues.length)] ?? (queues[0] as string);
      else {
        // Round-robin: the next queue (by name) after the one this lane served last.
        const last = this.#last[lane];
        q = (last !== undefined ? queues.find((x) => x > last) : undefined) ?? (queues[0] as string);
        this.#last[lane] = q;
      }
      const list = map.get(q) ?? [];
      const w = list.shift();
      if (list.length === 0) map.delete(q);
      return w;
    }
    return undefined;
  }
}
