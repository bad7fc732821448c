/**
 * The parts of the q packages the benchmark drives, typed from the public API
 * (docs/design/api.md). They are loaded dynamically, so a scenario whose package has not
 * landed yet is skipped with a clear message instead of breaking the build.
 */
import type { Tracer, TracerProvider } from '@opentelemetry/api';

export interface QOpenOptions {
  maxConns?: number;
  tracerProvider?: TracerProvider;
  migrate?: boolean;
}

// ---- @q/store: request queue -------------------------------------------------------------
export interface QKey {
  id: string;
  token: string;
}
export interface QStamp extends QKey {
  attempt: number;
}
export interface QNewRequest extends QKey {
  queue: string;
  deadline: number;
  envelope: string;
  payload: Uint8Array;
}
export interface QRequest extends QNewRequest {
  partition: number;
  epoch: number;
  attempt: number;
  cancelled: boolean;
}
export interface QCompletion extends QKey {
  attempt: number;
  route: string;
  payload: string;
  expiresAt?: number;
}
export interface QLease {
  partition: number;
  epoch: number;
  draining: boolean;
}

export interface QStore {
  readonly pool: import('pg').Pool;
  now(): Promise<Date>;
  close(): Promise<void>;
  enqueue(reqs: QNewRequest[]): Promise<void>;
  ensurePartitions(queue: string): Promise<void>;
  acquirePartitions(queue: string, owner: string, now: Date, ttlMs: number, limit: number): Promise<QLease[]>;
  dispatch(queue: string, owner: string, now: Date, limit: number): Promise<QRequest[]>;
  ack(owner: string, completions: QCompletion[]): Promise<boolean[]>;
  resultDepth(route: string): Promise<number>;
  backlog(queue: string, now: number, windows: number[]): Promise<{ depth: number; expiring: number[] }>;
}
export interface QStoreModule {
  RequestStore: { open(dsn: string, opts?: QOpenOptions): Promise<QStore> };
}

// ---- @q/store: job store, @q/job-worker ----------------------------------------------------
export interface QJob {
  id: number;
  uuid: string;
  payload: unknown;
  status: string;
}
export interface QJobStore {
  close(): Promise<void>;
}
export interface QJobStoreModule {
  JobStore: { open(dsn: string, opts?: QOpenOptions): Promise<QJobStore> };
}
export interface QEnqueueOptions {
  queue?: string;
  type: string;
  payload?: unknown;
  group?: string;
}
export interface QJobQueue {
  enqueue(opts: QEnqueueOptions): Promise<QJob>;
  enqueueMany(opts: QEnqueueOptions[]): Promise<QJob[]>;
}
export interface QWorker {
  register(type: string, handler: (job: QJob, ctx: { signal: AbortSignal }) => Promise<unknown>): void;
  run(signal: AbortSignal): Promise<void>;
  wait(timeoutMs: number): Promise<void>;
}
/** A per-group limit of a Worker (`limits`): the first rule matching a job's queue and type. */
export interface QGroupLimit {
  queue?: string;
  type?: string;
  concurrency?: number;
}
export interface QWorkerOptions {
  queues: string[];
  concurrency: number;
  prefetch?: number;
  tracer?: Tracer;
  limits?: readonly QGroupLimit[];
  fairness?: boolean;
}
export interface QJobWorkerModule {
  JobQueue: new (store: QJobStore, opts: { knownQueues: string[] }) => QJobQueue;
  Worker: new (store: QJobStore, opts: QWorkerOptions) => QWorker;
}
export interface QBatchItem {
  job: QJob;
}
export interface QJobWorkerBatchModule {
  batchHandler(
    fn: (items: readonly QBatchItem[]) => Promise<void>,
    opts: { batchSize?: number; maxWaitMs?: number },
  ): (job: QJob, ctx: { signal: AbortSignal }) => Promise<unknown>;
}

// ---- @q/partition-consumer ---------------------------------------------------------------
export type QOutcome =
  { result: { route: string; payload: string; expiresAt?: number } } | { retryAt: number; envelope?: string } | { defer: number };
export interface QRunPartitionWorkerOptions {
  store: QStore;
  queue: string;
  owner?: string;
  concurrency: number;
  batchSize: number;
  leaseTtlMs: number;
  drainTimeoutMs: number;
  handle(req: QRequest, signal: AbortSignal): Promise<QOutcome>;
  signal: AbortSignal;
}
export interface QPartitionModule {
  runPartitionWorker(opts: QRunPartitionWorkerOptions): Promise<void>;
  Consumer: new (store: QStore, queue: string, owner: string, opts: { leaseTtlMs: number; drainTimeoutMs: number }) => QConsumer;
}
export interface QConsumer {
  rebalance(now: Date): Promise<void>;
  poll(now: Date, limit: number, signal?: AbortSignal): Promise<QRequest[]>;
  ack(completions: QCompletion[]): Promise<boolean[]>;
  stop(): void;
  close(): Promise<void>;
  inspect(): { active: number[]; draining: number[] };
}

// ---- @q/quota ------------------------------------------------------------------------------
export type QRelease = () => Promise<void>;
export interface QQuotaStore {
  registerQuotaHolder(holder: string, ttlMs: number): Promise<void>;
  acquireQuotaSlots(holder: string, key: string, n: number, limit: number): Promise<number>;
  releaseQuotaSlots(holder: string, keys: string[], counts: number[]): Promise<void>;
  admitQuota(key: string, n: number, limit: number, windowMs: number): Promise<number>;
  close(): Promise<void>;
}
export interface QQuota {
  acquire(key: string, limit: number, signal?: AbortSignal): Promise<QRelease | null>;
  admit(key: string, limit: number, windowMs: number, signal?: AbortSignal): Promise<boolean>;
  close(): Promise<void>;
}
export interface QQuotaModule {
  createQuota(opts: { dsn?: string; pool?: import('pg').Pool; ttlMs?: number; maxConns?: number }): Promise<QQuota>;
  QuotaStore: { open(dsn: string, opts?: QOpenOptions): Promise<QQuotaStore> };
}

// ---- @q/otel ---------------------------------------------------------------------------------
export interface QOtelModule {
  qTracer(tp?: TracerProvider): Tracer | undefined;
}

/** A loaded module, or why it cannot be used. */
export type Loaded<T> = { ok: true; mod: T } | { ok: false; reason: string };

async function load<T>(specifier: string, exports: string[], importer: () => Promise<unknown>): Promise<Loaded<T>> {
  let mod: Record<string, unknown>;
  try {
    mod = (await importer()) as Record<string, unknown>;
  } catch (err) {
    return { ok: false, reason: `${specifier} cannot be loaded (${(err as Error).message.split('\n')[0] ?? ''})` };
  }
  const missing = exports.filter((e) => mod[e] === undefined);
  if (missing.length > 0) return { ok: false, reason: `${specifier} has not landed yet (no ${missing.join(', ')} export)` };
  return { ok: true, mod: mod as T };
}

const cache = new Map<string, Promise<Loaded<unknown>>>();
function once<T>(key: string, f: () => Promise<Loaded<T>>): Promise<Loaded<T>> {
  let p = cache.get(key);
  if (!p) cache.set(key, (p = f()));
  return p as Promise<Loaded<T>>;
}

export const loadStore = () => once<QStoreModule>('store', () => load('@q/store', ['RequestStore'], () => import('@q/store')));
export const loadJobStore = () => once<QJobStoreModule>('jobstore', () => load('@q/store', ['JobStore'], () => import('@q/store')));
export const loadJobWorker = () =>
  once<QJobWorkerModule>('job-worker', () => load('@q/job-worker', ['JobQueue', 'Worker'], () => import('@q/job-worker')));
export const loadJobWorkerBatch = () =>
  once<QJobWorkerBatchModule>('job-worker-batch', () => load('@q/job-worker', ['batchHandler'], () => import('@q/job-worker')));
export const loadPartition = () =>
  once<QPartitionModule>('partition', () =>
    load('@q/partition-consumer', ['runPartitionWorker', 'Consumer'], () => import('@q/partition-consumer')),
  );
export const loadQuota = () => once<QQuotaModule>('quota', () => load('@q/quota', ['createQuota', 'QuotaStore'], () => import('@q/quota')));
export const loadOtel = () => once<QOtelModule>('otel', () => load('@q/otel', ['qTracer'], () => import('@q/otel')));

/** Loads every module and returns the first reason one is unusable (a System's `skip`). */
export async function missing(...loaders: Array<() => Promise<Loaded<unknown>>>): Promise<string | undefined> {
  for (const l of loaders) {
    const r = await l();
    if (!r.ok) return r.reason;
  }
  return undefined;
}

/** The loaded module; only call after `missing` returned undefined. */
export async function need<T>(loader: () => Promise<Loaded<T>>): Promise<T> {
  const r = await loader();
  if (!r.ok) throw new Error(r.reason);
  return r.mod;
}
