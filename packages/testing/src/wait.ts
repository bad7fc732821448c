/** How {@link waitFor} polls. */
export interface WaitForOptions<T> {
  /** Give up after this long (default 30 s: the test machine may be loaded). */
  readonly timeoutMs?: number;
  /** Poll interval (default 25 ms). */
  readonly everyMs?: number;
  /** Named in the timeout error: `timed out after N ms waiting for <what>`. */
  readonly what?: string;
  /** When a value counts as done (default: truthy). */
  readonly done?: (value: T) => boolean;
}

/** The values {@link waitFor} can resolve with when `done` is the default truthiness test. */
export type Truthy<T> = Exclude<T, undefined | null | false | 0 | ''>;

/**
 * Polls `check` until its value is done (truthy by default) and resolves with that value; fails
 * after `timeoutMs`. The positional forms `waitFor(check, timeoutMs, everyMs)` and
 * `waitFor(check, timeoutMs, what)` are the ones the suites already used.
 */
export async function waitFor<T>(
  check: () => T | Promise<T>,
  timeoutOrOptions: number | WaitForOptions<T> = {},
  everyOrWhat?: number | string,
): Promise<Truthy<T>> {
  const o: WaitForOptions<T> = typeof timeoutOrOptions === 'number' ? { timeoutMs: timeoutOrOptions } : timeoutOrOptions;
  const timeoutMs = o.timeoutMs ?? 30_000;
  const everyMs = typeof everyOrWhat === 'number' ? everyOrWhat : (o.everyMs ?? 25);
  const what = typeof everyOrWhat === 'string' ? everyOrWhat : (o.what ?? 'condition');
  const done = o.done ?? ((v: T) => Boolean(v));
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (done(v)) return v as Truthy<T>;
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** Resolves after `ms`. */
export function sleep(ms: number): Promise<void> {
  return new Promise<void>((resolve) => setTimeout(resolve, ms));
}

/** What {@link runWorkerUntil} drives: a job worker's `run` and `wait` (structural: the kit depends on no worker package). */
export interface RunnableWorker {
  run(signal: AbortSignal): Promise<void>;
  wait(timeoutMs: number): Promise<void>;
}

/**
 * Runs `worker` until `done()` holds (polled by {@link waitFor} for up to `timeoutMs`), then
 * stops it: aborts its run, awaits it, and waits up to `drainMs` for its attempts to settle.
 * The worker is stopped also when `done` never holds (the timeout is then rethrown).
 */
export async function runWorkerUntil(
  worker: RunnableWorker,
  done: () => unknown,
  { timeoutMs, drainMs }: { timeoutMs: number; drainMs: number },
): Promise<void> {
  const ac = new AbortController();
  const run = worker.run(ac.signal);
  try {
    await waitFor(done, timeoutMs);
  } finally {
    ac.abort();
    await run;
    await worker.wait(drainMs);
  }
}
