import type { IncomingMessage } from 'node:http';
import type pg from 'pg';
import { invalidArgument } from '@q/schema';
import { checkSchemaName } from '@q/schema/internal';

/**
 * Who may run an action. Actions (cancel, retry a dead letter, forget a dead letter) are off
 * unless this is given; with it, a request must carry `Authorization: Bearer <token>` (when
 * `token` is set) or be accepted by `authorize` (when that is set; it then decides alone).
 */
export interface DashboardActions {
  /** The bearer token an action request must present; compared in constant time. At least 16 characters. */
  token?: string;
  /** Decides whether a request may run an action (a session check of the host application). */
  authorize?: (req: IncomingMessage) => boolean | Promise<boolean>;
}

/** Options of {@link createDashboard}. */
export interface DashboardOptions {
  /** A PostgreSQL DSN; the dashboard opens (and closes) a small pool on it. Give this or `pool`. */
  dsn?: string;
  /** A pool the application owns (and ends). Give this or `dsn`. */
  pool?: pg.Pool;
  /** The schema q's tables live in (default: the connection's current schema). */
  schema?: string;
  /** Where the handler is mounted, e.g. `/dashboard` (default: the root). Links are built under it. */
  basePath?: string;
  /** Show job payloads, results and progress values (escaped). Default false: they are hidden. */
  showPayloads?: boolean;
  /** Enables actions; see {@link DashboardActions}. Default: read-only. */
  actions?: DashboardActions;
  /** How often a page refreshes its live part, in ms (default 3000, at least 500). */
  refreshMs?: number;
  /** The page the root path opens (default `jobs`; a request-queue service would pick `requests`). */
  home?: 'jobs' | 'flows' | 'schedules' | 'requests' | 'quotas';
}

/** Options after checking, with defaults. */
export interface ResolvedOptions {
  basePath: string;
  showPayloads: boolean;
  actions: DashboardActions | null;
  refreshMs: number;
  schema: string | null;
  home: string;
}

const OP = 'createDashboard';

/** Checks `opts` (throws `INVALID_ARGUMENT` before anything is opened) and fills in defaults. */
export function resolveOptions(opts: DashboardOptions): ResolvedOptions {
  if (typeof opts !== 'object' || opts === null) throw invalidArgument(`${OP}: options must be an object`);
  if ((opts.dsn === undefined) === (opts.pool === undefined)) throw invalidArgument(`${OP}: options must have exactly one of dsn and pool`);
  if (opts.dsn !== undefined && typeof opts.dsn !== 'string') throw invalidArgument(`${OP}: dsn must be a string`);
  const schema = opts.schema === undefined ? null : checkSchemaName(OP, opts.schema);
  let basePath = opts.basePath ?? '';
  if (typeof basePath !== 'string' || (basePath !== '' && !/^(\/[A-Za-z0-9._~-]+)+$/.test(basePath.replace(/\/$/, '')))) {
    throw invalidArgument(`${OP}: basePath must be a path such as /dashboard`);
  }
  basePath = basePath.replace(/\/$/, '');
  const refreshMs = opts.refreshMs ?? 3000;
  if (!Number.isInteger(refreshMs) || refreshMs < 500) throw invalidArgument(`${OP}: refreshMs must be an integer of at least 500`);
  if (opts.showPayloads !== undefined && typeof opts.showPayloads !== 'boolean') throw invalidArgument(`${OP}: showPayloads must be a boolean`);
  let actions: DashboardActions | null = null;
  if (opts.actions !== undefined) {
    const a = opts.actions;
    if (typeof a !== 'object' || a === null) throw invalidArgument(`${OP}: actions must be an object`);
    if (a.token === undefined && a.authorize === undefined) throw invalidArgument(`${OP}: actions must have a token or an authorize function`);
    if (a.token !== undefined && (typeof a.token !== 'string' || a.token.length < 16)) {
      throw invalidArgument(`${OP}: actions.token must be a string of at least 16 characters`);
    }
    if (a.authorize !== undefined && typeof a.authorize !== 'function') throw invalidArgument(`${OP}: actions.authorize must be a function`);
    actions = a;
  }
  const home = opts.home ?? 'jobs';
  if (!['jobs', 'flows', 'schedules', 'requests', 'quotas'].includes(home))
    throw invalidArgument(`${OP}: home must be jobs, flows, schedules, requests or quotas`);
  return { basePath, showPayloads: opts.showPayloads ?? false, actions, refreshMs, schema, home };
}
