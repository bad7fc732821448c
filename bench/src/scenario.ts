/** One figure a scenario measures per run. */
export interface Metric {
  /** Key in a run's {@link Measurement}. */
  key: string;
  /** Column label, e.g. `jobs/s`. */
  unit: string;
  /** Whether a larger value is better (throughput) or a smaller one (latency). */
  better: 'higher' | 'lower';
  /**
   * For a wait (a lower-is-better metric): a run stops waiting at this value and records it, so a
   * figure at the cap is a lower bound (the true wait is at least that); the report marks it `≥`,
   * with `capNote` saying what it means.
   */
  cap?: number;
  /** What a capped figure means, for the report (e.g. `the job had not started after 30 s`). */
  capNote?: string;
}

/** What one run of one system returns: a value per metric key. */
export type Measurement = Record<string, number>;

/** Handed to every run. */
export interface RunContext {
  /** DSN of a database created for this run alone. */
  readonly dsn: string;
  /** Tiny sizes, one repetition: proves the code works, measures nothing. */
  readonly smoke: boolean;
  /** This is the discarded warm-up run (sizes are reduced). */
  readonly warmup: boolean;
  /** The size to use: `full` normally, `smoke` in smoke mode, a fraction of `full` for the warm-up. */
  n(full: number, smoke: number): number;
  /** Progress line on stderr. */
  log(message: string): void;
}

/** A contender in a scenario. */
export interface System {
  /** `q`, `pg-boss`, `graphile-worker`, `raw-sql`, … */
  name: string;
  /** A reason to skip this system (e.g. its package has not landed), or undefined to run it. */
  skip?: () => Promise<string | undefined>;
  run(ctx: RunContext): Promise<Measurement>;
}

/** A benchmark: the same work done by each system. */
export interface Scenario {
  /** CLI name, e.g. `job-drain-c8`. */
  name: string;
  /** One line for the table. */
  title: string;
  metrics: Metric[];
  /** The system the ratios are about (the others are compared against it). */
  baseline: string;
  systems: System[];
  /** Repetitions per system in a full run (default: the CLI's `--reps`, capped by `maxReps`). */
  reps?: number;
  /** Upper bound on the CLI's `--reps` for long scenarios (keeps a full run near 15 minutes). */
  maxReps?: number;
  /** Warm-up size as a fraction of the full size (default: the harness's); 0: no warm-up run. */
  warmupFraction?: number;
  /**
   * Name of a sibling scenario that runs the same code with other parameters: a smoke run of
   * everything leaves this one out (it is still run when named explicitly).
   */
  smokeCoveredBy?: string;
  /**
   * Why a smoke run of everything leaves this one out although nothing else runs its code (it
   * waits on the wall clock, e.g. for cron minutes); it is still run when named explicitly.
   */
  smokeWaitsFor?: string;
}
