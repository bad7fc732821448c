/** Job states, in the order the `q_job_status` enum declares them. */
export const JOB_STATUSES = [
  'scheduled',
  'queued',
  'leased',
  'running',
  'retry_wait',
  'succeeded',
  'cancelled',
  'dead_letter',
  'waiting',
] as const;

/**
 * Where a job is in its life: `scheduled` (future `runAt`), `queued` (eligible), `leased` (claimed
 * by a worker), `running`, `retry_wait` (failed, waiting for its backoff), and the terminal
 * `succeeded`, `cancelled`, `dead_letter`. There is no `failed`. A node of a flow whose parents are
 * not all done yet is `waiting` (declared last: it came last, migration 0014).
 */
export type JobStatus = (typeof JOB_STATUSES)[number];

/** Status of one step of a job's timeline. `pending` exists for compatibility but is never written. */
export type StepStatus = 'pending' | 'running' | 'succeeded' | 'failed' | 'skipped';

/**
 * One entry of a job's step timeline (as stored in `jobs.steps`). Times are RFC 3339 UTC strings;
 * absent fields are omitted, never `null`.
 */
export interface Step {
  name: string;
  status: StepStatus;
  message?: string;
  started_at?: string;
  finished_at?: string;
}

/** A row of the `jobs` table. Times are instants read from the database. */
export interface Job {
  id: number;
  uuid: string;
  queue: string;
  type: string;
  payload: unknown;
  status: JobStatus;
  /** Higher is claimed first. */
  priority: number;
  /** The job may not start before this instant; also its FIFO key. */
  runAt: Date;
  /** Incremented when the job is leased (given back when a crash or a drain returns it). */
  attempt: number;
  maxAttempts: number;
  idempotencyKey: string | null;
  lockKey: string | null;
  /** Id of the worker holding the lease, if any. */
  leasedBy: string | null;
  leaseExpiresAt: Date | null;
  /** Set by `cancel` on a leased/running job: its handler is aborted and the job ends `cancelled`. */
  cancelRequestedAt: Date | null;
  /** The error message of the latest failed attempt (kept after a later success), or `null`. */
  lastError: string | null;
  /**
   * The stack of that failure when the worker kept one: the handler's stack frames only (no
   * message, no payload), at most 30 frames / 4 KB, DSNs redacted. `null` otherwise.
   */
  lastErrorStack: string | null;
  /** The step timeline of the latest attempt; `[]` when it recorded none. */
  steps: Step[];
  /** The handler's result (JSON), or `null`. */
  result: unknown;
  retryOfId: number | null;
  teamId: number | null;
  resourceId: number | null;
  /** Lease-expiry reclaims (crashes) over the job's whole life; never reset. */
  resumeCount: number;
  createdAt: Date;
  updatedAt: Date;
  finishedAt: Date | null;
  deadLetteredAt: Date | null;
  /**
   * Times a handler snoozed the job (`ctx.snooze` of `@q/job-worker`): put it back to wait
   * without using an attempt. Over the job's whole life; never reset.
   */
  snoozes: number;
  /**
   * The last progress a handler reported (`ctx.progress`, {@link JobStore.updateProgress}): a
   * JSON value, `null` when none was. Kept across attempts (a new attempt can resume from it)
   * and after the job finishes.
   */
  progress: unknown;
  /**
   * The job key it was enqueued with ({@link NewJob.jobKey}) while the job is pending (`queued` or
   * `scheduled`): a claim clears it (mode `replace`/`debounce`). A throttled job keeps it for
   * good. `null` otherwise.
   */
  jobKey: string | null;
  /** The group it was enqueued in ({@link NewJob.group}), or `null`. */
  group: string | null;
  /** The flow the job is a node of (`JobStore.flows.insert`); absent for a job outside flows. */
  flow?: JobFlowNode;
}

/** Where a job sits in its flow ({@link Job.flow}). */
export interface JobFlowNode {
  /** The flow's id (`FlowResult.flowId`). */
  id: string;
  /** The node's name in its flow. */
  ref: string;
  /**
   * The node waited for parents and was released by the last of them: its `runAt` is the instant
   * of that release (database clock), until it is retried.
   */
  released: boolean;
}

/** A claimed job with the fencing token of its lease. Every outcome write must present the token. */
export interface LeasedJob extends Job {
  leaseToken: string;
}

/**
 * What {@link JobStore.snooze} did:
 * - `snoozed`: the job waits until `runAt` (database clock), its attempt given back, `snoozes`
 *   one higher;
 * - `dead_letter`: it had already been snoozed `maxSnoozes` times, so it was dead-lettered
 *   (`lastError` says `snoozed more than N times`);
 * - `cancelled`: a cancel had been requested, which wins;
 * - `fenced`: the lease was not held any more (reaped, or taken over): nothing was written.
 */
export type SnoozeResult =
  | { status: 'snoozed'; runAt: Date; snoozes: number }
  | { status: 'dead_letter' | 'cancelled'; runAt: null; snoozes: number }
  | { status: 'fenced'; runAt: null; snoozes: null };

/** Identifies one lease: the job id and the lease's fencing token. */
export interface JobLease {
  id: number;
  leaseToken: string;
}

/** One job of {@link JobStore.enqueueResults}: the job, and whether this call inserted it. */
export interface EnqueueResult {
  job: Job;
  /**
   * `true`: this call inserted the job. `false`: its idempotency key was already held in its
   * queue and type, and `job` is the job holding it, unchanged (also for a later duplicate of a
   * key within the same batch, which returns the job the batch inserted first).
   */
  created: boolean;
}

/** A job to insert (see {@link JobStore.enqueue}). */
export interface NewJob {
  /** Logical queue; the store does not check it against a list (`JobQueue` does). */
  queue: string;
  /** The job type, which selects the handler: a non-empty string. */
  type: string;
  /** Any JSON value; absent or `null` is stored as `{}`. */
  payload?: unknown;
  /** Default 0; higher is claimed first. 32-bit integer. */
  priority?: number;
  /** A future instant makes the job `scheduled`; past or absent means `queued` now (database clock). */
  runAt?: Date;
  /** Default 5; at least 1. */
  maxAttempts?: number;
  /**
   * Idempotency key, held per queue and type: while a job with this key in the same queue and of
   * the same type is kept (live or finished, until it is purged), enqueueing another returns that
   * job unchanged. The same key in another queue or of another type makes a new job.
   */
  idempotencyKey?: string;
  /**
   * Job key, held per queue and type (dedupe of pending work; see {@link JobKeyMode} and the
   * `@q/job-worker` README for the full table). Not together with `idempotencyKey`.
   */
  jobKey?: string;
  /** What an enqueue with a {@link NewJob.jobKey} does when the key is held. Default `replace`. */
  jobKeyMode?: JobKeyMode;
  /** The window of mode `throttle`, in ms (an integer from 1 to 2³¹−1); required by it, refused otherwise. */
  throttleMs?: number;
  /** At most one job per lock key is leased or running at a time. */
  lockKey?: string;
  /**
   * The group the job belongs to (a tenant, a destination host): a non-empty string of at most
   * 2,048 bytes; absent or `null` for none. Claims interleave groups within a priority, and a
   * worker's `limits` bound how many jobs of one group run at once, or start per window, across
   * the fleet (see the `@q/job-worker` README). A job without a group is never limited.
   */
  group?: string | null;
  teamId?: number;
  resourceId?: number;
  retryOfId?: number;
}

/**
 * What an enqueue with a job key does (per queue, type and key):
 * - `replace`: a pending job (`queued`/`scheduled`) holding the key gets the new payload,
 *   priority and runAt (and the status they give) and is returned, `created: false`; with none
 *   pending (none, or it was claimed or finished) a new job is inserted holding the key.
 * - `debounce`: as `replace` but the pending job keeps its runAt (and status).
 * - `throttle`: at most one job per key per window of `throttleMs`, windows fixed and aligned to
 *   the epoch (database clock): the first enqueue in a window inserts the job, every later one in
 *   the same window returns it unchanged, whatever its state (even finished).
 */
export type JobKeyMode = 'replace' | 'debounce' | 'throttle';

/** What the lease holder reports for one attempt (see {@link JobStore.complete}). */
export type JobOutcome = JobLease & {
  /** Final timeline of the attempt; absent keeps the stored one. */
  steps?: readonly Step[];
} & (
    | { status: 'succeeded'; result?: unknown }
    | { status: 'retry_wait'; error: string; retryDelayMs: number }
    | { status: 'dead_letter'; error: string }
    | { status: 'cancelled'; error?: string }
  );

/** State of a lease after a fenced write: still held, and whether a cancel was requested. */
export interface LeaseState {
  id: number;
  cancelRequested: boolean;
}

/** A lease taken back by the reaper. */
export interface ReapedJob {
  id: number;
  uuid: string;
  status: JobStatus;
}

/** Filter of {@link JobStore.list}. */
export interface JobListFilter {
  status?: JobStatus;
  queue?: string;
  type?: string;
  teamId?: number;
  /** Only the nodes of this flow (`JobStore.flows.insert`'s `flowId`, a UUID). */
  flowId?: string;
  /** Opaque cursor from a previous page's `nextCursor`. */
  cursor?: string;
  /** 1–100, default 25. */
  limit?: number;
}

/** One page of jobs, newest (`id DESC`) first. */
export interface JobPage {
  jobs: Job[];
  /** Pass as `cursor` for the next page; `null` on the last page. */
  nextCursor: string | null;
}

/** Result of {@link JobStore.cancel}. */
export type CancelOutcome =
  /** A waiting job was cancelled at once. */
  | 'cancelled'
  /** A leased/running job was asked to stop; its worker aborts the handler and records `cancelled`. */
  | 'cancel_requested'
  /** No such job, or already finished. */
  | 'not_cancellable';

/**
 * A per-group limit (see {@link ClaimOptions.limits}) on the jobs of one group in the queue and
 * of the type given (absent: any), across every claimer of the job table: how many are leased or
 * running at once, how many start per window, or both (at least one of the two).
 */
export interface GroupLimit {
  /** The queue whose jobs the rule covers; absent: every queue claimed. */
  queue?: string;
  /** The job type the rule covers; absent: every type. */
  type?: string;
  /**
   * Jobs of one group leased or running at once: an integer from 0 (the group waits) to 2³¹−1,
   * or a function of the group returning one (at least 1). A claimer admits a group it has not
   * computed the function for yet at 1 job at a time, so a fleet never runs more than the limit.
   */
  concurrency?: number | ((group: string) => number);
  /**
   * Starts of one group in any sliding window of `windowMs`: at most `limit` (integers from 1 to
   * 2³¹−1). A start is the claim that leases the job, timed by the database clock; a job over the
   * rate stays queued until a start of the window ages out (a worker sees that on its next poll).
   */
  rate?: { limit: number; windowMs: number };
}

/** Jobs of one group leased or running now (see `JobStore.runningGroups`). */
export interface GroupRunning {
  queue: string;
  group: string;
  running: number;
}

/** What to claim (see `JobStore.claim`). */
export interface ClaimOptions {
  queues: readonly string[];
  workerId: string;
  /** Jobs leased at most (at least 1). */
  limit: number;
  /** Lease duration (database clock). */
  leaseMs: number;
  /** Lease straight into `running` (a claimer that starts the jobs at once). Default false. */
  start?: boolean;
  /**
   * A uuid naming this claim (default: a random one). The lease tokens of the jobs it leases are
   * derived from it, so a claimer whose reply was lost (the statement may have committed) can
   * give back exactly what that claim leased with {@link JobStore.releaseClaims}, whatever other
   * process uses the same `workerId`.
   */
  claimId?: string;
  /**
   * Per-group concurrency limits, in order: a job with a group takes the first rule matching its
   * queue and type. A job over its group's limit stays queued (it uses no attempt) and does not
   * hold up other groups. Jobs without a group are never limited. Every claimer of a job table
   * should pass the same rules: the limit is what each claim holds, fleet-wide.
   */
  limits?: readonly GroupLimit[];
  /**
   * Interleave groups within a priority (round-robin: every group's first job, then every
   * group's second…), so one group's backlog does not delay another group's job by more than a
   * claim round. Default true; it applies once a claim has seen jobs with a group.
   */
  fair?: boolean;
  /** Round-robin weights per group (an integer from 1; absent: 1): a group of weight 3 gets three jobs a round. */
  weights?: Readonly<Record<string, number>>;
}

/**
 * What a node's child does when this parent ends in the dead letter or is cancelled:
 * `fail` (the default: the child is dead-lettered with a reason naming the parent, and the failure
 * cascades to its own children by their policies), `continue` (the edge counts as done: the child
 * runs once its other parents are done, and sees the failure among its parents), `ignore` (the
 * edge is dropped: it counts as done and the child does not see the parent), `cancel` (the child
 * and all its descendants are cancelled).
 */
export type FlowFailurePolicy = 'fail' | 'continue' | 'ignore' | 'cancel';

/** The failure policies, in the order {@link FlowFailurePolicy} lists them. */
export const FLOW_FAILURE_POLICIES: readonly FlowFailurePolicy[] = ['fail', 'continue', 'ignore', 'cancel'];

/** A parent of a flow node, with the policy its failure applies to the node. */
export interface FlowDependency {
  /** The parent's `ref` in the same flow. */
  ref: string;
  /** Default `fail`. */
  onFailure?: FlowFailurePolicy;
}

/** One node of a new flow: a job, queued once every parent it depends on has succeeded. */
/** A node of a flow: a job for a worker ({@link FlowJobNode}) or an inference step ({@link FlowRequestNode}). */
export type FlowNode = FlowJobNode | FlowRequestNode;

/** A flow node run by a worker: a job of its own type. */
export interface FlowJobNode {
  /** The node's name, unique in its flow: children name their parents by it, and the result is keyed by it. */
  ref: string;
  /** The job type (as {@link NewJob.type}). */
  type: string;
  /** As {@link NewJob.payload}. */
  payload?: unknown;
  /** Default `default`. */
  queue?: string;
  /** As {@link NewJob.priority}. */
  priority?: number;
  /** As {@link NewJob.maxAttempts}. */
  maxAttempts?: number;
  /** As {@link NewJob.idempotencyKey}: a key another job holds fails the whole flow (`DUPLICATE`). */
  idempotencyKey?: string;
  /** The parents, by `ref` (policy `fail`) or with a policy each. A node without parents is queued at once. */
  dependsOn?: ReadonlyArray<string | FlowDependency>;
  /** Only an inference step has a request. */
  request?: undefined;
}

/**
 * An inference step: a flow node that is a request on the request queue (`RequestStore` of
 * `@q/store`, in the same schema), inserted with the flow and answered by whatever serves that
 * queue (the dispatcher, `runPartitionWorker`). The result written for it finishes the node in
 * the same transaction: `succeeded` with the model's response body as its result (JSON when it
 * is JSON, else the text), or in the dead letter for an error result; its deadline passing fails
 * it too. No worker slot is held while the model runs. Its job has the type {@link FLOW_REQUEST_TYPE}.
 * Without parents it is sent with the flow (or the `ctx.flow.add` that adds it); with parents it
 * waits like any node and is sent in the transaction that releases it (a parent failing under
 * `continue` releases it too: its payload is fixed when the node is inserted, whatever its parents
 * return). `retryFlow` sends a failed one again, as a new request.
 */
export interface FlowRequestNode {
  /** As {@link FlowJobNode.ref}. */
  ref: string;
  /** The request. */
  request: FlowRequest;
  /** As {@link FlowJobNode.dependsOn}: the request is sent once they are done. */
  dependsOn?: ReadonlyArray<string | FlowDependency>;
  /** Only a job node has a type. */
  type?: undefined;
}

/** The request of an inference step ({@link FlowRequestNode}). */
export interface FlowRequest {
  /** The request queue that serves it. */
  queue: string;
  /** The body sent to the model (any JSON value). */
  payload: unknown;
  /**
   * Unix seconds, in the future: the node fails if no result is written by then. Give this or
   * {@link FlowRequest.deadlineSeconds}, not both. For a node with parents it is fixed when the
   * flow is inserted, so a late release leaves the request less time (or none: the node fails at
   * the next maintenance round).
   */
  deadline?: number;
  /**
   * Seconds the request has once it is sent (a positive whole number): counted from the send,
   * so from the release for a node with parents, and afresh for each retry. Give this or
   * {@link FlowRequest.deadline}, not both.
   */
  deadlineSeconds?: number;
  /** The tenant the request is accounted to (the dispatcher's quota and fairness attributes). */
  tenant?: string;
}

/** The job type of an inference step's node ({@link FlowRequestNode}): reserved, never claimed. */
export const FLOW_REQUEST_TYPE = 'q:request';

/**
 * The result route prefix of flows' requests: their envelope names `q:flow:<flow id>`. A result of
 * a flow's request finishes its node on whatever route it is written; a late one on such a route
 * (its node already finished) is dropped.
 */
export const FLOW_ROUTE_PREFIX = 'q:flow:';

/** A job graph for `JobStore.flows.insert`. */
export interface NewFlow {
  /** A name shown with the flow (any text). */
  name?: string;
  /** Unique among flows: a second flow with this key returns the first one instead. */
  idempotencyKey?: string;
  /** The nodes, 1 to {@link MAX_FLOW_NODES}; their edges must form no cycle. */
  nodes: readonly FlowNode[];
}

/** The most nodes one flow may have. */
export const MAX_FLOW_NODES = 100_000;

/** What `JobStore.flows.insert` inserted (or found, by the flow's idempotency key). */
export interface FlowResult {
  /** The flow's id (a UUID). */
  flowId: string;
  /** False when the flow's idempotency key returned a flow inserted before. */
  created: boolean;
  /** Each node's job, by its `ref`. */
  jobs: Record<string, Job>;
}

/** A parent of a flow node, as the node's handler reads it (`ctx.parents`). */
export interface FlowParent {
  /** `succeeded`, or (policy `continue`) `dead_letter` or `cancelled`; live statuses only in a flow changed by hand. */
  status: JobStatus;
  /** What the parent's handler returned (JSON), or null. */
  result: unknown;
  /** The parent's last error message (without its stack); null when it succeeded (a retried attempt's error is not its outcome). */
  error: string | null;
}

/** An edge of a flow, by the refs of its nodes. */
export interface FlowEdge {
  parent: string;
  child: string;
  onFailure: FlowFailurePolicy;
}

/** A flow as `JobStore.flows.get` reads it. */
export interface FlowInfo {
  /** The flow's id (a UUID). */
  id: string;
  name: string | null;
  idempotencyKey: string | null;
  createdAt: Date;
  /** When its last node finished, once every node has (`null` while any is live). */
  finishedAt: Date | null;
  /** Each node's job (with its status and timestamps: created, run from, updated, finished), by ref. */
  nodes: Record<string, Job>;
  /** Its edges (those the `ignore` policy dropped are gone). */
  edges: FlowEdge[];
}
