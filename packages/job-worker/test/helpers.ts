import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const repoRoot = path.resolve(here, '../../..');

/** Polls `check` until it returns a truthy value (generous timeout: the machine may be loaded). */
export async function waitFor<T>(check: () => Promise<T> | T, timeoutMs = 20_000, everyMs = 50): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** A worker process running test/fixtures/worker-process.ts, with its output collected. */
export interface WorkerProcess {
  child: ChildProcess;
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts a fixture (default the fixture worker) in a real child process; resolves once it printed `ready`. */
export async function spawnWorker(env: Record<string, string>, fixture = 'worker-process.ts'): Promise<WorkerProcess> {
  const child = spawn(
    process.execPath,
    ['--conditions=q-source', '--import', 'tsx', path.join(here, 'fixtures', fixture)],
    { cwd: repoRoot, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const proc = { child, output: () => out, exited };
  await Promise.race([
    waitFor(() => out.includes('ready'), 60_000),
    exited.then((e) => {
      throw new Error(`worker process exited early (${JSON.stringify(e)}): ${out}`);
    }),
  ]);
  return proc;
}
