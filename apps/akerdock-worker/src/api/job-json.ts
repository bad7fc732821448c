import type { FlowInfo, Job } from '../job-types.js';

/** A job as the admin API and `q-jobs --json` show it (snake_case, ISO-8601 UTC instants). */
export interface JobJson {
  id: number;
  uuid: string;
  queue: string;
  type: string;
  status: Job['status'];
  priority: number;
  payload: unknown;
  attempt: number;
  max_attempts: number;
  resume_count: number;
  /** Times a handler snoozed the job (back to waiting without using an attempt). */
  snoozes: number;
  run_at: string;
  idempotency_key: string | null;
  lock_key: string | null;
  /** The job key of a pending (or throttled) job; a claim clears it. */
  job_key: string | null;
  group: string | null;
  steps: Job['steps'];
  result: unknown;
  /** The last progress a handler reported (`ctx.progress`: any JSON), or null. */
  progress: unknown;
  /** The last failure while one is recorded; `stack`: the failing handler's frames, when kept. */
  error: { code: string; message: string; stack: string | null } | null;
  retry_of_id: number | null;
  team_id: number | null;
  resource_id: number | null;
  created_at: string;
  updated_at: string;
  finished_at: string | null;
  dead_lettered_at: string | null;
}

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

/** Maps a store {@link Job} to its API shape. `steps` is always an array. */
export function jobToJson(job: Job): JobJson {
  return {
    id: job.id,
    uuid: job.uuid,
    queue: job.queue,
    type: job.type,
    status: job.status,
    priority: job.priority,
    payload: job.payload,
    attempt: job.attempt,
    max_attempts: job.maxAttempts,
    resume_count: job.resumeCount,
    snoozes: job.snoozes,
    run_at: job.runAt.toISOString(),
    idempotency_key: job.idempotencyKey,
    lock_key: job.lockKey,
    job_key: job.jobKey,
    group: job.group,
    steps: job.steps ?? [],
    result: job.result ?? null,
    progress: job.progress ?? null,
    // A succeeded job keeps the error of an earlier failed attempt in the table; it is history, not state.
    error:
      job.lastError === null || job.status === 'succeeded'
        ? null
        : {
            code: job.status === 'dead_letter' ? 'dead_letter' : 'attempt_failed',
            message: job.lastError,
            stack: job.lastErrorStack ?? null,
          },
    retry_of_id: job.retryOfId,
    team_id: job.teamId,
    resource_id: job.resourceId,
    created_at: job.createdAt.toISOString(),
    updated_at: job.updatedAt.toISOString(),
    finished_at: iso(job.finishedAt),
    dead_lettered_at: iso(job.deadLetteredAt),
  };
}

/** A flow as the admin API and `q-jobs --json` show it. */
export interface FlowJson {
  id: string;
  name: string | null;
  idempotency_key: string | null;
  created_at: string;
  finished_at: string | null;
  /** Every node, in job id order. */
  nodes: Array<{ ref: string; job: JobJson }>;
  edges: Array<{ parent: string; child: string; on_failure: FlowInfo['edges'][number]['onFailure'] }>;
}

/** Maps a store {@link FlowInfo} to its API shape. */
export function flowToJson(flow: FlowInfo): FlowJson {
  return {
    id: flow.id,
    name: flow.name,
    idempotency_key: flow.idempotencyKey,
    created_at: flow.createdAt.toISOString(),
    finished_at: iso(flow.finishedAt),
    nodes: Object.entries(flow.nodes)
      .sort(([, a], [, b]) => a.id - b.id)
      .map(([ref, job]) => ({ ref, job: jobToJson(job) })),
    edges: flow.edges.map((e) => ({ parent: e.parent, child: e.child, on_failure: e.onFailure })),
  };
}
