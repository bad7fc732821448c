import { beforeEach } from 'vitest';
import { createTestSchema, idInPartition as firstIdInPartition, newRequest, useStore, type TestSchema, type UsedStore } from '@q/testing';
import { RequestStore, partitionOf, type NewRequest, type OpenOptions } from '../../src/index.js';

/** A store on a fresh schema of the test database; `close()` drops both. */
export interface TestStore {
  store: RequestStore;
  schema: TestSchema;
  close(): Promise<void>;
}

/**
 * Registers the file's store lifecycle (a fresh schema, a store with `maxConns: 4` unless `opts` says
 * otherwise, both dropped after the file). With `resetQueue`, every test starts on empty tables with the
 * partitions of that queue created.
 */
export function useTestStore(opts: OpenOptions & { resetQueue?: string } = {}): UsedStore<RequestStore> {
  const { resetQueue, ...open } = opts;
  const t = useStore(RequestStore, { prefix: 'store', maxConns: 4, ...open });
  if (resetQueue !== undefined) {
    beforeEach(async () => {
      await t.store.truncateForTest();
      await t.store.ensurePartitions(resetQueue);
    });
  }
  return t;
}

export async function openTestStore(opts: OpenOptions = {}): Promise<TestStore> {
  const schema = await createTestSchema('store');
  const store = await RequestStore.open(schema.dsn, { maxConns: 4, ...opts });
  return {
    store,
    schema,
    async close() {
      await store.close();
      await schema.drop();
    },
  };
}

export { token, waitFor } from '@q/testing';

/** A request with defaults: queue `q`, deadline 1000, envelope `{}`, payload = utf8(id). */
export function req(id: string, over: Partial<NewRequest> = {}): NewRequest {
  return newRequest(id, over);
}

/** The first id `prefix-N` (N from 0) that lands in partition `p`. */
export function idInPartition(prefix: string, p: number): string {
  return firstIdInPartition(prefix, p, partitionOf);
}

/** All partition numbers. */
export const ALL = Array.from({ length: 64 }, (_, i) => i);

/** A `Date` at Unix second `s`. */
export function at(s: number): Date {
  return new Date(s * 1000);
}
