/** What one statement served for a batch of waiting callers. */
export interface BatchOutcome<T> {
  /** How many callers get {@link BatchOutcome.grant}'s value (the first ones, in arrival order). */
  granted: number;
  /** The value of one granted caller (called once per granted caller). */
  grant(): T;
  /** The value of every caller beyond `granted`. */
  refusal: T;
  /** Called with the number of grants whose callers gave up (aborted) while the statement ran. */
  unused(count: number): void;
}

interface Waiter<T> {
  resolve(value: T): void;
  reject(err: unknown): void;
  done: boolean;
}

interface Lane<T> {
  run: (n: number) => Promise<BatchOutcome<T>>;
  queue: Waiter<T>[];
}

/**
 * The admit batcher: per lane (a batching key such as `(key, limit)`), at most one statement is
 * in flight; callers arriving meanwhile queue and share the next statement, which asks for as
 * many units as there are callers. Grants go to the callers still waiting, in arrival order.
 */
export class Batcher<T> {
  readonly #lanes = new Map<string, Lane<T>>();
  readonly #pumps = new Set<Promise<void>>();
  readonly #refusing: () => unknown;

  /**
   * @param refusing Asked when a statement's outcome arrives: an error (e.g. `CLOSED` once the
   * client is closing) rejects every caller of that statement, and its grants go to `unused`, so
   * nobody is handed a grant that is about to stop counting. `undefined`: serve as usual.
   */
  constructor(refusing: () => unknown = () => undefined) {
    this.#refusing = refusing;
  }

  /**
   * Queues one caller on `lane`, served by `run(n)` (used only when the lane is idle: callers of
   * one lane share its semantics). If `signal` aborts first, the caller is rejected with its
   * reason; a grant that arrives later for it goes to `unused`.
   */
  enqueue(lane: string, run: (n: number) => Promise<BatchOutcome<T>>, signal?: AbortSignal): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => {
        if (waiter.done) return;
        waiter.done = true;
        const queued = this.#lanes.get(lane)?.queue;
        const at = queued ? queued.indexOf(waiter) : -1;
        if (at >= 0) queued?.splice(at, 1);
        reject(signal?.reason);
      };
      const waiter: Waiter<T> = {
        done: false,
        resolve: (v) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(v);
        },
        reject: (e) => {
          signal?.removeEventListener('abort', onAbort);
          reject(e);
        },
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      let l = this.#lanes.get(lane);
      if (l) {
        l.queue.push(waiter);
        return;
      }
      l = { run, queue: [waiter] };
      this.#lanes.set(lane, l);
      const pump = this.#pump(lane, l);
      this.#pumps.add(pump);
      void pump.finally(() => this.#pumps.delete(pump));
    });
  }

  /** Rejects every caller still queued (not yet sent) with `err`. */
  rejectQueued(err: unknown): void {
    for (const l of this.#lanes.values()) {
      for (const w of l.queue.splice(0)) settle(w, (x) => x.reject(err));
    }
  }

  /** Resolves once no statement is in flight and no caller is queued. */
  async idle(): Promise<void> {
    while (this.#pumps.size > 0) await Promise.allSettled([...this.#pumps]);
  }

  async #pump(lane: string, l: Lane<T>): Promise<void> {
    try {
      // Callers arriving in the same tick join the first statement.
      await Promise.resolve();
      while (l.queue.length > 0) {
        const batch = l.queue.splice(0);
        let outcome: BatchOutcome<T>;
        try {
          outcome = await l.run(batch.length);
        } catch (err) {
          for (const w of batch) settle(w, (x) => x.reject(err));
          continue;
        }
        let left = outcome.granted;
        const refusal = this.#refusing();
        for (const w of batch) {
          if (w.done) continue;
          if (refusal !== undefined) settle(w, (x) => x.reject(refusal));
          else if (left > 0) {
            left -= 1;
            settle(w, (x) => x.resolve(outcome.grant()));
          } else settle(w, (x) => x.resolve(outcome.refusal));
        }
        if (left > 0) outcome.unused(left);
      }
    } finally {
      // Synchronous with the last empty-queue check: a later caller starts a new pump.
      this.#lanes.delete(lane);
    }
  }
}

function settle<T>(w: Waiter<T>, fn: (w: Waiter<T>) => void): void {
  if (w.done) return;
  w.done = true;
  fn(w);
}
