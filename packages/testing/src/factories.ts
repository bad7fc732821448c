import { randomBytes } from 'node:crypto';

/** `n` ids `prefix-0` … `prefix-(n-1)`. */
export function ids(prefix: string, n: number): string[] {
  return Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
}

/**
 * The first id `prefix-N` (N from 0) that lands in partition `p` under `partitionOf` (pass `partitionOf` from
 * `@q/store`; the kit does not import it, see {@link StoreClass}).
 */
export function idInPartition(prefix: string, p: number, partitionOf: (id: string) => number): string {
  for (let i = 0; i < 100_000; i++) {
    const id = `${prefix}-${i}`;
    if (partitionOf(id) === p) return id;
  }
  throw new Error(`idInPartition: no id for partition ${p}`);
}

/** A fresh generation token (32 hex digits). */
export function token(bytes = 16): string {
  return randomBytes(bytes).toString('hex');
}

/** A request as `RequestStore.enqueue` takes it (the shape of `NewRequest` from `@q/store`). */
export interface RequestInput {
  id: string;
  token: string;
  queue: string;
  deadline: number;
  envelope: string;
  payload: Buffer;
}

/** A request with defaults: queue `q`, deadline 1000, envelope `{}`, payload = utf8(id), a fresh token. */
export function newRequest<T extends object = Partial<RequestInput>>(id: string, over: T = {} as T): RequestInput & T {
  return { id, token: token(), queue: 'q', deadline: 1000, envelope: '{}', payload: Buffer.from(id), ...over };
}

/** Requests on `queue` with the given ids, deadline `deadline` (default an hour from now), envelope `{"id":…}`. */
export function newRequests(queue: string, idList: readonly string[], deadline = Math.floor(Date.now() / 1000) + 3600): RequestInput[] {
  return idList.map((id) => ({ id, token: token(8), queue, deadline, envelope: JSON.stringify({ id }), payload: Buffer.from(id) }));
}

/** A job as `JobStore.enqueue` takes it (queue `default`, type `t` unless given). */
export function newJob<T extends object>(over: T = {} as T): { queue: string; type: string } & T {
  return { queue: 'default', type: 't', ...over };
}
