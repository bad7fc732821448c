// Typed jobs (issue 39 item 6): defineJob carries payload and result types from one definition;
// its schema (any Standard Schema validator) is checked at enqueue (INVALID_ARGUMENT naming the
// field, nothing written) and before the handler runs (a bad stored payload is dead-lettered
// with the message, the handler never called). The compile-time half: fixtures/typed-job-types.ts.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { QError, QErrorCode } from '@q/schema';
import { JobStore } from '@q/store';
import { expect, it } from 'vitest';
import { z } from 'zod';
import { defineJob, type JobQueue, type StandardSchemaV1 } from '../src/index.js';
import { jobInStatus, useWorkerTests, waitFor } from './helpers.js';

let store: JobStore;
let queue: JobQueue;
const { startWorker } = useWorkerTests('jwdefine', { concurrency: 2 }, (t) => ({ store, queue } = t));

const here = path.dirname(fileURLToPath(import.meta.url));
const countJobs = async () => (await store.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM q_jobs_all')).rows[0]!.n;

const email = defineJob<{ to: string; tags: string[] }, { sent: string }>({
  type: 'email.send',
  schema: z.object({ to: z.string().email(), tags: z.array(z.string()) }),
});

it('a valid payload is enqueued and the handler gets it, typed; its result is stored', async () => {
  const seen: unknown[] = [];
  startWorker({}, (w) =>
    email.register(w, async (job) => {
      seen.push(job.payload);
      return { sent: job.payload.to };
    }),
  );
  const job = await email.enqueue(queue, { to: 'a@example.com', tags: ['x'] }, { maxAttempts: 2 });
  expect(job).toMatchObject({ type: 'email.send', queue: 'default', payload: { to: 'a@example.com', tags: ['x'] }, maxAttempts: 2 });
  const done = await waitFor(jobInStatus(store, job.uuid, 'succeeded'));
  expect(done.result).toEqual({ sent: 'a@example.com' });
  expect(seen).toEqual([{ to: 'a@example.com', tags: ['x'] }]);
});

it('a bad payload is INVALID_ARGUMENT naming each bad field, and nothing is written (enqueue and enqueueMany)', async () => {
  const bad = { to: 'not an email', tags: ['ok', 3] } as unknown as { to: string; tags: string[] };
  const err = await email.enqueue(queue, bad).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(QError);
  expect((err as QError).code).toBe(QErrorCode.INVALID_ARGUMENT);
  expect((err as QError).message).toBe(
    'email.send.enqueue: payload.to is invalid: Invalid email; payload.tags[1] is invalid: Expected string, received number',
  );
  const many = await email.enqueueMany(queue, [{ to: 'b@example.com', tags: [] }, bad]).catch((e: unknown) => e);
  expect((many as QError).code).toBe(QErrorCode.INVALID_ARGUMENT);
  expect((many as QError).message).toMatch(/^email\.send\.enqueueMany \(job 1\): payload\.to is invalid: Invalid email/);
  expect(await countJobs()).toBe(0);
});

it('a stored payload the schema refuses goes to the dead letter with the message; the handler is never called', async () => {
  let calls = 0;
  startWorker({}, (w) =>
    email.register(w, async () => {
      calls++;
      return { sent: 'never' };
    }),
  );
  // Enqueued around the definition (as an old producer or SQL would): the worker's check catches it.
  const raw = await queue.enqueue({ type: 'email.send', payload: { to: 'b@example.com' }, maxAttempts: 5 });
  const dead = await waitFor(jobInStatus(store, raw.uuid, 'dead_letter'));
  expect(dead.lastError).toBe('email.send: the stored payload is invalid: payload.tags is invalid: Required');
  expect(dead.attempt).toBe(1);
  expect(calls).toBe(0);
});

it('a hand-written Standard Schema (async validate, path segments as objects) works the same way', async () => {
  const positive: StandardSchemaV1<{ n: number }> = {
    '~standard': {
      version: 1,
      vendor: 'test',
      validate: async (v) => {
        const n = (v as { n?: unknown } | null)?.n;
        return typeof n === 'number' && n > 0 ? { value: { n } } : { issues: [{ message: 'must be a positive number', path: [{ key: 'n' }] }] };
      },
    },
  };
  const count = defineJob<{ n: number }, number>({ type: 'count', queue: 'default', schema: positive });
  await expect(count.enqueue(queue, { n: -1 })).rejects.toThrow('count.enqueue: payload.n is invalid: must be a positive number');
  await expect(count.check({ n: 2 })).resolves.toEqual({ n: 2 });
  expect(await countJobs()).toBe(0);
  expect(() => defineJob({ type: 'x', schema: {} as StandardSchemaV1 })).toThrow(/schema must implement Standard Schema/);
  expect(() => defineJob({ type: '' })).toThrow(QError);
});

it('typed-job-types.ts: each @ts-expect-error line is refused by tsc once its directive is gone (the type test can fail)', async () => {
  const fixture = path.join(here, 'fixtures', 'typed-job-types.ts');
  const source = fs.readFileSync(fixture, 'utf8');
  const lines = source.split('\n');
  const expected = lines.flatMap((l, i) => (l.trim().startsWith('// @ts-expect-error') ? [i + 2] : []));
  expect(expected.length).toBeGreaterThanOrEqual(6);
  // Inside the package's node_modules, so `zod` and the package's own sources resolve from it.
  const dir = fs.mkdtempSync(path.join(here, '..', 'node_modules', '.typed-job-check-'));
  try {
    const toSrc = path
      .relative(dir, path.join(here, '..', 'src', 'index.js'))
      .split(path.sep)
      .join('/');
    const stripped = lines
      .map((l) => (l.trim().startsWith('// @ts-expect-error') ? '//' : l))
      .join('\n')
      .replace("'../../src/index.js'", `'${toSrc.startsWith('.') ? toSrc : `./${toSrc}`}'`);
    fs.writeFileSync(path.join(dir, 'check.ts'), stripped);
    fs.writeFileSync(
      path.join(dir, 'tsconfig.json'),
      JSON.stringify({ extends: path.join(here, '..', 'tsconfig.json'), compilerOptions: { noEmit: true }, include: ['check.ts'] }),
    );
    const tsc = path.join(here, '..', '..', '..', 'node_modules', 'typescript', 'bin', 'tsc');
    const out = await promisify(execFile)(process.execPath, [tsc, '-p', path.join(dir, 'tsconfig.json')]).then(
      () => '',
      (err: { stdout?: string }) => err.stdout ?? '',
    );
    const refused = [...out.matchAll(/check\.ts\((\d+),\d+\): error TS\d+/g)].map((m) => Number(m[1]));
    expect([...new Set(refused)].sort((a, b) => a - b)).toEqual(expected);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}, 120_000);
