import { SpanKind, SpanStatusCode, context, trace, type Tracer, type TracerProvider } from '@opentelemetry/api';
import type pg from 'pg';

/** Instrumentation scope name of every q span and metric. */
export const INSTRUMENTATION_SCOPE = '@q/otel';

type QueryFn = (...args: unknown[]) => unknown;
const INSTRUMENTED = Symbol.for('q.otel.instrumented');

/**
 * Adds one span per statement to every connection `pool` opens from now on (`db.system` =
 * `postgresql`, `db.statement` = the parameterised SQL text — parameter values are never
 * recorded —, `db.operation`, `db.name` of a named statement). Statement spans are children of
 * the active span, normally an operation span from {@link withOperation}.
 *
 * Without a `tracerProvider` the pool is returned untouched: no wrapper, no span objects.
 * Call it before the pool opens its first connection.
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

/** Adds statement spans to one client (see {@link instrumentPool}). */
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
    const finish = (err?: unknown) => {
      if (err) {
        span.recordException(scrubError(err));
        span.setStatus({ code: SpanStatusCode.ERROR, message: scrubError(err).message });
      }
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
      return original(...args);
    }
    let result: unknown;
    try {
      result = original(...args);
    } catch (err) {
      finish(err);
      throw err;
    }
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
 * given; statement spans of `fn` become its children. Without a tracer it just calls `fn`.
 */
export async function withOperation<T>(
  tracer: Tracer | undefined,
  name: string,
  fn: () => Promise<T>,
  attributes?: Record<string, string | number | boolean>,
): Promise<T> {
  if (!tracer) return fn();
  const span = tracer.startSpan(name, { kind: SpanKind.INTERNAL, ...(attributes ? { attributes } : {}) });
  try {
    return await context.with(trace.setSpan(context.active(), span), fn);
  } catch (err) {
    span.recordException(scrubError(err));
    span.setStatus({ code: SpanStatusCode.ERROR, message: scrubError(err).message });
    throw err;
  } finally {
    span.end();
  }
}

/** The tracer q uses for operation spans, or `undefined` (no cost) without a provider. */
export function qTracer(tracerProvider?: TracerProvider): Tracer | undefined {
  return tracerProvider?.getTracer(INSTRUMENTATION_SCOPE);
}

function firstKeyword(sql: string): string {
  const m = /^\s*(?:--[^\n]*\n\s*)*([a-zA-Z]+)/.exec(sql);
  return (m?.[1] ?? 'query').toUpperCase();
}

// Postgres error messages can quote a failing row's values (e.g. unique violations): keep the
// code and the constraint, drop the DETAIL, so no payload reaches a span.
function scrubError(err: unknown): Error {
  if (!(err instanceof Error)) return new Error('query failed');
  const pgErr = err as Error & { code?: string; constraint?: string };
  const e = new Error(pgErr.message);
  e.name = pgErr.code ? `PostgresError ${pgErr.code}` : pgErr.name;
  return e;
}
