import { afterAll, beforeAll } from 'vitest';
import { createTestSchema, idInPartition as firstIdInPartition, newRequests, useStore, type TestSchema, type UsedStore } from '@q/testing';
import { partitionOf, Store, type NewRequest } from '@q/store';

/** A fresh schema and an open store on it (small pool). */
export async function openTestStore(prefix: string, maxConns = 4): Promise<{ schema: TestSchema; store: Store }> {
  const schema = await createTestSchema(prefix);
  const store = await Store.open(schema.dsn, { maxConns });
  return { schema, store };
}

/** Registers the file's lifecycle: a fresh schema and a store on it (small pool), then `onOpen`; both dropped after the file. */
export function useTestStore(prefix: string, maxConns = 4, onOpen?: (t: UsedStore<Store>) => unknown): UsedStore<Store> {
  return useStore(Store, { prefix, maxConns }, onOpen);
}

/** Collects the process's unhandled rejections into `into` while the file runs (a test asserts none happened). */
export function trackUnhandledRejections(into: unknown[]): void {
  const onUnhandled = (err: unknown) => into.push(err);
  beforeAll(() => {
    process.on('unhandledRejection', onUnhandled);
  });
  afterAll(() => {
    process.off('unhandledRejection', onUnhandled);
  });
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
