/**
 * Arguments of the bench's single-purpose tools (`explain-jobs.ts`, `cpu-split.ts`): numeric
 * `--name N` flags and the server to read, `DSN` (or `TEST_DATABASE_URL`, else the machine's
 * PostgreSQL 15 at 127.0.0.1).
 */
export interface ToolArgs {
  dsn: string;
  /** The value of `--name`, or `dflt` when absent. Throws on a value that is not a number. */
  num(name: string, dflt: number): number;
  /** The value of `--name`, or `dflt` when absent. */
  str(name: string, dflt: string): string;
}

/** Reads `argv` (without node and the script) and the environment. */
export function toolArgs(argv: readonly string[] = process.argv.slice(2)): ToolArgs {
  /** Absent: the flag is not given; otherwise the word after it (undefined at the end). */
  const given = (name: string): { value: string | undefined } | undefined => {
    const i = argv.indexOf(`--${name}`);
    return i < 0 ? undefined : { value: argv[i + 1] };
  };
  return {
    dsn: process.env.DSN ?? process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
    num(name, dflt) {
      const g = given(name);
      if (!g) return dflt;
      const v = Number(g.value);
      if (!Number.isFinite(v)) throw new Error(`--${name} needs a number`);
      return v;
    },
    str(name, dflt) {
      const g = given(name);
      if (!g) return dflt;
      if (g.value === undefined || g.value.startsWith('--')) throw new Error(`--${name} needs a value`);
      return g.value;
    },
  };
}
