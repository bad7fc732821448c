import { sql } from 'drizzle-orm';
import { bigint, bigserial, index, integer, pgSequence, pgTable, primaryKey, smallint, text } from 'drizzle-orm/pg-core';
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
