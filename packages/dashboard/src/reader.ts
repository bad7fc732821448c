import type pg from 'pg';
import { StatementScope, type Statement } from '@q/schema/internal';
import { BATCHES } from './sql/batches.js';
import { DISPATCHERS } from './sql/dispatchers.js';
import { JOB_COUNTS } from './sql/job-counts.js';
import { listStatement } from './sql/list-jobs.js';
import { MAX_JOB_ID } from './sql/max-job-id.js';
import { PARTITIONS } from './sql/partitions.js';
import { PENDING_DEPTH } from './sql/pending-depth.js';
import { QUOTA_HOLDERS } from './sql/quota-holders.js';
import { QUOTA_KEYS } from './sql/quota-keys.js';
import { QUOTA_WINDOWS } from './sql/quota-windows.js';
import { RECENT_FLOWS } from './sql/recent-flows.js';
import { RESULT_ROUTES } from './sql/result-routes.js';
import { SCHEDULES } from './sql/schedules.js';
import { THROUGHPUT } from './sql/throughput.js';

/** A page of the job list's rows. */
export interface JobListRow {
  id: string;
  uuid: string;
  queue: string;
  job_type: string;
  status: string;
  attempt: number;
  max_attempts: number;
  job_group: string | null;
  run_at: Date;
  created_at: Date;
  finished_at: Date | null;
}

/** Filters of the job list (`null`: any). */
export interface JobFilter {
  status: string | null;
  queue: string | null;
  type: string | null;
  group: string | null;
  beforeId: string | null;
  /** The lowest id searched (null: no bound). */
  lowestId: string | null;
}

/** The job statuses a filter may name: the store's, in the enum's order. */
export { JOB_STATUSES } from '@q/store/jobs';

// 42P01: undefined_table — the module (requests, quota, flows) is not installed in this schema.
function missingTable(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === '42P01';
}

/** Runs the dashboard's read-only statements, bound to one schema. */
export class Reader {
  readonly #pool: pg.Pool;
  readonly #scope: StatementScope;

  constructor(pool: pg.Pool, schema: string) {
    this.#pool = pool;
    this.#scope = new StatementScope(schema);
  }

  async #rows<R extends pg.QueryResultRow>(stmt: Statement, values: unknown[] = []): Promise<R[]> {
    return (await this.#scope.run<R>(this.#pool, stmt, values)).rows;
  }

  /** `stmt`'s rows, or `null` when its module's tables are not installed. */
  async #optional<R extends pg.QueryResultRow>(stmt: Statement, values: unknown[] = []): Promise<R[] | null> {
    try {
      return await this.#rows<R>(stmt, values);
    } catch (err) {
      if (missingTable(err)) return null;
      throw err;
    }
  }

  /** Jobs per queue and status, each counted up to `cap` (see the statement). */
  jobCounts(cap: number) {
    return this.#optional<{ queue: string; status: string; n: string; capped: boolean }>(JOB_COUNTS, [cap]);
  }

  throughput() {
    return this.#optional<{ ago: number; status: string; n: string }>(THROUGHPUT);
  }

  listJobs(f: JobFilter, limit: number) {
    return this.#optional<JobListRow>(listStatement(f.status), [f.status, f.queue, f.type, f.group, f.beforeId, limit, f.lowestId]);
  }

  async maxJobId(): Promise<string | null> {
    const rows = await this.#optional<{ id: string | null }>(MAX_JOB_ID);
    return rows?.[0]?.id ?? null;
  }

  partitions() {
    return this.#optional<{
      queue: string;
      partition_id: number;
      owner: string;
      epoch: string;
      draining: boolean;
      lease_expires_ms: string;
      in_flight: string;
    }>(PARTITIONS);
  }

  dispatchers() {
    return this.#optional<{ queue: string; owner: string; expires_ms: string }>(DISPATCHERS);
  }

  pendingDepth() {
    return this.#optional<{ queue: string; pending: string; expired: string; within_1m: string; within_10m: string; later: string }>(
      PENDING_DEPTH,
    );
  }

  resultRoutes() {
    return this.#optional<{ route: string; depth: string }>(RESULT_ROUTES);
  }

  batches(limit: number) {
    return this.#optional<{
      id: string;
      tenant: string;
      queue: string;
      status: string;
      total: number;
      completed: number;
      failed: number;
      created_at: string;
    }>(BATCHES, [limit]);
  }

  quotaKeys() {
    return this.#optional<{ key: string; used: string; holders: string; last_limit: number | null }>(QUOTA_KEYS);
  }

  quotaHolders() {
    return this.#optional<{ holder: string; expires_ms: string; lapsed: boolean; now_ms: string; slots: string }>(QUOTA_HOLDERS);
  }

  quotaWindows() {
    return this.#optional<{ key: string; window_ms: string; admitted: string }>(QUOTA_WINDOWS);
  }

  recentFlows(limit: number) {
    return this.#optional<{ id: string; name: string | null; created_at: Date }>(RECENT_FLOWS, [limit]);
  }

  schedules() {
    return this.#optional<{
      name: string;
      cron: string;
      timezone: string;
      queue: string;
      job_type: string;
      next_fire_at: Date;
      last_slot: Date | null;
      paused_at: Date | null;
    }>(SCHEDULES);
  }
}
