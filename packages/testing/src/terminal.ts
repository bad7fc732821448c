import { spawn } from 'node:child_process';
import { Writable } from 'node:stream';

/** A writable stream that keeps what is written to it, for a logger's `destination`. */
export interface TextSink {
  readonly sink: Writable;
  /** Everything written so far. */
  text(): string;
}

/** A {@link TextSink}: the one way the suites capture what a logger writes. */
export function textSink(): TextSink {
  let text = '';
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      text += chunk.toString();
      cb();
    },
  });
  return { sink, text: () => text };
}

// eslint-disable-next-line no-control-regex -- ANSI escape sequences start with ESC (0x1b)
const ANSI = /\x1b\[[0-9;]*m/g;

/** `text` without its ANSI colour sequences. */
export function stripAnsi(text: string): string {
  return text.replace(ANSI, '');
}

/** Options of {@link runUnderTerminal}. */
export interface RunUnderTerminalOptions {
  /** Working directory of the command. */
  readonly cwd?: string;
  /** Called with the output so far (colours stripped); true ends the run. */
  readonly until: (output: string) => boolean;
  /** How long to wait for `until` (ms). */
  readonly timeoutMs: number;
}

/** What {@link runUnderTerminal} saw. */
export interface TerminalRun {
  /** True if `until` held before the timeout and before the command exited. */
  readonly matched: boolean;
  /** The command's output (stdout and stderr: both are the terminal), colours stripped. */
  readonly output: string;
}

/**
 * Runs `argv` with a pseudo-terminal as its stdout and stderr (util-linux `script`), so it logs as
 * it would to a person, until `until(output)` holds or `timeoutMs` passes; then sends SIGTERM and
 * waits for it to exit.
 */
export async function runUnderTerminal(argv: readonly string[], opts: RunUnderTerminalOptions): Promise<TerminalRun> {
  const quoted = argv.map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
  const child = spawn('script', ['-q', '-e', '-c', quoted, '/dev/null'], {
    stdio: ['pipe', 'pipe', 'pipe'],
    ...(opts.cwd !== undefined ? { cwd: opts.cwd } : {}),
  });
  let output = '';
  child.stdout.on('data', (b: Buffer) => (output += stripAnsi(b.toString())));
  const matched = await new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), opts.timeoutMs);
    child.stdout.on('data', () => {
      if (opts.until(output)) {
        clearTimeout(timer);
        resolve(true);
      }
    });
    child.once('exit', () => resolve(false));
  });
  child.kill('SIGTERM');
  if (child.exitCode === null && child.signalCode === null) await new Promise((r) => child.once('exit', r));
  return { matched, output };
}
