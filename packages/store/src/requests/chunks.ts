// Splitting of large write batches. `pg` renders each array parameter as one JS string (V8 caps
// a string at about 2^29 UTF-16 units) and Postgres caps one message at 1 GiB, so a batch whose
// values add up to a few hundred MB cannot go in one statement. A row is at most
// MAX_VALUE_BYTES (checked up front); a statement carries at most STATEMENT_BUDGET.
import { at, withTransaction } from '@q/schema/internal';
import type pg from 'pg';
import type { Db } from './sql/db.js';
import { MAX_VALUE_BYTES } from './types.js';

/**
 * Upper bound of what one statement's parameters may render to (characters and bytes alike):
 * room for one row of the largest size (its text rendered with every byte escaped, its bytes as
 * hex), under both the string and the message limit.
 */
export const STATEMENT_BUDGET = 2 * MAX_VALUE_BYTES + 8_000_000;

/** Upper bound of a text value's rendering inside an array literal: every byte escaped, quotes, comma. */
export function textCost(s: string): number {
  return 2 * Buffer.byteLength(s, 'utf8') + 3;
}

/** Upper bound of a byte value's rendering inside an array literal: `\\x` and two hex digits per byte. */
export function bytesCost(b: Uint8Array): number {
  return 2 * b.byteLength + 5;
}

/** Cheap upper bound of {@link textCost} (no UTF-8 scan): a UTF-16 unit is at most 3 bytes. */
export function quickTextCost(s: string): number {
  return 6 * s.length + 3;
}

/**
 * Index ranges `[start, end)` of `n` items in order, each range's summed `cost` at most `budget`
 * (an item costlier than `budget` alone gets a range of its own) and at most `maxItems` long.
 */
export function chunkRanges(
  n: number,
  cost: (i: number) => number,
  budget: number,
  maxItems = Number.POSITIVE_INFINITY,
): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  let start = 0;
  let sum = 0;
  for (let i = 0; i < n; i++) {
    const c = cost(i);
    if (i > start && (sum + c > budget || i - start >= maxItems)) {
      out.push([start, i]);
      start = i;
      sum = 0;
    }
    sum += c;
  }
  if (n > start) out.push([start, n]);
  return out;
}

/**
 * Writes `chunks` in order with `write`: a single chunk as one statement on the pool, several in
 * one transaction, so a batch split for size is still stored all or none.
 */
export async function writeChunks<C, R>(pool: pg.Pool, chunks: C[], write: (db: Db, chunk: C) => Promise<R>): Promise<R[]> {
  if (chunks.length === 1) return [await write(pool, at(chunks, 0))];
  return withTransaction(pool, async (c) => {
    const out: R[] = [];
    for (const chunk of chunks) out.push(await write(c, chunk));
    return out;
  });
}
