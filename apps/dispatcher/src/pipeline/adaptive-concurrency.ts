// Adaptive concurrency per endpoint (issue 43): an AIMD window of calls in flight to each endpoint
// URL, in this process. A call over the latency target, a 429 or a 5xx shrinks the window by
// `decrease_factor`; calls that went well grow it by `increase_step` per window's worth of
// calls (about one step per round trip, as TCP does). The window never leaves [min, max]; the
// gates, the pools and `concurrency` still bound the calls on top of it.
import { metrics, type MeterProvider } from '@opentelemetry/api';

/** The knobs of {@link AdaptiveConcurrency} (`batch_api.adaptive_concurrency`, validated at load). */
export interface AdaptiveConcurrencySettings {
  /** Window of a new endpoint. */
  initial: number;
  /** Smallest window (at least 1). */
  min: number;
  /** Largest window. */
  max: number;
  /** A call that took longer than this, ms, counts as congestion. */
  latencyTargetMs: number;
  /** Window growth per window's worth of calls that went well. */
  increaseStep: number;
  /** Window multiplier on congestion, in (0, 1). */
  decreaseFactor: number;
}

/** How one call through the window ended. */
export type CallSignal = 'ok' | 'congested' | 'neutral';

/** A slot of an endpoint's window; `done` gives it back (once) with how the call went. */
export interface AdaptiveSlot {
  done(signal: CallSignal, latencyMs: number): void;
}

interface Waiter {
  resolve(slot: AdaptiveSlot | undefined): void;
}

class EndpointWindow {
  window: number;
  inFlight = 0;
  /** When the window last shrank: congestion seen by calls started before it is already answered. */
  lastDecrease = -Infinity;
  readonly waiters: Waiter[] = [];

  constructor(initial: number) {
    this.window = initial;
  }

  get limit(): number {
    return Math.floor(this.window);
  }
}

/** The AIMD windows of the endpoints this process calls. */
export class AdaptiveConcurrency {
  readonly #s: AdaptiveConcurrencySettings;
  readonly #windows = new Map<string, EndpointWindow>();
  readonly #now: () => number;

  constructor(settings: AdaptiveConcurrencySettings, meterProvider?: MeterProvider, now: () => number = () => performance.now()) {
    this.#s = settings;
    this.#now = now;
    const m = (meterProvider ?? metrics.getMeterProvider()).getMeter('@q/dispatcher');
    const gauge = m.createObservableGauge('q.dispatcher.adaptive.concurrency_limit', {
      description: 'Current adaptive concurrency limit (AIMD window) of calls in flight per endpoint.',
      unit: '{request}',
    });
    gauge.addCallback((r) => {
      for (const [endpoint, w] of this.#windows) r.observe(w.limit, { endpoint });
    });
  }

  /** The current limit of `endpoint` (the initial window when it was never called). */
  limit(endpoint: string): number {
    return this.#windows.get(endpoint)?.limit ?? Math.floor(this.#s.initial);
  }

  /** Calls in flight to `endpoint` through its window. */
  inFlight(endpoint: string): number {
    return this.#windows.get(endpoint)?.inFlight ?? 0;
  }

  /** Waits for a slot of `endpoint`'s window; `undefined` when `signal` aborted first. */
  acquire(endpoint: string, signal?: AbortSignal): Promise<AdaptiveSlot | undefined> {
    let w = this.#windows.get(endpoint);
    if (w === undefined) {
      w = new EndpointWindow(this.#s.initial);
      this.#windows.set(endpoint, w);
    }
    if (signal?.aborted) return Promise.resolve(undefined);
    if (w.inFlight < w.limit && w.waiters.length === 0) return Promise.resolve(this.#take(w));
    const win = w;
    return new Promise((resolve) => {
      const waiter: Waiter = {
        resolve: (slot) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(slot);
        },
      };
      const onAbort = (): void => {
        const i = win.waiters.indexOf(waiter);
        if (i >= 0) win.waiters.splice(i, 1);
        resolve(undefined);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      win.waiters.push(waiter);
    });
  }

  #take(w: EndpointWindow): AdaptiveSlot {
    w.inFlight += 1;
    const started = this.#now();
    let given = false;
    return {
      done: (signal, latencyMs) => {
        if (given) return;
        given = true;
        w.inFlight -= 1;
        this.#adjust(w, signal, latencyMs, started);
        this.#admit(w);
      },
    };
  }

  #adjust(w: EndpointWindow, signal: CallSignal, latencyMs: number, started: number): void {
    const s = this.#s;
    const congested = signal === 'congested' || (signal === 'ok' && latencyMs > s.latencyTargetMs);
    if (congested) {
      // One decrease per round: the calls already in flight when it shrank saw the old window.
      if (started < w.lastDecrease) return;
      w.window = Math.max(s.min, w.window * s.decreaseFactor);
      w.lastDecrease = this.#now();
      return;
    }
    if (signal === 'ok') w.window = Math.min(s.max, w.window + s.increaseStep / Math.max(1, w.limit));
  }

  #admit(w: EndpointWindow): void {
    while (w.inFlight < w.limit && w.waiters.length > 0) w.waiters.shift()?.resolve(this.#take(w));
  }
}
