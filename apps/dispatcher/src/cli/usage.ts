// The help texts of `q-dispatcher`: the global usage and one per command (`q-dispatcher CMD --help`,
// `q-dispatcher help CMD`).

/** The global usage (`q-dispatcher --help`). */
export const USAGE = `usage: q-dispatcher <command> [options]

commands:
  run                      run the dispatcher (no DSN: embedded Postgres under .q/ + simulated endpoint)
  submit [--file F]        enqueue JSONL requests from F or stdin (progress bar on stderr)
  results --route R        print results of route R as JSONL; --follow keeps polling, --peek leaves them
  cancel ID…               cancel requests by id
  status                   backlog, expiring soon, partitions by owner, results waiting
  demo                     the whole pipeline on the embedded Postgres, with a summary table
  help COMMAND             the options of one command (also: q-dispatcher COMMAND --help)

common options:
  --config FILE            YAML or JSON configuration (env Q_CONFIG)
  --dsn URL                Postgres DSN (env Q_DSN / SQL_URL); overrides the config
  --queue NAME, --route NAME
  --migrate                create (or upgrade) q's request tables in that database if needed;
                           without it, commands other than run refuse a database lacking them
  --<field> VALUE          override any top-level config field (--concurrency 32, --lease-ttl-seconds 10 …)
  --version                print the version
  -h, --help               this text
exit status: 0 ok; 1 a failure while running (database unreachable, …); 2 bad usage or config.
The cause is one stderr line; --log-level debug adds its stack.`;

const DB = `database: --dsn URL (env Q_DSN / SQL_URL), else the config's url, else the embedded server of
          a running \`q-dispatcher run\`. --config FILE (env Q_CONFIG) names the queues.
  --migrate                create or upgrade q's request tables if they are missing or older
                           (without it the command exits 2 and says so; nothing is created)`;

/** Per-command usage texts, by command name. */
export const COMMAND_USAGE: Readonly<Record<string, string>> = {
  run: `usage: q-dispatcher run [options]

Runs the dispatcher until SIGINT/SIGTERM, then stops gracefully. It creates or upgrades q's
request (and, with gates, quota) tables in its database.
  --config FILE            YAML or JSON configuration (env Q_CONFIG)
  --dsn URL                Postgres DSN (env Q_DSN / SQL_URL); absent: the embedded server under --data-dir
  --igw-base-url URL       no config file: the endpoint of the default queue (absent: a simulated one)
  --queue NAME, --route NAME  no config file: the queue served and its result route
  --data-dir DIR           data directory of the embedded server (.q/pgdata)
  --log-level LEVEL        fatal, error, warn, info (default), debug, trace, silent
  --log-format FORMAT      auto (default: human lines when stderr is a terminal, JSON otherwise), pretty, json
  --pooler transaction     the DSN is a transaction pooler (PgBouncer): unnamed statements (env Q_POOLER)
  --schema NAME            the schema of q's tables, for every store (env Q_SCHEMA)
  --<field> VALUE          override any top-level config field (--concurrency 32 …)
exit status: 0 after SIGTERM/SIGINT; 1 the database unreachable, or after a persistent database failure (its cause is the last line); 2 bad usage or config
env: OTEL_EXPORTER_OTLP_ENDPOINT (traces and metrics over OTLP), OTEL_SERVICE_NAME (default q-dispatcher)`,
  submit: `usage: q-dispatcher submit [--file F] [options]

Enqueues the JSONL requests of F (or stdin), one per line: {"id", "deadline", "payload", …}.
Every line is checked first (an id twice in the input is refused too, exit 2); then all are
written in one transaction, so a bad line or a failed write leaves nothing submitted. A warning
goes to stderr when no dispatcher has served the queue in this database yet. A progress bar goes
to stderr when it is a terminal.
  --file F                 read F instead of stdin
  --queue NAME             request queue (default request-sql)
  --route NAME             result route written into each request
  --batch-size N           rows per statement (500)
${DB}`,
  results: `usage: q-dispatcher results --route R [--follow | --peek] [options]

Pops the results of route R and prints them as JSONL (each result is printed once, then gone).
  --route R                the result route (required without --config)
  --limit N                results per read (100)
  --follow                 keep polling until SIGINT
  --peek                   print the results the next pop would return, leaving them in place
${DB}`,
  cancel: `usage: q-dispatcher cancel ID… [options]

Cancels the requests with these ids (pending or in flight) and reports, per id, whether a request
was cancelled: an unknown id, or one already cancelled, is reported as not cancelled.
exit status: 0 every id cancelled; 1 some not (named on stderr); 2 an id no request can have.
${DB}`,
  status: `usage: q-dispatcher status [options]

Per queue: the backlog (pending, cancelled apart), what expires within 1 min / 5 min / 1 h,
partitions by owner (epochs, draining, lapsed leases) and the results waiting on its route.
  --queue NAME, --route NAME  one queue (default: every queue of --config, else request-sql)
  --json                   machine-readable output
${DB}`,
  demo: `usage: q-dispatcher demo [options]

The whole pipeline on one machine: the embedded Postgres (a fresh schema q_demo under --data-dir),
a simulated inference endpoint, requests over a few tenants behind a concurrency gate, live
progress and a summary table. Exit status 1 when a result is missing or a tenant exceeded its limit.
  --requests N (2000)  --tenants N (3)  --limit N (8, per tenant)  --concurrency N (64)
  --latency-ms A-B (20-80)  --rate-429 X (0.03)  --rate-503 X (0.02)  --deadline-seconds N (60)
  --data-dir DIR           embedded data directory (.q/pgdata)
  --saturation             drain --requests (3000) into a saturating model server with and without
                           an endpoint-scrape gate; charts the server's saturation over time
  --dsn URL                run on this database instead (env Q_DSN / SQL_URL): it gets q's request
                           and quota tables, so that needs --migrate unless they are there already
  --migrate                allow the demo to create or upgrade them`,
};

/** The help text of `command` (the global usage for no or an unknown command). */
export function helpFor(command: string | undefined): string {
  return (command !== undefined && COMMAND_USAGE[command]) || USAGE;
}
