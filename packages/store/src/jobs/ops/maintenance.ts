// The job table's maintenance, by role: the reaper (`reapExpired`: jobs whose lease lapsed go
// back to retry_wait, or to the dead letter after maxResumes crashes), the promoter (`promoteDue`:
// scheduled and retry_wait jobs whose run_at came become queued), and both as one round under a
// lock, which also fails the flows' inference steps whose request deadline passed with no result
// (sql/fail-late-flow-requests.ts) (`maintain`; a maintenance leader's fenced round: `maintainFenced` in leadership.ts). Pruning
// finished jobs (`JobStore.purgeFinished`) is the store's own, run by applications on a schedule.
//
// A round is not stopped by one row. Each step is one statement over every row it concerns: cheap,
// and all or nothing. A single row the statement cannot write (a scheduled job whose queue name is
// too long for the dequeue index, written by raw SQL; a job whose archive row cannot be written)
// fails the statement, and with it every round after, for the whole table: nothing is promoted or
// reaped again. So a round whose statement fails on a row's data (see ROW_PROBLEM) is run again
// carefully: each step in a savepoint, and a step that fails is retried on halves of its rows until
// the failing rows stand alone; each is then dead-lettered with the error (out of the hot table,
// kept for a human, see `JobStore.get`), and the others are written as usual. The careful run costs
// a few savepoints per round only while such a row exists; a round with none runs exactly as
// before.
import { redactDsn } from '@q/schema';
import { withTransaction, type StatementScope } from '@q/schema/internal';
import type pg from 'pg';
import { tryMaintenanceXactLock } from '../sql/maintenance-lock.js';
import { promoteDueJobs } from '../sql/promote-due-jobs.js';
import { failLateFlowRequests } from '../sql/fail-late-flow-requests.js';
import { reapExpiredLeases, type ReapedRow } from '../sql/reap-expired-leases.js';
import { deadLetterStuck, stepCandidates, type MaintenanceStep } from '../sql/stuck-rows.js';
import type { ReapedJob } from '../types.js';
import { checkMaxResumes } from '../validate.js';
import type { JobStoreContext } from './context.js';

/** Result of `JobStore.maintain`. */
export interface MaintenanceResult {
  reaped: ReapedJob[];
  promoted: number;
  /**
   * Jobs the round could not reap or promote (a row the statement fails on), dead-lettered with
   * the error so that the rest of the table goes on. Usually empty.
   */
  failed: MaintenanceFailure[];
}

/** The promoter: `JobStore.promoteDue` (a job it cannot promote is dead-lettered, see the essay above). */
export async function promoteDue(ctx: JobStoreContext): Promise<number> {
  return ctx.opPuttingBack(
    'promote',
    () =>
      carefully(
        () => promoteDueJobs(ctx.scope, ctx.pool, ctx.channel),
        async () => (await robustRound(ctx.pool, (client) => roundSteps(ctx.scope, client, ctx.channel, 0, true, 'promote'))).promoted,
      ),
    (promoted) => promoted > 0,
  );
}

/** The reaper: `JobStore.reapExpired` (a job it cannot reap is dead-lettered, see the essay above). */
export async function reapExpired(ctx: JobStoreContext, maxResumes: number): Promise<ReapedJob[]> {
  checkMaxResumes(maxResumes);
  return ctx.opPuttingBack(
    'reap',
    () =>
      carefully(
        async () => (await reapExpiredLeases(ctx.scope, ctx.pool, maxResumes)).map((r) => ({ id: Number(r.id), uuid: r.uuid, status: r.status })),
        async () => (await robustRound(ctx.pool, (client) => roundSteps(ctx.scope, client, ctx.channel, maxResumes, true, 'reap'))).reaped,
      ),
    (rows) => rows.length > 0,
  );
}

/** `JobStore.maintain`: the reaper then the promoter, in one transaction under the maintenance lock. */
export async function maintain(ctx: JobStoreContext, maxResumes: number): Promise<MaintenanceResult | null> {
  checkMaxResumes(maxResumes);
  return ctx.opPuttingBack(
    'maintain',
    () =>
      robustRound(ctx.pool, async (client, careful) => {
        if (!(await tryMaintenanceXactLock(ctx.scope, client))) return null;
        return roundSteps(ctx.scope, client, ctx.channel, maxResumes, careful);
      }),
    roundPutBack,
  );
}

/** Whether a maintenance round put jobs back in their queues (reaped, promoted or dead-lettered some). */
export function roundPutBack(result: MaintenanceResult | null): boolean {
  return result !== null && (result.reaped.length > 0 || result.promoted > 0 || result.failed.length > 0);
}

/** A job a maintenance round could not reap or promote, dead-lettered (or left) with the error. */
export interface MaintenanceFailure {
  id: number;
  /** The job's uuid (null when even its dead-lettering failed: it stays where it is). */
  uuid: string | null;
  /** The step that failed on it. */
  step: MaintenanceStep;
  /** The error, as recorded in the job's `lastError`. */
  error: string;
  /** Whether the job was dead-lettered (false: that failed too, and the next round tries again). */
  deadLettered: boolean;
}

/** What one round wrote. */
export interface RoundResult {
  reaped: ReapedJob[];
  promoted: number;
  /** Jobs the round could not reap or promote (usually empty). */
  failed: MaintenanceFailure[];
}

/** Rows one careful step isolates at most per round (the rest wait for the next round). */
export const CAREFUL_ROWS = 1_000;

// Errors of a row's data or of the table's constraints on it (data exceptions, integrity
// violations, program limits such as an index entry's size, errors raised by a trigger): another
// row would not fail so. Anything else (connection, timeout, permission, lock) fails the round.
const ROW_PROBLEM = /^(22|23|54|P0)/;

/** Whether `err` is a failure of one row's data (see ROW_PROBLEM), not of the round. */
export function isRowProblem(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && ROW_PROBLEM.test(code);
}

const reapedJob = (r: ReapedRow): ReapedJob => ({ id: Number(r.id), uuid: r.uuid, status: r.status });

/**
 * The round's steps on `client`, inside its transaction (`only` one of them when given): as single
 * statements, or `careful`ly (each step in a savepoint; see the essay above).
 */
export async function roundSteps(
  scope: StatementScope,
  client: pg.PoolClient,
  channel: string,
  maxResumes: number,
  careful: boolean,
  only?: MaintenanceStep,
): Promise<RoundResult> {
  if (!careful && only === undefined) {
    const reaped = await reapExpiredLeases(scope, client, maxResumes);
    const promoted = await promoteDueJobs(scope, client, channel);
    await failLateFlowRequests(scope, client);
    return { reaped: reaped.map(reapedJob), promoted, failed: [] };
  }
  const failed: MaintenanceFailure[] = [];
  const reaped =
    only === 'promote'
      ? []
      : await carefulStep<ReapedRow[]>(
          scope,
          client,
          'reap',
          failed,
          (ids) => reapExpiredLeases(scope, client, maxResumes, ids),
          [],
          (a, b) => [...a, ...b],
        );
  const promoted =
    only === 'reap'
      ? 0
      : await carefulStep<number>(
          scope,
          client,
          'promote',
          failed,
          (ids) => promoteDueJobs(scope, client, channel, ids),
          0,
          (a, b) => a + b,
        );
  if (only === undefined) await failLateFlowRequests(scope, client);
  return { reaped: reaped.map(reapedJob), promoted, failed };
}

/** `fast()`, and `careful()` instead when it failed on a row's data (see the essay above). */
export async function carefully<T>(fast: () => Promise<T>, careful: () => Promise<T>): Promise<T> {
  try {
    return await fast();
  } catch (err) {
    if (!isRowProblem(err)) throw err;
    return careful();
  }
}

/**
 * Runs `fn(txn)` in a transaction: first as single statements, and again carefully when that
 * failed on a row's data (see the essay above).
 */
export async function robustRound<T>(pool: pg.Pool, fn: (client: pg.PoolClient, careful: boolean) => Promise<T>): Promise<T> {
  return carefully(
    () => withTransaction(pool, (client) => fn(client, false)),
    () => withTransaction(pool, (client) => fn(client, true)),
  );
}

async function inSavepoint<T>(client: pg.PoolClient, fn: () => Promise<T>): Promise<{ ok: true; value: T } | { ok: false; err: unknown }> {
  await client.query('SAVEPOINT q_maintenance_step');
  try {
    const value = await fn();
    await client.query('RELEASE SAVEPOINT q_maintenance_step');
    return { ok: true, value };
  } catch (err) {
    if (!isRowProblem(err)) throw err;
    await client.query('ROLLBACK TO SAVEPOINT q_maintenance_step');
    return { ok: false, err };
  }
}

async function carefulStep<T>(
  scope: StatementScope,
  client: pg.PoolClient,
  step: MaintenanceStep,
  failed: MaintenanceFailure[],
  run: (ids: readonly number[] | null) => Promise<T>,
  none: T,
  merge: (a: T, b: T) => T,
): Promise<T> {
  const whole = await inSavepoint(client, () => run(null));
  if (whole.ok) return whole.value;
  const ids = await stepCandidates(scope, client, step, CAREFUL_ROWS);
  return isolate(ids);

  async function isolate(part: readonly number[]): Promise<T> {
    if (part.length === 0) return none;
    const got = await inSavepoint(client, () => run(part));
    if (got.ok) return got.value;
    if (part.length > 1) {
      const half = Math.ceil(part.length / 2);
      return merge(await isolate(part.slice(0, half)), await isolate(part.slice(half)));
    }
    const id = part[0] as number;
    const error = `maintenance: ${step} failed on this job, which was dead-lettered so that the rest of the table goes on: ${describe(got.err)}`;
    const dead = await inSavepoint(client, () => deadLetterStuck(scope, client, step, id, error));
    const uuid = dead.ok ? dead.value : null;
    failed.push({ id, uuid, step, error, deadLettered: uuid !== null });
    return none;
  }
}

// Postgres' message without its DETAIL; for a data exception or a program limit only the headline
// before the first ':', since the rest can quote the value (as databaseError does).
function describe(err: unknown): string {
  const code = String((err as { code?: unknown }).code);
  const message = err instanceof Error ? err.message : String(err);
  const text = /^(22|54)/.test(code) ? (message.split(':')[0] ?? message).trim() : message;
  return `${redactDsn(text)} (SQLSTATE ${code})`;
}
