/**
 * One system's `job-drain-held-xmin` run alone, with what its database sessions wait on: every
 * 20 ms it samples `pg_stat_activity` of the run's database and prints, per 5 s window, the share
 * of samples in which a session was active in each statement and wait (`cpu` when it waited on
 * nothing), most first. A share above 1 means more than one session at once.
 *
 *   node bench/dist/held-xmin.js [--system q|graphile-worker] [--held-s 30] [--fillfactor N]
 *
 * `--fillfactor` sets q's hot table to N before the run (to compare storage settings). The server
 * is `DSN` (a maintenance database: the run creates and drops its own); nothing else should run.
 */
import pg from 'pg';
import { JobStore } from '@q/store';
import { jobDrainHeldXmin } from './scenarios/jobs-history.js';
import { freshDatabase } from './server.js';
import { toolArgs } from './tool-args.js';

const args = toolArgs();
const systemName = args.str('system', 'q');
const heldMs = args.num('held-s', 30) * 1000;
const fillfactor = args.num('fillfactor', 0);
const WINDOW_MS = 5_000;
const SAMPLE_MS = 20;
const SHOWN = 6;

/** Samples the database `dbName`'s active sessions until `stop()`; prints a line per window. */
function sampleActivity(dsn: string, dbName: string): { stop: () => Promise<void> } {
  const client = new pg.Client({ connectionString: dsn });
  let stopped = false;
  const done = (async () => {
    await client.connect();
    let counts = new Map<string, number>();
    let samples = 0;
    let windowStart = Date.now();
    while (!stopped) {
      const { rows } = await client.query<{ q: string; w: string }>(
        `SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 70) AS q, coalesce(wait_event_type || ':' || wait_event, 'cpu') AS w
         FROM pg_stat_activity WHERE state = 'active' AND datname = $1 AND pid <> pg_backend_pid()`,
        [dbName],
      );
      samples++;
      for (const r of rows) counts.set(`${r.w} | ${r.q}`, (counts.get(`${r.w} | ${r.q}`) ?? 0) + 1);
      if (Date.now() - windowStart >= WINDOW_MS) {
        const top = [...counts].sort((a, b) => b[1] - a[1]).slice(0, SHOWN);
        process.stdout.write(`${new Date().toISOString().slice(11, 19)} (${samples} samples)\n`);
        for (const [k, n] of top) process.stdout.write(`  ${(n / samples).toFixed(2)} ${k}\n`);
        counts = new Map();
        samples = 0;
        windowStart = Date.now();
      }
      await new Promise((r) => setTimeout(r, SAMPLE_MS));
    }
    await client.end();
  })();
  return {
    stop: async () => {
      stopped = true;
      await done;
    },
  };
}

async function main(): Promise<void> {
  const scenario = jobDrainHeldXmin(undefined, heldMs);
  const system = scenario.systems.find((s) => s.name === systemName);
  if (!system) throw new Error(`--system: one of ${scenario.systems.map((s) => s.name).join(', ')}`);
  const db = await freshDatabase(args.dsn);
  try {
    if (fillfactor > 0) {
      const store = await JobStore.open(db.dsn, { maxConns: 1 });
      await store.pool.query(`ALTER TABLE q_jobs SET (fillfactor = ${Math.trunc(fillfactor)})`);
      await store.close();
    }
    const sampler = sampleActivity(args.dsn, db.name);
    const m = await system.run({ dsn: db.dsn, smoke: false, warmup: false, n: (full) => full, log: (line) => process.stderr.write(`${line}\n`) });
    await sampler.stop();
    console.log(JSON.stringify({ system: systemName, heldS: heldMs / 1000, ...(fillfactor > 0 ? { fillfactor } : {}), ...m }));
  } finally {
    await db.drop();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
