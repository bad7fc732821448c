// Runs `model-server-main` as a child process and talks to it over IPC.
import { fork, type ChildProcess } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ModelServerOptions, SaturationPoint } from './model-server.js';

/** What the child reports. */
export interface ModelServerStats {
  maxSaturation: number;
  served: number;
  timeline: SaturationPoint[];
  running: number;
  waiting: number;
}

/** A model server in its own process. */
export class ModelServerProcess {
  #next = 1;
  readonly #pending = new Map<number, (v: unknown) => void>();
  private constructor(
    readonly child: ChildProcess,
    readonly url: string,
  ) {
    child.on('message', (m: { id?: number; data?: unknown }) => {
      if (m.id !== undefined) {
        this.#pending.get(m.id)?.(m.data);
        this.#pending.delete(m.id);
      }
    });
  }

  /**
   * Starts the child (from source under tsx when running from `src`, else the built file).
   * `priority` (a nice value, e.g. -10) stands in for the server running on a machine of its
   * own: on a small shared test machine the dispatcher's CPU use would otherwise show up as
   * model-server latency. Ignored where not permitted.
   */
  static async start(opts: ModelServerOptions & { priority?: number } = {}): Promise<ModelServerProcess> {
    const here = path.dirname(fileURLToPath(import.meta.url));
    const fromSource = import.meta.url.endsWith('.ts');
    const entry = path.join(here, fromSource ? 'model-server-main.ts' : 'model-server-main.js');
    const child = fork(entry, [JSON.stringify(opts)], {
      execArgv: fromSource ? ['--conditions=q-source', '--import', 'tsx'] : [],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const url = await new Promise<string>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('model server did not start within 20 s')), 20_000);
      child.once('exit', (code) => reject(new Error(`model server exited with ${code}`)));
      child.on('message', (m: { ready?: string }) => {
        if (m.ready) {
          clearTimeout(t);
          resolve(m.ready);
        }
      });
    });
    if (opts.priority !== undefined && child.pid !== undefined) {
      try {
        os.setPriority(child.pid, opts.priority);
      } catch {
        /* not permitted: keep the default priority */
      }
    }
    return new ModelServerProcess(child, url);
  }

  #call<T>(cmd: string, extra: Record<string, unknown> = {}): Promise<T> {
    const id = this.#next++;
    return new Promise<T>((resolve) => {
      this.#pending.set(id, resolve as (v: unknown) => void);
      this.child.send({ id, cmd, ...extra });
    });
  }

  probeStart(everyMs = 20): Promise<void> {
    return this.#call('probe-start', { everyMs });
  }
  probeStop(): Promise<{ count: number; p50: number; p99: number }> {
    return this.#call('probe-stop');
  }
  stats(): Promise<ModelServerStats> {
    return this.#call('stats');
  }
  reset(): Promise<void> {
    return this.#call('reset');
  }
  async close(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise((r) => this.child.once('exit', r));
    this.child.send({ id: 0, cmd: 'close' });
    const t = setTimeout(() => this.child.kill('SIGKILL'), 3000);
    await exited;
    clearTimeout(t);
  }
}
