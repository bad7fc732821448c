import { at } from '@q/schema/internal';
// Batch shaping of the job store: statement-sized chunks, insert order, deadlock retries, and the
// outcome columns of a completion with how to report what was written.
import type { CompletionBatch } from './sql/complete-jobs.js';
import type { JobOutcome } from './types.js';
import { checkCallSize, outcomeRow } from './validate.js';

/** Outcomes per completion statement. */
export const COMPLETE_CHUNK = 2_000;
/**
 * Characters of JSON and error text one statement carries at most; a batch with more is split
 * (an enqueue in one transaction). The driver builds each array parameter as one string, with
 * every `"` and backslash escaped: a few hundred million characters in one statement exceed what
 * a string can hold.
 */
export const STATEMENT_TEXT_BUDGET = 64 * 1024 * 1024;

const DEADLOCK_RETRIES = 3;
const DEADLOCK_DETECTED = '40P01';

/** Runs `fn`, again when it lost a deadlock (the database rolled it back), a few times. */
export async function retryDeadlock<T>(fn: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if ((err as { code?: unknown } | null)?.code !== DEADLOCK_DETECTED || attempt >= DEADLOCK_RETRIES) throw err;
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 20 * attempt));
    }
  }
}

/**
 * The batch's indices in the order its rows are inserted: by idempotency key, then queue, then
 * type (the key's scope), each in UTF-8 byte order (the `COLLATE "C"` order of enqueue-jobs.ts),
 * input order among equal scopes, keyless jobs last.
 */
export function keyOrder(keys: ReadonlyArray<string | null>, queues: readonly string[], types: readonly string[]): number[] {
  const order = keys.map((_, i) => i);
  if (!keys.some((k) => k !== null)) return order;
  const utf8 = (s: string) => Buffer.from(s, 'utf8');
  const scopes = keys.map((k, i) => (k === null ? null : [utf8(k), utf8(at(queues, i)), utf8(at(types, i))]));
  return order.sort((a, b) => {
    const sa = at(scopes, a);
    const sb = at(scopes, b);
    if (sa === null || sb === null) return sa === sb ? a - b : sa === null ? 1 : -1;
    return Buffer.compare(at(sa, 0), at(sb, 0)) || Buffer.compare(at(sa, 1), at(sb, 1)) || Buffer.compare(at(sa, 2), at(sb, 2)) || a - b;
  });
}

/**
 * Splits `order` into statements of at most `maxCount` entries and {@link STATEMENT_TEXT_BUDGET}
 * characters (`sizes[i]` for entry i; an entry larger than the budget goes alone). One chunk
 * keeps `order` as given.
 */
export function chunkIndices(order: number[], sizes: readonly number[], maxCount: number): number[][] {
  const chunks: number[][] = [];
  let current: number[] = [];
  let chars = 0;
  for (const i of order) {
    const size = sizes[i] ?? 0;
    if (current.length > 0 && (current.length >= maxCount || chars + size > STATEMENT_TEXT_BUDGET)) {
      chunks.push(current);
      current = [];
      chars = 0;
    }
    current.push(i);
    chars += size;
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}

/** The key of one lease in a `written` set (Postgres returns tokens in lower case). */
export function leaseKey(id: number | string, token: string): string {
  return `${id}/${token.toLowerCase()}`;
}

/** Outcomes checked and turned into statement columns, with how to report what was written. */
export interface PreparedOutcomes {
  /** One entry per distinct lease (the first outcome of a lease listed twice). */
  batch: CompletionBatch;
  /** `[from, to)` ranges of `batch`, one per statement. */
  chunks: Array<[number, number]>;
  /**
   * `written[i]` for input i: every batch entry was written but those whose {@link leaseKey} is
   * in `fenced` (a repeated lease is reported not written).
   */
  reportFenced(fenced: ReadonlySet<string>): boolean[];
}

/** Checks every outcome (`INVALID_ARGUMENT` naming its index) and splits the batch into statements. */
export function prepareOutcomes(outcomes: readonly JobOutcome[]): PreparedOutcomes {
  const b: CompletionBatch = { ids: [], tokens: [], statuses: [], results: [], errors: [], retryDelaysMs: [], steps: [] };
  // Input i is batch entry slotOf[i], or -1 for a repeated lease (reported as not written).
  const slotOf: number[] = [];
  const seen = new Set<string>();
  const sizes: number[] = [];
  outcomes.forEach((o, i) => {
    try {
      const row = outcomeRow(o);
      const key = leaseKey(o.id, o.leaseToken);
      if (seen.has(key)) {
        slotOf.push(-1);
        return;
      }
      seen.add(key);
      slotOf.push(b.ids.length);
      b.ids.push(o.id);
      b.tokens.push(o.leaseToken);
      b.statuses.push(o.status);
      b.results.push(row.result);
      b.errors.push(row.error);
      b.retryDelaysMs.push(row.retryDelayMs);
      b.steps.push(row.steps);
      sizes.push((row.result?.length ?? 0) + (row.error?.length ?? 0) + (row.steps?.length ?? 0));
    } catch (err) {
      if (err instanceof Error && outcomes.length > 1) err.message += ` (outcome ${i})`;
      throw err;
    }
  });
  checkCallSize('complete', 'result JSON and error text', sizes);
  const chunks = chunkIndices(
    b.ids.map((_, i) => i),
    sizes,
    COMPLETE_CHUNK,
  ).map((c): [number, number] => [at(c, 0), at(c, c.length - 1) + 1]);
  return {
    batch: b,
    chunks,
    reportFenced: (fenced) => slotOf.map((j) => j >= 0 && (fenced.size === 0 || !fenced.has(leaseKey(at(b.ids, j), at(b.tokens, j))))),
  };
}

/** Outcomes `[from, to)` of `b` (the batch itself when that is all of it). */
export function sliceBatch(b: CompletionBatch, from: number, to: number): CompletionBatch {
  if (from === 0 && to === b.ids.length) return b;
  return {
    ids: b.ids.slice(from, to),
    tokens: b.tokens.slice(from, to),
    statuses: b.statuses.slice(from, to),
    results: b.results.slice(from, to),
    errors: b.errors.slice(from, to),
    retryDelaysMs: b.retryDelaysMs.slice(from, to),
    steps: b.steps.slice(from, to),
  };
}
