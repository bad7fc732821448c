import { startEmbeddedPostgres } from '@q/devdb';
import { createTestSchema, type TestSchema } from '@q/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import {
  DSN_PASSWORD,
  FaultProxy,
  PAYLOAD_SECRET,
  deadTuples,
  dsnWithPassword,
  findSecrets,
  logDir,
  malformedPasswordDsns,
  pinVacuumHorizon,
  terminateBackends,
} from '../src/index.js';

let schema: TestSchema;
beforeAll(async () => {
  schema = await createTestSchema('chaos');
});
afterAll(async () => {
  await schema.drop();
});

function viaProxy(dsn: string, port: number): string {
  const u = new URL(dsn);
  u.hostname = '127.0.0.1';
  u.port = String(port);
  return u.toString();
}

describe('fault toolkit', () => {
  it('proxy: dropAll cuts live connections; a pool reconnects afterwards', async () => {
    const u = new URL(schema.dsn);
    const proxy = new FaultProxy({ host: u.hostname, port: Number(u.port || 5432) });
    const port = await proxy.listen();
    const pool = new pg.Pool({ connectionString: viaProxy(schema.dsn, port), max: 2 });
    pool.on('error', () => undefined);
    try {
      expect((await pool.query('SELECT 1 AS x')).rows[0].x).toBe(1);
      const hanging = pool.query('SELECT pg_sleep(5)');
      await new Promise((r) => setTimeout(r, 200));
      expect(proxy.dropAll()).toBeGreaterThan(0);
      await expect(hanging).rejects.toThrow();
      expect((await pool.query('SELECT 2 AS x')).rows[0].x).toBe(2);
    } finally {
      await pool.end();
      await proxy.close();
    }
  });

  it('proxy: cutOn fails only the statements carrying the marker, for its duration', async () => {
    const u = new URL(schema.dsn);
    const proxy = new FaultProxy({ host: u.hostname, port: Number(u.port || 5432) });
    const port = await proxy.listen();
    const pool = new pg.Pool({ connectionString: viaProxy(schema.dsn, port), max: 2 });
    pool.on('error', () => undefined);
    const marked = { name: 'q_toolkit_marked', text: 'SELECT 1 AS x' };
    try {
      await pool.query('SELECT 1');
      proxy.cutOn('q_toolkit_marked', 1_000);
      await expect(pool.query(marked)).rejects.toThrow();
      expect((await pool.query('SELECT 2 AS x')).rows[0].x).toBe(2);
      expect(proxy.cuts).toBe(1);
      await new Promise((r) => setTimeout(r, 1_100));
      expect((await pool.query(marked)).rows[0].x).toBe(1);
    } finally {
      await pool.end();
      await proxy.close();
    }
  });

  it('proxy: dropReplyTo lets the marked statement commit but loses its reply, the given number of times', async () => {
    const u = new URL(schema.dsn);
    const proxy = new FaultProxy({ host: u.hostname, port: Number(u.port || 5432) });
    const port = await proxy.listen();
    const pool = new pg.Pool({ connectionString: viaProxy(schema.dsn, port), max: 2 });
    pool.on('error', () => undefined);
    const direct = new pg.Pool({ connectionString: schema.dsn, max: 1 });
    const marked = { name: 'q_toolkit_dropped', text: 'INSERT INTO toolkit_drops VALUES (1) RETURNING n' };
    try {
      await direct.query('CREATE TABLE toolkit_drops (n int)');
      proxy.dropReplyTo('q_toolkit_dropped', 1);
      await expect(pool.query(marked)).rejects.toThrow();
      // It committed, though the client never heard so.
      expect((await direct.query('SELECT count(*)::int AS n FROM toolkit_drops')).rows[0].n).toBe(1);
      expect(proxy.drops).toBe(1);
      // Only once: the next one is answered.
      expect((await pool.query(marked)).rows[0].n).toBe(1);
      expect((await direct.query('SELECT count(*)::int AS n FROM toolkit_drops')).rows[0].n).toBe(2);
    } finally {
      await direct.query('DROP TABLE IF EXISTS toolkit_drops');
      await direct.end();
      await pool.end();
      await proxy.close();
    }
  });

  it('proxy: blackhole holds traffic for its duration, then it flows again', async () => {
    const u = new URL(schema.dsn);
    const proxy = new FaultProxy({ host: u.hostname, port: Number(u.port || 5432) });
    const port = await proxy.listen();
    const pool = new pg.Pool({ connectionString: viaProxy(schema.dsn, port), max: 1 });
    pool.on('error', () => undefined); // the proxy closing under an idle connection must not crash
    try {
      await pool.query('SELECT 1');
      proxy.blackhole(1_000);
      const started = Date.now();
      await pool.query('SELECT 1');
      expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    } finally {
      await pool.end();
      await proxy.close();
    }
  });

  it('terminateBackends ends every connection of an application name', async () => {
    const pool = new pg.Pool({ connectionString: schema.dsn, max: 3, application_name: 'q-chaos-victim' });
    pool.on('error', () => undefined);
    try {
      const clients = await Promise.all([pool.connect(), pool.connect(), pool.connect()]);
      clients.forEach((c) => c.on('error', () => undefined));
      expect(await terminateBackends(schema.serverDsn, 'q-chaos-victim')).toBe(3);
      await expect(clients[0]!.query('SELECT 1')).rejects.toThrow();
      clients.forEach((c) => c.release(true));
      expect((await pool.query('SELECT 3 AS x')).rows[0].x).toBe(3);
    } finally {
      await pool.end();
    }
  });

  it('a pinned vacuum horizon keeps dead tuples from being vacuumed', async () => {
    const pool = schema.pool();
    await pool.query('CREATE TABLE churn (id int primary key, v int)');
    await pool.query('INSERT INTO churn SELECT g, 0 FROM generate_series(1, 500) g');
    const pin = await pinVacuumHorizon(schema.dsn);
    try {
      await pool.query('UPDATE churn SET v = v + 1');
      await pool.query('VACUUM churn');
      await pool.query('SELECT pg_stat_force_next_flush()').catch(() => undefined);
      const { rows } = await pool.query(
        `SELECT n_dead_tup::int AS n FROM pg_stat_user_tables WHERE relname = 'churn' AND schemaname = current_schema()`,
      );
      expect(rows[0]?.n ?? (await deadTuples(schema.dsn, 'churn'))).toBeGreaterThanOrEqual(500);
    } finally {
      await pin.release();
    }
  });

  it('restarts an embedded server on the same data directory without losing committed rows', async () => {
    const server = await startEmbeddedPostgres({ fast: false });
    try {
      const c1 = new pg.Client(server.dsn);
      await c1.connect();
      await c1.query('CREATE TABLE kept (v int)');
      await c1.query('INSERT INTO kept VALUES (42)');
      await c1.end();
      await server.halt('immediate');
      await server.start();
      const c2 = new pg.Client(server.dsn);
      await c2.connect();
      expect((await c2.query('SELECT v FROM kept')).rows).toEqual([{ v: 42 }]);
      await c2.end();
    } finally {
      await server.stop();
    }
  });

  it('findSecrets reports any log line carrying a payload marker or the DSN password', () => {
    const dir = logDir('toolkit-secrets');
    fs.writeFileSync(path.join(dir, 'clean.log'), '{"msg":"ready"}\n');
    expect(findSecrets(dir)).toEqual([]);
    fs.writeFileSync(
      path.join(dir, 'leaky.log'),
      `{"msg":"x","dsn":"${dsnWithPassword('postgres://u@h/db')}"}\n{"payload":"${PAYLOAD_SECRET}"}\n`,
    );
    const hits = findSecrets(dir);
    expect(hits).toHaveLength(2);
    expect(hits[0]).toContain(DSN_PASSWORD);
  });

  it('findSecrets also reports either half of a password with an unescaped reserved character', () => {
    const dir = logDir('toolkit-secrets-malformed');
    // What an unredacted message would print: the DSN whole, or cut at the reserved character.
    const lines = malformedPasswordDsns().flatMap((dsn) => [
      dsn,
      dsn
        .split(/[/#? ]/)
        .slice(2)
        .join('|'),
    ]);
    fs.writeFileSync(path.join(dir, 'leaky.log'), `${lines.map((l) => JSON.stringify({ msg: l })).join('\n')}\n`);
    expect(findSecrets(dir)).toHaveLength(lines.length);
  });
});
