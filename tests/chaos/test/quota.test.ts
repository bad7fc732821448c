// Scenario 5: six processes contend for a concurrency limit of 5 on one key while one of them is
// SIGKILLed inside the protected section. The resource never sees more than 5 users at once; the
// dead process's slots keep counting until its holder's lease lapses, and then are free again.
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createQuota } from '@q/quota';
import { createTestSchema, type TestSchema } from '@q/testing';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Proc, logDir, sleep } from '../src/index.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const WORKER = path.join(here, '..', 'src', 'workers', 'quota-worker.ts');
const LIMIT = 5;
const TTL_MS = 2_000;

let schema: TestSchema;
beforeAll(async () => {
  schema = await createTestSchema('chaos_quota');
});
afterAll(async () => {
  await schema.drop();
});

/** The protected resource: counts its concurrent users, per process. */
function startResource() {
  const active = new Map<string, number>();
  let inUse = 0;
  let peak = 0;
  let entries = 0;
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const who = url.searchParams.get('who') ?? '?';
    if (url.pathname === '/enter') {
      inUse += 1;
      entries += 1;
      peak = Math.max(peak, inUse);
      active.set(who, (active.get(who) ?? 0) + 1);
      // A user that dies inside the section leaves it when its connection drops.
      const sock = req.socket as typeof req.socket & { inside?: number; watched?: boolean };
      sock.inside = (sock.inside ?? 0) + 1;
      if (!sock.watched) {
        sock.watched = true;
        sock.once('close', () => {
          const n = Math.min(sock.inside ?? 0, active.get(who) ?? 0);
          active.set(who, (active.get(who) ?? 0) - n);
          inUse -= n;
        });
      }
    } else if (url.pathname === '/leave' && (active.get(who) ?? 0) > 0) {
      const sock = req.socket as typeof req.socket & { inside?: number };
      sock.inside = Math.max(0, (sock.inside ?? 1) - 1);
      active.set(who, active.get(who)! - 1);
      inUse -= 1;
    }
    res.end('ok');
  });
  return {
    server,
    active,
    get peak() {
      return peak;
    },
    get entries() {
      return entries;
    },
  };
}

it('quota: a limit of 5 holds across 6 processes and a SIGKILL; slots come back after the TTL, not before', async () => {
  const resource = startResource();
  await new Promise<void>((r) => resource.server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(resource.server.address() as { port: number }).port}`;
  const logs = logDir('quota');
  const procs = Array.from(
    { length: 6 },
    (_, i) =>
      new Proc(
        `q${i}`,
        WORKER,
        { Q_DSN: schema.dsn, Q_RESOURCE_URL: url, Q_PREFIX: `chaosq${i}`, Q_LIMIT: String(LIMIT), Q_TTL_MS: String(TTL_MS) },
        path.join(logs, `q${i}.log`),
      ),
  );
  const admin = new pg.Client({ connectionString: schema.dsn });
  await admin.connect();
  try {
    const t0 = Date.now();
    await Promise.all(procs.map((p) => p.waitFor(/"ready"/)));
    const tReady = Date.now();
    await sleep(2_000);

    // Kill a process while it is inside the protected section.
    let victim = -1;
    for (let i = 0; i < 400 && victim < 0; i++) {
      const holder = [...resource.active.entries()].find(([, n]) => n > 0);
      if (holder) victim = Number(holder[0].replace('chaosq', ''));
      else await sleep(5);
    }
    expect(victim).toBeGreaterThanOrEqual(0);
    procs[victim]!.signal('SIGKILL');
    await procs[victim]!.wait();
    const killedAt = Date.now();
    const held = await admin.query<{ used: number }>(`SELECT coalesce(sum(s.used), 0)::int AS used FROM q_quota_slots s WHERE s.holder LIKE $1`, [
      `chaosq${victim}-%`,
    ]);
    const deadHeld = held.rows[0]!.used;
    expect(deadHeld).toBeGreaterThan(0);

    // Within the TTL the dead holder's slots still count: survivors never exceed LIMIT - deadHeld.
    await sleep(Math.max(0, TTL_MS / 2 - (Date.now() - killedAt)));
    const probe = await createQuota({ dsn: schema.dsn, ttlMs: 10_000, holderPrefix: 'probe' });
    try {
      const live = await admin.query<{ used: number }>(
        `SELECT coalesce(sum(s.used), 0)::int AS used FROM q_quota_slots s JOIN q_quota_holders h USING (holder)
          WHERE s.key = 'tenant:shared' AND h.expires_ms > (extract(epoch FROM clock_timestamp()) * 1000)::bigint AND s.holder LIKE $1`,
        [`chaosq${victim}-%`],
      );
      if (Date.now() - killedAt < TTL_MS) expect(live.rows[0]!.used).toBe(deadHeld);

      await sleep(TTL_MS * 2);
      const tStop = Date.now();
      for (const p of procs) p.signal('SIGTERM');
      await Promise.all(procs.map((p) => p.wait()));
      console.log(`chaos quota timings: ready ${tReady - t0} ms, stop ${Date.now() - tStop} ms`);

      // After the TTL everything is free again: the probe gets all 5 slots.
      const releases = [];
      for (let i = 0; i < LIMIT; i++) releases.push(await probe.acquire('tenant:shared', LIMIT));
      expect(releases.every((r) => r !== null)).toBe(true);
      expect(await probe.acquire('tenant:shared', LIMIT)).toBeNull();
      for (const r of releases) await r!();
    } finally {
      await probe.close();
    }
    console.log(
      `chaos quota: ${resource.entries} protected entries by 6 processes, 1 SIGKILL holding ${deadHeld} slot(s), peak ${resource.peak} of ${LIMIT}, ${resource.peak > LIMIT ? 1 : 0} invariant violations`,
    );
    expect(resource.peak).toBeLessThanOrEqual(LIMIT);
    expect(resource.entries).toBeGreaterThan(50);
  } finally {
    for (const p of procs) p.signal('SIGKILL');
    await admin.end();
    await new Promise((r) => resource.server.close(r));
  }
});
