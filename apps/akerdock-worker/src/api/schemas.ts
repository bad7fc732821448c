// JSON Schemas of the admin API: Fastify validates requests and serialises responses with them,
// and openapi.ts turns the same objects into /openapi.json, so the document cannot drift.
import { KNOWN_QUEUES } from '../config.js';

const JOB_STATUSES = ['scheduled', 'queued', 'leased', 'running', 'retry_wait', 'succeeded', 'cancelled', 'dead_letter', 'waiting'];

const nullableString = { type: ['string', 'null'] } as const;
const nullableDate = { type: ['string', 'null'], format: 'date-time' } as const;
const nullableInt = { type: ['integer', 'null'] } as const;

/** Error body of every 4xx/5xx answer. */
export const errorSchema = {
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message'],
      properties: {
        code: {
          type: 'string',
          description:
            'Stable machine-readable code: invalid_request, invalid_cursor, unknown_queue, unknown_type, unauthorized, ' +
            'forbidden, not_found, invalid_state, payload_too_large, unsupported_media_type, not_ready, internal',
        },
        message: { type: 'string' },
      },
    },
  },
} as const;

/** One entry of a job's step timeline. */
export const stepSchema = {
  type: 'object',
  properties: {
    name: { type: 'string' },
    status: { type: 'string', enum: ['pending', 'running', 'succeeded', 'failed', 'skipped'] },
    message: { type: 'string' },
    started_at: { type: 'string', format: 'date-time' },
    finished_at: { type: 'string', format: 'date-time' },
  },
} as const;

/** A job as the API shows it. */
export const jobSchema = {
  type: 'object',
  required: ['uuid', 'queue', 'type', 'status', 'attempt', 'max_attempts', 'steps', 'created_at'],
  properties: {
    id: { type: 'integer', description: 'Database id (monotonic); `retry_of_id` refers to it' },
    uuid: { type: 'string', format: 'uuid' },
    queue: { type: 'string' },
    type: { type: 'string' },
    status: { type: 'string', enum: JOB_STATUSES },
    priority: { type: 'integer' },
    payload: { description: 'The job payload (any JSON)' },
    attempt: { type: 'integer', description: 'Attempts leased so far' },
    max_attempts: { type: 'integer' },
    resume_count: { type: 'integer', description: 'Times a crashed attempt was given back' },
    snoozes: { type: 'integer', description: 'Times a handler snoozed the job: put it back to wait without using an attempt' },
    run_at: { type: 'string', format: 'date-time' },
    idempotency_key: nullableString,
    lock_key: nullableString,
    job_key: { ...nullableString, description: 'The job key of a pending (or throttled) job; a claim clears it' },
    group: { ...nullableString, description: 'The group the job belongs to (a webhook: its destination host), or null' },
    steps: { type: 'array', items: stepSchema },
    result: { description: 'What the handler returned (any JSON), or null' },
    progress: {
      description:
        'The last progress a handler reported (a number or a small JSON value, at most 8 KiB), or null; kept across attempts and after the job finished',
    },
    error: {
      type: ['object', 'null'],
      description: 'The last failure, while one is recorded',
      properties: {
        code: { type: 'string' },
        message: { type: 'string' },
        stack: { ...nullableString, description: "The failing handler's stack frames (no message, no payload), when kept" },
      },
    },
    retry_of_id: nullableInt,
    team_id: nullableInt,
    resource_id: nullableInt,
    created_at: { type: 'string', format: 'date-time' },
    updated_at: { type: 'string', format: 'date-time' },
    finished_at: nullableDate,
    dead_lettered_at: nullableDate,
  },
} as const;

const uuidParams = {
  type: 'object',
  required: ['uuid'],
  properties: { uuid: { type: 'string', format: 'uuid', description: 'The job uuid' } },
} as const;

const flowParams = {
  type: 'object',
  required: ['id'],
  properties: { id: { type: 'string', format: 'uuid', description: 'The flow id (`flowId` of `JobQueue.flow`)' } },
} as const;

/** A flow (a job graph) as the API shows it: its nodes' jobs by ref, and its edges. */
export const flowSchema = {
  type: 'object',
  required: ['id', 'created_at', 'nodes', 'edges'],
  properties: {
    id: { type: 'string', format: 'uuid' },
    name: nullableString,
    idempotency_key: nullableString,
    created_at: { type: 'string', format: 'date-time' },
    finished_at: { ...nullableDate, description: 'When its last node finished, once every node has' },
    nodes: {
      type: 'array',
      description: 'Every node, in job id order',
      items: { type: 'object', required: ['ref', 'job'], properties: { ref: { type: 'string' }, job: jobSchema } },
    },
    edges: {
      type: 'array',
      items: {
        type: 'object',
        required: ['parent', 'child', 'on_failure'],
        properties: {
          parent: { type: 'string', description: 'The ref of the parent node' },
          child: { type: 'string', description: 'The ref of the child node' },
          on_failure: {
            type: 'string',
            enum: ['fail', 'continue', 'ignore', 'cancel'],
            description: 'What the child does when the parent ends in the dead letter or is cancelled',
          },
        },
      },
    },
  },
} as const;

const idempotencyHeader = {
  type: 'object',
  properties: {
    'idempotency-key': {
      type: 'string',
      minLength: 1,
      maxLength: 200,
      description: 'Repeating a request with the same key returns the job it created, whatever the body',
    },
  },
} as const;

const errors = (...codes: number[]) => Object.fromEntries(codes.map((c) => [c, errorSchema]));

/** Body of `POST /jobs`. */
export const enqueueBodySchema = {
  type: 'object',
  required: ['type'],
  additionalProperties: false,
  properties: {
    type: { type: 'string', minLength: 1, maxLength: 200, description: 'Job type, e.g. webhook.deliver' },
    queue: { type: 'string', minLength: 1, maxLength: 64, description: `One of: ${KNOWN_QUEUES.join(', ')} (default: default)` },
    payload: { description: 'Any JSON value handed to the handler (default {})' },
    priority: { type: 'integer', minimum: -1000, maximum: 1000, description: 'Higher runs first' },
    run_at: { type: 'string', format: 'date-time', description: 'Not before this instant (default: now)' },
    max_attempts: { type: 'integer', minimum: 1, maximum: 100 },
    lock_key: { type: 'string', minLength: 1, maxLength: 200, description: 'At most one job per key runs at a time' },
    group: {
      type: 'string',
      minLength: 1,
      maxLength: 200,
      description: 'The group the job belongs to, for per-group limits and fair claims (default for webhook.deliver: host:<its URL host>)',
    },
    team_id: { type: 'integer', minimum: 1 },
    resource_id: { type: 'integer', minimum: 1 },
  },
} as const;

/** Query of `GET /jobs`. */
export const listQuerySchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    status: { type: 'string', enum: JOB_STATUSES },
    queue: { type: 'string', minLength: 1, maxLength: 64 },
    type: { type: 'string', minLength: 1, maxLength: 200 },
    cursor: { type: 'string', minLength: 1, maxLength: 200, description: '`next_cursor` of the previous page' },
    limit: { type: 'integer', minimum: 1, maximum: 100, default: 25 },
  },
} as const;

/** A schedule as the API shows it. */
export const scheduleSchema = {
  type: 'object',
  required: [
    'name',
    'cron',
    'timezone',
    'queue',
    'type',
    'payload',
    'priority',
    'max_attempts',
    'group',
    'backfill_ms',
    'next_fire_at',
    'last_slot',
    'paused_at',
  ],
  properties: {
    name: { type: 'string' },
    cron: { type: 'string', description: 'Cron pattern: 5 fields (minute first), or 6 with seconds first' },
    timezone: { type: 'string', description: 'IANA time zone the pattern is read in' },
    queue: { type: 'string' },
    type: { type: 'string', description: 'Job type of every job enqueued' },
    payload: {
      type: 'object',
      additionalProperties: true,
      description: "Every job's payload is this object plus scheduledFor (its slot, ISO 8601 UTC)",
    },
    priority: { type: 'integer' },
    max_attempts: { type: 'integer' },
    group: { ...nullableString, description: 'The group of every job it enqueues, or null' },
    backfill_ms: { ...nullableInt, description: 'null: after downtime only the latest missed slot is enqueued; else every slot of this window' },
    next_fire_at: { type: 'string', format: 'date-time', description: 'When the next job is enqueued (the first slot not yet enqueued)' },
    last_slot: { ...nullableDate, description: 'The latest slot enqueued, null before the first' },
    paused_at: { ...nullableDate, description: 'When it was paused (nothing is enqueued until it is resumed), null while it runs' },
    created_at: { type: 'string', format: 'date-time' },
    updated_at: { type: 'string', format: 'date-time' },
  },
} as const;

const nameParams = {
  type: 'object',
  required: ['name'],
  properties: { name: { type: 'string', minLength: 1, maxLength: 200, description: 'The schedule name' } },
} as const;

/** Body of `PUT /schedules/{name}`. */
export const scheduleBodySchema = {
  type: 'object',
  required: ['cron', 'type'],
  additionalProperties: false,
  properties: {
    cron: { type: 'string', minLength: 1, maxLength: 200, description: 'Cron pattern: 5 fields (minute first), or 6 with seconds first' },
    timezone: { type: 'string', minLength: 1, maxLength: 100, description: 'IANA time zone, DST included (default UTC)' },
    type: { type: 'string', minLength: 1, maxLength: 200, description: 'Job type; a handler of this worker must serve it' },
    payload: { type: 'object', description: 'A JSON object without a scheduledFor key (default {})' },
    queue: { type: 'string', minLength: 1, maxLength: 64, description: `One of: ${KNOWN_QUEUES.join(', ')} (default: default)` },
    priority: { type: 'integer', minimum: -1000, maximum: 1000, description: 'Higher runs first' },
    max_attempts: { type: 'integer', minimum: 1, maximum: 100 },
    group: {
      type: 'string',
      minLength: 1,
      maxLength: 200,
      description: 'The group of every job it enqueues, for per-group limits and fair claims',
    },
    backfill_ms: {
      type: 'integer',
      minimum: 1,
      description: 'After downtime, enqueue every missed slot of this window (oldest first) instead of only the latest one',
    },
  },
} as const;

/** Route definitions: Fastify `schema` objects plus the OpenAPI summary. */
export const ROUTES = {
  enqueue: {
    method: 'POST',
    url: '/jobs',
    summary: 'Enqueue a job',
    operationId: 'enqueueJob',
    schema: { headers: idempotencyHeader, body: enqueueBodySchema, response: { 201: jobSchema, ...errors(400, 401, 403, 413, 415) } },
  },
  list: {
    method: 'GET',
    url: '/jobs',
    summary: 'List jobs, newest first',
    operationId: 'listJobs',
    schema: {
      querystring: listQuerySchema,
      response: {
        200: {
          type: 'object',
          required: ['data', 'next_cursor'],
          properties: { data: { type: 'array', items: jobSchema }, next_cursor: nullableString },
        },
        ...errors(400, 401, 403),
      },
    },
  },
  get: {
    method: 'GET',
    url: '/jobs/:uuid',
    summary: 'One job with its steps, attempt, result and error',
    operationId: 'getJob',
    schema: { params: uuidParams, response: { 200: jobSchema, ...errors(400, 401, 403, 404) } },
  },
  retry: {
    method: 'POST',
    url: '/jobs/:uuid/retry',
    summary: 'Retry a dead-letter job as a new job',
    operationId: 'retryJob',
    schema: {
      params: uuidParams,
      headers: idempotencyHeader,
      response: {
        202: {
          type: 'object',
          required: ['job_uuid', 'status_url', 'job'],
          properties: { job_uuid: { type: 'string', format: 'uuid' }, status_url: { type: 'string' }, job: jobSchema },
        },
        ...errors(400, 401, 403, 404, 409),
      },
    },
  },
  forget: {
    method: 'POST',
    url: '/jobs/:uuid/forget',
    summary: 'Close a dead-letter job without retrying it (→ cancelled)',
    operationId: 'forgetJob',
    schema: { params: uuidParams, response: { 200: jobSchema, ...errors(400, 401, 403, 404, 409) } },
  },
  cancel: {
    method: 'POST',
    url: '/jobs/:uuid/cancel',
    summary: 'Cancel a job: waiting jobs at once, running ones through their abort signal',
    operationId: 'cancelJob',
    schema: { params: uuidParams, response: { 202: jobSchema, ...errors(400, 401, 403, 404, 409) } },
  },
  listSchedules: {
    method: 'GET',
    url: '/schedules',
    summary: 'List the recurring jobs by name, with their next fire time and last slot',
    operationId: 'listSchedules',
    schema: {
      response: {
        200: { type: 'object', required: ['data'], properties: { data: { type: 'array', items: scheduleSchema } } },
        ...errors(401, 403),
      },
    },
  },
  putSchedule: {
    method: 'PUT',
    url: '/schedules/:name',
    summary: 'Create (201) or replace (200) a recurring job; an unchanged pattern and time zone keep its next fire time',
    operationId: 'putSchedule',
    schema: {
      params: nameParams,
      body: scheduleBodySchema,
      response: { 200: scheduleSchema, 201: scheduleSchema, ...errors(400, 401, 403, 413, 415) },
    },
  },
  deleteSchedule: {
    method: 'DELETE',
    url: '/schedules/:name',
    summary: 'Delete a recurring job: no job is enqueued for it from then on (jobs already enqueued stay)',
    operationId: 'deleteSchedule',
    schema: { params: nameParams, response: { 204: { type: 'null', description: 'Deleted' }, ...errors(400, 401, 403, 404) } },
  },
  pauseSchedule: {
    method: 'POST',
    url: '/schedules/:name/pause',
    summary: 'Pause a recurring job: no job is enqueued for it until it is resumed (pausing a paused one changes nothing)',
    operationId: 'pauseSchedule',
    schema: { params: nameParams, response: { 200: scheduleSchema, ...errors(400, 401, 403, 404) } },
  },
  resumeSchedule: {
    method: 'POST',
    url: '/schedules/:name/resume',
    summary: "Resume a paused recurring job at its pattern's first slot after now: the slots of the paused time are not enqueued",
    operationId: 'resumeSchedule',
    schema: { params: nameParams, response: { 200: scheduleSchema, ...errors(400, 401, 403, 404) } },
  },
  getFlow: {
    method: 'GET',
    url: '/flows/:id',
    summary: 'A flow (job graph): each node with its job, and the edges with their failure policies',
    operationId: 'getFlow',
    schema: { params: flowParams, response: { 200: flowSchema, ...errors(400, 401, 403, 404) } },
  },
  cancelFlow: {
    method: 'POST',
    url: '/flows/:id/cancel',
    summary: 'Cancel every live node of a flow: waiting and queued ones at once, running ones through their abort signal',
    operationId: 'cancelFlow',
    schema: {
      params: flowParams,
      response: {
        202: {
          type: 'object',
          required: ['cancelled', 'cancel_requested', 'flow'],
          properties: {
            cancelled: { type: 'integer', description: 'Nodes cancelled at once (they never start)' },
            cancel_requested: { type: 'integer', description: 'Running nodes asked to stop (they end cancelled)' },
            flow: flowSchema,
          },
        },
        ...errors(400, 401, 403, 404),
      },
    },
  },
  retryFlow: {
    method: 'POST',
    url: '/flows/:id/retry',
    summary:
      "Run a flow's failed nodes again in place (mode failed), or also what finished below them (failed-and-downstream); each waits again for its parents that did not succeed",
    operationId: 'retryFlow',
    schema: {
      params: flowParams,
      body: {
        type: ['object', 'null'],
        additionalProperties: false,
        properties: { mode: { type: 'string', enum: ['failed', 'failed-and-downstream'], default: 'failed' } },
      },
      response: {
        202: {
          type: 'object',
          required: ['retried', 'flow'],
          properties: { retried: { type: 'integer', description: 'Nodes put back to run' }, flow: flowSchema },
        },
        ...errors(400, 401, 403, 404, 415),
      },
    },
  },
  groups: {
    method: 'GET',
    url: '/groups',
    summary: 'Jobs running per group now, most first (what per-group limits hold)',
    operationId: 'runningGroups',
    schema: {
      querystring: {
        type: 'object',
        additionalProperties: false,
        properties: {
          queue: { type: 'string', minLength: 1, maxLength: 64 },
          limit: { type: 'integer', minimum: 1, maximum: 1000, default: 100 },
        },
      },
      response: {
        200: {
          type: 'object',
          required: ['data'],
          properties: {
            data: {
              type: 'array',
              items: {
                type: 'object',
                required: ['queue', 'group', 'running'],
                properties: { queue: { type: 'string' }, group: { type: 'string' }, running: { type: 'integer' } },
              },
            },
          },
        },
        ...errors(400, 401, 403),
      },
    },
  },
  healthz: {
    method: 'GET',
    url: '/healthz',
    summary: 'Liveness: the process answers',
    operationId: 'healthz',
    public: true,
    schema: { response: { 200: { type: 'object', properties: { status: { type: 'string' } } } } },
  },
  readyz: {
    method: 'GET',
    url: '/readyz',
    summary: 'Readiness: database reachable and the worker consuming',
    operationId: 'readyz',
    public: true,
    schema: {
      response: {
        200: { type: 'object', properties: { status: { type: 'string' } } },
        503: errorSchema,
      },
    },
  },
} as const;

/** One entry of {@link ROUTES}. */
export interface RouteDef {
  method: string;
  url: string;
  summary: string;
  operationId: string;
  public?: boolean;
  schema: {
    headers?: object;
    params?: object;
    querystring?: object;
    body?: object;
    response: Record<number, object>;
  };
}
