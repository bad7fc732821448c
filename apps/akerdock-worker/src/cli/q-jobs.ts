import fs from 'node:fs';
import { parseArgs } from 'node:util';
import { AdminClient, ApiCallError, type JobPage } from './client.js';
import { escapeBlock, escapeField, escapeJson } from './escape.js';
import { VERSION } from '../version.js';
import { flowTree, jobDetail, jobsTable, schedulesTable, stepsTable } from './table.js';

/** `q-jobs --help`. */
export const CLI_USAGE = `usage: q-jobs <command> [args] [--json] [--url URL] [--token TOKEN]

  enqueue TYPE [--queue Q] [--payload JSON | --payload-file FILE] [--priority N]
               [--run-at ISO] [--max-attempts N] [--lock-key K] [--idempotency-key K] [--group G]
  list         [--status S] [--queue Q] [--type T] [--limit N] [--cursor C] [--all]
  get UUID     the job, its attempt, result, error and steps
  steps UUID   the step timeline
  retry UUID   [--idempotency-key K]   dead-letter jobs only: enqueues a new job
  forget UUID  dead-letter jobs only: closes it as cancelled
  cancel UUID
  flow show ID                       a flow (job graph) as a tree of its nodes, with their statuses
  flow cancel ID                     cancels every live node of the flow
  flow retry ID [--downstream]       runs its failed nodes again (and what finished below them)
  schedules list                     the recurring jobs, with their next fire time and last slot
  schedules add NAME --cron EXPR --type T [--timezone Z] [--payload JSON | --payload-file FILE]
                [--queue Q] [--priority N] [--max-attempts N] [--group G] [--backfill-ms N]
  schedules pause NAME | resume NAME
  schedules remove NAME

  --url    admin API (AKERDOCK_API_URL, default http://127.0.0.1:8080)
  --token  bearer token (AKERDOCK_ADMIN_TOKEN)
  --json   print the API's JSON instead of tables
  q-jobs COMMAND --help   that command's help;  q-jobs --version   the version
Exit status: 0 ok, 1 the API refused or did not answer (error and hint on stderr), 2 usage error.`;

const COMMON_FLAGS = `  --url URL      admin API (AKERDOCK_API_URL, default http://127.0.0.1:8080)
  --token TOKEN  bearer token (AKERDOCK_ADMIN_TOKEN)
  --json         print the API's JSON instead of a table`;

/** `q-jobs COMMAND --help` (and `q-jobs help COMMAND`): one text per command. */
export const COMMAND_USAGE: Readonly<Record<string, string>> = {
  enqueue: `usage: q-jobs enqueue TYPE [flags]

Enqueues one job of type TYPE (POST /jobs) and prints it.
  --queue Q              logical queue (default: the type's queue)
  --payload JSON         the payload, inline
  --payload-file FILE    the payload, read from FILE (not with --payload)
  --priority N           higher runs first
  --run-at ISO           not before this time
  --max-attempts N       attempts before dead letter
  --lock-key K           at most one running job per key
  --idempotency-key K    the same key returns the first job instead of a new one
  --group G              the group it belongs to (per-group limits, fair claims)`,
  list: `usage: q-jobs list [flags]

Lists jobs, newest first (GET /jobs).
  --status S   scheduled, queued, leased, running, retry_wait, succeeded, cancelled, dead_letter,
               waiting (a flow node whose parents are not all done)
  --queue Q    one logical queue
  --type T     one job type
  --limit N    page size
  --cursor C   the page after C (printed under a full page)
  --all        follow every cursor to the oldest job`,
  get: `usage: q-jobs get UUID [flags]

Prints one job: its attempt, result, error and steps.`,
  steps: `usage: q-jobs steps UUID [flags]

Prints the step timeline of one job.`,
  retry: `usage: q-jobs retry UUID [--idempotency-key K] [flags]

Dead-letter jobs only: enqueues a new job with the same type and payload and prints it.`,
  forget: `usage: q-jobs forget UUID [flags]

Dead-letter jobs only: closes it as cancelled.`,
  cancel: `usage: q-jobs cancel UUID [flags]

Cancels a queued job, or asks a running one to stop.`,
  flow: `usage: q-jobs flow show|cancel|retry ID [flags]

Flows: job graphs inserted with JobQueue.flow, each node a job run once its parents are done.
  show ID     the flow as a tree from its roots: each node's ref, status, type and attempts
              (a node with several parents is drawn under the first, and named under the others)
  cancel ID   cancels every live node: waiting and queued ones at once, running ones through
              their abort signal (POST /flows/ID/cancel)
  retry ID    runs the nodes in the dead letter or cancelled again, in place; each waits again
              for its parents that did not succeed (POST /flows/ID/retry)
    --downstream  also the nodes that finished below them (mode failed-and-downstream)`,
  schedules: `usage: q-jobs schedules list|add|pause|resume|remove [args] [flags]

Recurring jobs: every worker enqueues one job per slot of a schedule, fleet-wide.
  list                 every schedule with its next fire time and last slot (GET /schedules)
  add NAME [flags]     creates the schedule NAME, or replaces it (PUT /schedules/NAME)
  pause NAME           enqueues nothing for it until it is resumed (POST /schedules/NAME/pause)
  resume NAME          starts it again at its next slot; the paused time's slots are not
                       enqueued (POST /schedules/NAME/resume)
  remove NAME          deletes it; jobs already enqueued stay (DELETE /schedules/NAME)
Flags of add:
  --cron EXPR          cron pattern: 5 fields (minute first), or 6 with seconds first (required)
  --type T             job type; a handler of the worker must serve it (required)
  --timezone Z         IANA time zone the pattern is read in (default UTC)
  --payload JSON       a JSON object (each job's payload is it plus scheduledFor, its slot)
  --payload-file FILE  the payload, read from FILE (not with --payload)
  --queue Q            logical queue (default: default)
  --priority N         higher runs first
  --max-attempts N     attempts before dead letter
  --group G            the group of every job it enqueues (per-group limits, fair claims)
  --backfill-ms N      after downtime, every missed slot of the last N ms (default: only the latest)`,
};

/** The help text of `cmd` (with the flags every command takes), or the global usage. */
function usageOf(cmd: string | undefined): string {
  const text = cmd === undefined ? undefined : COMMAND_USAGE[cmd];
  return text === undefined ? CLI_USAGE : `${text}\n\n${COMMON_FLAGS}`;
}

const OPTIONS = {
  url: { type: 'string' },
  token: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean', short: 'V' },
  queue: { type: 'string' },
  payload: { type: 'string' },
  'payload-file': { type: 'string' },
  priority: { type: 'string' },
  'run-at': { type: 'string' },
  'max-attempts': { type: 'string' },
  'lock-key': { type: 'string' },
  group: { type: 'string' },
  'idempotency-key': { type: 'string' },
  status: { type: 'string' },
  type: { type: 'string' },
  limit: { type: 'string' },
  cursor: { type: 'string' },
  all: { type: 'boolean' },
  cron: { type: 'string' },
  timezone: { type: 'string' },
  'backfill-ms': { type: 'string' },
  downstream: { type: 'boolean' },
} as const;

/** Where the CLI writes. */
export interface CliIo {
  out(text: string): void;
  err(text: string): void;
}

class UsageError extends Error {}

/** The job statuses `list --status` takes (the admin API's enum). */
const JOB_STATUSES = ['scheduled', 'queued', 'leased', 'running', 'retry_wait', 'succeeded', 'cancelled', 'dead_letter', 'waiting'] as const;

/** The payload text of `--payload-file`; a file that cannot be read is a usage error (exit 2). */
function readPayloadFile(file: string | undefined): string | undefined {
  if (file === undefined) return undefined;
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new UsageError(`--payload-file: cannot read ${file}: ${code === 'ENOENT' ? 'no such file' : (code ?? (err as Error).message)}`);
  }
}

/** What to do about an answer the API refused, when the fix is on the operator's side. */
function hintFor(err: ApiCallError, cmd: string | undefined): string | undefined {
  if (cmd === 'schedules' && err.status === 404 && err.code === 'not_found') return 'hint: q-jobs schedules list shows the names';
  if (cmd === 'flow' && err.status === 404 && err.code === 'not_found') return 'hint: a flow id is the flowId JobQueue.flow returned';
  if (err.status === 401) return 'hint: set AKERDOCK_ADMIN_TOKEN or pass --token (the token the worker was started with)';
  if (err.status === 403 && err.code === 'forbidden')
    return 'hint: check AKERDOCK_ADMIN_TOKEN or --token (the token the worker was started with)';
  return undefined;
}

/** Runs `q-jobs` with `argv` (without node and script); returns the exit status. */
export async function runCli(argv: string[], env: NodeJS.ProcessEnv, io: CliIo): Promise<number> {
  let values: Record<string, string | boolean | undefined>;
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true }));
  } catch (err) {
    io.err(`${(err as Error).message}\n\n${CLI_USAGE}`);
    return 2;
  }
  const [cmd, ...rest] = positionals;
  if (values.version) {
    io.out(`q-jobs ${VERSION}`);
    return 0;
  }
  if (cmd === 'help') {
    // `q-jobs help list`; an unknown command name is a usage error.
    if (rest[0] !== undefined && COMMAND_USAGE[rest[0]] === undefined) {
      io.err(`unknown command "${rest[0]}"\n\n${CLI_USAGE}`);
      return 2;
    }
    io.out(usageOf(rest[0]));
    return 0;
  }
  if (values.help || cmd === undefined) {
    io.out(usageOf(cmd));
    return cmd === undefined && !values.help ? 2 : 0;
  }
  const str = (k: keyof typeof OPTIONS) => (typeof values[k] === 'string' ? (values[k] as string) : undefined);
  const int = (k: keyof typeof OPTIONS) => {
    const v = str(k);
    if (v === undefined) return undefined;
    if (!/^-?\d+$/.test(v)) throw new UsageError(`--${k} must be an integer`);
    return Number(v);
  };
  const one = (what: string) => {
    if (rest.length !== 1) throw new UsageError(`${cmd} needs exactly one ${what}`);
    return rest[0] as string;
  };
  const payloadArg = (): unknown => {
    if (str('payload') !== undefined && str('payload-file') !== undefined) throw new UsageError('use --payload or --payload-file, not both');
    const text = str('payload') ?? readPayloadFile(str('payload-file'));
    if (text === undefined) return undefined;
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw new UsageError('the payload is not valid JSON');
    }
  };
  const client = new AdminClient(str('url') ?? env.AKERDOCK_API_URL ?? 'http://127.0.0.1:8080', str('token') ?? env.AKERDOCK_ADMIN_TOKEN);
  const json = values.json === true;
  // Job fields are anyone's text: nothing raw reaches the terminal (fields are escaped one by one
  // in table.ts; escapeBlock catches whatever a message puts around them).
  const print = (data: unknown, human: () => string) => io.out(json ? escapeJson(JSON.stringify(data, null, 2)) : escapeBlock(human()));

  try {
    switch (cmd) {
      case 'enqueue': {
        const type = one('job TYPE');
        const body: Record<string, unknown> = { type };
        const payload = payloadArg();
        if (payload !== undefined) body.payload = payload;
        for (const [flag, field] of [
          ['queue', 'queue'],
          ['run-at', 'run_at'],
          ['lock-key', 'lock_key'],
          ['group', 'group'],
        ] as const) {
          if (str(flag) !== undefined) body[field] = str(flag);
        }
        for (const [flag, field] of [
          ['priority', 'priority'],
          ['max-attempts', 'max_attempts'],
        ] as const) {
          if (str(flag) !== undefined) body[field] = int(flag);
        }
        const job = await client.enqueue(body, str('idempotency-key'));
        print(job, () => escapeField(`enqueued ${job.uuid} (${job.type} on ${job.queue}, ${job.status})`));
        return 0;
      }
      case 'list': {
        if (rest.length) throw new UsageError('list takes no positional arguments');
        const status = str('status');
        if (status !== undefined && !(JOB_STATUSES as readonly string[]).includes(status)) {
          throw new UsageError(`--status must be one of ${JOB_STATUSES.join(', ')}, got ${JSON.stringify(status)}`);
        }
        const query = { status: str('status'), queue: str('queue'), type: str('type'), limit: int('limit'), cursor: str('cursor') };
        let page: JobPage = await client.list(query);
        if (values.all) {
          const data = [...page.data];
          // Bounded: a cursor always moves to older ids, so this ends at the oldest job.
          while (page.next_cursor !== null) {
            page = await client.list({ ...query, cursor: page.next_cursor });
            data.push(...page.data);
          }
          page = { data, next_cursor: null };
        }
        print(page, () => jobsTable(page.data) + (page.next_cursor ? `\n\nmore: q-jobs list --cursor ${page.next_cursor}` : ''));
        return 0;
      }
      case 'get': {
        const job = await client.get(one('job UUID'));
        print(job, () => jobDetail(job));
        return 0;
      }
      case 'steps': {
        const job = await client.get(one('job UUID'));
        print(job.steps, () => stepsTable(job));
        return 0;
      }
      case 'retry': {
        const ans = await client.retry(one('job UUID'), str('idempotency-key'));
        print(ans, () => `retrying as ${ans.job_uuid} (${ans.job.status})`);
        return 0;
      }
      case 'forget': {
        const job = await client.forget(one('job UUID'));
        print(job, () => `forgot ${job.uuid} (${job.status})`);
        return 0;
      }
      case 'cancel': {
        const job = await client.cancel(one('job UUID'));
        print(job, () => `cancel requested for ${job.uuid} (${job.status})`);
        return 0;
      }
      case 'flow': {
        const [sub, ...args] = rest;
        if (sub !== 'show' && sub !== 'cancel' && sub !== 'retry')
          throw new UsageError(sub === undefined ? 'flow needs show, cancel or retry' : `unknown flow command "${sub}"`);
        if (args.length !== 1) throw new UsageError(`flow ${sub} needs exactly one flow ID`);
        const id = args[0] as string;
        if (values.downstream !== undefined && sub !== 'retry') throw new UsageError('--downstream goes with flow retry');
        if (sub === 'show') {
          const flow = await client.flow(id);
          print(flow, () => flowTree(flow));
          return 0;
        }
        if (sub === 'retry') {
          const ans = await client.retryFlow(id, values.downstream === true ? 'failed-and-downstream' : 'failed');
          print(ans, () => `flow ${ans.flow.id}: ${ans.retried} nodes put back to run`);
          return 0;
        }
        const ans = await client.cancelFlow(id);
        print(ans, () => `flow ${ans.flow.id}: ${ans.cancelled} nodes cancelled, ${ans.cancel_requested} running nodes asked to stop`);
        return 0;
      }
      case 'schedules': {
        const [sub, ...args] = rest;
        if (sub === 'list') {
          if (args.length) throw new UsageError('schedules list takes no further arguments');
          const page = await client.schedules();
          print(page, () => schedulesTable(page.data));
          return 0;
        }
        if (sub === 'pause' || sub === 'resume') {
          if (args.length !== 1) throw new UsageError(`schedules ${sub} needs exactly one schedule NAME`);
          const s = await client.setSchedulePaused(args[0] as string, sub === 'pause');
          print(s, () => escapeField(sub === 'pause' ? `paused schedule ${s.name}` : `resumed schedule ${s.name}, next fire ${s.next_fire_at}`));
          return 0;
        }
        if (sub === 'remove') {
          if (args.length !== 1) throw new UsageError('schedules remove needs exactly one schedule NAME');
          const name = args[0] as string;
          await client.removeSchedule(name);
          print({ removed: name }, () => escapeField(`removed schedule ${name}`));
          return 0;
        }
        if (sub !== 'add')
          throw new UsageError(sub === undefined ? 'schedules needs list, add, pause, resume or remove' : `unknown schedules command "${sub}"`);
        if (args.length !== 1) throw new UsageError('schedules add needs exactly one schedule NAME');
        const name = args[0] as string;
        const cron = str('cron');
        const type = str('type');
        if (cron === undefined || type === undefined) throw new UsageError('schedules add needs --cron and --type');
        const body: Record<string, unknown> = { cron, type };
        const payload = payloadArg();
        if (payload !== undefined) {
          if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
            throw new UsageError('a schedule payload must be a JSON object');
          }
          body.payload = payload;
        }
        if (str('timezone') !== undefined) body.timezone = str('timezone');
        if (str('queue') !== undefined) body.queue = str('queue');
        if (str('group') !== undefined) body.group = str('group');
        for (const [flag, field] of [
          ['priority', 'priority'],
          ['max-attempts', 'max_attempts'],
          ['backfill-ms', 'backfill_ms'],
        ] as const) {
          if (str(flag) !== undefined) body[field] = int(flag);
        }
        const s = await client.putSchedule(name, body);
        print(s, () => escapeField(`scheduled ${s.name} (${s.type} on ${s.queue}, ${s.cron} ${s.timezone}; next ${s.next_fire_at})`));
        return 0;
      }
      default:
        throw new UsageError(`unknown command "${cmd}"`);
    }
  } catch (err) {
    if (err instanceof UsageError) {
      io.err(`${err.message}\n\n${usageOf(cmd)}`);
      return 2;
    }
    if (err instanceof ApiCallError) {
      const hint = hintFor(err, cmd);
      io.err(
        json
          ? escapeJson(JSON.stringify({ error: { status: err.status, code: err.code, message: err.message, ...(hint ? { hint } : {}) } }))
          : escapeField(`error: ${err.code} (HTTP ${err.status}): ${err.message}`) + (hint ? `\n${hint}` : ''),
      );
      return 1;
    }
    if ((err as NodeJS.ErrnoException).code === 'ECONNREFUSED') {
      io.err(escapeField(`error: connection refused: is the worker running at ${client.url}? (--url, AKERDOCK_API_URL)`));
      return 1;
    }
    io.err(escapeField(`error: ${(err as Error).message}`));
    return 1;
  }
}
