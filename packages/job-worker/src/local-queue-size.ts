/** Weight of the newest sample in the moving averages of handler and round-trip time. */
const EWMA_WEIGHT = 0.2;
/** Handler times below this count as this (a no-op handler would ask for an unbounded queue). */
const MIN_HANDLER_MS = 0.01;

/**
 * The most jobs an adaptive local queue holds: 128 per slot and 1,024 in all. Only jobs far
 * shorter than a round trip reach it. For them a refill of a few hundred jobs amortises what
 * every statement costs whatever its size (the round trip, the commit, the executor's start):
 * at concurrency 8 on no-op jobs a cap of 256 drained about 27,000 jobs/s, 1,024 about 33,000
 * (PostgreSQL 15 on the 2-core bench machine). Beyond about 1,000 a statement grows slower by
 * more than it saves, and it only holds leases longer.
 */
export function autoPrefetchMax(concurrency: number): number {
  return Math.min(1024, 128 * concurrency);
}

/**
 * How many jobs a worker keeps leased ahead of its free slots. Fixed (the `prefetch` option), or
 * adaptive (`'auto'`, the default): enough to keep every slot busy for two round trips of the
 * claim statement at the measured handler time — `2 × concurrency × roundTrip / handler` — so
 * slots never wait for a refill, and never more than {@link autoPrefetchMax}. Jobs that take long
 * against a round trip (most real handlers: 100 ms against 2 ms) get a local queue of 0 and are
 * claimed only for free slots; no-op jobs get the cap. Either way a job waits in the local queue
 * for about two round trips at most, so it never starves an idle worker for longer: a job
 * enqueued meanwhile goes to whichever worker has room. Until both times are measured the size is
 * 0 (claims only for free slots).
 */
export class LocalQueueSize {
  readonly #fixed: number | undefined;
  readonly #concurrency: number;
  readonly #max: number;
  readonly #stalledMs: () => number;
  #handlerMs: number | undefined;
  #roundTripMs: number | undefined;

  /**
   * `stalledMs()`: how long every slot has been busy without one freeing up (0 while a slot is
   * free). A handler that has run that long takes at least that long, so a stall counts as the
   * handler time when longer: a worker whose handlers block stops filling its local queue at once,
   * without waiting for one of them to finish.
   */
  constructor(concurrency: number, prefetch: number | 'auto', stalledMs: () => number = () => 0) {
    this.#concurrency = concurrency;
    this.#stalledMs = stalledMs;
    this.#fixed = prefetch === 'auto' ? undefined : prefetch;
    this.#max = autoPrefetchMax(concurrency);
  }

  /** Whether the size adapts to measurements. */
  get adaptive(): boolean {
    return this.#fixed === undefined;
  }

  /** The local queue's size now. */
  get size(): number {
    if (this.#fixed !== undefined) return this.#fixed;
    // Nothing measured yet: claim only for free slots (jobs may be long; an idle peer may want them).
    if (this.#handlerMs === undefined || this.#roundTripMs === undefined) return 0;
    const handlerMs = Math.max(this.#handlerMs, this.#stalledMs(), MIN_HANDLER_MS);
    const perTrip = (this.#concurrency * this.#roundTripMs) / handlerMs;
    return Math.min(this.#max, Math.round(2 * perTrip));
  }

  /** A handler ran for `ms`. */
  handler(ms: number): void {
    this.#handlerMs = ewma(this.#handlerMs, ms);
  }

  /** A claim round trip took `ms`. */
  roundTrip(ms: number): void {
    this.#roundTripMs = ewma(this.#roundTripMs, ms);
  }
}

function ewma(avg: number | undefined, sample: number): number {
  return avg === undefined ? sample : avg + EWMA_WEIGHT * (sample - avg);
}
