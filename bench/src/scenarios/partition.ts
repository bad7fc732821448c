import { spawn } from 'node:child_process';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import type { Scenario } from '../scenario.js';
import { ExactlyOnce, check, waitUntil } from '../verify.js';
import { loadPartition, loadStore, missing, need, type QConsumer, type QStore } from '../systems/q-api.js';
import { PAYLOAD, QUEUE, ROUTE, idOf, indexOf } from '../systems/requests.js';

const skip = () => missing(loadStore, loadPartition);

/** Rebalances `c` every `everyMs` on the database clock until `stop` aborts. */
async function rebalanceLoop(store: QStore, c: QConsumer, everyMs: number, stop: AbortSignal): Promise<void> {
  while (!stop.aborted) {
    await c.rebalance(await store.now());
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/**
 * Time for a newcomer to get its share: consumer A owns all 64 partitions of an idle queue; B
 * joins; both rebalance every `leaseTtlMs / 3` (as `runPartitionWorker` does). Measured from B's
 * first rebalance until B holds 32 active partitions and A holds the other 32 — no partition
 * owned twice.
 */
export function partitionNewcomer(): Scenario {
  const ttl = 3_000;
  return {
    name: 'partition-newcomer',
    title: `partition newcomer: time until a 2nd consumer owns its 32 of 64 (lease TTL ${ttl} ms, rebalance every ${ttl / 3} ms)`,
    metrics: [{ key: 'share', unit: 'ms', better: 'lower' }],
    baseline: 'q',
    reps: 3,
    systems: [
      {
        name: 'q',
        skip,
        async run(ctx) {
          const { Store } = await need(loadStore);
          const { Consumer } = await need(loadPartition);
          const store = await Store.open(ctx.dsn, { maxConns: 4 });
          const stop = new AbortController();
          const opts = { leaseTtlMs: ttl, drainTimeoutMs: ttl };
          const a = new Consumer(store, QUEUE, 'a', opts);
          const b = new Consumer(store, QUEUE, 'b', opts);
          const loops: Array<Promise<void>> = [];
          try {
            loops.push(rebalanceLoop(store, a, ttl / 3, stop.signal));
            await waitUntil(async () => a.inspect().active.length === 64, 30_000, 'a owning all 64 partitions');
            const t0 = performance.now();
            loops.push(rebalanceLoop(store, b, ttl / 3, stop.signal));
            await waitUntil(
              async () => b.inspect().active.length === 32 && a.inspect().active.length + a.inspect().draining.length === 32,
              60_000,
              'b owning 32 partitions',
              5,
            );
            const ms = performance.now() - t0;
            const owned = [...a.inspect().active, ...a.inspect().draining, ...b.inspect().active];
            check(new Set(owned).size === 64, `partitions owned twice or not at all: ${owned.length} owned, ${new Set(owned).size} distinct`);
            return { share: ms };
          } finally {
            stop.abort();
            await Promise.allSettled(loops);
            await a.close().catch(() => undefined);
            await b.close().catch(() => undefined);
            await store.close();
          }
        },
      },
    ],
  };
}

/** How to start a TypeScript or built child script. */
function childArgs(script: string): string[] {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const ts = import.meta.url.endsWith('.ts');
  const file = path.join(here, '..', 'children', `${script}.${ts ? 'ts' : 'js'}`);
  return ts ? ['--conditions=q-source', '--import', 'tsx', file] : [file];
}

/**
 * Redelivery after a crash: a child process running `runPartitionWorker` holds `n` requests in
 * flight (its handler never finishes) and is SIGKILLed; a survivor then starts in this process.
 * Measured from the kill until the survivor has written every result; every request must be
 * handled exactly once by the survivor and the queue left empty.
 */
export function partitionRedelivery(): Scenario {
  const ttl = 2_000;
  return {
    name: 'partition-redelivery',
    title: `partition redelivery after SIGKILL of the owner (lease TTL ${ttl} ms): kill → every result written by the survivor`,
    metrics: [{ key: 'redelivery', unit: 'ms', better: 'lower' }],
    baseline: 'q',
    reps: 3,
    systems: [
      {
        name: 'q',
        skip,
        async run(ctx) {
          const { Store } = await need(loadStore);
          const { runPartitionWorker } = await need(loadPartition);
          const n = ctx.n(500, 50);
          const store = await Store.open(ctx.dsn, { maxConns: 8 });
          const stop = new AbortController();
          let survivor: Promise<unknown> | undefined;
          const child = spawn(process.execPath, childArgs('partition-runner'), {
            env: { ...process.env, BENCH_DSN: ctx.dsn, BENCH_QUEUE: QUEUE, BENCH_TTL_MS: String(ttl) },
            stdio: ['ignore', 'pipe', 'pipe'],
          });
          try {
            const deadline = Math.floor(Date.now() / 1000) + 3600;
            await store.enqueue(Array.from({ length: n }, (_, i) => ({ id: idOf(i), token: 't', queue: QUEUE, deadline, envelope: '{}', payload: PAYLOAD })));
            const got = new Set<string>();
            let err = '';
            child.stderr.on('data', (b: Buffer) => (err += b.toString()));
            child.stdout.on('data', (b: Buffer) => {
              for (const line of b.toString().split('\n')) if (line.startsWith('got ')) got.add(line.slice(4));
            });
            await waitUntil(async () => got.size === n || child.exitCode !== null, 60_000, `the child holding all ${n} requests`);
            check(got.size === n, `child exited early (${String(child.exitCode)}): ${err.slice(-500)}`);
            const exited = new Promise((r) => child.once('exit', r));
            const t0 = performance.now();
            child.kill('SIGKILL');
            await exited;
            const seen = new ExactlyOnce(n);
            survivor = runPartitionWorker({
              store,
              queue: QUEUE,
              owner: 'survivor',
              concurrency: 256,
              batchSize: 256,
              leaseTtlMs: ttl,
              drainTimeoutMs: ttl,
              signal: stop.signal,
              handle: async (req) => {
                seen.hit(indexOf(req.id));
                return { result: { route: ROUTE, payload: '' } };
              },
            });
            await waitUntil(async () => (await store.resultDepth(ROUTE)) >= n, 60_000, `${n} results after the kill`, 5);
            const ms = performance.now() - t0;
            seen.verify('redelivered requests');
            const left = Number((await store.pool.query<{ n: string }>('SELECT count(*) AS n FROM async_requests')).rows[0]?.n);
            check(left === 0, `${left} requests left after redelivery`);
            return { redelivery: ms };
          } finally {
            if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
            stop.abort();
            await survivor;
            await store.close();
          }
        },
      },
    ],
  };
}
