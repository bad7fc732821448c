// Where a claim starts reading a queue.
//
// A claim reads its queue's dequeue index from the head: the highest priority, the earliest
// run_at. Every job claimed leaves its `queued` entry behind in that index until vacuum removes
// it, and PostgreSQL skips such an entry cheaply only once no snapshot can still see the row
// version it points to. While some session holds an old snapshot open (a long report, a
// forgotten transaction in an admin console), none of the entries of the jobs claimed since can
// be skipped cheaply: every claim visits each of them, and its row in the table, before it
// reaches the first job still queued. That walk grows by one entry per job claimed: in the
// benchmark's drain under a snapshot held a minute (job-drain-held-xmin), the claim's time was
// mostly walk after a few seconds, and the worker kept about 38 % of its rate (91–94 % since).
//
// So a store remembers, per queue, where its latest claim ended if it came back full (the
// position of the last job it leased, in dequeue order) and starts the next claim past it: the
// queue's higher priorities are still read whole, and the prefix of the position's own priority
// is read only after the rest of that priority, before any lower one (claim-jobs.ts), so order
// across priorities is exact. What lies in that prefix is almost only what this claimer and its
// peers have already claimed. Not only, though: a job may land there after the claim passed (one
// enqueued by a transaction that committed late, with the run_at of its start; a released or
// reaped lease; a promoted retry or schedule), or stay there because it was passed over (its lock
// key was busy, another session held its row locked). Within their priority those come first by
// a claim from the head, and one is sent
//   - whenever the queue has no position: the first claim, and after any claim that came back
//     with fewer jobs than it asked for, which is the normal case for a worker that keeps up (so
//     a queue without a backlog is always read from its head, exactly as before);
//   - every HEAD_SCAN_EVERY_MS while a backlog lasts, or, when head scans are slow, as often as
//     keeps them to 1 / HEAD_SCAN_SHARE of the time (under a held snapshot a head scan is the
//     slow walk: its period grows with its cost, so it cannot take the rate back);
//   - for KEYED_HOLD_MS after the queue gave a job with a lock key: a queue that serializes jobs
//     by key has jobs waiting for a key in the prefix all the time, and each must start as soon
//     as its key is free;
//   - after this store released leases, reaped expired ones or promoted due jobs (all put jobs
//     back behind positions; positions are forgotten then, in one place: the store's operations
//     that put jobs back).
// Nothing is lost either way: a skipped job is only found later, never leased twice, since every
// lease is still taken under its row lock by the same statement. The cost is order, bounded:
// such a job may wait one head-scan period behind the backlog of its own priority, never behind a lower one.

import type { LeasedJob } from './types.js';

/** A backlog's queue is read from its head at least this often (ms). */
export const HEAD_SCAN_EVERY_MS = 250;
/** And at most so often that head scans take 1 / HEAD_SCAN_SHARE of the time. */
export const HEAD_SCAN_SHARE = 20;
/** A queue that gave a job with a lock key is read from its head for this long after (ms). */
export const KEYED_HOLD_MS = 60_000;

/**
 * A job's place in its queue's dequeue order (priority DESC, run_at, id), run_at exactly: UTC
 * text with microseconds (`2026-12-04T03:09:31.123456`), whose text order is time order.
 */
interface Position {
  priority: number;
  runAt: string;
  id: number;
}

/** The last job of a claim in dequeue order, and its queue. */
export interface ClaimEnd extends Position {
  queue: string;
}

/** What one claim statement leased, with the position of its last job in dequeue order. */
export interface ClaimedRows {
  jobs: LeasedJob[];
  /** The last job in dequeue order, with its exact run_at (absent when none was leased). */
  end: ClaimEnd | undefined;
  /** A grouped claim's: per queue, the group its next walk starts after (absent: unchanged). */
  cursors?: Map<string, string>;
  /** A grouped claim's: the jobs it left queued for a limit, per rule (1-based) and kind (absent: none). */
  refusals?: { rule: number; kind: 'concurrency' | 'rate'; count: number }[];
}

interface QueueState {
  position: Position | undefined;
  /** `performance.now()` when the last head scan was sent. */
  headScanAt: number;
  /**
   * What a head scan costs (ms): the shorter of the last two, so that one slow scan (the first of
   * a connection, which prepares the statement) does not space out the next ones.
   */
  headScanMs: number;
  lastHeadScanMs: number;
  /** Until when (`performance.now()`) every claim reads the queue from its head. */
  keyedUntil: number;
}

/** The start positions of one claim statement, aligned with its queues (NULL: from the head). */
export interface ClaimStartParams {
  priority: (number | null)[];
  runAt: (string | null)[];
  id: (number | null)[];
}

/** One claim's plan: its parameters, and what `ClaimStarts.record` needs to learn from it. */
export interface ClaimStartPlan {
  readonly params: ClaimStartParams;
  readonly sentAt: number;
  readonly fromHead: readonly boolean[];
}

/** A run_at text as the claim writes it (a year of four digits: any other is not compared). */
const RUN_AT_TEXT = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}$/;

/**
 * Per queue, where the next claim of a store starts (see the essay above): past the last job of
 * its latest claim when that came back full, or at the queue's head. Process-side bookkeeping only: a wrong position
 * delays a job until the next head scan, it never leases one twice.
 */
export class ClaimStarts {
  readonly #queues = new Map<string, QueueState>();

  #state(queue: string): QueueState {
    let s = this.#queues.get(queue);
    if (s === undefined) {
      s = { position: undefined, headScanAt: -Infinity, headScanMs: 0, lastHeadScanMs: 0, keyedUntil: -Infinity };
      this.#queues.set(queue, s);
    }
    return s;
  }

  /** The start positions for a claim of `queues` sent now. */
  plan(queues: readonly string[], now = performance.now()): ClaimStartPlan {
    const params: ClaimStartParams = { priority: [], runAt: [], id: [] };
    const fromHead: boolean[] = [];
    for (const queue of queues) {
      const s = this.#state(queue);
      const p = s.position;
      const headDue = now - s.headScanAt >= Math.max(HEAD_SCAN_EVERY_MS, HEAD_SCAN_SHARE * s.headScanMs);
      if (p === undefined || headDue || now < s.keyedUntil) {
        // Marked as sent at once, so the claims in flight beside this one do not scan too.
        s.headScanAt = now;
        fromHead.push(true);
        params.priority.push(null);
        params.runAt.push(null);
        params.id.push(null);
      } else {
        fromHead.push(false);
        params.priority.push(p.priority);
        params.runAt.push(p.runAt);
        params.id.push(p.id);
      }
    }
    return { params, sentAt: now, fromHead };
  }

  /** Learns from a claim of `queues` planned as `plan` that asked for `limit` jobs and leased `got`. */
  record(plan: ClaimStartPlan, queues: readonly string[], limit: number, got: ClaimedRows, now = performance.now()): void {
    const end = got.end;
    // Full means every one of `limit` jobs came from the queue of the claim's last job.
    let endQueueJobs = 0;
    const keyed = new Set<string>();
    for (const j of got.jobs) {
      if (j.queue === end?.queue) endQueueJobs++;
      if (j.lockKey !== null) keyed.add(j.queue);
    }
    queues.forEach((queue, i) => {
      const s = this.#state(queue);
      if (plan.fromHead[i] === true) {
        const ms = now - plan.sentAt;
        s.headScanMs = Math.min(ms, s.lastHeadScanMs);
        s.lastHeadScanMs = ms;
      }
      if (keyed.has(queue)) s.keyedUntil = Math.max(s.keyedUntil, now + KEYED_HOLD_MS);
      // The claim that came back last decides, also when it ended earlier in the order (it took
      // jobs of a higher priority, or behind the position). Of two claims in flight that one may
      // be the earlier sent: the next claim then reads again what the other passed, a little walk,
      // and a claim in flight across forget() may set a position past jobs put back, which the
      // next head scan finds. Neither leases a job twice.
      if (keyed.has(queue) || end === undefined || end.queue !== queue || endQueueJobs < limit || !RUN_AT_TEXT.test(end.runAt)) {
        // A claim that came back short has passed every job it could take: start at the head.
        // (One that came back full did so from one queue, whose job is the claim's last.)
        s.position = undefined;
      } else {
        s.position = { priority: end.priority, runAt: end.runAt, id: end.id };
      }
    });
  }

  /**
   * Every queue's next claim reads from its head: jobs were put back behind the positions. Called
   * in one place, the job store's operations that put jobs back (`JobStoreContext.opPuttingBack`).
   */
  forget(): void {
    for (const s of this.#queues.values()) s.position = undefined;
  }
}
