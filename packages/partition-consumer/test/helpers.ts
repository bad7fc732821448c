import { randomBytes } from 'node:crypto';
import { createTestSchema, type TestSchema } from '@q/testing';
import { partitionOf, Store, type NewRequest } from '@q/store';

/** A fresh schema and an open store on it (small pool). */
export async function openTestStore(prefix: string, maxConns = 4): Promise<{ schema: TestSchema; store: Store }> {
  const schema = await createTestSchema(prefix);
  const store = await Store.open(schema.dsn, { maxConns });
  return { schema, store };
}

/** First id `prefix-<n>` that lands in partition `p`. */
export function idInPartition(prefix: string, p: number): string {
  for (let i = 0; i < 100_000; i++) {
    const id = `${prefix}-${i}`;
    if (partitionOf(id) === p) return id;
  }
  throw new Error(`no id for partition ${p}`);
}

/** New requests with the given ids, a far deadline (or `deadline`), envelope `{"id":…}`. */
export function requests(queue: string, ids: string[], deadline = Math.floor(Date.now() / 1000) + 3600): NewRequest[] {
  return ids.map((id) => ({
    id,
    token: randomBytes(8).toString('hex'),
    queue,
    deadline,
    envelope: JSON.stringify({ id }),
    payload: Buffer.from(id),
  }));
}

/** `n` ids `prefix-0` … `prefix-(n-1)`. */
export function ids(prefix: string, n: number): string[] {
  return Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
}

/** Polls `cond` every `everyMs` until it is true; fails after `timeoutMs`. */
export async function waitFor(cond: () => boolean | Promise<boolean>, timeoutMs = 20_000, everyMs = 25): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    if (await cond()) return;
    if (Date.now() > until) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** A Date `ms` after `t`. */
export const plus = (t: Date, ms: number): Date => new Date(t.getTime() + ms);

/** Unix seconds of `t`. */
export const unix = (t: Date): number => Math.floor(t.getTime() / 1000);
