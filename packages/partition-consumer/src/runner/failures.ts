// Handler failures (a throw, or an outcome that fails the store's checks) of each request
// generation: how long to wait before running it again, and when to stop. A handler that answers
// invalidly answers so again, and every run repeats its work (a dispatcher re-sends its inference
// call): so the retries are few, spaced out, bounded by the request's deadline, and then give up.
import type { Request } from '@q/store';
import { errorFields, type Logger } from '../logger.js';
import type { PartitionWorkerOptions } from './options.js';
import { settlementOf, type Settlement } from './outcome.js';

/** Longest wait between two runs of a failing request, ms. */
export const MAX_FAILURE_DELAY_MS = 300_000;

/** Generations remembered at most (a failure that is never settled again must not grow the map). */
const REMEMBERED = 10_000;

/**
 * Set-aside time of a request nobody can answer: `not_before` so far out that it is never
 * dispatched again (it stays pending and counted in the backlog until an operator acts).
 */
export const SET_ASIDE_NOT_BEFORE = Number.MAX_SAFE_INTEGER;

/** Why a handler gave no outcome (what `failureResult` is told). */
export interface Failure {
  reason: string;
  error?: unknown;
}

/** What the runner does after one failure. */
export type FailureStep = { kind: 'retry'; at: number; failures: number } | { kind: 'give-up'; failures: number };

/** Counts failures per request generation and decides the next step. */
export class HandlerFailures {
  readonly #counts = new Map<string, number>();
  readonly #max: number;
  readonly #baseMs: number;

  constructor(max: number, baseMs: number) {
    this.#max = max;
    this.#baseMs = baseMs;
  }

  /**
   * Records a failure of `req` at `nowMs`. Gives up at the `max`-th failure in a row, or at once
   * when the request's deadline has passed (no later run can answer it in time); otherwise the
   * next run waits `baseMs · 2^(n−1)` (at most {@link MAX_FAILURE_DELAY_MS}), and never past the
   * deadline, so the last run still sees the request before it expires.
   */
  failed(req: Request, nowMs: number): FailureStep {
    const key = keyOf(req);
    const failures = (this.#counts.get(key) ?? 0) + 1;
    this.#counts.delete(key); // re-inserted last: the oldest entry is the one evicted
    const deadlineMs = req.deadline * 1000;
    if (failures >= this.#max || nowMs >= deadlineMs) return { kind: 'give-up', failures };
    this.#counts.set(key, failures);
    if (this.#counts.size > REMEMBERED) this.#counts.delete(this.#counts.keys().next().value as string);
    const delay = Math.min(this.#baseMs * 2 ** (failures - 1), MAX_FAILURE_DELAY_MS);
    const at = Math.min(nowMs + delay, Math.max(deadlineMs, nowMs + this.#baseMs));
    return { kind: 'retry', at: Math.ceil(at / 1000), failures };
  }

  /** `req` got a valid outcome: its count starts again. */
  settled(req: Request): void {
    if (this.#counts.size > 0) this.#counts.delete(keyOf(req));
  }
}

const keyOf = (r: Request): string => `${r.id}\u0000${r.token}`;

/**
 * The result `failureResult` gives for a request the runner gave up on, checked like any result;
 * `undefined` (logged) when there is none, it threw, or it is not valid.
 */
export function fallbackSettlement(
  fallback: PartitionWorkerOptions['failureResult'],
  req: Request,
  failure: Failure & { failures: number },
  log: Logger,
  fields: Record<string, unknown>,
): Extract<Settlement, { kind: 'result' }> | undefined {
  if (!fallback) return undefined;
  let answer: Settlement;
  try {
    answer = settlementOf({ result: fallback(req, failure) }, req);
  } catch (err) {
    log.error({ ...errorFields(err), ...fields }, 'failureResult threw');
    return undefined;
  }
  if (answer.kind === 'result') return answer;
  log.error({ ...fields, invalid: answer.kind === 'invalid' ? answer.reason : answer.kind }, 'failureResult gave no valid result');
  return undefined;
}
