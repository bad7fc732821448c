// Which completions of one ack call are tried, and in which statements, with no connection:
// duplicate resolution, statement sizing and mapping the acked keys back to input positions.
import { at } from '@q/schema/internal';
import { chunkRanges, STATEMENT_BUDGET } from './chunks.js';
import { cost, keyId } from './keys.js';
import type { AckRows } from './sql/ack.js';
import type { Completion, Key } from './types.js';

/** The statements of one ack call and, per key, the input position tried. */
export interface AckPlan {
  /** Per key, the position of the completion tried (the highest attempt, first on ties). */
  chosen: Map<string, number>;
  /** The chosen completions column-wise, in input order, one entry per statement. */
  statements: AckRows[];
}

/** Plans acking `list` (checked completions). */
export function planAck(list: Array<Required<Completion>>): AckPlan {
  const chosen = new Map<string, number>();
  list.forEach((c, i) => {
    const k = keyId(c);
    const prev = chosen.get(k);
    if (prev === undefined || c.attempt > at(list, prev).attempt) chosen.set(k, i);
  });
  const picked = [...chosen.values()].sort((a, b) => a - b);
  const rowsOf = (part: number[]): AckRows => ({
    ids: part.map((i) => at(list, i).id),
    tokens: part.map((i) => at(list, i).token),
    attempts: part.map((i) => at(list, i).attempt),
    routes: part.map((i) => at(list, i).route),
    payloads: part.map((i) => at(list, i).payload),
    expiresAt: part.map((i) => at(list, i).expiresAt),
    ords: part,
  });
  // Results too large together for one statement go in several, in order, in one transaction.
  const statements = chunkRanges(
    picked.length,
    (j) => {
      const c = at(list, at(picked, j));
      return cost(c.payload) + cost(c.route) + cost(c.id) + cost(c.token) + 64;
    },
    STATEMENT_BUDGET,
  ).map(([start, end]) => rowsOf(picked.slice(start, end)));
  return { chosen, statements };
}

/** Per input position of `n` completions, whether it was acked (`acked`: the keys the database acked). */
export function ackedPositions(n: number, chosen: Map<string, number>, acked: Key[]): boolean[] {
  const out = Array.from({ length: n }, () => false);
  for (const k of acked) {
    const i = chosen.get(keyId(k));
    if (i !== undefined) out[i] = true;
  }
  return out;
}
