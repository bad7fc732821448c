// Runs the CLI as child processes (`node --conditions=q-source --import tsx src/cli.ts …`) next
// to a test schema, a fake inference server and a producer store.
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll } from 'vitest';
import { createTestSchema, spawnTs, type TestSchema } from '@q/testing';
import { RequestStore } from '@q/store';
import { startInferenceServer, type InferenceServer } from '../src/sim/server.js';
import { ok, scenarioOf } from './helpers.js';

const appDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const cli = path.join(appDir, 'src', 'cli.ts');

/** One CLI child process. */
export interface CliProcess {
  child: ChildProcess;
  out(): string;
  err(): string;
  exit: Promise<number | null>;
}

/** What a process test file gets. */
export interface CliFixture {
  tmp: string;
  schema: TestSchema;
  server: InferenceServer;
  store: RequestStore;
  startCli(args: string[], env?: NodeJS.ProcessEnv): CliProcess;
  /** Writes `text` to `name` in `tmp`; returns its path. */
  tmpFile(name: string, text: string): string;
}

/** Registers beforeAll/afterAll hooks and returns the fixture (filled in by beforeAll). */
export function useCliFixture(): CliFixture {
  const children: ChildProcess[] = [];
  const f = {
    startCli(args: string[], env: NodeJS.ProcessEnv = {}): CliProcess {
      const p = spawnTs(cli, { args, cwd: appDir, env });
      children.push(p.child);
      return { child: p.child, out: p.stdout, err: p.stderr, exit: p.exited.then((e) => e.code) };
    },
    tmpFile(name: string, text: string): string {
      const file = path.join(f.tmp, name);
      fs.writeFileSync(file, text);
      return file;
    },
  } as CliFixture;
  beforeAll(async () => {
    f.tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'qdisp-'));
    f.schema = await createTestSchema('dproc');
    f.server = await startInferenceServer({ behaviour: (call) => ok(scenarioOf(call).id, 40 + Math.random() * 80) });
    f.store = await RequestStore.open(f.schema.dsn, { maxConns: 2 });
  });
  afterAll(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await f.store?.close();
    await f.server?.close();
    await f.schema?.drop();
    if (f.tmp) fs.rmSync(f.tmp, { recursive: true, force: true });
  });
  return f;
}
