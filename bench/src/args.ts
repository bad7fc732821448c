/** Command-line options of `pnpm bench`. */
export interface BenchArgs {
  scenarios: string[];
  smoke: boolean;
  reps: number;
  /** Directory for `<date>.json` and `<date>.png`; undefined = bench/results. */
  out?: string;
  /** Rewrite the results section of bench/README.md. */
  readme: boolean;
  list: boolean;
  help: boolean;
}

export const USAGE = `usage: pnpm bench [scenario…] [--smoke] [--reps N] [--out DIR] [--readme] [--list]

  scenario…   names or prefixes (e.g. job-drain); default: all
  --smoke     tiny sizes, one repetition, no warm-up (proves the code runs; measures nothing)
  --reps N    measured runs per system and scenario (default 3)
  --out DIR   where <date>.json and <date>.png go (default bench/results)
  --readme    put the table and chart into bench/README.md
  --list      print the scenario names

Postgres: DATABASE_URL, or an embedded PostgreSQL 18 (durable settings) when unset.`;

/** Parses argv (without node and the script). Throws on an unknown option. */
export function parseArgs(argv: string[]): BenchArgs {
  const a: BenchArgs = { scenarios: [], smoke: false, reps: 3, readme: false, list: false, help: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${arg} needs a value`);
      return v;
    };
    if (arg === '--smoke') a.smoke = true;
    else if (arg === '--readme') a.readme = true;
    else if (arg === '--list') a.list = true;
    else if (arg === '--help' || arg === '-h') a.help = true;
    else if (arg === '--reps') {
      a.reps = Number(value());
      if (!Number.isInteger(a.reps) || a.reps < 1) throw new Error('--reps must be a positive integer');
    } else if (arg === '--out') a.out = value();
    else if (arg === '--') continue;
    else if (arg.startsWith('-')) throw new Error(`unknown option ${arg}\n${USAGE}`);
    else a.scenarios.push(arg);
  }
  return a;
}
