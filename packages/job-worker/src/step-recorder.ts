import type { Step } from '@q/store/jobs';

/** Persists a timeline; resolves false when the write was refused (lease lost). */
export type StepWriter = (steps: Step[]) => Promise<boolean>;

/**
 * A job attempt's step timeline. Each attempt starts empty, so its first write replaces the
 * previous attempt's timeline. Every change is written at once (fenced by the lease token) and
 * awaited; a failed write never fails the job. An empty timeline is `[]`.
 */
export class StepRecorder {
  readonly #write: StepWriter;
  readonly #steps: Step[] = [];
  #chain: Promise<void> = Promise.resolve();

  /** @param write persists the whole timeline (the worker passes a fenced store write). */
  constructor(write: StepWriter) {
    this.#write = write;
  }

  /** A copy of the timeline so far. */
  get steps(): Step[] {
    return this.#steps.map((s) => ({ ...s }));
  }

  /** Appends a `running` step (an earlier running step is left as is) and writes the timeline. */
  start(name: string): Promise<void> {
    this.#steps.push({ name: String(name), status: 'running', started_at: timestamp(new Date()) });
    return this.flush();
  }

  /**
   * Marks the last step `succeeded` (whatever its status), with `message` if not empty. Does
   * nothing on an empty timeline.
   */
  succeed(message?: string): Promise<void> {
    return this.#finish('succeeded', message);
  }

  /** Marks the last step `failed`, like {@link StepRecorder.succeed}. */
  fail(message?: string): Promise<void> {
    return this.#finish('failed', message);
  }

  /** Appends a `skipped` step with `message` (kept even when empty) and equal start/finish times. */
  skip(name: string, message: string): Promise<void> {
    const t = timestamp(new Date());
    this.#steps.push({ name: String(name), status: 'skipped', message: String(message ?? ''), started_at: t, finished_at: t });
    return this.flush();
  }

  /** Writes the timeline as it is now, after any earlier write; never rejects. */
  flush(): Promise<void> {
    const snapshot = this.steps;
    this.#chain = this.#chain.then(() =>
      this.#write(snapshot).then(
        () => undefined,
        () => undefined,
      ),
    );
    return this.#chain;
  }

  #finish(status: 'succeeded' | 'failed', message: string | undefined): Promise<void> {
    const last = this.#steps[this.#steps.length - 1];
    if (!last) return Promise.resolve();
    const msg = message === undefined || message === null || message === '' ? last.message : String(message);
    // Rebuilt so the keys keep the canonical order name, status, message, started_at, finished_at.
    this.#steps[this.#steps.length - 1] = {
      name: last.name,
      status,
      ...(msg !== undefined ? { message: msg } : {}),
      ...(last.started_at !== undefined ? { started_at: last.started_at } : {}),
      finished_at: timestamp(new Date()),
    };
    return this.flush();
  }
}

/** RFC 3339 UTC with trailing zeros of the fraction trimmed (`…:02.12Z`, `…:02Z`), as Go writes it. */
export function timestamp(d: Date): string {
  return d.toISOString().replace(/\.?0+Z$/, 'Z');
}
