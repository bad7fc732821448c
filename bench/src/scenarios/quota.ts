import { performance } from 'node:perf_hooks';
import type { Scenario, System } from '../scenario.js';
import { check } from '../verify.js';
import { loadQuota, missing } from '../systems/q-api.js';
import { qQuotaClient, qQuotaStore, rawSqlQuota, runQuotaClients, slotsInUse, type QuotaSystem } from '../systems/quota.js';

const SYSTEMS = [qQuotaClient, qQuotaStore, rawSqlQuota];
/** Concurrent callers in the process (each awaits its operation before the next). */
const CALLERS = 8;

function asSystem(qs: QuotaSystem, run: System['run']): System {
  return { name: qs.name, ...(qs.skip ? { skip: () => (qs.skip as () => Promise<string | undefined>)() } : {}), run };
}

const keyOf = (keys: number, op: number) => (keys === 1 ? 'hot' : `k${op % keys}`);

/** Runs `n` operations spread over {@link CALLERS} concurrent callers; returns seconds taken. */
async function callers(n: number, op: (i: number) => Promise<void>): Promise<number> {
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CALLERS }, async () => {
      for (let i = next++; i < n; i = next++) await op(i);
    }),
  );
  return (performance.now() - t0) / 1000;
}

/**
 * Sliding-window admission on one hot key or spread over 1,000 keys. Each key's limit is half the
 * calls it gets in a 1-hour window, so exactly that many must be admitted — no more, no fewer.
 */
export function quotaAdmit(keys: 1 | 1000): Scenario {
  const name = keys === 1 ? 'quota-admit-hot' : 'quota-admit-1k';
  return {
    name,
    ...(keys !== 1 ? { smokeCoveredBy: 'quota-admit-hot' } : {}),
    title: `quota admit, ${keys === 1 ? 'one hot key' : '1,000 keys'}, ${CALLERS} concurrent callers`,
    metrics: [{ key: 'rate', unit: 'calls/s', better: 'higher' }],
    baseline: 'q',
    systems: SYSTEMS.map((qs) =>
      asSystem(qs, async (ctx) => {
        const n = ctx.n(keys === 1 ? 4_000 : 5_000, 200);
        const perKey = new Map<string, number>();
        for (let i = 0; i < n; i++) perKey.set(keyOf(keys, i), (perKey.get(keyOf(keys, i)) ?? 0) + 1);
        const limitOf = (k: string) => Math.ceil((perKey.get(k) as number) / 2);
        const h = await qs.open(ctx.dsn, CALLERS);
        try {
          const admitted = new Map<string, number>();
          const s = await callers(n, async (i) => {
            const k = keyOf(keys, i);
            if (await h.admit(k, limitOf(k), 3_600_000)) admitted.set(k, (admitted.get(k) ?? 0) + 1);
          });
          for (const [k] of perKey) {
            const got = admitted.get(k) ?? 0;
            check(got === limitOf(k), `${qs.name}: key ${k} admitted ${got}, limit ${limitOf(k)}`);
          }
          return { rate: n / s };
        } finally {
          await h.close();
        }
      }),
    ),
  };
}

/**
 * Acquire then release one concurrency slot, on one hot key or over 1,000 keys, with a limit of
 * half the callers: a refused caller tries again at once. Every grant is held across a turn of the
 * event loop so grants overlap; the number held at once must never exceed the limit, and nothing
 * may be held at the end.
 */
export function quotaAcquire(keys: 1 | 1000): Scenario {
  const name = keys === 1 ? 'quota-acquire-hot' : 'quota-acquire-1k';
  const limit = CALLERS / 2;
  return {
    name,
    ...(keys !== 1 ? { smokeCoveredBy: 'quota-acquire-hot' } : {}),
    title: `quota acquire + release, ${keys === 1 ? 'one hot key' : '1,000 keys'}, limit ${limit}, ${CALLERS} concurrent callers`,
    metrics: [{ key: 'rate', unit: 'pairs/s', better: 'higher' }],
    baseline: 'q',
    systems: SYSTEMS.map((qs) =>
      asSystem(qs, async (ctx) => {
        const n = ctx.n(keys === 1 ? 2_000 : 3_000, 100);
        const h = await qs.open(ctx.dsn, CALLERS);
        try {
          const held = new Map<string, number>();
          let peak = 0;
          let refused = 0;
          const s = await callers(n, async (i) => {
            const k = keyOf(keys, i);
            for (;;) {
              const release = await h.acquire(k, limit);
              if (release === null) {
                refused++;
                await new Promise((r) => setImmediate(r));
                continue;
              }
              const now = (held.get(k) ?? 0) + 1;
              held.set(k, now);
              peak = Math.max(peak, now);
              await new Promise((r) => setImmediate(r));
              held.set(k, (held.get(k) as number) - 1);
              await release();
              return;
            }
          });
          check(peak <= limit, `${qs.name}: ${peak} slots held at once, limit ${limit}`);
          for (const k of keys === 1 ? ['hot'] : ['k0', 'k1', 'k999']) {
            const used = await h.inUse(k);
            check(used === 0, `${qs.name}: ${used} slots still held on ${k} after every release`);
          }
          return { rate: n / s, refused };
        } finally {
          await h.close();
        }
      }),
    ),
  };
}

/** Client processes of the `-procs8` scenarios, and concurrent callers in each. */
const PROCS = 8;
const PROC_CALLERS = 4;

/**
 * Admission like {@link quotaAdmit}, but by {@link PROCS} `Quota` clients in separate processes
 * ({@link PROC_CALLERS} callers each), so the per-key batching of one client no longer sees every
 * caller: each key's limit is half its calls over all processes, and the admissions summed over
 * the processes must be exactly that. Timed from the start signal (every child connected) to the
 * last child's report.
 */
export function quotaAdmitProcs(keys: 1 | 1000): Scenario {
  const name = keys === 1 ? 'quota-admit-hot-procs8' : 'quota-admit-1k-procs8';
  return {
    name,
    smokeCoveredBy: keys === 1 ? 'quota-admit-hot' : 'quota-admit-1k',
    title: `quota admit, ${keys === 1 ? 'one hot key' : '1,000 keys'}, ${PROCS} client processes × ${PROC_CALLERS} callers`,
    metrics: [{ key: 'rate', unit: 'calls/s', better: 'higher' }],
    baseline: 'q',
    systems: [
      {
        name: 'q',
        skip: () => missing(loadQuota),
        async run(ctx) {
          const n = ctx.n(keys === 1 ? 4_000 : 5_000, 200);
          const { reports, seconds } = await runQuotaClients({
            dsn: ctx.dsn,
            mode: 'admit',
            keys,
            n,
            procs: PROCS,
            callers: PROC_CALLERS,
            limit: 0,
          });
          const perKey = new Map<string, number>();
          for (let i = 0; i < n; i++) perKey.set(keyOf(keys, i), (perKey.get(keyOf(keys, i)) ?? 0) + 1);
          const admitted = new Map<string, number>();
          for (const r of reports) for (const [k, c] of Object.entries(r.admitted)) admitted.set(k, (admitted.get(k) ?? 0) + c);
          check(admitted.size <= perKey.size, `admissions on ${admitted.size} keys, only ${perKey.size} used`);
          for (const [k, calls] of perKey) {
            const got = admitted.get(k) ?? 0;
            const limit = Math.ceil(calls / 2);
            check(got === limit, `q procs: key ${k} admitted ${got} over ${PROCS} processes, limit ${limit}`);
          }
          return { rate: n / seconds };
        },
      },
    ],
  };
}

/**
 * Acquire + release like {@link quotaAcquire}, by {@link PROCS} `Quota` clients in separate
 * processes ({@link PROC_CALLERS} callers each) with a limit of half of all callers. Every child
 * must complete its share of pairs, no child may hold more than the limit at once, and no slot may
 * be left held on the keys at the end.
 */
export function quotaAcquireProcs(keys: 1 | 1000): Scenario {
  const name = keys === 1 ? 'quota-acquire-hot-procs8' : 'quota-acquire-1k-procs8';
  const limit = (PROCS * PROC_CALLERS) / 2;
  return {
    name,
    smokeCoveredBy: keys === 1 ? 'quota-acquire-hot' : 'quota-acquire-1k',
    title: `quota acquire + release, ${keys === 1 ? 'one hot key' : '1,000 keys'}, limit ${limit}, ${PROCS} client processes × ${PROC_CALLERS} callers`,
    metrics: [{ key: 'rate', unit: 'pairs/s', better: 'higher' }],
    baseline: 'q',
    systems: [
      {
        name: 'q',
        skip: () => missing(loadQuota),
        async run(ctx) {
          const n = ctx.n(keys === 1 ? 2_000 : 3_000, 100);
          const { reports, seconds } = await runQuotaClients({
            dsn: ctx.dsn,
            mode: 'acquire',
            keys,
            n,
            procs: PROCS,
            callers: PROC_CALLERS,
            limit,
          });
          const pairs = reports.reduce((a, r) => a + r.pairs, 0);
          check(pairs === n, `q procs: ${pairs} acquire+release pairs reported, ${n} expected`);
          for (const r of reports) check(r.peak <= limit, `q procs: a process held ${r.peak} slots at once, limit ${limit}`);
          const left = await slotsInUse(ctx.dsn);
          check(left === 0, `q procs: ${left} slots still held after every release`);
          return { rate: n / seconds, refused: reports.reduce((a, r) => a + r.refused, 0) };
        },
      },
    ],
  };
}
