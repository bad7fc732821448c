import type { Lease } from '../types.js';
import { num } from './db.js';

/** A partition lease as the lease statements return it. */
export interface LeaseRow {
  partition_id: number;
  epoch: string;
  draining: number;
}

/** Leases from their rows, by partition. */
export function leases(rows: LeaseRow[]): Lease[] {
  return rows
    .map((r) => ({ partition: r.partition_id, epoch: num(r.epoch), draining: r.draining !== 0 }))
    .sort((a, b) => a.partition - b.partition);
}

/** Who asks for (or renews) partition leases of a queue, at what time, until when. */
export interface LeaseTerm {
  queue: string;
  owner: string;
  nowMs: number;
  /** The new lease expiry (ms since epoch). */
  expiresMs: number;
}

/** The first four parameters of the lease statements: `$1` queue, `$2` owner, `$3` now, `$4` expiry. */
export function termValues(t: LeaseTerm): [string, string, number, number] {
  return [t.queue, t.owner, t.nowMs, t.expiresMs];
}
