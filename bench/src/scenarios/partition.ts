import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
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
          const { RequestStore } = await need(loadStore);
          const { Consumer } = await need(loadPartition);
          const store = await RequestStore.open(ctx.dsn, { maxConns: 4 });
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
          const { RequestStore } = await need(loadStore);
          const { runPartitionWorker } = await need(loadPartition);
          const n = ctx.n(500, 50);
          const store = await RequestStore.open(ctx.dsn, { maxConns: 8 });
          const stop = new AbortController();
          let survivor: Promise<unknown> | undefined;
          const child = spawn(process.execPath, childArgs('partition-runner'), {
            env: { ...process.env, BENCH_DSN: ctx.dsn, BENCH_QUEUE: QUEUE, BENCH_TTL_MS: String(ttl) },
            stdio: ['ignore', 'pipe', 'pipe'],
          });
          try {
            const deadline = Math.floor(Date.now() / 1000) + 3600;
            await store.enqueue(
              Array.from({ length: n }, (_, i) => ({ id: idOf(i), token: 't', queue: QUEUE, deadline, envelope: '{}', payload: PAYLOAD })),
            );
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
            const left = Number((await store.pool.query<{ n: string }>('SELECT count(*) AS n FROM q_requests')).rows[0]?.n);
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

/** A child process started by {@link partitionRunnersProcs}, with what it printed. */
interface RunnerChild {
  proc: ChildProcessWithoutNullStreams;
  out: string;
  err: string;
}

function startRunner(dsn: string, owner: string, ttl: number): RunnerChild {
  const proc = spawn(process.execPath, childArgs('partition-noop-runner'), {
    env: { ...process.env, BENCH_DSN: dsn, BENCH_QUEUE: QUEUE, BENCH_ROUTE: ROUTE, BENCH_OWNER: owner, BENCH_TTL_MS: String(ttl) },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const c: RunnerChild = { proc, out: '', err: '' };
  proc.stdout.on('data', (b: Buffer) => (c.out += b.toString()));
  proc.stderr.on('data', (b: Buffer) => (c.err = (c.err + b.toString()).slice(-2_000)));
  return c;
}

const alive = (c: RunnerChild) => c.proc.exitCode === null && c.proc.signalCode === null;

/**
 * Dispatch (batch 256) → no-op handling → ack with `procs` child processes, each running one
 * `runPartitionWorker` (concurrency 256, its own pool of 4). The children open their stores first;
 * measured from the moment all are told to start (partition acquisition included) until every
 * result exists. Exactly one result per request and an empty queue are verified after the children
 * were stopped with SIGTERM (each must exit 0).
 */
export function partitionRunnersProcs(procs: number): Scenario {
  const ttl = 5_000;
  return {
    name: `partition-runners-p${procs}`,
    ...(procs !== 2 ? { smokeCoveredBy: 'partition-runners-p2' } : {}),
    title: `request dispatch → ack, batch 256, ${procs} runner process(es), 20,000 requests`,
    metrics: [{ key: 'rate', unit: 'req/s', better: 'higher' }],
    baseline: 'q',
    systems: [
      {
        name: 'q',
        skip,
        async run(ctx) {
          const { RequestStore } = await need(loadStore);
          const n = ctx.n(20_000, 500);
          const store = await RequestStore.open(ctx.dsn, { maxConns: 2 });
          const children: RunnerChild[] = [];
          try {
            const deadline = Math.floor(Date.now() / 1000) + 3600;
            for (let from = 0; from < n; from += 1_000) {
              const count = Math.min(1_000, n - from);
              await store.enqueue(
                Array.from({ length: count }, (_, k) => ({
                  id: idOf(from + k),
                  token: 't',
                  queue: QUEUE,
                  deadline,
                  envelope: '{}',
                  payload: PAYLOAD,
                })),
              );
            }
            for (let k = 0; k < procs; k++) children.push(startRunner(ctx.dsn, `proc-${k}`, ttl));
            const failure = () => children.find((c) => !alive(c));
            await waitUntil(
              async () => children.every((c) => c.out.includes('ready\n')) || failure() !== undefined,
              60_000,
              `${procs} runner processes ready`,
            );
            const dead = failure();
            check(dead === undefined, `runner exited before starting (${String(dead?.proc.exitCode)}): ${dead?.err ?? ''}`);
            const t0 = performance.now();
            for (const c of children) c.proc.stdin.write('go\n');
            await waitUntil(
              async () => {
                const gone = failure();
                check(gone === undefined, `runner died (${String(gone?.proc.exitCode ?? gone?.proc.signalCode)}): ${gone?.err ?? ''}`);
                return (await store.resultDepth(ROUTE)) >= n;
              },
              120_000,
              `${n} results`,
              5,
            );
            const s = (performance.now() - t0) / 1000;
            const exits = children.map((c) => new Promise<number | null>((r) => c.proc.once('exit', (code) => r(code))));
            for (const c of children) c.proc.kill('SIGTERM');
            const codes = await Promise.all(exits);
            check(
              codes.every((c) => c === 0),
              `runner exit codes after SIGTERM: ${codes.join(',')}: ${children.map((c) => c.err).join(' | ')}`,
            );
            const row = (
              await store.pool.query<{ total: string; distinct: string; known: string }>(
                `SELECT count(*) AS total, count(DISTINCT id) AS distinct,
                        count(*) FILTER (WHERE id ~ '^r[0-9]+$' AND substr(id, 2)::int < $2) AS known
                   FROM q_results WHERE route = $1`,
                [ROUTE, n],
              )
            ).rows[0];
            const [total, distinct, known] = [Number(row?.total), Number(row?.distinct), Number(row?.known)];
            check(
              total === n && distinct === n && known === n,
              `expected exactly one result for each of ${n} requests: ${total} results, ${distinct} distinct ids, ${known} known ids`,
            );
            const left = Number((await store.pool.query<{ n: string }>('SELECT count(*) AS n FROM q_requests')).rows[0]?.n);
            check(left === 0, `${left} requests left after every result was written`);
            return { rate: n / s };
          } finally {
            for (const c of children) if (alive(c)) c.proc.kill('SIGKILL');
            await store.close();
          }
        },
      },
    ],
  };
}
