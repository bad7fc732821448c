// The partitioned request queue of @q/store (docs/design/api.md#request-queue-store).
export { DEFAULT_MAX_CONNS } from '@q/schema';
export { checkCompletion, checkEnvelope, checkUnixSeconds } from './check.js';
export { partitionOf } from './partition.js';
export { RequestStore, Store } from './store.js';
export type { Backlog } from './sql/backlog.js';
export type { OwnerPartitions } from './sql/partition-owners.js';
export {
  MAX_VALUE_BYTES,
  PARTITIONS,
  keyOf,
  stampOf,
  type Completion,
  type Key,
  type Lease,
  type NewRequest,
  type Request,
  type Result,
  type Stamp,
} from './types.js';
