// Per-tenant accounting of the Batch API: request lines by outcome and tokens by kind (from each
// answer's `usage`), counted once per line, when its result is written. The batch object carries
// the same token sums per batch (`usage`).
import { metrics, type Counter, type MeterProvider } from '@opentelemetry/api';
import type { BatchLineResult } from '@q/store';

/** The counters of the batch driver. */
export class BatchMetrics {
  readonly #requests: Counter;
  readonly #tokens: Counter;

  constructor(meterProvider: MeterProvider | undefined) {
    const m = (meterProvider ?? metrics.getMeterProvider()).getMeter('@q/dispatcher');
    this.#requests = m.createCounter('q.dispatcher.batch.requests', {
      description: 'Batch request lines settled, by tenant and outcome (completed, failed, expired, cancelled).',
      unit: '{request}',
    });
    this.#tokens = m.createCounter('q.dispatcher.batch.tokens', {
      description: "Tokens of the batch answers' usage, by tenant and kind (prompt, completion).",
      unit: '{token}',
    });
  }

  /** Counts the results of `tenant` whose lines `moved` (the others were written before). */
  results(tenant: string, results: readonly BatchLineResult[], moved: readonly number[]): void {
    const written = new Set(moved);
    let prompt = 0;
    let completion = 0;
    for (const r of results) {
      if (!written.has(r.lineNo)) continue;
      written.delete(r.lineNo);
      this.#requests.add(1, { tenant, outcome: r.ok ? 'completed' : 'failed' });
      prompt += r.promptTokens ?? 0;
      completion += r.completionTokens ?? 0;
    }
    if (prompt > 0) this.#tokens.add(prompt, { tenant, kind: 'prompt' });
    if (completion > 0) this.#tokens.add(completion, { tenant, kind: 'completion' });
  }

  /** Counts `n` lines of `tenant` settled without an answer. */
  settled(tenant: string, outcome: 'expired' | 'cancelled', n: number): void {
    if (n > 0) this.#requests.add(n, { tenant, outcome });
  }
}
