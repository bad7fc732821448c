import { invalidArgument } from '@q/schema';
import { checkName } from '@q/schema/internal';
import type { InTransaction, Job } from '@q/store/jobs';
import { DeadLetterError } from './errors.js';
import type { WorkerEventSource } from './events.js';
import type { EnqueueOptions, JobQueue } from './job-queue.js';
import type { WorkOptions } from './managed-workers.js';
import type { HandlerContext, HandlerFunc } from './options.js';
import type { Worker } from './worker.js';

/** One segment of a {@link StandardSchemaIssue}'s path: a key, or an object holding one. */
export type StandardSchemaPathSegment = PropertyKey | { readonly key: PropertyKey };

/** One problem a Standard Schema validator found: its message and where. */
export interface StandardSchemaIssue {
  readonly message: string;
  readonly path?: ReadonlyArray<StandardSchemaPathSegment> | undefined;
}

/** What a Standard Schema validator returns: the value it accepted, or the issues it found. */
export type StandardSchemaResult<Output> =
  { readonly value: Output; readonly issues?: undefined } | { readonly issues: ReadonlyArray<StandardSchemaIssue> };

/**
 * A validator of the Standard Schema interface (v1), which zod (3.24 and later), valibot and
 * arktype schemas implement: q needs nothing else from them, and depends on none of them.
 */
export interface StandardSchemaV1<Input = unknown, Output = Input> {
  readonly '~standard': {
    readonly version: 1;
    readonly vendor: string;
    readonly validate: (value: unknown) => StandardSchemaResult<Output> | Promise<StandardSchemaResult<Output>>;
    /** Type-level only: the input and output types the schema infers. */
    readonly types?: { readonly input: Input; readonly output: Output } | undefined;
  };
}

/** A {@link Job} whose payload and result have the types of its {@link JobDefinition}. */
export type TypedJob<Payload, Result = unknown> = Omit<Job, 'payload' | 'result'> & { payload: Payload; result: Result | null };

/** A handler of a {@link JobDefinition}: given the typed job, it resolves with the typed result. */
export type TypedHandler<Payload, Result> = (job: TypedJob<Payload, Result>, ctx: HandlerContext) => Promise<Result>;

/** What {@link defineJob} takes. */
export interface JobDefinitionOptions<Payload> {
  /** The job type: a non-empty name (as `enqueue`'s `type`). */
  type: string;
  /** The queue its jobs are enqueued to and served from. Default `default`. */
  queue?: string;
  /**
   * Checks the payload at enqueue (a failure is `INVALID_ARGUMENT` naming each bad field,
   * nothing written) and again before the handler runs (a stored payload that fails goes to the
   * dead letter with the same message; the handler is not called). The value the schema returns
   * is what is stored and what the handler gets, so a schema that strips unknown keys drops the
   * `traceparent` `enqueue` may add. Its input and output types must be the payload's.
   */
  schema?: StandardSchemaV1<Payload, Payload>;
}

/** The enqueue options of a {@link JobDefinition}: all of {@link EnqueueOptions} but those it fixes. */
export type TypedEnqueueOptions = Omit<EnqueueOptions, 'type' | 'payload' | 'queue'>;

/**
 * One job type, defined once: its payload and result types flow into `enqueue`, `work`,
 * `register` and the handler. Made by {@link defineJob}.
 */
export interface JobDefinition<Payload, Result = unknown> {
  readonly type: string;
  readonly queue: string;
  readonly schema: StandardSchemaV1<Payload, Payload> | undefined;
  /** Checks `payload` (see {@link JobDefinitionOptions.schema}) and enqueues it as `queue.enqueue` does. */
  enqueue(queue: JobQueue, payload: Payload, opts?: TypedEnqueueOptions, tx?: InTransaction): Promise<TypedJob<Payload, Result>>;
  /** {@link JobDefinition.enqueue} for many payloads, all or none: every payload is checked first. */
  enqueueMany(queue: JobQueue, payloads: Payload[], opts?: TypedEnqueueOptions, tx?: InTransaction): Promise<Array<TypedJob<Payload, Result>>>;
  /** Serves the type on an opened queue (`queue.work` on the definition's queue); returns the worker's events. */
  work(queue: JobQueue, handler: TypedHandler<Payload, Result>, opts?: Omit<WorkOptions, 'queue'>): WorkerEventSource;
  /** Registers the handler on `worker` (which must consume the definition's queue). */
  register(worker: Worker, handler: TypedHandler<Payload, Result>): void;
  /** The untyped handler `work` and `register` install: the schema check, then `handler`. */
  handler(handler: TypedHandler<Payload, Result>): HandlerFunc;
  /** Checks `payload` against the schema: the value it returns, or `INVALID_ARGUMENT` naming each bad field. */
  check(payload: unknown, op?: string): Promise<Payload>;
}

/**
 * Defines a job type once, so its payload and result types flow from one place:
 *
 * ```ts
 * const sendEmail = defineJob<{ to: string }, { id: string }>({ type: 'email.send', schema: z.object({ to: z.string().email() }) });
 * sendEmail.work(queue, async (job) => ({ id: await send(job.payload.to) }));
 * await sendEmail.enqueue(queue, { to: 'a@example.com' });
 * ```
 *
 * Without type arguments the payload type is the schema's. Bad options → `INVALID_ARGUMENT`.
 */
export function defineJob<Payload, Result = unknown>(opts: JobDefinitionOptions<Payload>): JobDefinition<Payload, Result> {
  if (!opts || typeof opts !== 'object') throw invalidArgument('defineJob: options must be an object { type, queue?, schema? }');
  const type = checkName('defineJob', 'type', opts.type);
  const queueName = opts.queue === undefined ? 'default' : checkName('defineJob', 'queue', opts.queue);
  const schema = opts.schema;
  if (schema !== undefined && typeof (schema as Partial<StandardSchemaV1>)?.['~standard']?.validate !== 'function') {
    throw invalidArgument('defineJob: schema must implement Standard Schema (a "~standard" property with validate)');
  }
  const check = async (payload: unknown, op = `${type}.enqueue`): Promise<Payload> => {
    if (schema === undefined) return payload as Payload;
    const result = await schema['~standard'].validate(payload);
    if (result.issues !== undefined) throw invalidArgument(`${op}: ${describeIssues(result.issues)}`);
    return result.value;
  };
  const toOptions = (payload: Payload, o: TypedEnqueueOptions | undefined): EnqueueOptions => ({ ...o, type, queue: queueName, payload });
  const handler = (fn: TypedHandler<Payload, Result>): HandlerFunc => {
    if (typeof fn !== 'function') throw invalidArgument(`${type}: handler must be a function`);
    if (schema === undefined) return (job, ctx) => fn(job as TypedJob<Payload, Result>, ctx);
    return async (job, ctx) => {
      const result = await schema['~standard'].validate(job.payload);
      // Stored and invalid: every attempt would fail alike, so the first one dead-letters it.
      if (result.issues !== undefined) throw new DeadLetterError(`${type}: the stored payload is invalid: ${describeIssues(result.issues)}`);
      return fn({ ...job, payload: result.value } as TypedJob<Payload, Result>, ctx);
    };
  };
  return Object.freeze({
    type,
    queue: queueName,
    schema,
    async enqueue(queue: JobQueue, payload: Payload, o?: TypedEnqueueOptions, tx?: InTransaction) {
      const job = await queue.enqueue(toOptions(await check(payload), o), tx);
      return job as TypedJob<Payload, Result>;
    },
    async enqueueMany(queue: JobQueue, payloads: Payload[], o?: TypedEnqueueOptions, tx?: InTransaction) {
      if (!Array.isArray(payloads)) throw invalidArgument(`${type}.enqueueMany: payloads must be an array`);
      const checked = await Promise.all(payloads.map((p, i) => check(p, payloads.length > 1 ? `${type}.enqueueMany (job ${i})` : undefined)));
      const jobs = await queue.enqueueMany(
        checked.map((p) => toOptions(p, o)),
        tx,
      );
      return jobs as Array<TypedJob<Payload, Result>>;
    },
    work(queue: JobQueue, fn: TypedHandler<Payload, Result>, o: Omit<WorkOptions, 'queue'> = {}) {
      return queue.work(type, handler(fn), { ...o, queue: queueName });
    },
    register(worker: Worker, fn: TypedHandler<Payload, Result>) {
      worker.register(type, handler(fn));
    },
    handler,
    check,
  });
}

/** Every issue with its path: `payload.to is invalid: Required; payload.items[0].sku is invalid: …`. */
function describeIssues(issues: ReadonlyArray<StandardSchemaIssue>): string {
  if (issues.length === 0) return 'payload is invalid';
  return issues.map((i) => `${issuePath(i.path)} is invalid: ${i.message}`).join('; ');
}

function issuePath(path: ReadonlyArray<StandardSchemaPathSegment> | undefined): string {
  let out = 'payload';
  for (const seg of path ?? []) {
    const key = typeof seg === 'object' && seg !== null ? seg.key : seg;
    if (typeof key === 'number') out += `[${key}]`;
    else if (typeof key === 'string' && /^[A-Za-z_$][\w$]*$/.test(key)) out += `.${key}`;
    else out += `[${JSON.stringify(String(key))}]`;
  }
  return out;
}
