// The shared test kit itself: waitFor, spawnTs, inTransaction and the store lifecycle hooks, on real Postgres.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { idInPartition, inTransaction, newRequest, runUnderTerminal, spawnTs, stripAnsi, textSink, useOpenStore, waitFor } from '../src/index.js';

const here = path.dirname(fileURLToPath(import.meta.url));

/** A minimal real store: a pool on the DSN it is opened with. */
class PoolStore {
  static async open(dsn: string, opts: { max?: number } = {}): Promise<PoolStore> {
    return new PoolStore(new pg.Pool({ connectionString: dsn, max: opts.max ?? 2 }));
  }
  readonly pool: pg.Pool;
  constructor(pool: pg.Pool) {
    this.pool = pool;
  }
  close(): Promise<void> {
    return this.pool.end();
  }
}

describe('waitFor', () => {
  it('resolves with the first truthy value', async () => {
    let n = 0;
    expect(await waitFor(() => (++n >= 3 ? n : 0), 5_000, 1)).toBe(3);
  });

  it('fails after the timeout naming what it waited for', async () => {
    await expect(waitFor(() => false, 50, 'the moon')).rejects.toThrow('timed out after 50 ms waiting for the moon');
  });

  it('takes a custom done test (0 counts as done here)', async () => {
    expect(await waitFor(() => 0, { timeoutMs: 1_000, done: (v) => v !== undefined })).toBe(0);
  });
});

describe('textSink and runUnderTerminal', () => {
  it('a sink keeps what is written to it', async () => {
    const t = textSink();
    await new Promise<void>((r) => t.sink.write('a\n', () => r()));
    await new Promise<void>((r) => t.sink.write('b', () => r()));
    expect(t.text()).toBe('a\nb');
    expect(stripAnsi('\x1b[32mINFO\x1b[39m: ready')).toBe('INFO: ready');
  });

  it('the command sees a terminal; the run ends when `until` holds, or reports that it never did', async () => {
    const tty = await runUnderTerminal(
      [process.execPath, '-e', "console.log(process.stdout.isTTY ? 'on a tty' : 'on a pipe'); setInterval(() => {}, 1000)"],
      {
        until: (out) => /on a (tty|pipe)/.test(out),
        timeoutMs: 20_000,
      },
    );
    expect(tty).toMatchObject({ matched: true });
    expect(tty.output).toContain('on a tty');
    const never = await runUnderTerminal([process.execPath, '-e', "console.log('it\\'s done')"], {
      until: (out) => out.includes('ready'),
      timeoutMs: 20_000,
    });
    expect(never.matched).toBe(false);
    expect(never.output).toContain("it's done");
  }, 60_000);
});

describe('spawnTs', () => {
  it('runs a TypeScript file with args and env, collecting stdout, stderr and the exit code', async () => {
    const p = spawnTs(path.join(here, 'fixtures', 'echo.ts'), { args: ['a', 'b'], env: { KIT_GREETING: 'hi', KIT_EXIT: '3' } });
    const exit = await p.exited;
    expect(exit.code).toBe(3);
    expect(p.stdout()).toBe('out:hi:a,b\n');
    expect(p.stderr()).toBe('err:line\n');
    expect(p.output()).toContain('out:hi:a,b');
    expect(p.alive).toBe(false);
  });
});

describe('useOpenStore and inTransaction', () => {
  let seenInHook = '';
  const t = useOpenStore(PoolStore, { prefix: 'kit', max: 3, truncate: ['kit_rows'] }, async ({ store, schema }) => {
    seenInHook = schema.name;
    await store.pool.query('CREATE TABLE kit_rows (n int NOT NULL)');
  });

  it('opens the store on a fresh schema before the tests and runs onOpen', async () => {
    expect(t.schema.name).toBe(seenInHook);
    expect(t.schema.name.startsWith('kit_')).toBe(true);
    const { rows } = await t.store.pool.query<{ s: string }>('SELECT current_schema() AS s');
    expect(rows[0]?.s).toBe(t.schema.name);
    await t.store.pool.query('INSERT INTO kit_rows VALUES (1)');
  });

  it('truncates the listed tables before each test', async () => {
    const { rows } = await t.store.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM kit_rows');
    expect(rows[0]?.n).toBe(0);
  });

  it('inTransaction commits, rolls back on request, and rolls back when fn throws', async () => {
    await inTransaction(t.store.pool, (c) => c.query('INSERT INTO kit_rows VALUES (1)'));
    await inTransaction(t.store.pool, (c) => c.query('INSERT INTO kit_rows VALUES (2)'), 'ROLLBACK');
    await expect(
      inTransaction(t.store.pool, async (c) => {
        await c.query('INSERT INTO kit_rows VALUES (3)');
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    const { rows } = await t.store.pool.query<{ n: number }>('SELECT n FROM kit_rows ORDER BY n');
    expect(rows.map((r) => r.n)).toEqual([1]);
  });
});

describe('factories', () => {
  it('idInPartition returns the first id of the partition; newRequest fills defaults', () => {
    const mod4 = (id: string) => Number(id.split('-')[1]) % 4;
    expect(idInPartition('x', 3, mod4)).toBe('x-3');
    const r = newRequest('r1', { queue: 'other' });
    expect(r).toMatchObject({ id: 'r1', queue: 'other', deadline: 1000, envelope: '{}' });
    expect(Buffer.from(r.payload).toString()).toBe('r1');
    expect(r.token).toMatch(/^[0-9a-f]{32}$/);
  });
});
