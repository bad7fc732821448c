// The slices of @q/store, @q/partition-consumer and @q/quota the pipeline uses (docs/design/api.md),
// as narrow structural types so the request logic reads (and is tested) without the wiring.

/** A request generation. */
export interface Key {
  id: string;
  token: string;
}

/** A dispatched request as the partition worker hands it over (`@q/store` `Request`). */
export interface QueuedRequest extends Key {
  queue: string;
  /** Unix seconds. */
  deadline: number;
  envelope: string;
  payload: Uint8Array;
  partition: number;
  epoch: number;
  attempt: number;
  cancelled: boolean;
}

/** What the handler decides for one dispatch (`@q/partition-consumer` `Outcome`). */
export type Outcome =
  | { result: { route: string; payload: string; expiresAt?: number } }
  /** Park the request until `retryAt` (Unix s), storing `envelope` (retry_count persisted). */
  | { retryAt: number; envelope?: string }
  /** Back to pending, not before `defer` (Unix s): gate refusal, shutdown. No result. */
  | { defer: number };

/** Batched cancellation lookups (`RequestStore.cancelledKeys`). */
export interface CancelSource {
  cancelledKeys(keys: Key[]): Promise<Key[]>;
}

/** Gives a concurrency slot back. */
export type Release = () => unknown;

/** The quota client (`@q/quota` `Quota`). */
export interface QuotaPort {
  acquire(key: string, limit: number, signal?: AbortSignal): Promise<Release | null>;
  admit(key: string, limit: number, windowMs: number, signal?: AbortSignal): Promise<boolean>;
}
