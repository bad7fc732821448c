/** One request system opened on a run's database: what the request scenarios need. */
export interface RequestHarness {
  /** Enqueues requests `from…from+count-1` in one call. */
  enqueue(from: number, count: number): Promise<void>;
  /** Requests stored and not yet acked. */
  stored(): Promise<number>;
  /** Results written. */
  results(): Promise<number>;
  /**
   * Dispatches and acks (no-op handling) with `runners` concurrent dispatchers of `batch` each until
   * `onHandled` was called for `expected` requests; resolves when every ack is written.
   */
  drain(opts: { runners: number; batch: number; expected: number; onHandled(i: number): void }): Promise<void>;
  close(): Promise<void>;
}

/** A request queue the request scenarios compare. */
export interface RequestSystem {
  name: string;
  skip?(): Promise<string | undefined>;
  open(dsn: string, poolSize: number): Promise<RequestHarness>;
}

/** Queue and result route every request scenario uses. */
export const QUEUE = 'bench';
export const ROUTE = 'bench-results';
/** Every request carries this payload (byte-exactness is the store's own tests' business). */
export const PAYLOAD = Buffer.alloc(64, 7);

/** Request id of item `i`; {@link indexOf} inverts it. */
export const idOf = (i: number) => `r${i}`;
export const indexOf = (id: string) => Number(id.slice(1));
