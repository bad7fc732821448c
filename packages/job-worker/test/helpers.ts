import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnTs, waitFor, type Exit, type TsProcess } from '@q/testing';
import { afterEach } from 'vitest';
import type { Worker } from '../src/index.js';

export { memoryLogger, waitFor } from '@q/testing';

const here = path.dirname(fileURLToPath(import.meta.url));
const repoRoot = path.resolve(here, '../../..');

/** A worker process running test/fixtures/worker-process.ts, with its output collected. */
export interface WorkerProcess {
  child: TsProcess['child'];
  output(): string;
  exited: Promise<Exit>;
}

/** Starts a fixture (default the fixture worker) in a real child process; resolves once it printed `ready`. */
export async function spawnWorker(env: Record<string, string>, fixture = 'worker-process.ts'): Promise<WorkerProcess> {
  const p = spawnTs(path.join(here, 'fixtures', fixture), { cwd: repoRoot, env });
  const proc = { child: p.child, output: p.output, exited: p.exited };
  await Promise.race([
    waitFor(() => p.output().includes('ready'), 60_000),
    p.exited.then((e) => {
      throw new Error(`worker process exited early (${JSON.stringify(e)}): ${p.output()}`);
    }),
  ]);
  return proc;
}

/** A worker a test started: stopped by {@link stopWorkersAfterEach}. */
export interface RunningWorker {
  worker: Worker;
  ac: AbortController;
  run: Promise<void>;
}

/**
 * Registers an `afterEach` that runs `cleanups` (newest first), then aborts every worker in `running`,
 * waits for its run and its jobs (5 s), and empties `running`.
 */
export function stopWorkersAfterEach(running: RunningWorker[], cleanups: Array<() => Promise<void> | void> = []): void {
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
    for (const r of running) r.ac.abort();
    await Promise.all(
      running.map(async (r) => {
        await r.run;
        await r.worker.wait(5_000);
      }),
    );
    running.length = 0;
  });
}
