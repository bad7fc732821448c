// Coalesces the workers' cancellation checks into one `cancelledKeys` statement per linger
// window (docs/design/dispatcher.md#loops: ≤ 256 keys, 5 ms).
import type { CancelSource, Key } from './ports.js';

interface Waiter {
  key: Key;
  resolve: (cancelled: boolean) => void;
  reject: (err: unknown) => void;
}

/** Batches `isCancelled` calls. */
export class CancelBatcher {
  #queue: Waiter[] = [];
  #timer: NodeJS.Timeout | undefined;

  readonly #source: CancelSource;
  readonly #maxBatch;
  readonly #lingerMs;

  constructor(source: CancelSource, maxBatch = 256, lingerMs = 5) {
    this.#source = source;
    this.#maxBatch = maxBatch;
    this.#lingerMs = lingerMs;
  }

  /** Whether this generation of the request is cancelled; rejects when the lookup fails. */
  isCancelled(key: Key): Promise<boolean> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ key, resolve, reject });
      if (this.#queue.length >= this.#maxBatch) this.#flush();
      else this.#timer ??= setTimeout(() => this.#flush(), this.#lingerMs);
    });
  }

  #flush(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    const batch = this.#queue.splice(0, this.#maxBatch);
    if (this.#queue.length > 0) this.#timer = setTimeout(() => this.#flush(), this.#lingerMs);
    if (batch.length === 0) return;
    const seen = new Map<string, Key>();
    for (const w of batch) seen.set(`${w.key.id}\u0000${w.key.token}`, { id: w.key.id, token: w.key.token });
    this.#source.cancelledKeys([...seen.values()]).then(
      (hits) => {
        const set = new Set(hits.map((k) => `${k.id}\u0000${k.token}`));
        for (const w of batch) w.resolve(set.has(`${w.key.id}\u0000${w.key.token}`));
      },
      (err: unknown) => {
        for (const w of batch) w.reject(err);
      },
    );
  }
}
