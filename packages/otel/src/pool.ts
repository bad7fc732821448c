import { SpanKind, SpanStatusCode, context, trace, type Span, type SpanOptions, type Tracer, type TracerProvider } from '@opentelemetry/api';
import type pg from 'pg';
import { linksFromTraceparent } from './propagation.js';

/** Instrumentation scope name of every q span and metric. */
export const INSTRUMENTATION_SCOPE = '@q/otel';

type QueryFn = (...args: unknown[]) => unknown;
const INSTRUMENTED = Symbol.for('q.otel.instrumented');

/**
 * Adds one span per statement to every connection `pool` opens from now on (`db.system` =
 * `postgresql`, `db.statement` = the parameterised SQL text — parameter values are never
 * recorded —, `db.operation` = the statement's first keyword, `db.statement.name` of a named
 * prepared statement). Statement spans are children of the active span, normally an operation
 * span from {@link withOperation}. A failing statement's span records the SQLSTATE
 * (`db.response.status_code`) and a scrubbed exception, with status ERROR.
 *
 * Without a `tracerProvider` the pool is returned untouched: no wrapper, no listener, no span
 * objects. Call it before the pool opens its first connection (`openPool`'s `instrument` option).
 */
export function instrumentPool<P extends pg.Pool>(pool: P, tracerProvider?: TracerProvider): P {
  if (!tracerProvider) return pool;
  const marked = pool as P & { [INSTRUMENTED]?: boolean };
  if (marked[INSTRUMENTED]) return pool;
  marked[INSTRUMENTED] = true;
  const tracer = tracerProvider.getTracer(INSTRUMENTATION_SCOPE);
  pool.on('connect', (client) => instrumentClient(client, tracer));
  return pool;
}

/** Adds statement spans to one client (see {@link instrumentPool}). Idempotent. */
export function instrumentClient(client: pg.ClientBase, tracer: Tracer): void {
  const target = client as unknown as { query: QueryFn; [INSTRUMENTED]?: boolean };
  if (target[INSTRUMENTED]) return;
  target[INSTRUMENTED] = true;
  const original = target.query.bind(client) as QueryFn;
  target.query = (...args: unknown[]) => {
    const config = args[0];
    const text = typeof config === 'string' ? config : ((config as { text?: string } | undefined)?.text ?? '');
    const name = typeof config === 'object' && config ? (config as { name?: string }).name : undefined;
    const operation = firstKeyword(text);
    const span = tracer.startSpan(
      name ? `${operation} ${name}` : operation,
      {
        kind: SpanKind.CLIENT,
        attributes: {
          'db.system': 'postgresql',
          'db.statement': text,
          'db.operation': operation,
          ...(name ? { 'db.statement.name': name } : {}),
        },
      },
      context.active(),
    );
    let ended = false;
    const finish = (err?: unknown) => {
      if (ended) return;
      ended = true;
      if (err) recordError(span, err);
      span.end();
    };
    const last = args[args.length - 1];
    if (typeof last === 'function') {
      // Callback style (pg's Pool.query uses it).
      const cb = last as (err: unknown, res: unknown) => void;
      args[args.length - 1] = (err: unknown, res: unknown) => {
        finish(err);
        cb(err, res);
      };
    }
    let result: unknown;
    try {
      result = original(...args);
    } catch (err) {
      finish(err);
      throw err;
    }
    if (typeof last === 'function') return result;
    if (result && typeof (result as Promise<unknown>).then === 'function') {
      (result as Promise<unknown>).then(
        () => finish(),
        (err: unknown) => finish(err),
      );
    } else {
      // Submittables (cursors, streams) end on their own events.
      const sub = result as { once?: (ev: string, fn: (e?: unknown) => void) => void } | undefined;
      if (sub?.once) {
        sub.once('end', () => finish());
        sub.once('error', (e) => finish(e));
      } else finish();
    }
    return result;
  };
}

/**
 * Runs `fn` inside an operation span named `name` (e.g. `q.store.dispatch`) when a tracer is
 * given; statement spans of `fn` become its children. A thrown error is recorded (scrubbed) with
 * status ERROR and rethrown.
 *
 * Without a tracer it returns `fn()` itself: no span, no context, no extra promise. (Callers that
 * want the no-provider path allocation-free should also skip building `attributes`.)
 */
export function withOperation<T>(
  tracer: Tracer | undefined,
  name: string,
  fn: () => Promise<T>,
  attributes?: Record<string, string | number | boolean>,
): Promise<T> {
  if (!tracer) {
    try {
      return fn();
    } catch (err) {
      // Same contract as the traced path (an async function): a synchronous throw rejects.
      return Promise.reject(err);
    }
  }
  return traced(tracer, name, fn, { kind: SpanKind.INTERNAL, ...(attributes ? { attributes } : {}) });
}

/**
 * Runs a consumer's processing of one message (`q.jobs.process`, `q.partition-consumer.handle`)
 * inside a span of kind CONSUMER that is active for `fn`. The span starts a trace of its own,
 * **linked** to the producer's span when `traceparent` is a valid W3C value: a message is handled
 * later, maybe more than once, so it is not a child of the enqueue.
 */
export function withConsumerSpan<T>(
  tracer: Tracer,
  name: string,
  fn: () => Promise<T>,
  opts: { attributes: Record<string, string | number | boolean>; traceparent?: string | undefined },
): Promise<T> {
  return traced(tracer, name, fn, {
    kind: SpanKind.CONSUMER,
    root: true,
    attributes: opts.attributes,
    links: linksFromTraceparent(opts.traceparent),
  });
}

async function traced<T>(tracer: Tracer, name: string, fn: () => Promise<T>, options: SpanOptions): Promise<T> {
  const span = tracer.startSpan(name, options);
  try {
    return await context.with(trace.setSpan(context.active(), span), fn);
  } catch (err) {
    recordError(span, err);
    throw err;
  } finally {
    span.end();
  }
}

/** The tracer q uses for operation spans, or `undefined` (no cost) without a provider. */
export function qTracer(tracerProvider?: TracerProvider): Tracer | undefined {
  return tracerProvider?.getTracer(INSTRUMENTATION_SCOPE);
}

/**
 * Records `err` on `span` without leaking data: the exception is scrubbed (see
 * {@link scrubError}), the status set to ERROR, and a Postgres SQLSTATE kept as
 * `db.response.status_code`.
 */
export function recordError(span: Span, err: unknown): void {
  const scrubbed = scrubError(err);
  const code = sqlState(err);
  if (code) span.setAttribute('db.response.status_code', code);
  span.recordException(scrubbed);
  span.setStatus({ code: SpanStatusCode.ERROR, message: scrubbed.message });
}

function firstKeyword(sql: string): string {
  const m = /^\s*(?:(?:--[^\n]*\n|\/\*[\s\S]*?\*\/)\s*)*([a-zA-Z]+)/.exec(sql);
  return (m?.[1] ?? 'query').toUpperCase();
}

// A Postgres error (pg's DatabaseError) carries a severity and a five-character SQLSTATE; a
// Node system error may have a five-letter code too (EPIPE), hence the severity check.
function sqlState(err: unknown): string | undefined {
  const e = err as { code?: unknown; severity?: unknown } | null | undefined;
  const code = e?.code;
  return typeof code === 'string' && typeof e?.severity === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/**
 * A copy of `err` safe to put on a span. Postgres messages can quote an input value
 * (`invalid input syntax for type uuid: "…"`), and their DETAIL repeats a row's values (unique
 * violations): keep the message with any trailing quoted value replaced by `"?"`, name it after
 * the SQLSTATE, drop everything else.
 */
export function scrubError(err: unknown): Error {
  if (!(err instanceof Error)) return new Error('operation failed');
  const code = sqlState(err);
  const message = code ? err.message.replace(/: (".*"|'.*')$/s, ': "?"') : err.message;
  const e = new Error(message);
  e.name = code ? `PostgresError ${code}` : err.name;
  // The original stack starts with the original message; keep only its frames.
  const frames = err.stack?.split('\n').filter((l) => /^\s+at /.test(l));
  e.stack = `${e.name}: ${message}${frames?.length ? `\n${frames.join('\n')}` : ''}`;
  return e;
}
