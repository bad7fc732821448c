// Silent by default no more (issue 34 item 15): a worker with default options whose schema is
// dropped says so on stderr within seconds, one structured line, while routine work prints nothing.
import { createTestSchema, type TestSchema } from '@q/testing';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { stderrLogger } from '../src/index.js';
import { spawnWorker, waitFor, type WorkerProcess } from './helpers.js';

let schema: TestSchema;
let proc: WorkerProcess | undefined;
beforeAll(async () => {
  schema = await createTestSchema('jwdeflog');
});
afterAll(async () => {
  proc?.child.kill('SIGKILL');
  await proc?.exited;
  await schema?.drop();
});

it('a default-options worker whose schema is dropped prints an error line to stderr within a few seconds', async () => {
  proc = await spawnWorker({ Q_DSN: schema.dsn }, 'default-options.ts');
  // Routine work (open, migrate, a job run) wrote nothing but the fixture's own "ready".
  expect(proc.output().trim()).toBe('ready');
  const admin = new pg.Pool({ connectionString: schema.serverDsn, max: 1 });
  await admin.query(`DROP SCHEMA "${schema.name}" CASCADE`);
  await admin.end();
  const dropped = Date.now();
  const line = await waitFor(
    () =>
      proc!
        .output()
        .split('\n')
        .find((l) => l.startsWith('{') && l.includes('"level":"error"')),
    10_000,
  );
  expect(Date.now() - dropped).toBeLessThan(5_000);
  const parsed = JSON.parse(line) as Record<string, unknown>;
  expect(parsed).toMatchObject({ level: 'error', name: 'q-jobs', msg: expect.stringMatching(/persistent database failure/) });
  expect(parsed.time).toEqual(expect.any(String));
  expect(line).not.toContain('\n');
});

it('stderrLogger: warn and error lines, JSON or readable, nothing for info and debug, never throws', () => {
  const out: string[] = [];
  const json = stderrLogger({ name: 'q-jobs', pretty: false, write: (l) => out.push(l) });
  json.info({ a: 1 }, 'routine');
  json.debug({ a: 1 }, 'routine');
  const cyclic: Record<string, unknown> = { n: 10n };
  cyclic.self = cyclic;
  json.warn({ job_uuid: 'u', cyclic }, 'job lease lost; aborting its handler');
  json.error({}, 'job dead-lettered');
  expect(out).toHaveLength(2);
  expect(JSON.parse(out[0]!)).toMatchObject({
    level: 'warn',
    name: 'q-jobs',
    msg: 'job lease lost; aborting its handler',
    job_uuid: 'u',
    cyclic: { n: '10', self: '[circular]' },
  });
  expect(out.every((l) => l.endsWith('\n') && l.indexOf('\n') === l.length - 1)).toBe(true);
  const pretty: string[] = [];
  stderrLogger({ name: 'q-jobs', pretty: true, write: (l) => pretty.push(l) }).error({ queue: 'default' }, 'worker stopped');
  expect(pretty[0]).toMatch(/ERROR.*q-jobs.* worker stopped .*queue=default/);
  const throwing = stderrLogger({
    name: 'q',
    write: () => {
      throw new Error('EPIPE');
    },
  });
  expect(() => throwing.error({}, 'x')).not.toThrow();
});
