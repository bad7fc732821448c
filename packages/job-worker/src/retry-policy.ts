import { redactDsn } from '@q/schema';
import { outcomeProblem, type JobLease, type JobOutcome, type LeasedJob } from '@q/store/jobs';
import { retryBackoffMs } from './backoff.js';

// What an attempt's end becomes in the table, decided without I/O: a failure is retried with
// backoff until the job's attempts are used up (or at once dead-lettered when asked), and an
// outcome the store would refuse is replaced by a failed attempt saying why.

/** The attempt an outcome belongs to: the job as claimed and its lease. */
export interface AttemptRef {
  readonly job: Pick<LeasedJob, 'attempt' | 'maxAttempts'>;
  readonly lease: JobLease;
}

/**
 * The outcome of a failed attempt: `dead_letter` when asked (`deadLetter`) or when this was the
 * job's last attempt, otherwise `retry_wait` after {@link retryBackoffMs} of the attempt.
 */
export function failureOutcome(a: AttemptRef, message: string, retryBaseMs: number, deadLetter = false): JobOutcome {
  const { job } = a;
  return deadLetter || job.attempt >= job.maxAttempts
    ? { ...a.lease, status: 'dead_letter', error: message }
    : { ...a.lease, status: 'retry_wait', error: message, retryDelayMs: retryBackoffMs(job.attempt, retryBaseMs) };
}

/**
 * What is recorded instead of `outcome`, which the store refuses for `problem`: a success
 * becomes a failed attempt saying why; a failure or cancel keeps its status (and retry delay)
 * with the error replaced. The message never quotes the value.
 */
export function refusedOutcome(a: AttemptRef, outcome: JobOutcome, problem: string, retryBaseMs: number): JobOutcome {
  const what = /^steps\b/.test(problem) ? 'step timeline' : outcome.status === 'succeeded' ? 'result' : 'error';
  const message = `the handler's ${what} cannot be stored: ${problem}`;
  return outcome.status === 'succeeded' ? failureOutcome(a, message, retryBaseMs) : { ...outcome, error: message };
}

/**
 * The outcome as the store will take it. One it would refuse (a result JSON cannot carry
 * faithfully — a Map, a Set, NUL… — or over 64 MiB; an error text over 64 MiB) becomes a failed
 * attempt saying why, retried like a thrown error: otherwise it could not be recorded at all,
 * the job would sit `running` until its lease lapsed, and it could fail the batch it rides in.
 * Checked by the store's own rule ({@link outcomeProblem}).
 */
export function storableOutcome(a: AttemptRef, outcome: JobOutcome, retryBaseMs: number): JobOutcome {
  const problem = outcomeProblem(outcome);
  return problem === undefined ? outcome : refusedOutcome(a, outcome, problem, retryBaseMs);
}

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** `text` with what Postgres text cannot hold (NUL, a lone surrogate) replaced by U+FFFD, visibly. */
export function storableText(text: string): string {
  return text.replaceAll('\u0000', '\ufffd').replace(LONE_SURROGATE, '\ufffd');
}

/** Most stack frames kept with a failed attempt's error. */
export const MAX_STACK_FRAMES = 30;
/** Most characters of stack kept with a failed attempt's error. */
export const MAX_STACK_CHARS = 4_096;

const FRAME = /^\s+at /;

/**
 * The failing call's stack as kept with its error: the `at …` frame lines of `err.stack` only —
 * never its message lines, which may quote the payload (the message is stored on its own) — at
 * most {@link MAX_STACK_FRAMES} frames and {@link MAX_STACK_CHARS} characters, DSNs redacted,
 * NUL and lone surrogates replaced. `undefined` when `err` carries no stack frames.
 */
export function failureStack(err: unknown): string | undefined {
  const stack = err instanceof Error ? err.stack : undefined;
  if (typeof stack !== 'string') return undefined;
  const frames: string[] = [];
  let chars = 0;
  for (const line of stack.split('\n')) {
    if (!FRAME.test(line)) continue;
    const frame = storableText(redactDsn(line.trim()));
    if (frames.length >= MAX_STACK_FRAMES || chars + frame.length + 1 > MAX_STACK_CHARS) {
      frames.push('…');
      break;
    }
    frames.push(frame);
    chars += frame.length + 1;
  }
  return frames.length > 0 ? frames.join('\n') : undefined;
}
