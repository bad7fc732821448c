import { sql } from 'drizzle-orm';
import {
  bigint,
  bigserial,
  foreignKey,
  index,
  integer,
  jsonb,
  pgSequence,
  pgTable,
  primaryKey,
  smallint,
  text,
  uniqueIndex,
} from 'drizzle-orm/pg-core';
import { bytea } from './bytea.js';

/** One row per (request id, generation token). Pending while `dispatch_epoch = 0`. */
export const qRequests = pgTable(
  'q_requests',
  {
    id: text('id').notNull(),
    requestToken: text('request_token').notNull(),
    queue: text('queue').notNull(),
    partitionId: integer('partition_id').notNull(),
    /** Unix seconds. */
    deadline: bigint('deadline', { mode: 'number' }).notNull(),
    /** Unix seconds; not dispatchable while `not_before > now`. */
    notBefore: bigint('not_before', { mode: 'number' }).notNull().default(0),
    dispatchEpoch: bigint('dispatch_epoch', { mode: 'number' }).notNull().default(0),
    dispatchAttempt: bigint('dispatch_attempt', { mode: 'number' }).notNull().default(0),
    cancelled: smallint('cancelled').notNull().default(0),
    envelope: text('envelope').notNull(),
    payload: bytea('payload').notNull(),
    /** Client clock microseconds at enqueue plus the index in the batch: the submission-order tie-breaker. */
    createdAt: bigint('created_at', { mode: 'number' }).notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.id, t.requestToken] }),
    index('q_requests_pending')
      .on(t.queue, t.deadline, t.createdAt)
      .where(sql`dispatch_epoch = 0`),
    index('q_requests_inflight')
      .on(t.queue, t.partitionId)
      .where(sql`dispatch_epoch > 0`),
  ],
);

/** Per-queue partition leases; 64 rows per queue. */
export const qPartitions = pgTable(
  'q_partitions',
  {
    queue: text('queue').notNull(),
    partitionId: integer('partition_id').notNull(),
    owner: text('owner').notNull().default(''),
    epoch: bigint('epoch', { mode: 'number' }).notNull().default(0),
    draining: smallint('draining').notNull().default(0),
    /** Unix milliseconds. */
    leaseExpiresMs: bigint('lease_expires_ms', { mode: 'number' }).notNull().default(0),
  },
  (t) => [primaryKey({ columns: [t.queue, t.partitionId] })],
);

/** Live dispatchers per queue (membership). */
export const qDispatchers = pgTable(
  'q_dispatchers',
  {
    queue: text('queue').notNull(),
    owner: text('owner').notNull(),
    /** Unix milliseconds. */
    expiresMs: bigint('expires_ms', { mode: 'number' }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.queue, t.owner] })],
);

/** Results waiting on routes, in global `seq` order. */
export const qResults = pgTable(
  'q_results',
  {
    seq: bigserial('seq', { mode: 'number' }).primaryKey(),
    route: text('route').notNull(),
    id: text('id').notNull(),
    requestToken: text('request_token').notNull(),
    payload: text('payload').notNull(),
    /** Unix seconds; 0 = never expires. */
    expiresAt: bigint('expires_at', { mode: 'number' }).notNull().default(0),
    /** Client clock milliseconds at ack. */
    createdAt: bigint('created_at', { mode: 'number' }).notNull(),
  },
  (t) => [
    index('q_results_route_seq').on(t.route, t.seq),
    index('q_results_expiry')
      .on(t.route, t.expiresAt)
      .where(sql`expires_at > 0`),
    index('q_results_expires_at')
      .on(t.expiresAt)
      .where(sql`expires_at > 0`),
  ],
);

/** Source of fresh dispatch attempts. */
export const qDispatchAttempts = pgSequence('q_dispatch_attempts');

/**
 * Files of the Batch API (`file-…`): an uploaded batch input, or a batch's output or error file.
 * Their content is in {@link qBatchFileLines}, one row per line, so no file is ever held whole in
 * memory. `status` is `uploading` until the last line is written (such a file is invisible),
 * then `processed`.
 */
export const qBatchFiles = pgTable(
  'q_batch_files',
  {
    id: text('id').primaryKey(),
    tenant: text('tenant').notNull(),
    /** `batch` (an input), `batch_output` (an output or error file). */
    purpose: text('purpose').notNull(),
    filename: text('filename').notNull(),
    bytes: bigint('bytes', { mode: 'number' }).notNull().default(0),
    lines: integer('lines').notNull().default(0),
    status: text('status').notNull().default('uploading'),
    /** Unix seconds, database clock. */
    createdAt: bigint('created_at', { mode: 'number' }).notNull(),
    /** Unix seconds; 0 = never expires. */
    expiresAt: bigint('expires_at', { mode: 'number' }).notNull().default(0),
  },
  (t) => [index('q_batch_files_tenant_created').on(t.tenant, t.createdAt, t.id)],
);

/** The content of a batch file: line `line_no` (from 1) with its terminator, so the lines in order are the file byte for byte. */
export const qBatchFileLines = pgTable(
  'q_batch_file_lines',
  {
    fileId: text('file_id').notNull(),
    lineNo: integer('line_no').notNull(),
    content: bytea('content').notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.fileId, t.lineNo] }),
    foreignKey({ columns: [t.fileId], foreignColumns: [qBatchFiles.id], name: 'q_batch_file_lines_file_fk' }).onDelete('cascade'),
  ],
);

/**
 * Batches of the Batch API (`batch_…`). `status`: `validating`, `failed`, `in_progress`,
 * `finalizing`, `completed`, `expired`, `cancelling`, `cancelled`. A batch in an unfinished state
 * is driven by whoever holds its lease (`lease_owner`, `lease_expires_ms`, database clock), so a
 * second process finishes the batch of one that died.
 */
export const qBatches = pgTable(
  'q_batches',
  {
    id: text('id').primaryKey(),
    tenant: text('tenant').notNull(),
    endpoint: text('endpoint').notNull(),
    /** The request queue its lines are enqueued on. */
    queue: text('queue').notNull(),
    inputFileId: text('input_file_id').notNull(),
    /** Created with the batch (status `uploading`); shown to clients once the batch is finished. */
    outputFileId: text('output_file_id'),
    errorFileId: text('error_file_id'),
    status: text('status').notNull().default('validating'),
    completionWindow: text('completion_window').notNull(),
    /** Unix seconds: creation plus the completion window; every request of the batch has this deadline. */
    deadline: bigint('deadline', { mode: 'number' }).notNull(),
    metadata: jsonb('metadata'),
    /** Validation errors, `[{ code, message, param, line }]`. */
    errors: jsonb('errors'),
    total: integer('total').notNull().default(0),
    completed: integer('completed').notNull().default(0),
    failed: integer('failed').notNull().default(0),
    /** Lines enqueued so far (in line order), so a driver that died resumes after them. */
    enqueuedLines: integer('enqueued_lines').notNull().default(0),
    promptTokens: bigint('prompt_tokens', { mode: 'number' }).notNull().default(0),
    completionTokens: bigint('completion_tokens', { mode: 'number' }).notNull().default(0),
    leaseOwner: text('lease_owner').notNull().default(''),
    /** Unix milliseconds, database clock. */
    leaseExpiresMs: bigint('lease_expires_ms', { mode: 'number' }).notNull().default(0),
    /** Unix seconds, database clock; the later ones are null until reached. */
    createdAt: bigint('created_at', { mode: 'number' }).notNull(),
    inProgressAt: bigint('in_progress_at', { mode: 'number' }),
    finalizingAt: bigint('finalizing_at', { mode: 'number' }),
    completedAt: bigint('completed_at', { mode: 'number' }),
    failedAt: bigint('failed_at', { mode: 'number' }),
    expiredAt: bigint('expired_at', { mode: 'number' }),
    cancellingAt: bigint('cancelling_at', { mode: 'number' }),
    cancelledAt: bigint('cancelled_at', { mode: 'number' }),
  },
  (t) => [
    index('q_batches_tenant_created').on(t.tenant, t.createdAt, t.id),
    index('q_batches_unfinished')
      .on(t.leaseExpiresMs)
      .where(sql`status IN ('validating', 'in_progress', 'finalizing', 'cancelling')`),
  ],
);

/**
 * One row per request line of a batch: the request-queue request it became (`request_id`) and
 * its state (0 pending, 1 completed, 2 failed, 3 expired, 4 cancelled). A result is written to the
 * output or error file only by the statement that moves the row out of pending, so no line is
 * reported twice.
 */
export const qBatchRequests = pgTable(
  'q_batch_requests',
  {
    batchId: text('batch_id').notNull(),
    lineNo: integer('line_no').notNull(),
    customId: text('custom_id').notNull(),
    requestId: text('request_id').notNull(),
    state: smallint('state').notNull().default(0),
  },
  (t) => [
    primaryKey({ columns: [t.batchId, t.lineNo] }),
    uniqueIndex('q_batch_requests_custom_id').on(t.batchId, t.customId),
    uniqueIndex('q_batch_requests_request_id').on(t.requestId),
    index('q_batch_requests_pending')
      .on(t.batchId)
      .where(sql`state = 0`),
    foreignKey({ columns: [t.batchId], foreignColumns: [qBatches.id], name: 'q_batch_requests_batch_fk' }).onDelete('cascade'),
  ],
);

// Deprecated aliases: the objects were renamed with the tables (async_* → q_*, migration 0003).
/** @deprecated Use {@link qRequests} (the table is now `q_…`). */
export const asyncRequests = qRequests;
/** @deprecated Use {@link qPartitions} (the table is now `q_…`). */
export const asyncPartitions = qPartitions;
/** @deprecated Use {@link qDispatchers} (the table is now `q_…`). */
export const asyncDispatchers = qDispatchers;
/** @deprecated Use {@link qResults} (the table is now `q_…`). */
export const asyncResults = qResults;
/** @deprecated Use {@link qDispatchAttempts} (the table is now `q_…`). */
export const asyncDispatchAttempts = qDispatchAttempts;
