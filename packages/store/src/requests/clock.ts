/**
 * Submission-order stamps for `created_at`: client microseconds, strictly increasing within
 * this process. A batch reserves one value per row, so equal deadlines dispatch in submission
 * order within a call and across calls, even when calls come faster than the clock ticks.
 */
export class SubmissionClock {
  #last = 0;

  /** Reserves `n` consecutive stamps and returns the first. */
  reserve(n: number): number {
    const now = Date.now() * 1000;
    const first = Math.max(now, this.#last + 1);
    this.#last = first + n - 1;
    return first;
  }
}

/** One clock per process: every RequestStore of the process shares the ordering. */
export const submissionClock = new SubmissionClock();
