import { randomBytes } from 'node:crypto';
import { createTestSchema, type TestSchema } from '@q/testing';
import { Store, partitionOf, type NewRequest, type OpenOptions } from '../../src/index.js';

/** A store on a fresh schema of the test database; `close()` drops both. */
export interface TestStore {
  store: Store;
  schema: TestSchema;
  close(): Promise<void>;
}

export async function openTestStore(opts: OpenOptions = {}): Promise<TestStore> {
  const schema = await createTestSchema('store');
  const store = await Store.open(schema.dsn, { maxConns: 4, ...opts });
  return {
    store,
    schema,
    async close() {
      await store.close();
      await schema.drop();
    },
  };
}

/** A fresh generation token. */
export function token(): string {
  return randomBytes(16).toString('hex');
}

/** A request with defaults: queue `q`, deadline 1000, envelope `{}`, payload = utf8(id). */
export function req(id: string, over: Partial<NewRequest> = {}): NewRequest {
  return { id, token: token(), queue: 'q', deadline: 1000, envelope: '{}', payload: Buffer.from(id), ...over };
}

/** The first id `prefix-N` (N from 0) that lands in partition `p`. */
export function idInPartition(prefix: string, p: number): string {
  for (let i = 0; i < 100_000; i++) {
    const id = `${prefix}-${i}`;
    if (partitionOf(id) === p) return id;
  }
  throw new Error(`no id for partition ${p}`);
}

/** All partition numbers. */
export const ALL = Array.from({ length: 64 }, (_, i) => i);

/** A `Date` at Unix second `s`. */
export function at(s: number): Date {
  return new Date(s * 1000);
}

/** Polls `cond` until it is true (or throws after `timeoutMs`). */
export async function waitFor(cond: () => Promise<boolean> | boolean, timeoutMs = 20_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 25));
  }
}
