// The partitioned request queue of @q/store (docs/design/api.md#request-queue-store).
export { DEFAULT_MAX_CONNS } from '@q/schema';
export { checkCompletion, checkEnvelope, checkUnixSeconds } from './check.js';
export { partitionOf } from './partition.js';
export { RequestStore, Store } from './store.js';
export {
  BatchStore,
  MAX_BATCH_FILE_BYTES,
  MAX_BATCH_FILE_LINES,
  type EnqueueInTransaction,
  type NewBatchFile,
  type UploadLimits,
} from './batch-store.js';
export {
  UNFINISHED_BATCH_STATUSES,
  type Batch,
  type BatchFile,
  type BatchFileLine,
  type BatchLineError,
  type BatchLineResult,
  type BatchRequestLine,
  type BatchStatus,
  type NewBatch,
  type Page,
} from './batch-types.js';
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
