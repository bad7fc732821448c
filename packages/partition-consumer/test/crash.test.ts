import type { ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnTs, type TestSchema } from '@q/testing';
import type { RequestStore } from '@q/store';
import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { PartitionWorkerStats } from '../src/index.js';
import { ids, openTestStore, requests, waitFor } from './helpers.js';

// Three worker processes on one queue of 5,000 requests: one is SIGKILLed mid-run and a fresh
// one started; one is frozen (SIGSTOP) until its leases are taken, then resumed; one is stopped
// gracefully. Leases live 1 s so the whole run takes seconds.
const N = 5000;
const QUEUE = 'crash';
const ROUTE = 'crash-out';
const here = path.dirname(fileURLToPath(import.meta.url));
const script = path.join(here, 'fixtures', 'crash-worker.ts');

let schema: TestSchema;
let store: RequestStore;
let db: pg.Pool;
const children: ChildProcess[] = [];

interface Worker {
  owner: string;
  proc: ChildProcess;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stdout: () => string;
  stderr: () => string;
}

function startWorker(owner: string): Worker {
  const p = spawnTs(script, { cwd: path.join(here, '..'), env: { Q_DSN: schema.dsn, Q_QUEUE: QUEUE, Q_OWNER: owner, Q_ROUTE: ROUTE } });
  children.push(p.child);
  return { owner, proc: p.child, exited: p.exited, stdout: p.stdout, stderr: p.stderr };
}

async function stopGracefully(w: Worker): Promise<PartitionWorkerStats> {
  w.proc.kill('SIGTERM');
  const { code } = await w.exited;
  expect(code, `${w.owner} exit; stderr:\n${w.stderr()}`).toBe(0);
  return JSON.parse(w.stdout().trim()) as PartitionWorkerStats;
}

async function scalar(sql: string, params: unknown[] = []): Promise<number> {
  const { rows } = await db.query<{ n: string | null }>(sql, params);
  return Number(rows[0]?.n ?? 0);
}
const resultCount = () => scalar('SELECT count(*) AS n FROM q_results WHERE route = $1', [ROUTE]);
const maxSeq = () => scalar('SELECT max(seq) AS n FROM q_results WHERE route = $1', [ROUTE]);
const writtenBy = (owner: string) =>
  scalar(`SELECT count(*) AS n FROM q_results WHERE route = $1 AND (payload::jsonb ->> 'owner') = $2`, [ROUTE, owner]);
const ownedBy = (owner: string) => scalar(`SELECT count(*) AS n FROM q_partitions WHERE queue = $1 AND owner = $2`, [QUEUE, owner]);

beforeAll(async () => {
  ({ schema, store } = await openTestStore('pc_crash', 4));
  db = schema.pool();
  const all = requests(QUEUE, ids('crash', N));
  await store.enqueue(all);
});
afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await store?.close();
  await schema?.drop();
});

it('every request gets exactly one result through SIGKILL, freeze and graceful stop; none written after losing its partition', async () => {
  const t0 = Date.now();
  const phases: string[] = [];
  const mark = (what: string) => phases.push(`${what} ${((Date.now() - t0) / 1000).toFixed(1)}s`);
  const a = startWorker('crash-a');
  const b = startWorker('crash-b');
  const c = startWorker('crash-c');

  // 1. SIGKILL a mid-run (once it has written some of the results itself: on a loaded machine its
  // peers could take the first 600 before a held a partition); a fresh worker takes its place.
  await waitFor(async () => (await resultCount()) >= 600 && (await writtenBy('crash-a')) > 0, 60_000, 50);
  mark('kill a');
  a.proc.kill('SIGKILL');
  expect((await a.exited).signal).toBe('SIGKILL');
  const seqAfterKill = await maxSeq();
  const d = startWorker('crash-d');

  // 2. Freeze b until its peers have taken all its partitions, then let it run on as a zombie.
  await waitFor(async () => (await resultCount()) >= 1500, 60_000, 50);
  mark('freeze b');
  b.proc.kill('SIGSTOP');
  await waitFor(async () => (await ownedBy('crash-b')) === 0, 30_000, 50);
  const { rows: epochs } = await db.query<{ partition_id: number; epoch: string }>(
    'SELECT partition_id, epoch FROM q_partitions WHERE queue = $1',
    [QUEUE],
  );
  const epochAtResume = new Map(epochs.map((r) => [r.partition_id, Number(r.epoch)]));
  const seqAtResume = await maxSeq();
  mark('resume b');
  b.proc.kill('SIGCONT');

  // 3. Stop c gracefully.
  await waitFor(async () => (await resultCount()) >= 3000, 60_000, 50);
  mark('stop c');
  const statsC = await stopGracefully(c);
  mark('c stopped');

  // 4. The rest finish the queue.
  await waitFor(async () => (await resultCount()) >= N && (await scalar('SELECT count(*) AS n FROM q_requests')) === 0, 60_000, 50);
  mark('all done');
  const [statsB, statsD] = await Promise.all([stopGracefully(b), stopGracefully(d)]);
  mark('b, d stopped');

  // Exactly one result per request, nothing left.
  expect(await resultCount()).toBe(N);
  expect(await scalar('SELECT count(DISTINCT id) AS n FROM q_results WHERE route = $1', [ROUTE])).toBe(N);
  expect(await scalar('SELECT count(*) AS n FROM q_requests')).toBe(0);

  const { rows } = await db.query<{ seq: string; payload: string }>('SELECT seq, payload FROM q_results WHERE route = $1', [ROUTE]);
  const results = rows.map((r) => ({ seq: Number(r.seq), ...(JSON.parse(r.payload) as { owner: string; partition: number; epoch: number }) }));
  // The killed worker wrote nothing after it died.
  expect(results.filter((r) => r.owner === 'crash-a' && r.seq > seqAfterKill)).toEqual([]);
  // The frozen worker wrote nothing, once resumed, for work dispatched before it lost its partitions.
  const stale = results.filter((r) => r.owner === 'crash-b' && r.seq > seqAtResume && r.epoch <= (epochAtResume.get(r.partition) ?? 0));
  expect(stale).toEqual([]);
  // Each (partition, epoch) lease had a single writer.
  const writer = new Map<string, string>();
  for (const r of results) {
    const k = `${r.partition}:${r.epoch}`;
    expect(writer.get(k) ?? r.owner, `lease ${k}`).toBe(r.owner);
    writer.set(k, r.owner);
  }
  // Each survivor's own count of written results matches the table.
  for (const [owner, stats] of [
    ['crash-b', statsB],
    ['crash-c', statsC],
    ['crash-d', statsD],
  ] as const) {
    expect(stats.acked, owner).toBe(results.filter((r) => r.owner === owner).length);
  }
  expect(results.filter((r) => r.owner === 'crash-a').length).toBeGreaterThan(0);
  console.log(
    `crash test: ${phases.join(', ')};`,
    `a wrote ${results.filter((r) => r.owner === 'crash-a').length} before SIGKILL;`,
    `b ${JSON.stringify(statsB)}; c ${JSON.stringify(statsC)}; d ${JSON.stringify(statsD)}`,
  );
}, 120_000);
