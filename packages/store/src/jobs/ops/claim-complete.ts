// The worker's hot path: claiming jobs and writing attempt outcomes, alone or in one round trip.
// Kept apart from the store facade because the lock-key race retries and the outcome chunking
// belong together: completeAndClaim is both at once.
import { at, invalidArgument } from '@q/schema';
import { prepareOutcomes, sliceBatch } from '../batches.js';
import { claimOrder } from '../claim-order.js';
import { claimJobs } from '../sql/claim-jobs.js';
import { completeAndClaimJobs } from '../sql/complete-and-claim-jobs.js';
import { completeJobs } from '../sql/complete-jobs.js';
import type { ClaimOptions, JobOutcome, LeasedJob } from '../types.js';
import { checkClaim } from '../validate.js';
import { CLAIM_RACE_RETRIES, isLockKeyRace, type JobStoreContext } from './context.js';

/** Result of `JobStore.completeAndClaim`. */
export interface CompleteAndClaimResult {
  /** Per outcome, in input order: whether it was written (false = fenced). */
  written: boolean[];
  /** The jobs leased, in claim order. */
  jobs: LeasedJob[];
}

/** `JobStore.claim`: one claim statement, a lock-key race retried at once (never surfaced). */
export async function claim(ctx: JobStoreContext, opts: ClaimOptions): Promise<LeasedJob[]> {
  const claim = checkClaim(opts);
  return ctx.op('claim', async () => {
    for (let attempt = 0; ; attempt++) {
      try {
        const plan = ctx.starts.plan(claim.queues);
        const got = await claimJobs(ctx.scope, ctx.pool, { ...claim, starts: plan.params });
        ctx.starts.record(plan, claim.queues, claim.limit, got);
        return got.jobs.sort(claimOrder);
      } catch (err) {
        if (!isLockKeyRace(err) || attempt >= CLAIM_RACE_RETRIES) {
          if (isLockKeyRace(err)) return [];
          throw err;
        }
      }
    }
  });
}

/** `JobStore.completeAndClaim`: the older outcomes alone, the last chunk with the claim in one statement. */
export async function completeAndClaim(
  ctx: JobStoreContext,
  outcomes: readonly JobOutcome[],
  opts: ClaimOptions,
): Promise<CompleteAndClaimResult> {
  if (!Array.isArray(outcomes)) throw invalidArgument('outcomes must be an array');
  const prepared = prepareOutcomes(outcomes);
  const checked = checkClaim(opts);
  if (outcomes.length === 0) return { written: [], jobs: await claim(ctx, opts) };
  return ctx.op(
    'complete_claim',
    async () => {
      // Every outcome is written but for the fenced ones each statement reports (usually none).
      const fenced = new Set<string>();
      const { batch, chunks } = prepared;
      // Rare (a worker submits fewer): the older outcomes alone first, the last chunk with the claim.
      for (const [from, to] of chunks.slice(0, -1)) {
        for (const k of await completeJobs(ctx.scope, ctx.pool, sliceBatch(batch, from, to))) fenced.add(k);
      }
      const [from, to] = at(chunks, chunks.length - 1);
      const last = sliceBatch(batch, from, to);
      for (let attempt = 0; ; attempt++) {
        try {
          const plan = ctx.starts.plan(checked.queues);
          const r = await completeAndClaimJobs(ctx.scope, ctx.pool, last, { ...checked, starts: plan.params });
          ctx.starts.record(plan, checked.queues, checked.limit, r.claimed);
          for (const k of r.fenced) fenced.add(k);
          return { written: prepared.reportFenced(fenced), jobs: r.claimed.jobs.sort(claimOrder) };
        } catch (err) {
          if (!isLockKeyRace(err)) throw err;
          if (attempt >= CLAIM_RACE_RETRIES) {
            for (const k of await completeJobs(ctx.scope, ctx.pool, last)) fenced.add(k);
            return { written: prepared.reportFenced(fenced), jobs: [] };
          }
        }
      }
    },
    { 'job.count': outcomes.length },
  );
}

/** `JobStore.complete`: one statement per chunk of outcomes, each fenced by its lease token. */
export async function complete(ctx: JobStoreContext, outcomes: readonly JobOutcome[]): Promise<boolean[]> {
  if (!Array.isArray(outcomes)) throw invalidArgument('outcomes must be an array');
  const prepared = prepareOutcomes(outcomes);
  if (outcomes.length === 0) return [];
  return ctx.op(
    'complete',
    async () => {
      const fenced = new Set<string>();
      for (const [from, to] of prepared.chunks) {
        for (const k of await completeJobs(ctx.scope, ctx.pool, sliceBatch(prepared.batch, from, to))) fenced.add(k);
      }
      return prepared.reportFenced(fenced);
    },
    { 'job.count': outcomes.length },
  );
}
