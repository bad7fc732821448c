// The per-message admission gates of docs/design/dispatcher.md#gates (local-max-concurrency,
// tier-priority-admission): they decide message by message and may hold a grant until the message
// is finished, unlike the budget gates in budget.ts which only size a poll's batch.
import { CONTINUE, clamp, type Gate, type GateMessage, type GateRelease, type Verdict } from './types.js';

/** In-process concurrency limit (docs/design/dispatcher.md#gates). */
export class LocalMaxConcurrency implements Gate {
  #inFlight = 0;
  readonly #waiters: Array<() => void> = [];
  constructor(
    readonly limit: number,
    readonly blocking: boolean,
  ) {}
  async budget(): Promise<number> {
    return clamp((this.limit - this.#inFlight) / this.limit);
  }
  async apply(_msg: GateMessage, releases: GateRelease[], signal?: AbortSignal): Promise<Verdict> {
    while (this.#inFlight >= this.limit) {
      if (!this.blocking) return { kind: 'refuse' };
      if (signal?.aborted) throw new Error('gate wait aborted');
      await new Promise<void>((resolve, reject) => {
        const onAbort = () => {
          const i = this.#waiters.indexOf(wake);
          if (i >= 0) this.#waiters.splice(i, 1);
          reject(new Error('gate wait aborted'));
        };
        const wake = () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        };
        this.#waiters.push(wake);
        signal?.addEventListener('abort', onAbort, { once: true });
      });
    }
    this.#inFlight++;
    let done = false;
    releases.push(() => {
      if (done) return;
      done = true;
      this.#inFlight--;
      this.#waiters.shift()?.();
    });
    return CONTINUE;
  }
}

/** docs/design/dispatcher.md#gates: saturated ⇔ the inner gate refuses; then reserved waits, interactive overflow is shed, the rest refused. */
export function tierPriorityAdmission(inner: Gate, tierLabel: string): Gate {
  return {
    budget: async () => 1,
    async apply(msg, releases, signal) {
      const v = await inner.apply(msg, releases, signal);
      if (v.kind !== 'refuse') return v.kind === 'drop' ? v : CONTINUE;
      const cls = msg.labels.classification;
      if (cls === 'reserved') return { kind: 'wait' };
      if (msg.labels[tierLabel] === 'interactive' && cls === 'overflow') {
        return { kind: 'drop', result: { payload: JSON.stringify({ error: 'Too Many Requests', code: 429 }) } };
      }
      return { kind: 'refuse' };
    },
  };
}
