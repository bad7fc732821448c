// The worker's hot path: claiming jobs and writing attempt outcomes, alone or in one round trip
// (completeAndClaim), with the lock-key race retries and the outcome chunking.
import { QError, invalidArgument } from '@q/schema';
import { at } from '@q/schema/internal';
import type pg from 'pg';
import { prepareOutcomes, sliceBatch } from '../batches.js';
import { claimOrder } from '../claim-order.js';
import { claimJobs } from '../sql/claim-jobs.js';
import { completeAndClaimGroupedJobs, completeAndClaimJobs, type CompleteAndClaimRows } from '../sql/complete-and-claim-jobs.js';
import { claimGroupedJobs } from '../sql/claim-grouped-jobs.js';
import type { ClaimedRows } from '../claim-starts.js';
import { completeJobs } from '../sql/complete-jobs.js';
import { releaseJobs } from '../sql/release-jobs.js';
import type { ClaimOptions, JobOutcome, LeasedJob } from '../types.js';
import { checkClaim } from '../validate.js';
import { CLAIM_RACE_RETRIES, closedError, isLockKeyRace, type JobStoreContext } from './context.js';

/** Result of `JobStore.completeAndClaim`. */
export interface CompleteAndClaimResult {
  /** Per outcome, in input order: whether it was written (false = fenced). */
  written: boolean[];
  /** The jobs leased, in claim order. */
  jobs: LeasedJob[];
}

/**
 * Runs a claiming operation on one connection of the pool. A claim that comes back after the
 * store's `close()` began (a worker's drain timed out with the statement in flight, and its owner
 * closed the store) gives the jobs it leased back on that same connection — the pool takes no new
 * work once closing — before `close()` can end it: nobody would ever run them, and they would sit
 * leased until their leases lapsed. The caller then gets `CLOSED` for the claim.
 */
async function onClaimConnection<T>(ctx: JobStoreContext, fn: (db: pg.PoolClient) => Promise<T>, leased: (r: T) => LeasedJob[]): Promise<T> {
  const client = await ctx.pool.connect();
  let broken = false;
  // A checked-out client has no listener of the pool's: a connection reset while it is out (a
  // lost reply, a terminated backend) would be an unhandled 'error' event that ends the process.
  // The statement rejects on its own; the client is then discarded below.
  const onError = (): void => {
    broken = true;
  };
  client.on('error', onError);
  try {
    const r = await fn(client);
    const jobs = leased(r);
    if (ctx.closed() && jobs.length > 0) {
      await releaseJobs(
        ctx.scope,
        client,
        jobs.map((j) => j.id),
        jobs.map((j) => j.leaseToken),
        ctx.channel,
      );
      throw closedError();
    }
    return r;
  } catch (err) {
    // A connection-level failure (no SQLSTATE) leaves the connection unusable: it is discarded.
    const code = (err as { code?: unknown } | null)?.code;
    broken ||= !(err instanceof QError) && !(typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code));
    throw err;
  } finally {
    client.removeListener('error', onError);
    client.release(broken);
  }
}

/** `JobStore.claim`: one claim statement, a lock-key or limit-slot race retried at once (never surfaced). */
export async function claim(ctx: JobStoreContext, opts: ClaimOptions): Promise<LeasedJob[]> {
  const claim = checkClaim(opts);
  return ctx.op('claim', () =>
    onClaimConnection(
      ctx,
      async (db) => {
        for (let attempt = 0; ; attempt++) {
          try {
            const groups = ctx.groups.plan(claim.queues, claim.groups);
            let got: ClaimedRows;
            if (groups === undefined) {
              const plan = ctx.starts.plan(claim.queues);
              got = await claimJobs(ctx.scope, db, { ...claim, starts: plan.params });
              ctx.starts.record(plan, claim.queues, claim.limit, got);
            } else {
              got = await claimGroupedJobs(ctx.scope, db, claim, groups);
            }
            ctx.groups.record(got, claim.groups);
            return got.jobs.sort(claimOrder);
          } catch (err) {
            if (!isLockKeyRace(err) || attempt >= CLAIM_RACE_RETRIES) {
              if (isLockKeyRace(err)) return [];
              throw err;
            }
          }
        }
      },
      (jobs) => jobs,
    ),
  );
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
    () =>
      onClaimConnection(
        ctx,
        async (db) => {
          // Every outcome is written but for the fenced ones each statement reports (usually none).
          const fenced = new Set<string>();
          const { batch, chunks } = prepared;
          // Rare (a worker submits fewer): the older outcomes alone first, the last chunk with the claim.
          for (const [from, to] of chunks.slice(0, -1)) {
            for (const k of await completeJobs(ctx.scope, db, sliceBatch(batch, from, to))) fenced.add(k);
          }
          const [from, to] = at(chunks, chunks.length - 1);
          const last = sliceBatch(batch, from, to);
          for (let attempt = 0; ; attempt++) {
            try {
              const groups = ctx.groups.plan(checked.queues, checked.groups);
              let r: CompleteAndClaimRows;
              if (groups === undefined) {
                const plan = ctx.starts.plan(checked.queues);
                r = await completeAndClaimJobs(ctx.scope, db, last, { ...checked, starts: plan.params });
                ctx.starts.record(plan, checked.queues, checked.limit, r.claimed);
              } else {
                r = await completeAndClaimGroupedJobs(ctx.scope, db, last, checked, groups);
              }
              ctx.groups.record(r.claimed, checked.groups);
              for (const k of r.fenced) fenced.add(k);
              return { written: prepared.reportFenced(fenced), jobs: r.claimed.jobs.sort(claimOrder) };
            } catch (err) {
              if (!isLockKeyRace(err)) throw err;
              if (attempt >= CLAIM_RACE_RETRIES) {
                for (const k of await completeJobs(ctx.scope, db, last)) fenced.add(k);
                return { written: prepared.reportFenced(fenced), jobs: [] };
              }
            }
          }
        },
        (r) => r.jobs,
      ),
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
