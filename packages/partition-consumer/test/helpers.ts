import { afterAll, beforeAll } from 'vitest';
import {
  createTestSchema,
  idInPartition as firstIdInPartition,
  newRequests,
  useStore,
  waitFor,
  type TestSchema,
  type UsedStore,
} from '@q/testing';
import { partitionOf, RequestStore, type NewRequest } from '@q/store';
import type pg from 'pg';
import { runPartitionWorker, type PartitionWorkerOptions, type PartitionWorkerStats } from '../src/index.js';

/** A fresh schema and an open store on it (small pool). */
export async function openTestStore(prefix: string, maxConns = 4): Promise<{ schema: TestSchema; store: RequestStore }> {
  const schema = await createTestSchema(prefix);
  const store = await RequestStore.open(schema.dsn, { maxConns });
  return { schema, store };
}

/** Registers the file's lifecycle: a fresh schema and a store on it (small pool), then `onOpen`; both dropped after the file. */
export function useTestStore(prefix: string, maxConns = 4, onOpen?: (t: UsedStore<RequestStore>) => unknown): UsedStore<RequestStore> {
  return useStore(RequestStore, { prefix, maxConns }, onOpen);
}

/** Collects the process's unhandled rejections into `into` while the file runs (a test asserts none happened). */
function trackUnhandledRejections(into: unknown[]): void {
  const onUnhandled = (err: unknown) => into.push(err);
  beforeAll(() => {
    process.on('unhandledRejection', onUnhandled);
  });
  afterAll(() => {
    process.off('unhandledRejection', onUnhandled);
  });
}

/**
 * Registers the lifecycle of a runner test file: a store on a fresh schema (6 connections) and a
 * pool `db` on that schema for the test's own checks, handed to `onOpen`; the process's unhandled
 * rejections are collected into the returned array while the file runs (its last test asserts
 * none happened).
 */
export function useRunnerStore(prefix: string, onOpen: (t: { store: RequestStore; db: pg.Pool }) => void): unknown[] {
  const unhandled: unknown[] = [];
  trackUnhandledRejections(unhandled);
  useTestStore(prefix, 6, (t) => onOpen({ store: t.store, db: t.schema.pool() }));
  return unhandled;
}

/**
 * The runner tests' `runPartitionWorker` options for `queue` on `store`: 8 slots, batches of 8, a
 * 1.5 s lease, a 3 s drain, 50 ms polls, `handle`, stopped by `ac`. Tests spread it and override.
 */
export function runnerOptions(
  store: RequestStore,
  queue: string,
  ac: AbortController,
  handle: PartitionWorkerOptions['handle'],
): PartitionWorkerOptions {
  return { store, queue, concurrency: 8, batchSize: 8, leaseTtlMs: 1500, drainTimeoutMs: 3000, pollIntervalMs: 50, handle, signal: ac.signal };
}

/**
 * Runs a partition worker with {@link runnerOptions} for `queue` on `store` and `handle`, then
 * `extra`; once `until` holds (`waitFor`, within `timeoutMs` when given) stops it and returns its
 * stats. For tests whose worker has one job to finish before it is stopped.
 */
export async function runUntil(
  store: RequestStore,
  queue: string,
  handle: PartitionWorkerOptions['handle'],
  until: () => boolean | Promise<boolean>,
  extra: Partial<PartitionWorkerOptions> = {},
  timeoutMs?: number,
): Promise<PartitionWorkerStats> {
  const ac = new AbortController();
  const done = runPartitionWorker({ ...runnerOptions(store, queue, ac, handle), ...extra });
  await waitFor(until, timeoutMs);
  ac.abort();
  return done;
}

/** First id `prefix-<n>` that lands in partition `p`. */
export function idInPartition(prefix: string, p: number): string {
  return firstIdInPartition(prefix, p, partitionOf);
}

/** New requests with the given ids, a far deadline (or `deadline`), envelope `{"id":…}`. */
export function requests(queue: string, ids: string[], deadline = Math.floor(Date.now() / 1000) + 3600): NewRequest[] {
  return newRequests(queue, ids, deadline);
}

export { ids, waitFor } from '@q/testing';

/** A Date `ms` after `t`. */
export const plus = (t: Date, ms: number): Date => new Date(t.getTime() + ms);

/** Unix seconds of `t`. */
export const unix = (t: Date): number => Math.floor(t.getTime() / 1000);
