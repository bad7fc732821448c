import fs from 'node:fs';
import path from 'node:path';
import { sleep, spawnTs, type Exit, type TsProcess } from '@q/testing';

/** A child process running a TypeScript entry of the workspace, with its output captured. */
export class Proc {
  readonly #proc: TsProcess;

  constructor(
    readonly name: string,
    script: string,
    env: Record<string, string>,
    logFile?: string,
  ) {
    this.#proc = spawnTs(script, { env, ...(logFile ? { onOutput: (s: string) => fs.appendFileSync(logFile, s) } : {}) });
  }

  /** The child process. */
  get child(): TsProcess['child'] {
    return this.#proc.child;
  }

  /** Everything the process printed so far (stdout and stderr). */
  get output(): string {
    return this.#proc.output();
  }

  get alive(): boolean {
    return this.#proc.alive;
  }

  signal(sig: NodeJS.Signals): void {
    this.#proc.kill(sig);
  }

  /** Resolves when the process prints a line matching `re`. */
  async waitFor(re: RegExp, timeoutMs = 60_000): Promise<void> {
    const until = Date.now() + timeoutMs;
    while (!re.test(this.output)) {
      if (!this.alive) throw new Error(`${this.name} exited before printing ${re}:\n${this.output.slice(-2000)}`);
      if (Date.now() > until) throw new Error(`${this.name} did not print ${re} within ${timeoutMs} ms:\n${this.output.slice(-2000)}`);
      await sleep(50);
    }
  }

  wait(): Promise<Exit> {
    return this.#proc.exited;
  }
}

/** A fresh folder for the process logs of one scenario (grepped for secrets at the end). */
export function logDir(scenario: string): string {
  const dir = path.join(process.env.Q_CHAOS_LOG_DIR ?? path.join(process.cwd(), '.chaos-logs'), scenario);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

export { sleep };

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
