// The partition-lease operations of the request queue (acquire, renew, release, drain, leave):
// the dispatcher membership protocol. Each checks all of its input before it sends a statement.
import type { StoreContext } from './context.js';
import { acquirePartitionRows } from './sql/acquire-partitions.js';
import { heartbeatRows } from './sql/heartbeat.js';
import { releasePartitionRows, setDrainingRows } from './sql/partitions.js';
import type { Lease } from './types.js';
import * as v from './validate.js';

/** `RequestStore.acquirePartitions`. */
export async function acquirePartitions(
  ctx: StoreContext,
  queue: string,
  owner: string,
  now: Date,
  ttlMs: number,
  limit: number,
): Promise<Lease[]> {
  const op = 'acquirePartitions';
  v.queueOwner(op, queue, owner);
  const nowMs = v.instant(op, 'now', now);
  const ttl = v.count(op, 'ttlMs', ttlMs);
  const n = v.limit(op, limit);
  if (n === 0) return [];
  return ctx.op(op, { 'q.queue': queue, 'q.limit': n }, () =>
    acquirePartitionRows(ctx.scope, ctx.pool, { queue, owner, nowMs, expiresMs: nowMs + ttl }, n),
  );
}

/** `RequestStore.heartbeat`. */
export async function heartbeat(
  ctx: StoreContext,
  queue: string,
  owner: string,
  now: Date,
  ttlMs: number,
  member: boolean,
): Promise<{ leases: Lease[]; members: number }> {
  const op = 'heartbeat';
  v.queueOwner(op, queue, owner);
  const nowMs = v.instant(op, 'now', now);
  const ttl = v.count(op, 'ttlMs', ttlMs);
  v.bool(op, 'member', member);
  return ctx.op(op, { 'q.queue': queue }, () => heartbeatRows(ctx.scope, ctx.pool, { queue, owner, nowMs, expiresMs: nowMs + ttl }, member));
}

/** `RequestStore.releasePartitions`. */
export async function releasePartitions(ctx: StoreContext, queue: string, owner: string, partitions: number[]): Promise<void> {
  const op = 'releasePartitions';
  v.queueOwner(op, queue, owner);
  const parts = v.partitions(op, partitions);
  if (parts.length === 0) return;
  await ctx.op(op, { 'q.queue': queue, 'q.batch': parts.length }, () => releasePartitionRows(ctx.scope, ctx.pool, queue, owner, parts));
}

/** `RequestStore.setDraining`. */
export async function setDraining(ctx: StoreContext, queue: string, owner: string, partitions: number[], draining: boolean): Promise<void> {
  const op = 'setDraining';
  v.queueOwner(op, queue, owner);
  const parts = v.partitions(op, partitions);
  v.bool(op, 'draining', draining);
  if (parts.length === 0) return;
  await ctx.op(op, { 'q.queue': queue, 'q.batch': parts.length }, () => setDrainingRows(ctx.scope, ctx.pool, queue, owner, parts, draining));
}
