// Lease upkeep of a worker: leased -> running, renewals, the step timeline and giving leases
// back. Every write here is fenced by the lease token and takes a batch of leases (`unnest`).
import { invalidArgument } from '@q/schema';
import { checkName } from '@q/schema/internal';
import { heartbeatJobs } from '../sql/heartbeat-jobs.js';
import { markJobsRunning } from '../sql/mark-jobs-running.js';
import { releaseClaims as releaseClaimRows, releaseJobs } from '../sql/release-jobs.js';
import { snoozeJob } from '../sql/snooze-job.js';
import { updateJobProgress } from '../sql/update-job-progress.js';
import { updateJobSteps } from '../sql/update-job-steps.js';
import type { JobLease, LeaseState, SnoozeResult, Step } from '../types.js';
import {
  DEFAULT_MAX_SNOOZES,
  checkClaimId,
  checkLease,
  checkLeaseMs,
  checkMaxSnoozes,
  checkSnoozeDelay,
  progressJson,
  splitLeases,
  stepsJson,
} from '../validate.js';
import type { JobStoreContext } from './context.js';

/** `JobStore.markRunning`. */
export async function markRunning(ctx: JobStoreContext, leases: readonly JobLease[]): Promise<LeaseState[]> {
  const { ids, tokens } = splitLeases(leases);
  if (ids.length === 0) return [];
  const rows = await ctx.op('mark_running', () => markJobsRunning(ctx.scope, ctx.pool, ids, tokens));
  return rows.map((r) => ({ id: Number(r.id), cancelRequested: r.cancel_requested }));
}

/** `JobStore.heartbeat`. */
export async function heartbeat(ctx: JobStoreContext, leases: readonly JobLease[], leaseMs: number): Promise<LeaseState[]> {
  const { ids, tokens } = splitLeases(leases);
  checkLeaseMs(leaseMs);
  if (ids.length === 0) return [];
  const rows = await ctx.op('heartbeat', () => heartbeatJobs(ctx.scope, ctx.pool, ids, tokens, leaseMs));
  return rows.map((r) => ({ id: Number(r.id), cancelRequested: r.cancel_requested }));
}

/** `JobStore.updateSteps`. */
export async function updateSteps(ctx: JobStoreContext, lease: JobLease, steps: readonly Step[]): Promise<boolean> {
  checkLease(lease);
  const json = stepsJson(steps);
  return ctx.op('update_steps', () => updateJobSteps(ctx.scope, ctx.pool, lease.id, lease.leaseToken, json));
}

/** `JobStore.updateProgress`. */
export async function updateProgress(ctx: JobStoreContext, lease: JobLease, progress: unknown): Promise<boolean> {
  checkLease(lease);
  const json = progressJson('updateProgress', progress);
  return ctx.op('update_progress', () => updateJobProgress(ctx.scope, ctx.pool, lease.id, lease.leaseToken, json));
}

/** `JobStore.snooze`. */
export async function snooze(ctx: JobStoreContext, lease: JobLease, delayMs: number, maxSnoozes = DEFAULT_MAX_SNOOZES): Promise<SnoozeResult> {
  checkLease(lease);
  const delay = checkSnoozeDelay('snooze', delayMs);
  const max = checkMaxSnoozes('snooze', maxSnoozes);
  const row = await ctx.opPuttingBack(
    'snooze',
    () => snoozeJob(ctx.scope, ctx.pool, lease.id, lease.leaseToken, delay, max, ctx.channel),
    (r) => r?.status === 'queued',
  );
  if (row === undefined) return { status: 'fenced', runAt: null, snoozes: null };
  if (row.status === 'scheduled' || row.status === 'queued') return { status: 'snoozed', runAt: row.run_at, snoozes: row.snoozes };
  return { status: row.status, runAt: null, snoozes: row.snoozes };
}

/** `JobStore.release`. */
export async function release(ctx: JobStoreContext, leases: readonly JobLease[]): Promise<number[]> {
  const { ids, tokens } = splitLeases(leases);
  if (ids.length === 0) return [];
  return ctx.opPuttingBack(
    'release',
    () => releaseJobs(ctx.scope, ctx.pool, ids, tokens, ctx.channel),
    (r) => r.length > 0,
  );
}

/** `JobStore.releaseClaims`. */
export async function releaseClaims(ctx: JobStoreContext, workerId: string, claimIds: readonly string[]): Promise<number[]> {
  if (typeof workerId !== 'string' || workerId === '') throw invalidArgument('releaseClaims: workerId must be a non-empty string');
  checkName('releaseClaims', 'workerId', workerId);
  if (!Array.isArray(claimIds)) throw invalidArgument('releaseClaims: claimIds must be an array of uuid strings');
  const ids = claimIds.map((id) => checkClaimId('releaseClaims', id));
  if (ids.length === 0) return [];
  return ctx.opPuttingBack(
    'release_claims',
    () => releaseClaimRows(ctx.scope, ctx.pool, workerId, ids, ctx.channel),
    (r) => r.length > 0,
  );
}
