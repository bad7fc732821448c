// The rows of one enqueue call, split into statements, with no connection: duplicate detection,
// submission order and statement sizing.
import { QError, QErrorCode } from '@q/schema';
import { at } from '@q/schema/internal';
import { bytesCost, chunkRanges, STATEMENT_BUDGET } from './chunks.js';
import { submissionClock } from './clock.js';
import { cost, keyId, toBuffer } from './keys.js';
import { partitionOf } from './partition.js';
import { ENQUEUE_CHUNK, type EnqueueRows } from './sql/enqueue.js';
import type { NewRequest } from './types.js';

/**
 * The column-wise chunks inserting `list` (checked requests): at most {@link ENQUEUE_CHUNK} rows
 * and {@link STATEMENT_BUDGET} of data each, stamped in submission order. Throws `DUPLICATE` when
 * one `(id, token)` appears twice.
 */
export function enqueueChunks(op: string, list: NewRequest[]): EnqueueRows[] {
  const seen = new Set<string>();
  for (const r of list) {
    const k = keyId(r);
    if (seen.has(k)) throw new QError(QErrorCode.DUPLICATE, `${op}: request "${r.id}" appears twice with the same token`);
    seen.add(k);
  }
  const first = submissionClock.reserve(list.length);
  const ranges = chunkRanges(
    list.length,
    (i) => {
      const r = at(list, i);
      return cost(r.envelope) + bytesCost(r.payload) + cost(r.id) + cost(r.token) + cost(r.queue) + 64;
    },
    STATEMENT_BUDGET,
    ENQUEUE_CHUNK,
  );
  return ranges.map(([start, end]) => {
    const part = list.slice(start, end);
    return {
      ids: part.map((r) => r.id),
      tokens: part.map((r) => r.token),
      queues: part.map((r) => r.queue),
      partitions: part.map((r) => partitionOf(r.id)),
      deadlines: part.map((r) => r.deadline),
      envelopes: part.map((r) => r.envelope),
      payloads: part.map((r) => toBuffer(r.payload)),
      createdAt: part.map((_, i) => first + start + i),
    };
  });
}
