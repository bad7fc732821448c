import { performance } from 'node:perf_hooks';
import type { Measurement, RunContext, Scenario, System } from '../scenario.js';
import { percentile } from '../stats.js';
import { pgBossFlows, qFlows, type FlowNodeSpec, type FlowSystem } from '../systems/flows.js';
import { ExactlyOnce, check, waitUntil } from '../verify.js';

// Job graphs (issue 41): a wide fan-out joined by one node, and a long chain, run by each
// system's graph API. What is measured is how soon a node becomes runnable once its parents are
// done: q releases it in the transaction that completes its last parent, pg-boss in a resolver pass.

const CONCURRENCY = 32;

function asSystem(fs: FlowSystem, run: System['run']): System {
  return { name: fs.name, ...(fs.skip ? { skip: () => (fs.skip as () => Promise<string | undefined>)() } : {}), run };
}

/**
 * `flow-fanout-10k`: one root, 10,000 children of the root, and one node joining them all
 * (10,002 jobs). Measures the graph's insert, the drain from the workers' start to the join's
 * start (jobs/s), and the delay from the last child's handler returning to the join's handler
 * starting (which includes writing that child's success).
 */
export function flowFanout(): Scenario {
  return {
    name: 'flow-fanout-10k',
    title: `flows: a root, 10,000 children and one join (concurrency ${CONCURRENCY})`,
    maxReps: 3,
    metrics: [
      { key: 'insert', unit: 'ms', better: 'lower' },
      { key: 'rate', unit: 'jobs/s', better: 'higher' },
      { key: 'join', unit: 'ms', better: 'lower' },
    ],
    baseline: 'q',
    systems: [qFlows, pgBossFlows].map((fs) => asSystem(fs, (ctx) => fanoutRun(fs, ctx))),
  };
}

async function fanoutRun(fs: FlowSystem, ctx: RunContext): Promise<Measurement> {
  const width = ctx.n(10_000, 50);
  const join = width + 1;
  const n = width + 2;
  const nodes: FlowNodeSpec[] = [{ ref: 'root', i: 0, dependsOn: [] }];
  for (let i = 1; i <= width; i++) nodes.push({ ref: `c${i}`, i, dependsOn: ['root'] });
  nodes.push({
    ref: 'join',
    i: join,
    dependsOn: nodes.slice(1).map((c) => c.ref),
  });
  const h = await fs.open(ctx.dsn, CONCURRENCY + 4);
  const seen = new ExactlyOnce(n);
  let closed = false;
  try {
    const t0 = performance.now();
    await h.insert(nodes);
    const insertMs = performance.now() - t0;
    let children = 0;
    let lastChildAt = 0;
    let joinAt = 0;
    let joinSawAll = false;
    const started = performance.now();
    await h.startWorkers({
      concurrency: CONCURRENCY,
      handle: (p) => {
        seen.hit(p.i);
        if (p.i === join) {
          joinAt = performance.now();
          joinSawAll = children === width;
        }
      },
      handled: (p) => {
        if (p.i > 0 && p.i < join) {
          children++;
          lastChildAt = performance.now();
        }
      },
    });
    await seen.all(600_000);
    check(joinSawAll, `${fs.name}: the join started before all ${width} children had run`);
    const s = (joinAt - started) / 1000;
    await waitUntil(async () => (await h.completed()) === n, 60_000, `${fs.name}: ${n} completions recorded`);
    closed = true;
    await h.close();
    seen.verify(`${fs.name} fan-out`);
    const joinMs = joinAt - lastChildAt;
    ctx.log(`insert ${insertMs.toFixed(0)} ms; ${n} jobs in ${s.toFixed(2)} s; join ${joinMs.toFixed(1)} ms after the last child`);
    return { insert: insertMs, rate: n / s, join: joinMs };
  } finally {
    if (!closed) await h.close().catch(() => undefined);
  }
}

/** How long a chain run may take before it stops and reports the hops it saw. */
const CHAIN_CAP_MS = 30_000;

/**
 * `flow-chain-1k`: a chain of 1,000 nodes, each depending on the one before. A hop is the time
 * from one node's handler returning to the next one's handler starting: p50 and p99 over the
 * chain. A system whose chain has not finished after 30 s stops there and reports the hops it made
 * (at least 10).
 */
export function flowChain(): Scenario {
  return {
    name: 'flow-chain-1k',
    title: 'flows: a chain of 1,000 nodes, the delay of each hop',
    maxReps: 3,
    metrics: [
      { key: 'p50', unit: 'ms', better: 'lower' },
      { key: 'p99', unit: 'ms', better: 'lower' },
      { key: 'hops', unit: 'hops', better: 'higher' },
    ],
    baseline: 'q',
    systems: [qFlows, pgBossFlows].map((fs) => asSystem(fs, (ctx) => chainRun(fs, ctx))),
  };
}

async function chainRun(fs: FlowSystem, ctx: RunContext): Promise<Measurement> {
  const length = ctx.n(1_000, 6);
  const nodes: FlowNodeSpec[] = Array.from({ length }, (_, i) => ({ ref: `n${i}`, i, dependsOn: i === 0 ? [] : [`n${i - 1}`] }));
  const startedAt = new Float64Array(length);
  const returnedAt = new Float64Array(length);
  const h = await fs.open(ctx.dsn, 12);
  let last = -1;
  let outOfOrder: string | undefined;
  let onDone: () => void = () => undefined;
  const done = new Promise<void>((r) => (onDone = r));
  try {
    await h.insert(nodes);
    await h.startWorkers({
      concurrency: 8,
      handle: (p) => {
        if (p.i !== last + 1) outOfOrder ??= `node ${p.i} started after node ${last}`;
        startedAt[p.i] = performance.now();
      },
      handled: (p) => {
        returnedAt[p.i] = performance.now();
        last = p.i;
        if (p.i === length - 1) onDone();
      },
    });
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([done, new Promise<void>((r) => (timer = setTimeout(r, CHAIN_CAP_MS)))]);
    clearTimeout(timer);
    check(outOfOrder === undefined, `${fs.name}: ${outOfOrder ?? ''}`);
    const hops = Array.from({ length: Math.max(0, last) }, (_, k) => (startedAt[k + 1] as number) - (returnedAt[k] as number));
    check(hops.length >= Math.min(10, length - 1), `${fs.name}: only ${hops.length} hops in ${CHAIN_CAP_MS / 1000} s`);
    ctx.log(`${hops.length} of ${length - 1} hops${last < length - 1 ? ` (stopped after ${CHAIN_CAP_MS / 1000} s)` : ''}`);
    return { p50: percentile(hops, 50), p99: percentile(hops, 99), hops: hops.length };
  } finally {
    await h.close().catch(() => undefined);
  }
}
