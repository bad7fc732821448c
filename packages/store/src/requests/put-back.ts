// Returning dispatched requests to pending (undispatch, defer, retry). Every one of them is a
// fenced write of one dispatch: a stamp that no longer matches (older attempt, other owner, not in
// flight, unknown) is skipped and counted as fenced.
import type { StoreContext } from './context.js';
import { distinctStamps } from './keys.js';
import { retryRequest } from './sql/retry.js';
import { undispatchRequests } from './sql/undispatch.js';
import type { Stamp } from './types.js';
import * as v from './validate.js';

/** Checks `owner` and `stamps` of `op`; the distinct stamps. */
function checkStamps(op: string, owner: string, stamps: Stamp[]): Stamp[] {
  v.text(op, 'owner', owner);
  return distinctStamps(v.list<unknown>(op, 'stamps', stamps).map((s, i) => v.stamp(op, s, i)));
}

/** Returns the requests carrying `list` to pending (`notBefore`: not dispatched before then). */
async function putBack(ctx: StoreContext, op: string, owner: string, list: Stamp[], notBefore: number | null): Promise<void> {
  if (list.length === 0) return;
  const n = await ctx.op(op, { 'q.batch': list.length }, () => undispatchRequests(ctx.scope, ctx.pool, owner, list, notBefore));
  if (n < list.length) ctx.metrics.fenced.add(list.length - n);
}

/** `RequestStore.undispatch`. */
export async function undispatch(ctx: StoreContext, owner: string, stamps: Stamp[]): Promise<void> {
  await putBack(ctx, 'undispatch', owner, checkStamps('undispatch', owner, stamps), null);
}

/** `RequestStore.defer`. */
export async function defer(ctx: StoreContext, owner: string, stamps: Stamp[], notBefore: number): Promise<void> {
  const list = checkStamps('defer', owner, stamps);
  await putBack(ctx, 'defer', owner, list, v.count('defer', 'notBefore', notBefore));
}

/** `RequestStore.retry`. */
export async function retry(ctx: StoreContext, owner: string, stamp: Stamp, notBefore: number, envelope: string): Promise<boolean> {
  const op = 'retry';
  v.text(op, 'owner', owner);
  const s = v.stampAs(op, 'stamp', stamp);
  const at = v.count(op, 'notBefore', notBefore);
  v.envelope(op, 'envelope', envelope);
  const ok = await ctx.op(op, undefined, () => retryRequest(ctx.scope, ctx.pool, owner, s, at, envelope));
  if (ok) ctx.metrics.retried.add(1);
  else ctx.metrics.fenced.add(1);
  return ok;
}
