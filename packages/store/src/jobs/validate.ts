import { randomUUID } from 'node:crypto';
import { QError, QErrorCode, invalidArgument } from '@q/schema';
import { checkName, checkText } from '@q/schema/internal';
import { jsonText, overLimit, repairJson, sizeProblem, tryStringify } from './json.js';
import {
  FLOW_FAILURE_POLICIES,
  FLOW_REQUEST_TYPE,
  JOB_STATUSES,
  MAX_FLOW_NODES,
  type ClaimOptions,
  type FlowFailurePolicy,
  type FlowJobNode,
  type NewFlow,
  type JobLease,
  type JobListFilter,
  type JobOutcome,
  type JobStatus,
  type NewJob,
  type Step,
} from './types.js';
import type { EnqueueBatch, JobKeyed } from './sql/enqueue-jobs.js';
import type { ListParams } from './sql/list-jobs.js';
import type { FlowBatch } from './sql/insert-flow.js';
import { decodeCursor } from './cursor.js';
import { checkFlowRequest, flowRequestPayload, type CheckedFlowRequest } from './flow-request.js';
import { checkGroupOptions, type CheckedGroups } from './group-claims.js';

const INT32_MIN = -2_147_483_648;
/** Largest 32-bit integer: also the longest lease (about 24.8 days, the longest Node timer). */
export const INT32_MAX = 2_147_483_647;
/** Longest delay or age accepted (retry backoff, purge age): 100 years, in milliseconds. */
export const MAX_DELAY_MS = 100 * 365.25 * 86_400_000;
// The instants a job's runAt may take: Postgres' timestamptz starts in 4713 BC, a JS Date ends in
// 275760; anything before year 1 is surely a mistake (and any past instant means "now" anyway).
const MIN_RUN_AT = new Date('0001-01-01T00:00:00.000Z').getTime();
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** No value checked yet (no job field can be this symbol). */
const UNCHECKED = Symbol('unchecked');

/** Default `maxAttempts` of a new job. */
export const DEFAULT_MAX_ATTEMPTS = 5;

/** Snoozes a job may take before the next one dead-letters it (`JobStore.snooze`, the worker's `maxSnoozes`). */
export const DEFAULT_MAX_SNOOZES = 100;

/** Page size of `JobStore.list` when the filter names none. */
const DEFAULT_LIST_LIMIT = 25;

/** `JobStore.getById`'s id: a safe integer. */
export function checkJobId(id: unknown): number {
  if (!Number.isSafeInteger(id)) throw invalidArgument('id must be a safe integer');
  return id as number;
}

/**
 * `JobStore.list`'s filter as the statement's parameters (`null`: any): `limit` 1–100 (default
 * 25), a known status, queue and type names, a safe-integer team, a cursor of an earlier page.
 */
export function checkListFilter(filter: JobListFilter): ListParams {
  const limit = filter.limit ?? DEFAULT_LIST_LIMIT;
  if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw invalidArgument('limit must be between 1 and 100');
  const status = filter.status === undefined ? null : checkStatus(filter.status);
  for (const k of ['queue', 'type'] as const) {
    if (filter[k] !== undefined) checkName('list', k, filter[k], { allowEmpty: true });
  }
  if (filter.teamId !== undefined && !Number.isSafeInteger(filter.teamId)) throw invalidArgument('teamId must be a safe integer');
  const beforeId = filter.cursor === undefined || filter.cursor === null ? null : decodeCursor(filter.cursor);
  const flowId = filter.flowId === undefined || filter.flowId === null ? null : checkUuid(filter.flowId, 'list: flowId');
  return { status, queue: filter.queue ?? null, type: filter.type ?? null, teamId: filter.teamId ?? null, flowId, beforeId, limit };
}

/** `JobStore.purgeFinished`'s age: milliseconds from 0 to 100 years. */
export function checkPurgeAge(olderThanMs: unknown): number {
  if (typeof olderThanMs !== 'number' || !Number.isFinite(olderThanMs) || olderThanMs < 0 || olderThanMs > MAX_DELAY_MS) {
    throw invalidArgument('olderThanMs must be a non-negative number of milliseconds, at most 100 years');
  }
  return olderThanMs;
}

/** `JobStore.runningGroups`'s filter: a queue name (`null`: every queue) and `limit` 1–1,000 (default 100). */
export function checkRunningGroupsFilter(filter: { queue?: string; limit?: number }): { queue: string | null; limit: number } {
  if (!filter || typeof filter !== 'object') throw invalidArgument('runningGroups: filter must be an object');
  const queue = filter.queue === undefined ? null : checkName('runningGroups', 'queue', filter.queue);
  const limit = filter.limit ?? 100;
  if (!Number.isInteger(limit) || limit < 1 || limit > 1_000) throw invalidArgument('runningGroups: limit must be an integer from 1 to 1000');
  return { queue, limit };
}

/** Largest progress value accepted (`JobStore.updateProgress`), in UTF-8 bytes of its JSON. */
export const MAX_PROGRESS_BYTES = 8 * 1024;

/** Checks a snooze delay (finite, 0 to 100 years); returns it rounded up to whole milliseconds. */
export function checkSnoozeDelay(op: string, delayMs: unknown): number {
  if (typeof delayMs !== 'number' || !Number.isFinite(delayMs) || delayMs < 0 || delayMs > MAX_DELAY_MS) {
    throw invalidArgument(`${op}: delayMs must be a non-negative number of milliseconds, at most 100 years`);
  }
  return Math.ceil(delayMs);
}

/** Checks a bound on snoozes: an integer from 0 to 2³¹−1. */
export function checkMaxSnoozes(op: string, maxSnoozes: unknown): number {
  if (typeof maxSnoozes !== 'number' || !Number.isInteger(maxSnoozes) || maxSnoozes < 0 || maxSnoozes > INT32_MAX) {
    throw invalidArgument(`${op}: maxSnoozes must be an integer from 0 to ${INT32_MAX}`);
  }
  return maxSnoozes;
}

/**
 * A progress value as stored JSON text (`null` for none): a JSON value JSON can carry as is (see
 * `jsonText`, strict: no BigInt, non-finite number, cycle, Map…) of at most
 * {@link MAX_PROGRESS_BYTES}. Anything else is `INVALID_ARGUMENT`; the message never quotes it.
 */
export function progressJson(op: string, value: unknown): string | null {
  if (value === null) return null;
  const json = jsonText(value, 'progress', 'strict');
  if ('problem' in json) throw invalidArgument(`${op}: ${json.problem}`);
  const text = json.text ?? 'null';
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > MAX_PROGRESS_BYTES) {
    throw invalidArgument(`${op}: progress must be at most ${MAX_PROGRESS_BYTES} bytes of JSON (it is ${bytes})`);
  }
  return text;
}

/** Throws `INVALID_ARGUMENT` unless `uuid` is a UUID string. */
export function checkUuid(uuid: unknown, what = 'uuid'): string {
  if (typeof uuid !== 'string' || !UUID.test(uuid)) throw invalidArgument(`${what} must be a UUID string`);
  return uuid;
}

/** Throws `INVALID_ARGUMENT` unless `v` is a job status. */
export function checkStatus(v: unknown): JobStatus {
  if (typeof v !== 'string' || !(JOB_STATUSES as readonly string[]).includes(v)) {
    throw invalidArgument(`status must be one of ${JOB_STATUSES.join(', ')}`);
  }
  return v as JobStatus;
}

/** An optional key (idempotency, lock): absent, or a non-empty identifier of bounded length. */
function optKey(v: unknown, what: string): string | null {
  return v === undefined || v === null ? null : checkName('enqueue', what, v);
}

function optId(v: unknown, what: string): number | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'number' || !Number.isSafeInteger(v)) throw invalidArgument(`${what} must be a safe integer`);
  return v;
}

function int32(v: unknown, what: string, min = INT32_MIN): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > INT32_MAX) {
    throw invalidArgument(`${what} must be an integer between ${min} and ${INT32_MAX}`);
  }
  return v;
}

/** The longest job key, in UTF-8 bytes: a throttle slot key (see row.ts) must fit an idempotency key. */
export const MAX_JOB_KEY_BYTES = 1984;

/**
 * The job key of `job` checked (see {@link NewJob.jobKey}), or null without one; `INVALID_ARGUMENT`
 * for a bad key, mode or window, a window outside mode throttle, or a key with an idempotency key.
 */
function jobKeyOf(job: NewJob, idempotencyKey: string | null): JobKeyed | null {
  const { jobKey, jobKeyMode, throttleMs } = job;
  if (jobKey === undefined || jobKey === null) {
    if (jobKeyMode !== undefined && jobKeyMode !== null) throw invalidArgument('enqueue: jobKeyMode must come with a jobKey');
    if (throttleMs !== undefined && throttleMs !== null) throw invalidArgument('enqueue: throttleMs must come with a jobKey');
    return null;
  }
  const key = checkName('enqueue', 'jobKey', jobKey);
  if (key.length > MAX_JOB_KEY_BYTES / 3 && Buffer.byteLength(key, 'utf8') > MAX_JOB_KEY_BYTES) {
    throw invalidArgument(`enqueue: jobKey must be at most ${MAX_JOB_KEY_BYTES} bytes`);
  }
  if (idempotencyKey !== null) throw invalidArgument('enqueue: jobKey must not come with an idempotencyKey');
  const mode = jobKeyMode === undefined || jobKeyMode === null ? 'replace' : jobKeyMode;
  if (mode !== 'replace' && mode !== 'debounce' && mode !== 'throttle') {
    throw invalidArgument('enqueue: jobKeyMode must be one of replace, debounce, throttle');
  }
  if (mode !== 'throttle') {
    if (throttleMs !== undefined && throttleMs !== null) throw invalidArgument('enqueue: throttleMs must come with jobKeyMode throttle');
    return { key, mode, throttleMs: 0 };
  }
  if (typeof throttleMs !== 'number' || !Number.isInteger(throttleMs) || throttleMs < 1 || throttleMs > INT32_MAX) {
    throw invalidArgument(`enqueue: throttleMs must be an integer from 1 to ${INT32_MAX} with jobKeyMode throttle`);
  }
  return { key, mode, throttleMs };
}

/**
 * Checks every job of a batch and turns it into statement columns, or throws `INVALID_ARGUMENT`
 * naming the first bad field (and its index in a batch) before anything is sent.
 */
export function toEnqueueBatch(jobs: readonly NewJob[]): EnqueueBatch {
  const b: EnqueueBatch = {
    uuids: [],
    queues: [],
    types: [],
    payloads: [],
    priorities: [],
    runAts: [],
    maxAttempts: [],
    idempotencyKeys: [],
    lockKeys: [],
    teamIds: [],
    resourceIds: [],
    retryOfIds: [],
    groups: [],
    ids: [],
  };
  // A batch mostly repeats one queue and one type: a value equal to the last one checked passes
  // without its scan (the verdict depends on the string alone).
  let lastQueue: unknown = UNCHECKED;
  let lastType: unknown = UNCHECKED;
  jobs.forEach((job, i) => {
    try {
      if (!job || typeof job !== 'object') throw invalidArgument('job must be an object');
      const queue = job.queue === lastQueue ? job.queue : checkName('enqueue', 'queue', job.queue);
      lastQueue = queue;
      const type = job.type === lastType ? job.type : checkName('enqueue', 'type', job.type);
      lastType = type;
      const payload = job.payload === undefined || job.payload === null ? {} : job.payload;
      const json = jsonText(payload, 'payload', 'strict');
      if ('problem' in json) throw invalidArgument(json.problem);
      let runAt: Date | null = null;
      if (job.runAt !== undefined && job.runAt !== null) {
        if (!(job.runAt instanceof Date) || Number.isNaN(job.runAt.getTime())) throw invalidArgument('runAt must be a valid Date');
        if (job.runAt.getTime() < MIN_RUN_AT) throw invalidArgument('runAt must not be before the year 1');
        runAt = job.runAt;
      }
      b.uuids.push(randomUUID());
      b.queues.push(queue);
      b.types.push(type);
      if (json.text === null) throw invalidArgument('payload must be a JSON value');
      b.payloads.push(json.text);
      b.priorities.push(job.priority === undefined || job.priority === null ? 0 : int32(job.priority, 'priority'));
      b.runAts.push(runAt);
      b.maxAttempts.push(
        job.maxAttempts === undefined || job.maxAttempts === null ? DEFAULT_MAX_ATTEMPTS : int32(job.maxAttempts, 'maxAttempts', 1),
      );
      const idempotencyKey = optKey(job.idempotencyKey, 'idempotencyKey');
      b.idempotencyKeys.push(idempotencyKey);
      const keyed = jobKeyOf(job, idempotencyKey);
      if (keyed !== null) (b.jobKeys ??= new Array<JobKeyed | null>(i).fill(null))[i] = keyed;
      else if (b.jobKeys) b.jobKeys[i] = null;
      b.lockKeys.push(optKey(job.lockKey, 'lockKey'));
      b.teamIds.push(optId(job.teamId, 'teamId'));
      b.resourceIds.push(optId(job.resourceId, 'resourceId'));
      b.retryOfIds.push(optId(job.retryOfId, 'retryOfId'));
      b.groups.push(optKey(job.group, 'group'));
    } catch (err) {
      if (err instanceof Error && jobs.length > 1) err.message += ` (job ${i})`;
      throw err;
    }
  });
  return b;
}

/**
 * Characters of JSON and error text one call (enqueue, complete) writes at most: a larger batch
 * is refused with `INVALID_ARGUMENT` naming its size, before anything is sent.
 */
export const CALL_TEXT_LIMIT = 256 * 1024 * 1024;

/** The total of `sizes`, or `INVALID_ARGUMENT` naming it when over {@link CALL_TEXT_LIMIT}. */
export function checkCallSize(op: string, what: string, sizes: readonly number[]): number {
  const total = sizes.reduce((a, b) => a + b, 0);
  if (total > CALL_TEXT_LIMIT) {
    throw invalidArgument(
      `${op}: the batch holds ${total} characters of ${what}, more than the ${CALL_TEXT_LIMIT / 1024 / 1024} Mi one call writes; split it`,
    );
  }
  return total;
}

/** Checks a claim's queue list; returns it without duplicates. Throws `INVALID_ARGUMENT`. */
export function checkQueues(queues: readonly string[]): string[] {
  if (!Array.isArray(queues) || queues.length === 0 || queues.some((q) => typeof q !== 'string' || q === '')) {
    throw invalidArgument('queues must be a non-empty array of non-empty strings');
  }
  for (const q of queues) checkName('claim', 'queue', q);
  return [...new Set(queues)];
}

/** Throws `INVALID_ARGUMENT` unless `maxResumes` is a non-negative 32-bit integer. */
export function checkMaxResumes(maxResumes: number): void {
  if (!Number.isInteger(maxResumes) || maxResumes < 0 || maxResumes > INT32_MAX) {
    throw invalidArgument('maxResumes must be a non-negative 32-bit integer');
  }
}

/** Checks {@link ClaimOptions}; returns them normalised (status `running` for `start: true`). */
export function checkClaim(opts: ClaimOptions): {
  queues: string[];
  workerId: string;
  limit: number;
  leaseMs: number;
  status: 'leased' | 'running';
  claimId: string;
  groups: CheckedGroups;
} {
  if (!opts || typeof opts !== 'object') throw invalidArgument('claim: options must be ClaimOptions (an object)');
  const queues = checkQueues(opts.queues);
  if (typeof opts.workerId !== 'string' || opts.workerId === '') throw invalidArgument('workerId must be a non-empty string');
  checkName('claim', 'workerId', opts.workerId);
  if (!Number.isInteger(opts.limit) || opts.limit < 1 || opts.limit > INT32_MAX) {
    throw invalidArgument('limit must be a positive 32-bit integer');
  }
  const leaseMs = checkLeaseMs(opts.leaseMs);
  const claimId = opts.claimId === undefined ? randomUUID() : checkClaimId('claim', opts.claimId);
  const groups = checkGroupOptions(opts);
  return { queues, workerId: opts.workerId, limit: opts.limit, leaseMs, status: opts.start === true ? 'running' : 'leased', claimId, groups };
}

/** Checks a claim id (a uuid, see `ClaimOptions.claimId`). */
export function checkClaimId(op: string, claimId: unknown): string {
  return checkUuid(claimId, `${op}: claimId`).toLowerCase();
}

/** Checks a lease duration; returns it rounded up to whole milliseconds. */
export function checkLeaseMs(leaseMs: number): number {
  if (typeof leaseMs !== 'number' || !Number.isFinite(leaseMs) || leaseMs <= 0 || leaseMs > INT32_MAX) {
    throw invalidArgument(`leaseMs must be a positive number of milliseconds, at most ${INT32_MAX}`);
  }
  return Math.ceil(leaseMs);
}

export function checkLease(l: JobLease): void {
  if (!l || !Number.isSafeInteger(l.id)) throw invalidArgument('lease id must be a safe integer');
  checkUuid(l.leaseToken, 'leaseToken');
}

/** Checks leases and splits them into the id and token columns of a statement. */
export function splitLeases(leases: readonly JobLease[]): { ids: number[]; tokens: string[] } {
  if (!Array.isArray(leases)) throw invalidArgument('leases must be an array');
  const ids: number[] = [];
  const tokens: string[] = [];
  for (const l of leases) {
    checkLease(l);
    ids.push(l.id);
    tokens.push(l.leaseToken);
  }
  return { ids, tokens };
}

/** A step timeline as stored JSON; over 64 MiB is `INVALID_ARGUMENT`. */
export function stepsJson(steps: readonly Step[]): string {
  if (!Array.isArray(steps)) throw invalidArgument('steps must be an array');
  // Most attempts record no step: their timeline needs no serialising.
  if (steps.length === 0) return '[]';
  const json = repairJson(tryStringify(steps) ?? '[]');
  const bytes = overLimit(json);
  if (bytes !== undefined) throw invalidArgument(sizeProblem('steps', bytes));
  return json;
}

/** Result as stored: JSON text, or null for `undefined` and values JSON.stringify refuses or omits. */
export function resultJson(result: unknown): string | null {
  if (result === undefined) return null;
  // Most handlers return nothing worth a walk of the value (a no-op job's null).
  if (result === null) return 'null';
  const json = jsonText(result, 'result', 'result');
  if ('problem' in json) throw invalidArgument(json.problem);
  return json.text;
}

/** Error text as stored: verbatim, so NUL, a lone surrogate or over 64 MiB is refused. */
export function errorText(error: unknown): string {
  const text = checkText('complete', 'error', String(error));
  const bytes = overLimit(text);
  if (bytes !== undefined) throw invalidArgument(sizeProblem('error', bytes));
  return text;
}

/**
 * Why {@link JobStore.complete} would refuse `outcome` with `INVALID_ARGUMENT`, or `undefined`
 * when it takes it: the same check the store runs before sending, so a caller can replace one bad
 * outcome (a result JSON cannot carry, an error with NUL…) before it fails a whole batch. The
 * problem never quotes the value.
 */
export function outcomeProblem(outcome: JobOutcome): string | undefined {
  try {
    outcomeRow(outcome);
    return undefined;
  } catch (err) {
    if (err instanceof QError && err.code === QErrorCode.INVALID_ARGUMENT) return err.message;
    throw err;
  }
}

/** Checks one outcome and turns it into its statement columns (throws `INVALID_ARGUMENT`). */
export function outcomeRow(o: JobOutcome): { result: string | null; error: string | null; retryDelayMs: number | null; steps: string | null } {
  checkLease(o);
  const steps = o.steps === undefined ? null : stepsJson(o.steps);
  switch (o.status) {
    case 'succeeded':
      return { result: resultJson(o.result), error: null, retryDelayMs: null, steps };
    case 'retry_wait':
      if (typeof o.retryDelayMs !== 'number' || !Number.isFinite(o.retryDelayMs) || o.retryDelayMs < 0 || o.retryDelayMs > MAX_DELAY_MS) {
        throw invalidArgument('retryDelayMs must be a non-negative number of milliseconds, at most 100 years');
      }
      return { result: null, error: errorText(o.error), retryDelayMs: Math.round(o.retryDelayMs), steps };
    case 'dead_letter':
    case 'cancelled':
      return { result: null, error: o.error === undefined ? null : errorText(o.error), retryDelayMs: null, steps };
    default:
      throw invalidArgument('outcome status must be succeeded, retry_wait, dead_letter or cancelled');
  }
}

/**
 * A flow checked and flattened into the column arrays of its insert (see sql/insert-flow.ts),
 * or `INVALID_ARGUMENT` naming the node, before anything is written: no nodes or more than
 * {@link MAX_FLOW_NODES}, a bad ref, a ref given twice, a node with both a `type` and a `request`,
 * an inference step with a bad request (see checkFlowRequest) or job fields, a job node without a valid type, payload, queue, priority, attempt limit or key,
 * a parent that is not a node of the flow, a node depending on itself or on one parent twice, a
 * policy that is none of {@link FLOW_FAILURE_POLICIES}, and edges that form a cycle.
 */
export function toFlowBatch(input: NewFlow, opts: { external?: boolean } = {}): FlowBatch {
  if (!input || typeof input !== 'object') throw invalidArgument('flow: the flow must be an object with nodes');
  const name = input.name === undefined || input.name === null ? null : checkText('flow', 'name', input.name);
  const idempotencyKey =
    input.idempotencyKey === undefined || input.idempotencyKey === null ? null : checkName('flow', 'idempotencyKey', input.idempotencyKey);
  const nodes: unknown = input.nodes;
  if (!Array.isArray(nodes) || nodes.length === 0) throw invalidArgument('flow: nodes must be a non-empty array');
  if (nodes.length > MAX_FLOW_NODES) throw invalidArgument(`flow: nodes must be at most ${MAX_FLOW_NODES}, got ${nodes.length}`);
  const list = nodes as NewFlow['nodes'];
  const index = new Map<string, number>();
  list.forEach((node, i) => {
    if (!node || typeof node !== 'object') throw invalidArgument(`flow: node ${i} must be an object`);
    const ref = checkName('flow', `the ref of node ${i}`, node.ref);
    if (index.has(ref)) throw invalidArgument(`flow: node refs must be unique, ${JSON.stringify(ref)} is given twice`);
    index.set(ref, i);
  });
  const b: FlowBatch = {
    name,
    idempotencyKey,
    refs: [],
    uuids: [],
    queues: [],
    types: [],
    payloads: [],
    priorities: [],
    maxAttempts: [],
    idempotencyKeys: [],
    parents: [],
    edgeParents: [],
    edgeChildren: [],
    edgePolicies: [],
    externalParents: [],
    externalChildren: [],
    externalPolicies: [],
    requests: [],
  };
  const children: number[][] = list.map(() => []);
  list.forEach((node, i) => {
    const named = JSON.stringify(node.ref);
    const asJob = node as FlowJobNode;
    let request: CheckedFlowRequest | null = null;
    if ('request' in node && node.request !== undefined) {
      if (node.type !== undefined) throw invalidArgument(`flow: node ${named} must have either a type or a request, not both`);
      const extra = (['payload', 'queue', 'priority', 'maxAttempts', 'idempotencyKey'] as const).find(
        (k) => (node as unknown as Record<string, unknown>)[k] !== undefined,
      );
      if (extra) throw invalidArgument(`flow: node ${named} must have no ${extra}: an inference step takes a ref, a request and dependsOn only`);
      request = checkFlowRequest(named, node.request);
    }
    let one: EnqueueBatch;
    try {
      one = toEnqueueBatch([
        request
          ? {
              queue: request.queue,
              type: FLOW_REQUEST_TYPE,
              payload: flowRequestPayload(request),
              maxAttempts: 1,
            }
          : {
              queue: asJob.queue ?? 'default',
              type: asJob.type,
              payload: asJob.payload,
              priority: asJob.priority,
              maxAttempts: asJob.maxAttempts,
              idempotencyKey: asJob.idempotencyKey,
            },
      ]);
    } catch (err) {
      if (err instanceof QError) throw new QError(err.code, `flow: node ${named}: ${err.message.replace(/^enqueue: /, '')}`, { cause: err });
      throw err;
    }
    b.refs.push(node.ref);
    b.uuids.push(at0(one.uuids));
    b.queues.push(at0(one.queues));
    b.types.push(at0(one.types));
    b.payloads.push(at0(one.payloads));
    b.priorities.push(at0(one.priorities));
    b.maxAttempts.push(at0(one.maxAttempts));
    b.idempotencyKeys.push(one.idempotencyKeys[0] ?? null);
    b.requests.push(request);
    const deps: unknown = asJob.dependsOn ?? [];
    if (!Array.isArray(deps)) throw invalidArgument(`flow: node ${named} dependsOn must be an array of refs or { ref, onFailure }`);
    const seen = new Set<number>();
    for (const dep of deps as unknown[]) {
      const parentRef: unknown = typeof dep === 'string' ? dep : (dep as { ref?: unknown } | null)?.ref;
      const policy: unknown = typeof dep === 'string' ? 'fail' : ((dep as { onFailure?: unknown } | null)?.onFailure ?? 'fail');
      if (typeof parentRef !== 'string') throw invalidArgument(`flow: node ${named} dependsOn must be an array of refs or { ref, onFailure }`);
      const p = index.get(parentRef);
      if (p === undefined && opts.external) {
        // A node already in the flow (JobStore.flows.addNodes): checked once the flow is read.
        if (!(FLOW_FAILURE_POLICIES as readonly unknown[]).includes(policy)) {
          throw invalidArgument(`flow: node ${named} onFailure must be one of ${FLOW_FAILURE_POLICIES.join(', ')}`);
        }
        if (b.externalParents.some((r, k) => r === parentRef && b.externalChildren[k] === i + 1)) {
          throw invalidArgument(`flow: node ${named} must not depend on ${JSON.stringify(parentRef)} twice`);
        }
        b.externalParents.push(parentRef);
        b.externalChildren.push(i + 1);
        b.externalPolicies.push(policy as FlowFailurePolicy);
        continue;
      }
      if (p === undefined) throw invalidArgument(`flow: node ${named} must depend on nodes of the flow, ${JSON.stringify(parentRef)} is not one`);
      if (p === i) throw invalidArgument(`flow: node ${named} must not depend on itself`);
      if (seen.has(p)) throw invalidArgument(`flow: node ${named} must not depend on ${JSON.stringify(parentRef)} twice`);
      if (!(FLOW_FAILURE_POLICIES as readonly unknown[]).includes(policy)) {
        throw invalidArgument(`flow: node ${named} onFailure must be one of ${FLOW_FAILURE_POLICIES.join(', ')}`);
      }
      seen.add(p);
      children[p]?.push(i);
      // 1-based: the insert joins edges to its input rows WITH ORDINALITY.
      b.edgeParents.push(p + 1);
      b.edgeChildren.push(i + 1);
      b.edgePolicies.push(policy as FlowFailurePolicy);
    }
    b.parents.push(seen.size);
  });
  const cyclic = cycleMember(children, b.parents);
  if (cyclic !== null) throw invalidArgument(`flow: nodes must not form a cycle, node ${JSON.stringify(b.refs[cyclic] ?? '')} is on one`);
  checkCallSize(
    'flow',
    'payload JSON',
    b.payloads.map((p) => p.length),
  );
  return inTopologicalOrder(b, children);
}

/**
 * The batch with its nodes in a topological order (parents first; otherwise as listed), so that
 * the ids the insert draws in that order put every parent below its children: whatever locks
 * a flow's jobs in id order (a cancelFlow, the release's and the failure walk's locks) then
 * locks them parents first, as a completion does (the parent's row, then its children's).
 */
function inTopologicalOrder(b: FlowBatch, children: readonly number[][]): FlowBatch {
  const left = [...b.parents];
  const order: number[] = [];
  left.forEach((n, i) => n === 0 && order.push(i));
  for (let k = 0; k < order.length; k++) {
    for (const c of children[order[k] ?? 0] ?? []) {
      const n = (left[c] ?? 0) - 1;
      left[c] = n;
      if (n === 0) order.push(c);
    }
  }
  const pos = new Array<number>(order.length);
  order.forEach((i, k) => (pos[i] = k));
  const pick = <T>(a: T[]): T[] => order.map((i) => a[i] as T);
  return {
    ...b,
    refs: pick(b.refs),
    uuids: pick(b.uuids),
    queues: pick(b.queues),
    types: pick(b.types),
    payloads: pick(b.payloads),
    priorities: pick(b.priorities),
    maxAttempts: pick(b.maxAttempts),
    idempotencyKeys: pick(b.idempotencyKeys),
    requests: pick(b.requests),
    parents: pick(b.parents),
    edgeParents: b.edgeParents.map((p) => (pos[p - 1] ?? 0) + 1),
    edgeChildren: b.edgeChildren.map((c) => (pos[c - 1] ?? 0) + 1),
    externalChildren: b.externalChildren.map((c) => (pos[c - 1] ?? 0) + 1),
  };
}

function at0<T>(a: readonly (T | undefined)[]): T {
  const v = a[0];
  if (v === undefined) throw new Error('flow: empty column');
  return v;
}

/**
 * A node on a cycle of the graph (`children[i]`: the nodes depending on i; `parents[i]`: how many
 * i depends on), or null when it has none: Kahn's order, then from a node it never reached, the
 * parents followed back until one repeats.
 */
function cycleMember(children: readonly number[][], parents: readonly number[]): number | null {
  const left = [...parents];
  const ready: number[] = [];
  left.forEach((n, i) => n === 0 && ready.push(i));
  let done = 0;
  while (ready.length > 0) {
    const i = ready.pop() as number;
    done++;
    for (const c of children[i] ?? []) {
      const n = (left[c] ?? 0) - 1;
      left[c] = n;
      if (n === 0) ready.push(c);
    }
  }
  if (done === parents.length) return null;
  // Every unreached node has an unreached parent: walk parents until a node repeats.
  const parentOf = new Map<number, number>();
  children.forEach((cs, p) => {
    for (const c of cs) if ((left[c] ?? 0) > 0 && (left[p] ?? 0) > 0) parentOf.set(c, p);
  });
  let node = left.findIndex((n) => n > 0);
  const visited = new Set<number>();
  while (!visited.has(node)) {
    visited.add(node);
    node = parentOf.get(node) ?? node;
  }
  return node;
}
