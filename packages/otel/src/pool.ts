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

/** What a statement span carries, computed once per distinct statement (see {@link statementInfo}). */
interface StatementInfo {
  readonly text: string;
  readonly spanName: string;
  readonly options: SpanOptions;
}

type Callback = (err: unknown, res: unknown) => void;

/** Adds statement spans to one client (see {@link instrumentPool}). Idempotent. */
export function instrumentClient(client: pg.ClientBase, tracer: Tracer): void {
  const target = client as unknown as { query: QueryFn; [INSTRUMENTED]?: boolean };
  if (target[INSTRUMENTED]) return;
  target[INSTRUMENTED] = true;
  const original = target.query;
  // Fixed arity, no rest/spread: pg's own signature is (config, values?, callback?), and it
  // tells a callback in second place apart by its type, so passing `undefined` through is exact.
  target.query = function instrumentedQuery(config: unknown, values?: unknown, callback?: unknown): unknown {
    const info = statementInfo(config);
    const span = tracer.startSpan(info.spanName, info.options, context.active());
    if (typeof callback === 'function') {
      // Callback style (pg's Pool.query uses it): the span ends in the callback, no promise.
      return callOriginal(original, client, span, config, values, endingCallback(span, callback as Callback));
    }
    if (typeof values === 'function') return callOriginal(original, client, span, config, endingCallback(span, values as Callback), undefined);
    const result = callOriginal(original, client, span, config, values, undefined);
    if (result !== null && typeof result === 'object' && typeof (result as Promise<unknown>).then === 'function') {
      (result as Promise<unknown>).then(
        () => span.end(),
        (err: unknown) => endWithError(span, err),
      );
    } else {
      // Submittables (cursors, streams) end on their own events, maybe both: end once.
      const sub = result as { once?: (ev: string, fn: (e?: unknown) => void) => void } | undefined;
      if (sub?.once) {
        let ended = false;
        const finish = (err?: unknown) => {
          if (ended) return;
          ended = true;
          if (err) endWithError(span, err);
          else span.end();
        };
        sub.once('end', () => finish());
        sub.once('error', finish);
      } else span.end();
    }
    return result;
  };
}

function callOriginal(original: QueryFn, client: unknown, span: Span, config: unknown, values: unknown, callback: unknown): unknown {
  try {
    return callback === undefined ? original.call(client, config, values) : original.call(client, config, values, callback);
  } catch (err) {
    endWithError(span, err);
    throw err;
  }
}

function endingCallback(span: Span, cb: Callback): Callback {
  return (err, res) => {
    if (err) endWithError(span, err);
    else span.end();
    cb(err, res);
  };
}

function endWithError(span: Span, err: unknown): void {
  recordError(span, err);
  span.end();
}

// Statement texts of a process are few (q's are named constants), so span name, attributes and
// options are built once per distinct statement and shared by every span of it (the SDK copies
// attributes into the span). The caches are bounded so a caller sending ever-new SQL texts
// cannot grow them without limit: past the bound, new texts are described per call.
const MAX_CACHED = 1024;
const byName = new Map<string, StatementInfo>();
const byText = new Map<string, StatementInfo>();

/** Span name and options of the statement `config` (a SQL string or a pg query config). */
function statementInfo(config: unknown): StatementInfo {
  let text = '';
  let name: string | undefined;
  if (typeof config === 'string') text = config;
  else if (typeof config === 'object' && config !== null) {
    const c = config as { text?: unknown; name?: unknown };
    if (typeof c.text === 'string') text = c.text;
    if (typeof c.name === 'string' && c.name) name = c.name;
  }
  const cache = name === undefined ? byText : byName;
  const key = name ?? text;
  const hit = cache.get(key);
  // A name is bound to one text per connection; compare anyway so a span never shows stale SQL.
  if (hit !== undefined && hit.text === text) return hit;
  const info = describeStatement(text, name);
  if (hit !== undefined || cache.size < MAX_CACHED) cache.set(key, info);
  return info;
}

function describeStatement(text: string, name: string | undefined): StatementInfo {
  const operation = firstKeyword(text);
  const attributes: Record<string, string> = {
    'db.system': 'postgresql',
    'db.statement': text,
    'db.operation': operation,
  };
  if (name !== undefined) attributes['db.statement.name'] = name;
  return { text, spanName: name !== undefined ? `${operation} ${name}` : operation, options: { kind: SpanKind.CLIENT, attributes } };
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
  return traced(tracer, name, fn, attributes ? { kind: SpanKind.INTERNAL, attributes } : INTERNAL);
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

const INTERNAL: SpanOptions = { kind: SpanKind.INTERNAL };

// One context lookup, and one promise hop (a `then` on fn's promise) instead of an async
// function's await + finally.
function traced<T>(tracer: Tracer, name: string, fn: () => Promise<T>, options: SpanOptions): Promise<T> {
  const parent = context.active();
  const span = tracer.startSpan(name, options, parent);
  let result: Promise<T>;
  try {
    result = context.with(trace.setSpan(parent, span), fn);
  } catch (err) {
    endWithError(span, err);
    return Promise.reject(err);
  }
  return Promise.resolve(result).then(
    (value) => {
      span.end();
      return value;
    },
    (err: unknown) => {
      endWithError(span, err);
      throw err;
    },
  );
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
