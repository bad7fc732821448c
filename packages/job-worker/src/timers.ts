import { invalidArgument } from '@q/schema';

/**
 * The longest delay `setTimeout` honours (2³¹−1 ms, about 24.8 days). Node fires a longer one
 * after 1 ms instead, so a timer option at or above it would turn into a busy loop.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * A timer option: absent (the default), or a finite number of milliseconds in
 * [`min`, {@link MAX_TIMER_MS}). Throws `INVALID_ARGUMENT` naming the option otherwise.
 */
export function timerOption(v: number | undefined, dflt: number, what: string, min = 0): number {
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0 || v < min || v >= MAX_TIMER_MS) {
    throw invalidArgument(`${what} must be a number of milliseconds${min > 0 ? ` of at least ${min}` : ' above 0'} and below 2^31-1`);
  }
  return v;
}

/** Resolves after `ms` (at most {@link MAX_TIMER_MS}; longer waits are cut to it). */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.min(Math.max(ms, 0), MAX_TIMER_MS)));
}

/**
 * Resolves true if `work` has not settled within `ms`, false once it has. A bound of
 * {@link MAX_TIMER_MS} or more is no bound (Node would fire such a timer at once).
 */
export async function timesOut(work: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      work.then(() => false),
      new Promise<boolean>((resolve) => {
        if (ms < MAX_TIMER_MS) timer = setTimeout(() => resolve(true), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
