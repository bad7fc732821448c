import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/** A child process running a TypeScript entry of the workspace, with its output captured. */
export class Proc {
  readonly child: ChildProcess;
  private out = '';
  private readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  constructor(
    readonly name: string,
    script: string,
    env: Record<string, string>,
    private readonly logFile?: string,
  ) {
    this.child = spawn(process.execPath, ['--conditions=q-source', '--import', 'tsx', script], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const take = (b: Buffer) => {
      const s = b.toString('utf8');
      this.out += s;
      if (this.logFile) fs.appendFileSync(this.logFile, s);
    };
    this.child.stdout?.on('data', take);
    this.child.stderr?.on('data', take);
    this.exited = new Promise((resolve) => this.child.once('exit', (code, signal) => resolve({ code, signal })));
  }

  /** Everything the process printed so far (stdout and stderr). */
  get output(): string {
    return this.out;
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  signal(sig: NodeJS.Signals): void {
    if (this.alive) this.child.kill(sig);
  }

  /** Resolves when the process prints a line matching `re`. */
  async waitFor(re: RegExp, timeoutMs = 60_000): Promise<void> {
    const until = Date.now() + timeoutMs;
    while (!re.test(this.out)) {
      if (!this.alive) throw new Error(`${this.name} exited before printing ${re}:\n${this.out.slice(-2000)}`);
      if (Date.now() > until) throw new Error(`${this.name} did not print ${re} within ${timeoutMs} ms:\n${this.out.slice(-2000)}`);
      await sleep(50);
    }
  }

  wait(): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    return this.exited;
  }
}

/** A fresh folder for the process logs of one scenario (grepped for secrets at the end). */
export function logDir(scenario: string): string {
  const dir = path.join(process.env.Q_CHAOS_LOG_DIR ?? path.join(process.cwd(), '.chaos-logs'), scenario);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** A deterministic pseudo-random generator so a failing run can be replayed (seed printed). */
export function rng(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 0x1_0000_0000;
  };
}
