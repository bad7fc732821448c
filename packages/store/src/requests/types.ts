/** Partitions per queue. Requests hash into them by id; dispatchers lease a share of them. */
export const PARTITIONS = 64;

/**
 * Largest variable-size data of one row, in bytes (UTF-8 for text): a request's envelope plus
 * payload, a result payload, a retry envelope. Larger ones are `INVALID_ARGUMENT` naming the
 * size; batches whose sum is larger are written in several statements of one transaction.
 */
export const MAX_VALUE_BYTES = 256_000_000;

/** Names one request generation: the public id and the token of one submission of it. */
export interface Key {
  id: string;
  token: string;
}

/** One dispatch of a request: every dispatch draws a fresh `attempt`. */
export interface Stamp extends Key {
  attempt: number;
}

/** A request to enqueue. */
export interface NewRequest {
  id: string;
  /** Generation token (e.g. 16 random bytes in hex per submission). */
  token: string;
  queue: string;
  /** Unix seconds. */
  deadline: number;
  /** The request minus its payload, typically JSON; replaced by `retry`. */
  envelope: string;
  /** Opaque bytes, returned byte-exact; may be empty. */
  payload: Uint8Array;
}

/** A dispatched request. */
export interface Request extends NewRequest {
  /** `partitionOf(id)`. */
  partition: number;
  /** The partition's epoch when this request was dispatched. */
  epoch: number;
  /** Fresh per dispatch. */
  attempt: number;
  /** Cancelled requests are still dispatched, flagged, so the caller can write their result. */
  cancelled: boolean;
}

/** The outcome of one dispatch, acknowledged with `ack`. */
export interface Completion extends Key {
  /** The attempt of the dispatch this completes. */
  attempt: number;
  /** Result queue the result goes to. */
  route: string;
  /** The result, typically JSON. */
  payload: string;
  /** Unix seconds; `0` or absent: never expires. */
  expiresAt?: number;
}

/** A result popped from a route. */
export interface Result {
  /** Global FIFO order. */
  seq: number;
  route: string;
  id: string;
  token: string;
  payload: string;
}

/** A partition lease held by an owner. */
export interface Lease {
  partition: number;
  epoch: number;
  /** A draining partition stays leased (acks work) but dispatches nothing new. */
  draining: boolean;
}

/** The `{ id, token }` of a request, completion or stamp (extra fields dropped). */
export function keyOf(r: Key): Key {
  return { id: r.id, token: r.token };
}

/** The stamp `{ id, token, attempt }` of a dispatched request. */
export function stampOf(r: Request): Stamp {
  return { id: r.id, token: r.token, attempt: r.attempt };
}
