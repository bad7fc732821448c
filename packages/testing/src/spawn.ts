import { spawn, type ChildProcessByStdio } from 'node:child_process';
import type { Readable } from 'node:stream';

/** Node flags that run a TypeScript file from source: the workspace's `q-source` export condition and tsx. */
export const TS_NODE_ARGS: readonly string[] = ['--conditions=q-source', '--import', 'tsx'];

/** Options of {@link spawnTs}. */
export interface SpawnTsOptions {
  /** Arguments after the script. */
  readonly args?: readonly string[];
  /** Added to the parent's environment. */
  readonly env?: NodeJS.ProcessEnv;
  /** Working directory (default: the parent's); `--import tsx` is resolved from here. */
  readonly cwd?: string;
  /** `inherit` shows the child's stderr in the test output instead of collecting it (default `pipe`). */
  readonly stderr?: 'pipe' | 'inherit';
  /** Called with every chunk of output (stdout and collected stderr), e.g. to tee it to a log file. */
  readonly onOutput?: (chunk: string) => void;
}

/** How a child process ended. */
export interface Exit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

/** A running TypeScript child process with its output collected. */
export interface TsProcess {
  /** The child; its stdout is always a pipe, its stderr one unless `stderr: 'inherit'`. */
  readonly child: ChildProcessByStdio<null, Readable, Readable | null>;
  /** Everything it wrote to stdout so far. */
  stdout(): string;
  /** Everything it wrote to stderr so far (empty with `stderr: 'inherit'`). */
  stderr(): string;
  /** stdout and stderr interleaved as they arrived. */
  output(): string;
  /** True until it exits. */
  readonly alive: boolean;
  /** Sends `signal` if it is still running. */
  kill(signal?: NodeJS.Signals): void;
  /** Resolves when it exited and its output is read (its pipes closed, or 2 s after the exit). */
  readonly exited: Promise<Exit>;
}

/**
 * Starts `node --conditions=q-source --import tsx <script> …args` with pipes on stdout (and stderr), the one
 * way the suites run a fixture or a CLI in a real child process.
 */
export function spawnTs(script: string, opts: SpawnTsOptions = {}): TsProcess {
  const child = spawn(process.execPath, [...TS_NODE_ARGS, script, ...(opts.args ?? [])], {
    ...(opts.cwd !== undefined ? { cwd: opts.cwd } : {}),
    env: { ...process.env, ...opts.env },
    stdio: ['ignore', 'pipe', opts.stderr ?? 'pipe'],
  }) as ChildProcessByStdio<null, Readable, Readable | null>;
  let out = '';
  let err = '';
  let all = '';
  child.stdout.on('data', (d: Buffer) => {
    const s = d.toString();
    out += s;
    all += s;
    opts.onOutput?.(s);
  });
  child.stderr?.on('data', (d: Buffer) => {
    const s = d.toString();
    err += s;
    all += s;
    opts.onOutput?.(s);
  });
  // 'exit' can come before the last chunks of output are read: resolve once the pipes closed too,
  // waiting at most 2 s for them (a grandchild may hold them open).
  const exited = new Promise<Exit>((resolve) =>
    child.once('exit', (code, signal) => {
      const done = (): void => resolve({ code, signal });
      if (child.stdout.closed && (child.stderr?.closed ?? true)) return done();
      child.once('close', done);
      setTimeout(done, 2_000).unref();
    }),
  );
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    output: () => all,
    get alive() {
      return child.exitCode === null && child.signalCode === null;
    },
    kill(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    },
    exited,
  };
}
