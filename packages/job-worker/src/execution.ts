import type { JobLease, JobStore, LeasedJob, Step } from '@q/store/jobs';
import { ProgressReporter } from './progress.js';
import { StepRecorder } from './step-recorder.js';

/** The timeline of an attempt that recorded no step (most): one array for all, read only. */
const NO_STEPS: readonly Step[] = Object.freeze([]);

/**
 * Where one attempt is:
 * - `buffered`: claimed, waiting in the prefetch buffer (holds no slot);
 * - `running`: its handler runs (holds a slot);
 * - `recording`: the handler settled (slot freed), its outcome is being written;
 * - `done`: forgotten (outcome written, fenced, discarded, or the job given back).
 */
export type ExecutionState = 'buffered' | 'running' | 'recording' | 'done';

/**
 * One attempt in flight, from the claim until its outcome is written or given back. Identified by
 * its lease (job id and token), not by the job: after a lease lapses the same worker may claim the
 * job again while the stale attempt still runs, and both must stay tracked until each settles.
 */
export class Execution {
  readonly job: LeasedJob;
  readonly lease: JobLease;
  /** Created on first use: most handlers never look at their signal. */
  #controller: AbortController | undefined;
  /** Where the timeline is written (fenced by this attempt's lease). */
  readonly #store: Pick<JobStore, 'updateSteps' | 'updateProgress'>;
  /** Created when the handler first records a step (most never do). */
  #recorder: StepRecorder | undefined;
  /** Created when the handler first reports progress (most never do). */
  progressReporter: ProgressReporter | undefined;
  /** The delay `ctx.snooze` asked for: the attempt ends snoozed, whatever the handler then does. */
  snoozeMs: number | undefined;
  state: ExecutionState = 'buffered';
  /** A cancel was requested: the outcome is `cancelled`. */
  cancelRequested = false;
  /** The lease is known lost (fenced, lapsing unrenewed, or the job claimed again): nothing more is recorded. */
  leaseLost = false;
  /**
   * The lease was given up because it could not be renewed in time: the database may still hold
   * it, so once the handler has stopped the job is given back (fenced) rather than left to lapse.
   */
  unrenewed = false;
  /** Given back by a stop (prefetched) or a timed-out drain: the handler's outcome is discarded. */
  released = false;
  /**
   * Until when (`performance.now()` clock) the lease surely holds: the send time of the claim or
   * of the last renewal that came back, plus the lease duration. The database computes the
   * expiry later than the send, on its own clock, so its lease never ends before this.
   */
  leaseUntil: number;

  constructor(job: LeasedJob, leaseUntil: number, store: Pick<JobStore, 'updateSteps' | 'updateProgress'>) {
    this.job = job;
    this.lease = { id: job.id, leaseToken: job.leaseToken };
    this.leaseUntil = leaseUntil;
    this.#store = store;
  }

  /** The attempt's step timeline (the handler's `steps`). */
  get recorder(): StepRecorder {
    this.#recorder ??= new StepRecorder((steps) => this.#store.updateSteps(this.lease, steps).catch(() => false));
    return this.#recorder;
  }

  /** The attempt's progress reporter (`ctx.progress`), fenced by this attempt's lease. */
  get progress(): ProgressReporter {
    this.progressReporter ??= new ProgressReporter((value) => this.#store.updateProgress(this.lease, value));
    return this.progressReporter;
  }

  /**
   * The timeline the outcome writes: the attempt's own, or, when the handler recorded no step, an
   * empty one (shared, frozen) replacing an earlier attempt's; `undefined` (the stored one is
   * kept) when that is already empty, as it is for most jobs. Nothing else writes the timeline
   * while this attempt holds the lease (step writes are fenced by it), so the one read at the
   * claim is still the stored one.
   */
  get steps(): readonly Step[] | undefined {
    if (this.#recorder) return this.#recorder.steps;
    return this.job.steps.length === 0 ? undefined : NO_STEPS;
  }

  /** Aborts the handler's signal (with `reason`); a signal asked for later starts aborted. */
  get controller(): AbortController {
    this.#controller ??= new AbortController();
    return this.#controller;
  }

  /** The lease is still ours as far as this process knows: renew it, and write its outcome. */
  get held(): boolean {
    return !this.leaseLost && !this.released && this.state !== 'done';
  }
}
