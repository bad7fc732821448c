import { sql } from 'drizzle-orm';
import {
  bigint,
  check,
  index,
  integer,
  jsonb,
  pgEnum,
  pgTable,
  pgView,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from 'drizzle-orm/pg-core';
import { bytea } from './bytea.js';

/** Job states, in declaration order. There is no `failed`: see `retry_wait` and `dead_letter`. */
export const jobStatus = pgEnum('q_job_status', [
  'scheduled',
  'queued',
  'leased',
  'running',
  'retry_wait',
  'succeeded',
  'cancelled',
  'dead_letter',
  'waiting',
]);

/**
 * The columns of a job table in table order, with the three that differ between the tables given:
 * the id (an identity in `q_jobs`, copied in the archive), the uuid (unique in the archive, kept
 * unique by the id it carries in `q_jobs`) and the status (defaulted only where jobs are created).
 * Fresh builders per call.
 */
function jobColumns<I, U, S>(id: I, jobUuid: U, status: S) {
  return {
    id,
    uuid: jobUuid,
    queue: text('queue').notNull().default('default'),
    jobType: text('job_type').notNull(),
    payload: jsonb('payload')
      .notNull()
      .default(sql`'{}'::jsonb`),
    status,
    /** Higher is dequeued first. */
    priority: integer('priority').notNull().default(0),
    runAt: timestamp('run_at', { withTimezone: true }).notNull().defaultNow(),
    attempt: integer('attempt').notNull().default(0),
    maxAttempts: integer('max_attempts').notNull().default(5),
    idempotencyKey: text('idempotency_key'),
    lockKey: text('lock_key'),
    leasedBy: text('leased_by'),
    /** Fencing token of the current lease: every outcome write must present it. */
    leaseToken: uuid('lease_token'),
    leaseExpiresAt: timestamp('lease_expires_at', { withTimezone: true }),
    heartbeatAt: timestamp('heartbeat_at', { withTimezone: true }),
    cancelRequestedAt: timestamp('cancel_requested_at', { withTimezone: true }),
    lastError: text('last_error'),
    steps: jsonb('steps')
      .notNull()
      .default(sql`'[]'::jsonb`),
    result: jsonb('result'),
    retryOfId: bigint('retry_of_id', { mode: 'number' }),
    teamId: bigint('team_id', { mode: 'number' }),
    resourceId: bigint('resource_id', { mode: 'number' }),
    correlationId: uuid('correlation_id'),
    deadLetteredAt: timestamp('dead_lettered_at', { withTimezone: true }),
    finishedAt: timestamp('finished_at', { withTimezone: true }),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
    resumeCount: integer('resume_count').notNull().default(0),
    /** Times a handler snoozed the job (back to waiting without using an attempt); migration 0009. */
    snoozes: integer('snoozes').notNull().default(0),
    /** The last progress a handler reported (any JSON value), kept across attempts; migration 0009. */
    progress: jsonb('progress'),
    /** The key a pending job holds (queued or scheduled), per queue and type; cleared by a claim. Migration 0010. */
    jobKey: text('job_key'),
    /** The group the job belongs to (a tenant, a host; null: none), for fairness and per-group limits. Migration 0011. */
    jobGroup: text('job_group'),
    /** While leased or running under a concurrency limit: the limit and group whose slot it holds (see limitSlot). Migration 0011. */
    limitScope: uuid('limit_scope'),
    /** The slot number it holds under `limitScope`, below the limit; unique among leased/running jobs. Migration 0011. */
    limitSlot: integer('limit_slot'),
    /** The flow the job is a node of (null: none). Migration 0014. */
    flowId: uuid('flow_id'),
    /** The node's name in its flow. Migration 0014. */
    flowRef: text('flow_ref'),
    /** While `waiting`: how many of its parents are not done yet; it is queued when this reaches 0. Migration 0014. */
    parentsLeft: integer('parents_left'),
  };
}

/** The durable job queue's live jobs: finished ones move to {@link jobsArchive} (migration 0006). */
export const jobs = pgTable(
  'q_jobs',
  jobColumns(
    bigint('id', { mode: 'number' }).primaryKey().generatedAlwaysAsIdentity(),
    // Not unique on its own: a uuid q writes carries its row's id (migration 0007, q_job_uuid).
    uuid('uuid').notNull().defaultRandom(),
    jobStatus('status').notNull().default('queued'),
  ),
  (t) => [
    // The rows whose uuid carries no id (made before migration 0007, or inserted with a uuid of
    // another kind): the others are found, and kept unique, by the id theirs carries.
    uniqueIndex('q_jobs_other_uuid_key')
      .on(t.uuid)
      .where(sql`q_job_uuid_version(uuid) <> 8`),
    check(
      'q_jobs_uuid_carries_id',
      sql`q_job_uuid_version(uuid) <> 8 OR substring(uuid_send(uuid) FROM 1 FOR 8) = int8send(((id >> 12) << 16) | 32768 | (id & 4095))`,
    ),
    // Partial on what each index serves, so a job's hot-path updates (queued → running →
    // succeeded, all non-HOT since status is in index predicates) add no entries it cannot use.
    uniqueIndex('q_jobs_lock_key_active_key')
      .on(t.lockKey)
      .where(sql`status IN ('leased', 'running') AND lock_key IS NOT NULL`),
    index('q_jobs_dequeue_idx')
      .on(t.queue, t.priority.desc(), t.runAt, t.id)
      .where(sql`status = 'queued'`),
    // A group's queued jobs in dequeue order (the jobs without a group as one), for claims that
    // interleave groups (migration 0011).
    index('q_jobs_group_dequeue_idx')
      .on(t.queue, t.jobGroup, t.priority.desc(), t.runAt, t.id)
      .where(sql`status = 'queued'`),
    // The fence of per-group concurrency limits: one job per slot while it is leased or running.
    uniqueIndex('q_jobs_limit_slot_key')
      .on(t.limitScope, t.limitSlot)
      .where(sql`limit_scope IS NOT NULL AND status IN ('leased', 'running')`),
    index('q_jobs_lease_expiry_idx')
      .on(t.leaseExpiresAt)
      .where(sql`status IN ('leased', 'running')`),
    index('q_jobs_waiting_run_at_idx')
      .on(t.runAt)
      .where(sql`status IN ('scheduled', 'retry_wait')`),
    index('q_jobs_team_id_id_idx')
      .on(t.teamId, t.id.desc())
      .where(sql`team_id IS NOT NULL`),
    // For `list` by a rare status (a dead-letter listing would otherwise walk the primary key
    // through every finished job). Queued and succeeded rows are found by that walk at once,
    // leased/running ones through jobs_lease_expiry_idx, so the hot statuses stay out of it.
    index('q_jobs_flow_idx')
      .on(t.flowId)
      .where(sql`flow_id IS NOT NULL`),
    index('q_jobs_status_id_idx')
      .on(t.status, t.id.desc())
      .where(sql`status IN ('scheduled', 'retry_wait', 'dead_letter', 'cancelled')`),
  ],
);

/**
 * Finished jobs (succeeded, cancelled, dead_letter), moved out of {@link jobs} when they finish
 * (migration 0006): the same columns in the same order, without the hot table's indexes. Rows
 * stay until `purgeFinished` (succeeded, cancelled) or `forgetDeadLetter` and a purge.
 */
export const jobsArchive = pgTable(
  'q_jobs_archive',
  jobColumns(
    bigint('id', { mode: 'number' }).primaryKey(),
    uuid('uuid').notNull().unique('q_jobs_archive_uuid_key').defaultRandom(),
    jobStatus('status').notNull(),
  ),
  (t) => [
    check('q_jobs_archive_status_check', sql`status IN ('succeeded', 'cancelled', 'dead_letter')`),
    index('q_jobs_archive_status_id_idx')
      .on(t.status, t.id.desc())
      .where(sql`status IN ('dead_letter', 'cancelled')`),
    index('q_jobs_archive_team_id_id_idx')
      .on(t.teamId, t.id.desc())
      .where(sql`team_id IS NOT NULL`),
    index('q_jobs_archive_finished_at_idx').using('brin', t.finishedAt),
    index('q_jobs_archive_flow_idx')
      .on(t.flowId)
      .where(sql`flow_id IS NOT NULL`),
  ],
);

/**
 * Every kept idempotency key with the job holding it, live or archived: the uniqueness no index
 * on two tables could give. A key is held per queue and job type: `scope` is
 * `q_idempotency_scope(queue, job_type, idempotency_key)`, a sha256 digest of the three (migration
 * 0009). Written by the insert trigger of {@link jobs}, deleted with the job.
 */
export const jobIdempotencyKeys = pgTable('q_jobs_idempotency_keys', {
  scope: bytea('scope').primaryKey(),
  jobId: bigint('job_id', { mode: 'number' }).notNull(),
});

/** Live and finished jobs as one relation ({@link jobs} `UNION ALL` {@link jobsArchive}): read-only. */
export const allJobs = pgView(
  'q_jobs_all',
  jobColumns(bigint('id', { mode: 'number' }).notNull(), uuid('uuid').notNull(), jobStatus('status').notNull()),
).existing();

/**
 * Recurring jobs (migration 0008), one row per schedule name: the cron pattern and time zone, the
 * job each slot enqueues, and the scheduler's state. `next_fire_at` is the first slot not yet
 * enqueued (workers pick due schedules by its index); `last_slot` the latest slot enqueued. A
 * worker advances both with a compare-and-set in the statement that inserts the slot's job, so a
 * slot is enqueued once however many workers see it due.
 */
export const schedules = pgTable(
  'q_schedules',
  {
    name: text('name').primaryKey(),
    cron: text('cron').notNull(),
    timezone: text('timezone').notNull(),
    queue: text('queue').notNull(),
    jobType: text('job_type').notNull(),
    payload: jsonb('payload')
      .notNull()
      .default(sql`'{}'::jsonb`),
    priority: integer('priority').notNull().default(0),
    maxAttempts: integer('max_attempts').notNull().default(5),
    /** The group of every job it enqueues (null: none). Migration 0012. */
    jobGroup: text('job_group'),
    /** Null: after downtime only the latest missed slot is enqueued; else every slot of this window. */
    backfillMs: bigint('backfill_ms', { mode: 'number' }),
    nextFireAt: timestamp('next_fire_at', { withTimezone: true }).notNull(),
    lastSlot: timestamp('last_slot', { withTimezone: true }),
    /** When it was paused (null: running); a paused schedule is never due. Migration 0015. */
    pausedAt: timestamp('paused_at', { withTimezone: true }),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    // The running schedules only (migration 0015): a tick reads the due ones and the earliest next
    // fire time from it, so paused ones are never due.
    index('q_schedules_next_fire_at_idx')
      .on(t.nextFireAt)
      .where(sql`paused_at IS NULL`),
    check('q_schedules_payload_object', sql`jsonb_typeof(payload) = 'object'`),
    check('q_schedules_backfill_ms_check', sql`backfill_ms IS NULL OR backfill_ms > 0`),
  ],
);

/**
 * The slots of per-group rate limits (migration 0011): per limit and group (`scope`, md5 of the
 * rule's id and the group as a uuid) one row per slot, holding when a claim last took it. A slot
 * is taken again only once its last start is more than `window_ms` ago, so no window holds more
 * starts of a group than its limit. Rows whose window has passed are deleted by
 * `JobStore.purgeFinished`.
 */
export const jobRateSlots = pgTable(
  'q_job_rate_slots',
  {
    scope: uuid('scope').notNull(),
    slot: integer('slot').notNull(),
    startedAt: timestamp('started_at', { withTimezone: true }).notNull(),
    windowMs: integer('window_ms').notNull(),
  },
  (t) => [primaryKey({ name: 'q_job_rate_slots_pkey', columns: [t.scope, t.slot] })],
);

/**
 * Flows (migration 0014): one row per job graph inserted by `JobStore.flows.insert`. Its nodes are the
 * jobs whose `flow_id` names it; an idempotency key, when given, is unique among flows.
 */
export const flows = pgTable(
  'q_flows',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    name: text('name'),
    idempotencyKey: text('idempotency_key'),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    uniqueIndex('q_flows_idempotency_key_key')
      .on(t.idempotencyKey)
      .where(sql`idempotency_key IS NOT NULL`),
  ],
);

/**
 * The edges of flows (migration 0014): the child job waits for the parent job. `on_failure` is
 * what the parent's dead letter or cancel does to the child: `fail`, `continue`, `ignore` or
 * `cancel` (trigger `q_jobs_flow_finished`, per statement since migration 0015).
 */
export const jobEdges = pgTable(
  'q_job_edges',
  {
    parentId: bigint('parent_id', { mode: 'number' }).notNull(),
    childId: bigint('child_id', { mode: 'number' }).notNull(),
    onFailure: text('on_failure').notNull().default('fail'),
  },
  (t) => [
    primaryKey({ name: 'q_job_edges_pkey', columns: [t.parentId, t.childId] }),
    index('q_job_edges_child_idx').on(t.childId, t.parentId),
    check('q_job_edges_on_failure_check', sql`on_failure IN ('fail', 'continue', 'ignore', 'cancel')`),
    check('q_job_edges_no_self_check', sql`parent_id <> child_id`),
  ],
);

/**
 * Inference steps of flows (migration 0015): the flow node `job_id` (of type `q:request`) awaits
 * the request-queue request `(request_id, request_token)`, whose result finishes it (trigger
 * `q_flow_request_result` on `q_results`), or whose `deadline` (Unix seconds) passing fails it.
 */
export const flowRequests = pgTable(
  'q_flow_requests',
  {
    jobId: bigint('job_id', { mode: 'number' }).primaryKey(),
    requestId: text('request_id').notNull(),
    requestToken: text('request_token').notNull(),
    deadline: bigint('deadline', { mode: 'number' }).notNull(),
  },
  (t) => [uniqueIndex('q_flow_requests_key').on(t.requestId, t.requestToken), index('q_flow_requests_deadline_idx').on(t.deadline, t.jobId)],
);

/**
 * The span of each flow node's latest traced attempt (migration 0015): its W3C `traceparent`,
 * written when a worker with a tracer starts the attempt, read by the node's children to link
 * their spans to it. Deleted with its node by purge.
 */
export const flowSpans = pgTable('q_flow_spans', {
  jobId: bigint('job_id', { mode: 'number' }).primaryKey(),
  flowId: uuid('flow_id').notNull(),
  traceparent: text('traceparent').notNull(),
});

/**
 * What an inference step's request is made of (migration 0015), kept for the node's life so it
 * can be sent when the node is released and again by a retry: the request queue, the body (JSON
 * text), the tenant, and the deadline, absolute (`deadline`, Unix seconds) or counted from the send
 * (`deadlineSeconds`), exactly one of the two.
 */
export const flowRequestSpecs = pgTable(
  'q_flow_request_specs',
  {
    jobId: bigint('job_id', { mode: 'number' }).primaryKey(),
    queue: text('queue').notNull(),
    body: text('body').notNull(),
    tenant: text('tenant'),
    deadline: bigint('deadline', { mode: 'number' }),
    deadlineSeconds: integer('deadline_seconds'),
  },
  () => [check('q_flow_request_specs_deadline_check', sql`(deadline IS NULL) <> (deadline_seconds IS NULL)`)],
);
