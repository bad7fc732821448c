// Runs the app's bin scripts as real child processes (TypeScript sources through tsx).
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnTs, TS_NODE_ARGS, type TsProcess } from '@q/testing';

const here = path.dirname(fileURLToPath(import.meta.url));
/** Path of a bin's TypeScript source. */
export const bin = (name: string) => path.join(here, '..', 'src', 'bin', `${name}.ts`);
/** Node flags that run the sources. */
export const NODE_ARGS = [...TS_NODE_ARGS];

/** Runs `q-jobs` to completion. */
export function runQJobs(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return runBin('q-jobs', args, env);
}

/** Runs `akerdock-worker` to completion (for commands that exit at once: bad flags, --help). */
export function runWorker(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return runBin('akerdock-worker', args, env);
}

function runBin(name: string, args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const p = spawnTs(bin(name), { args, env });
    p.child.once('error', reject);
    void p.exited.then(({ code }) => resolve({ code, stdout: p.stdout(), stderr: p.stderr() }));
  });
}

/** A running `akerdock-worker` child: its JSON log lines and exit. */
export interface WorkerChild {
  child: TsProcess['child'];
  lines: Array<Record<string, unknown>>;
  /** Resolves with the first log line matching `msg`. */
  line(msg: string, timeoutMs?: number): Promise<Record<string, unknown>>;
  exited: Promise<number | null>;
  /** What it wrote to stderr so far. */
  stderr(): string;
}

export function spawnWorker(args: string[], env: NodeJS.ProcessEnv = {}): WorkerChild {
  const p = spawnTs(bin('akerdock-worker'), { args, env });
  const child = p.child;
  const lines: Array<Record<string, unknown>> = [];
  const waiters: Array<() => void> = [];
  let buf = '';
  child.stdout.on('data', (b: Buffer) => {
    buf += b.toString();
    let i: number;
    while ((i = buf.indexOf('\n')) >= 0) {
      const text = buf.slice(0, i);
      buf = buf.slice(i + 1);
      try {
        lines.push(JSON.parse(text) as Record<string, unknown>);
      } catch {
        lines.push({ msg: text });
      }
      for (const w of waiters.splice(0)) w();
    }
  });
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => {
      for (const w of waiters.splice(0)) w();
      resolve(code);
    }),
  );
  return {
    child,
    lines,
    exited,
    stderr: p.stderr,
    line(msg, timeoutMs = 60_000) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no "${msg}" log line; stderr: ${p.stderr().slice(-2000)}`)), timeoutMs);
        const check = () => {
          const found = lines.find((l) => l.msg === msg);
          if (found) {
            clearTimeout(timer);
            resolve(found);
          } else if (child.exitCode !== null) {
            clearTimeout(timer);
            reject(new Error(`worker exited (${child.exitCode}) before "${msg}"; stderr: ${p.stderr().slice(-2000)}`));
          } else {
            waiters.push(check);
          }
        };
        check();
      });
    },
  };
}
