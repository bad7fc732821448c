import type { IncomingMessage, ServerResponse } from 'node:http';
import { isQError } from '@q/schema';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { JobQueueLike, JobStatus, ScheduleInfo } from '../job-types.js';
import { silentLogger, type Logger } from '../logger.js';
import { DASHBOARD_REALM, basicChecker, bearerChecker } from './auth.js';
import { ApiError, sendError, toApiError } from './errors.js';
import { flowToJson, jobToJson } from './job-json.js';
import { scheduleToJson } from './schedule-json.js';
import { originGuard } from './origin.js';
import { openApiDocument } from './openapi.js';
import { ROUTES, type RouteDef } from './schemas.js';

/** The Fastify part of a route definition (summary and operationId only feed /openapi.json). */
function route(def: RouteDef): Pick<RouteDef, 'method' | 'url' | 'schema'> {
  return { method: def.method, url: def.url, schema: def.schema };
}

/** Options of {@link buildAdminServer}. */
export interface AdminServerOptions {
  /** The producer side of the queue (a `JobQueue`). */
  jobs: JobQueueLike;
  /** Bearer token; `undefined` = no auth (`--insecure-local`, loopback only — checked by config). */
  token: string | undefined;
  /** Largest request body in bytes (413 above). */
  bodyLimit: number;
  /** `null` when ready, else why not (answers /readyz). */
  readiness: () => Promise<string | null>;
  logger?: Logger;
  /** Version shown in /openapi.json. */
  version?: string;
  /**
   * The address the server will listen on (default `127.0.0.1`): requests whose `Host` does not
   * name it are refused (DNS rebinding), see {@link originGuard}.
   */
  host?: string;
  /** Further `Host` names the API answers to (a DNS name in front of it). */
  allowedHosts?: readonly string[];
  /**
   * The job types a handler of this worker serves: `POST /jobs` refuses any other with 400
   * `unknown_type` (such a job would only burn its attempts). Absent: every type is accepted.
   */
  types?: readonly string[];
  /**
   * The queues a job may be put on: `PUT /schedules/{name}` refuses any other with 400
   * `unknown_queue` (`POST /jobs` gets the same answer from the queue itself). Absent: any queue.
   */
  queues?: readonly string[];
  /**
   * The web dashboard (`createDashboard` of `@q/dashboard` with `basePath: '/dashboard'`), served
   * at `/dashboard`: its pages with the token as an HTTP Basic password, its actions with it as a
   * bearer token (neither with `--insecure-local`).
   */
  dashboard?: DashboardMount;
}

/** What the admin server needs of a dashboard: its Node request handler. */
export interface DashboardMount {
  handle(req: IncomingMessage, res: ServerResponse): Promise<void>;
}

/** The path the dashboard is mounted at. */
export const DASHBOARD_PATH = '/dashboard';

interface EnqueueBody {
  type: string;
  queue?: string;
  payload?: unknown;
  priority?: number;
  run_at?: string;
  max_attempts?: number;
  lock_key?: string;
  group?: string;
  team_id?: number;
  resource_id?: number;
}
interface ListQuery {
  status?: JobStatus;
  queue?: string;
  type?: string;
  cursor?: string;
  limit: number;
}
interface UuidParams {
  uuid: string;
}
interface FlowParams {
  id: string;
}
interface NameParams {
  name: string;
}
interface ScheduleBody {
  cron: string;
  timezone?: string;
  type: string;
  payload?: Record<string, unknown>;
  queue?: string;
  priority?: number;
  max_attempts?: number;
  group?: string;
  backfill_ms?: number;
}

/** Hands a request to the dashboard, taking it out of Fastify's hands. */
async function serveDashboard(dashboard: DashboardMount, req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  reply.hijack();
  await dashboard.handle(req.raw, reply.raw);
  return reply;
}

/**
 * The admin HTTP API: jobs (enqueue, list, get, retry, forget, cancel), schedules (list, put,
 * delete, pause, resume), flows (get, cancel, retry), groups, /healthz, /readyz and /openapi.json. Every job, schedule, flow and group route needs `Authorization: Bearer <token>` (401 without one, 403 with
 * a wrong one); every route refuses a `Host` that does not name the server and every write a
 * cross-origin `Origin` / `Sec-Fetch-Site` (403); errors are `{ error: { code, message } }`. Not
 * listening yet: call `listen()`. With `dashboard`, `/dashboard` serves the web dashboard (its pages
 * with the token as an HTTP Basic password).
 */
export function buildAdminServer(opts: AdminServerOptions): FastifyInstance {
  const log = opts.logger ?? silentLogger;
  const app = Fastify({
    logger: false,
    bodyLimit: opts.bodyLimit,
    // Strict bodies: refuse unknown fields and wrong types instead of dropping or coercing them
    // (the one numeric query parameter is converted by hand below).
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false, allErrors: false } },
    return503OnClosing: true,
  });
  const check = bearerChecker(opts.token);
  const checkBasic = basicChecker(opts.token);
  const publicUrls = new Set<string>([ROUTES.healthz.url, ROUTES.readyz.url, '/openapi.json']);

  const guard = originGuard({ host: opts.host ?? '127.0.0.1', ...(opts.allowedHosts ? { allowedHosts: opts.allowedHosts } : {}) });

  // onRequest runs before the body is read: an unauthenticated client cannot make us parse 64 KiB.
  app.addHook('onRequest', async (req, reply) => {
    // Before the token: a rebinding page or a cross-site form gets nothing, public routes included.
    const refused = guard(req.method, req.headers);
    if (refused) return sendError(reply, refused.status, refused.code, refused.message);
    if (publicUrls.has(req.routeOptions.url ?? '')) return;
    const dashboard = opts.dashboard;
    const path = req.url.split('?')[0] ?? '';
    const toDashboard = dashboard !== undefined && (path === DASHBOARD_PATH || path.startsWith(`${DASHBOARD_PATH}/`));
    // A browser opening a page sends no bearer token: the pages ask for the admin token through
    // HTTP Basic (the browser prompts, then sends it with every page and refresh); a wrong one is
    // answered 401 too, so the browser asks again. The actions (POST) need the bearer token, here
    // and again in the dashboard itself.
    if (toDashboard && (req.method === 'GET' || req.method === 'HEAD')) {
      if (checkBasic(req.headers.authorization) !== 'ok') {
        reply.header('www-authenticate', `Basic realm="${DASHBOARD_REALM}", charset="UTF-8"`);
        return sendError(reply, 401, 'unauthorized', 'the dashboard asks for the admin token as the password (HTTP Basic, any user name)');
      }
      return serveDashboard(dashboard, req, reply);
    }
    const verdict = check(req.headers.authorization);
    if (verdict === 'missing') {
      reply.header('www-authenticate', 'Bearer realm="q"');
      return sendError(reply, 401, 'unauthorized', 'send Authorization: Bearer <token>');
    }
    if (verdict === 'wrong') return sendError(reply, 403, 'forbidden', 'the bearer token is not valid');
    // Served here, before Fastify reads the body: the dashboard reads its own.
    if (toDashboard) return serveDashboard(dashboard, req, reply);
  });
  app.addHook('onResponse', async (req, reply) => {
    log.debug({ method: req.method, route: req.routeOptions.url, status: reply.statusCode, ms: Math.round(reply.elapsedTime) }, 'http');
  });
  app.setErrorHandler((err, req, reply) => {
    const e = toApiError(err);
    if (e.statusCode >= 500) log.error({ err, route: req.routeOptions.url }, 'admin API error');
    return sendError(reply, e.statusCode, e.code, e.message);
  });
  app.setNotFoundHandler((req, reply) => sendError(reply, 404, 'not_found', `no route ${req.method} ${req.url.split('?')[0]}`));

  const jobOr404 = async (uuid: string) => {
    const job = await opts.jobs.get(uuid);
    if (!job) throw new ApiError(404, 'not_found', 'no such job');
    return job;
  };
  const idemKey = (req: FastifyRequest) => {
    const v = req.headers['idempotency-key'];
    return typeof v === 'string' ? v : undefined;
  };

  const served = opts.types === undefined ? undefined : new Set(opts.types);
  const servedList = [...(opts.types ?? [])].sort().join(', ');

  const checkType = (type: string) => {
    if (served !== undefined && !served.has(type)) {
      throw new ApiError(400, 'unknown_type', `no handler serves job type ${JSON.stringify(type)} (served: ${servedList || 'none'})`);
    }
  };
  const queues = opts.queues === undefined ? undefined : new Set(opts.queues);

  app.route<{ Body: EnqueueBody }>({
    ...route(ROUTES.enqueue),
    handler: async (req, reply) => {
      const b = req.body;
      checkType(b.type);
      const job = await opts.jobs.enqueue({
        type: b.type,
        queue: b.queue,
        payload: b.payload,
        priority: b.priority,
        runAt: b.run_at === undefined ? undefined : new Date(b.run_at),
        maxAttempts: b.max_attempts,
        lockKey: b.lock_key,
        group: b.group ?? defaultGroup(b),
        teamId: b.team_id,
        resourceId: b.resource_id,
        idempotencyKey: idemKey(req),
      });
      return reply.code(201).send(jobToJson(job));
    },
  });

  app.route<{ Querystring: ListQuery }>({
    ...route(ROUTES.list),
    preValidation: async (req) => {
      const q = req.query as unknown as Record<string, unknown>;
      if (typeof q.limit === 'string' && /^-?\d{1,6}$/.test(q.limit)) q.limit = Number(q.limit);
    },
    handler: async (req) => {
      const q = req.query;
      const page = await opts.jobs.list({ status: q.status, queue: q.queue, type: q.type, cursor: q.cursor, limit: q.limit });
      return { data: page.jobs.map(jobToJson), next_cursor: page.nextCursor };
    },
  });

  app.route<{ Params: UuidParams }>({
    ...route(ROUTES.get),
    handler: async (req) => jobToJson(await jobOr404(req.params.uuid)),
  });

  app.route<{ Params: UuidParams }>({
    ...route(ROUTES.retry),
    handler: async (req, reply) => {
      const original = await jobOr404(req.params.uuid);
      if (original.status !== 'dead_letter') {
        throw new ApiError(409, 'invalid_state', `only dead-letter jobs can be retried (this one is ${original.status})`);
      }
      const key = idemKey(req);
      const job = await opts.jobs.retryDeadLetter(original.uuid, key === undefined ? undefined : { idempotencyKey: key });
      return reply.code(202).send({ job_uuid: job.uuid, status_url: `/jobs/${job.uuid}`, job: jobToJson(job) });
    },
  });

  app.route<{ Params: UuidParams }>({
    ...route(ROUTES.forget),
    handler: async (req) => {
      const uuid = req.params.uuid;
      if (!(await opts.jobs.forgetDeadLetter(uuid))) {
        const job = await jobOr404(uuid);
        throw new ApiError(409, 'invalid_state', `only dead-letter jobs can be forgotten (this one is ${job.status})`);
      }
      return jobToJson(await jobOr404(uuid));
    },
  });

  app.route<{ Params: UuidParams }>({
    ...route(ROUTES.cancel),
    handler: async (req, reply) => {
      const uuid = req.params.uuid;
      if (!(await opts.jobs.cancel(uuid))) {
        const job = await jobOr404(uuid);
        throw new ApiError(409, 'invalid_state', `the job is ${job.status}: only waiting or running jobs can be cancelled`);
      }
      return reply.code(202).send(jobToJson(await jobOr404(uuid)));
    },
  });

  app.route({
    ...route(ROUTES.listSchedules),
    handler: async () => ({ data: (await opts.jobs.schedules()).map(scheduleToJson) }),
  });

  app.route<{ Params: NameParams; Body: ScheduleBody }>({
    ...route(ROUTES.putSchedule),
    handler: async (req, reply) => {
      const b = req.body;
      // Checked before anything is written, like POST /jobs: a schedule of a type nobody serves
      // would enqueue jobs that only burn their attempts.
      checkType(b.type);
      const queue = b.queue ?? 'default';
      if (queues !== undefined && !queues.has(queue)) {
        throw new ApiError(400, 'unknown_queue', `unknown queue ${JSON.stringify(queue)} (known: ${[...queues].join(', ')})`);
      }
      const s = await opts.jobs.schedule({
        name: req.params.name,
        cron: b.cron,
        timezone: b.timezone,
        type: b.type,
        payload: b.payload,
        queue,
        priority: b.priority,
        maxAttempts: b.max_attempts,
        group: b.group,
        backfill: b.backfill_ms === undefined ? undefined : { maxMs: b.backfill_ms },
      });
      // The upsert stamps both on insert and only updated_at on a replace.
      const created = s.createdAt.getTime() === s.updatedAt.getTime();
      return reply.code(created ? 201 : 200).send(scheduleToJson(s));
    },
  });

  app.route<{ Params: NameParams }>({
    ...route(ROUTES.deleteSchedule),
    handler: async (req, reply) => {
      // 404 rather than an idempotent 204: `q-jobs schedules remove` with a mistyped name should
      // say that nothing was removed.
      if (!(await opts.jobs.unschedule(req.params.name))) throw new ApiError(404, 'not_found', 'no such schedule');
      return reply.code(204).send();
    },
  });

  const scheduleOr404 = async (p: Promise<ScheduleInfo>) => {
    try {
      return scheduleToJson(await p);
    } catch (err) {
      if (isQError(err) && err.code === 'NOT_FOUND') throw new ApiError(404, 'not_found', 'no such schedule');
      throw err;
    }
  };

  app.route<{ Params: NameParams }>({
    ...route(ROUTES.pauseSchedule),
    handler: (req) => scheduleOr404(opts.jobs.pauseSchedule(req.params.name)),
  });

  app.route<{ Params: NameParams }>({
    ...route(ROUTES.resumeSchedule),
    handler: (req) => scheduleOr404(opts.jobs.resumeSchedule(req.params.name)),
  });

  const flowOr404 = async (id: string) => {
    const flow = await opts.jobs.getFlow(id);
    if (!flow) throw new ApiError(404, 'not_found', 'no such flow');
    return flow;
  };

  app.route<{ Params: FlowParams }>({
    ...route(ROUTES.getFlow),
    handler: async (req) => flowToJson(await flowOr404(req.params.id)),
  });

  app.route<{ Params: FlowParams }>({
    ...route(ROUTES.cancelFlow),
    handler: async (req, reply) => {
      await flowOr404(req.params.id);
      const done = await opts.jobs.cancelFlow(req.params.id);
      const flow = await flowOr404(req.params.id);
      return reply.code(202).send({ cancelled: done.cancelled, cancel_requested: done.cancelRequested, flow: flowToJson(flow) });
    },
  });

  app.route<{ Params: FlowParams; Body: { mode?: 'failed' | 'failed-and-downstream' } | null }>({
    ...route(ROUTES.retryFlow),
    handler: async (req, reply) => {
      await flowOr404(req.params.id);
      const done = await opts.jobs.retryFlow(req.params.id, { mode: req.body?.mode ?? 'failed' });
      return reply.code(202).send({ retried: done.retried, flow: flowToJson(await flowOr404(req.params.id)) });
    },
  });

  app.route<{ Querystring: { queue?: string; limit: number } }>({
    ...route(ROUTES.groups),
    preValidation: async (req) => {
      const q = req.query as unknown as Record<string, unknown>;
      if (typeof q.limit === 'string' && /^-?\d{1,6}$/.test(q.limit)) q.limit = Number(q.limit);
    },
    handler: async (req) => ({ data: await opts.jobs.runningGroups({ queue: req.query.queue, limit: req.query.limit }) }),
  });

  app.route({ ...route(ROUTES.healthz), handler: async () => ({ status: 'ok' }) });
  app.route({
    ...route(ROUTES.readyz),
    handler: async (_req, reply) => {
      const reason = await opts.readiness().catch((err: Error) => `readiness check failed: ${err.message}`);
      if (reason !== null) return sendError(reply, 503, 'not_ready', reason);
      return { status: 'ready' };
    },
  });

  const doc = openApiDocument(opts.version ?? '0.1.0');
  app.get('/openapi.json', async () => doc);
  return app;
}

/**
 * The group of a `webhook.deliver` job enqueued without one: `host:` and its URL's host (the
 * destination the per-host limit holds), or none when the URL does not parse (the handler then
 * dead-letters the job with that error).
 */
function defaultGroup(b: EnqueueBody): string | undefined {
  if (b.type !== 'webhook.deliver') return undefined;
  const url = (b.payload as { url?: unknown } | null | undefined)?.url;
  if (typeof url !== 'string') return undefined;
  try {
    return `host:${new URL(url).host}`;
  } catch {
    return undefined;
  }
}
