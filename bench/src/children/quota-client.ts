/**
 * Child process of the `quota-*-procs8` scenarios: one `Quota` client (createQuota) running its
 * share of the operations — op indices `index, index + procs, …` below `n` — over a few concurrent
 * callers. Prints `{"ready":true}` once connected, starts on the first line read from stdin (so
 * the parent times the work, not process start-up), then prints its counts as one JSON line and
 * exits.
 */
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { createQuota } from '@q/quota';

const env = (name: string) => {
  const v = process.env[name];
  if (v === undefined) throw new Error(`quota-client: ${name} not set`);
  return v;
};
const mode = env('BENCH_MODE') as 'admit' | 'acquire';
const keys = Number(env('BENCH_KEYS'));
const n = Number(env('BENCH_N'));
const procs = Number(env('BENCH_PROCS'));
const index = Number(env('BENCH_INDEX'));
const callers = Number(env('BENCH_CALLERS'));
const limit = Number(env('BENCH_LIMIT'));
const windowMs = 3_600_000;

/** The same key for op `i` in every process (and in the parent). */
const keyOf = (i: number) => (keys === 1 ? 'hot' : `k${i % keys}`);
/** Admission limit of a key: half the calls it gets over all processes. */
const perKey = new Map<string, number>();
for (let i = 0; i < n; i++) perKey.set(keyOf(i), (perKey.get(keyOf(i)) ?? 0) + 1);
const admitLimit = (k: string) => Math.ceil((perKey.get(k) as number) / 2);

const quota = await createQuota({ dsn: env('BENCH_DSN'), maxConns: callers, ttlMs: 60_000 });
const admitted: Record<string, number> = {};
let pairs = 0;
let refused = 0;
let peak = 0;
let held = 0;

async function one(i: number): Promise<void> {
  const k = keyOf(i);
  if (mode === 'admit') {
    if (await quota.admit(k, admitLimit(k), windowMs)) admitted[k] = (admitted[k] ?? 0) + 1;
    return;
  }
  for (;;) {
    const release = await quota.acquire(k, limit);
    if (release === null) {
      refused++;
      await new Promise((r) => setImmediate(r));
      continue;
    }
    peak = Math.max(peak, ++held);
    await new Promise((r) => setImmediate(r));
    held--;
    await release();
    pairs++;
    return;
  }
}

process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
const lines = createInterface({ input: process.stdin });
await new Promise<void>((resolve) => lines.once('line', () => resolve()));
lines.close();

let next = index;
const t0 = performance.now();
await Promise.all(
  Array.from({ length: callers }, async () => {
    for (let i = next; i < n; i = next) {
      next += procs;
      await one(i);
    }
  }),
);
const seconds = (performance.now() - t0) / 1000;
await quota.close();
process.stdout.write(`${JSON.stringify({ done: true, admitted, pairs, refused, peak, seconds })}\n`);
