import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { createTestSchema, type TestSchema } from '@q/testing';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { instrumentPool, qTracer, withOperation } from '../src/index.js';
import { CountingTracerProvider, memoryTracing, only } from './tracing.js';

const SECRET = 'payload-secret-7f3a';

let schema: TestSchema;
const pools: pg.Pool[] = [];
const tracing = memoryTracing();

function newPool(): pg.Pool {
  const pool = new pg.Pool({ connectionString: schema.dsn, max: 2 });
  pool.on('error', () => undefined);
  pools.push(pool);
  return pool;
}

beforeAll(async () => {
  schema = await createTestSchema('otel');
  await schema.pool().query('CREATE TABLE items (id int PRIMARY KEY, body text NOT NULL)');
});
afterAll(async () => {
  await Promise.all(pools.map((p) => p.end()));
  await schema.drop();
});
beforeEach(() => tracing.exporter.reset());

/** Everything a span exports, as text. */
function exported(s: ReadableSpan): string {
  return JSON.stringify({ name: s.name, attributes: s.attributes, events: s.events, status: s.status, links: s.links });
}

describe('instrumentPool with a tracer provider', () => {
  it('records a statement span with the SQL and no parameter values, under the operation span', async () => {
    const pool = instrumentPool(newPool(), tracing.provider);
    const tracer = qTracer(tracing.provider);
    await withOperation(
      tracer,
      'q.test.insert',
      async () => {
        await pool.query('INSERT INTO items (id, body) VALUES ($1, $2)', [1, SECRET]);
      },
      { 'q.queue': 'q1' },
    );

    const spans = tracing.spans();
    const op = only(spans, 'q.test.insert');
    const stmt = only(spans, 'INSERT');
    expect(op.attributes).toMatchObject({ 'q.queue': 'q1' });
    expect(op.kind).toBe(SpanKind.INTERNAL);
    expect(stmt.kind).toBe(SpanKind.CLIENT);
    expect(stmt.parentSpanContext?.spanId).toBe(op.spanContext().spanId);
    expect(stmt.spanContext().traceId).toBe(op.spanContext().traceId);
    expect(stmt.attributes).toEqual({
      'db.system': 'postgresql',
      'db.statement': 'INSERT INTO items (id, body) VALUES ($1, $2)',
      'db.operation': 'INSERT',
    });
    expect(stmt.status.code).toBe(SpanStatusCode.UNSET);
    for (const s of spans) expect(exported(s)).not.toContain(SECRET);
    // The statement ran for real.
    const { rows } = await schema.pool().query('SELECT body FROM items WHERE id = 1');
    expect(rows).toEqual([{ body: SECRET }]);
  });

  it('spans statements of checked-out clients (promise style), named statements and transactions', async () => {
    const pool = instrumentPool(newPool(), tracing.provider);
    await withOperation(qTracer(tracing.provider), 'q.test.tx', async () => {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        await client.query({ name: 'q_test_select', text: '/* why */ SELECT body FROM items WHERE id = $1', values: [1] });
        await client.query('COMMIT');
      } finally {
        client.release();
      }
    });
    const spans = tracing.spans();
    const op = only(spans, 'q.test.tx');
    const named = only(spans, 'SELECT q_test_select');
    expect(named.attributes['db.statement.name']).toBe('q_test_select');
    expect(named.attributes['db.operation']).toBe('SELECT');
    expect(spans.map((s) => s.name).sort()).toEqual(['BEGIN', 'COMMIT', 'SELECT q_test_select', 'q.test.tx']);
    for (const s of spans) if (s !== op) expect(s.parentSpanContext?.spanId).toBe(op.spanContext().spanId);
  });

  it('records a failing statement: status ERROR, SQLSTATE, scrubbed exception, on the operation too', async () => {
    const pool = instrumentPool(newPool(), tracing.provider);
    const err = await withOperation(qTracer(tracing.provider), 'q.test.fail', async () => {
      await pool.query('SELECT $1::uuid AS id', [SECRET]);
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect((err as { code?: string }).code).toBe('22P02'); // the caller still gets pg's own error

    const spans = tracing.spans();
    const stmt = only(spans, 'SELECT');
    const op = only(spans, 'q.test.fail');
    for (const s of [stmt, op]) {
      expect(s.status.code).toBe(SpanStatusCode.ERROR);
      expect(s.status.message).toBe('invalid input syntax for type uuid: "?"');
      const ex = s.events.find((e) => e.name === 'exception');
      expect(ex?.attributes?.['exception.type']).toBe('PostgresError 22P02');
      expect(exported(s)).not.toContain(SECRET);
    }
    expect(stmt.attributes['db.response.status_code']).toBe('22P02');
  });

  it('records a unique violation without the DETAIL that repeats the row', async () => {
    const pool = instrumentPool(newPool(), tracing.provider);
    await pool.query('INSERT INTO items (id, body) VALUES ($1, $2)', [2, SECRET]);
    tracing.exporter.reset();
    const err = await pool.query('INSERT INTO items (id, body) VALUES ($1, $2)', [2, SECRET]).catch((e: unknown) => e);
    expect((err as { detail?: string }).detail).toContain('(id)=(2)');
    const stmt = only(tracing.spans(), 'INSERT');
    expect(stmt.status.code).toBe(SpanStatusCode.ERROR);
    expect(stmt.attributes['db.response.status_code']).toBe('23505');
    expect(exported(stmt)).not.toContain('(id)=(2)');
    expect(exported(stmt)).not.toContain(SECRET);
  });

  it('describes each statement by its own text and name when many run (per-statement cache), callback style too', async () => {
    const pool = instrumentPool(newPool(), tracing.provider);
    const client = await pool.connect();
    try {
      for (let round = 0; round < 3; round++) {
        await client.query({ name: 'q_test_one', text: 'SELECT 1 AS one' });
        await client.query('UPDATE items SET body = body WHERE id = $1', [round]);
        await new Promise<void>((resolve, reject) => {
          client.query('DELETE FROM items WHERE id = -1', (err: Error | undefined) => (err ? reject(err) : resolve()));
        });
      }
    } finally {
      client.release();
    }
    const spans = tracing.spans();
    expect(spans.map((s) => s.name).sort()).toEqual([
      ...Array<string>(3).fill('DELETE'),
      ...Array<string>(3).fill('SELECT q_test_one'),
      ...Array<string>(3).fill('UPDATE'),
    ]);
    for (const s of spans) {
      const expected =
        s.name === 'DELETE'
          ? 'DELETE FROM items WHERE id = -1'
          : s.name === 'UPDATE'
            ? 'UPDATE items SET body = body WHERE id = $1'
            : 'SELECT 1 AS one';
      expect(s.attributes['db.statement']).toBe(expected);
      expect(s.attributes['db.operation']).toBe(s.name.split(' ')[0]);
      expect(s.attributes['db.statement.name']).toBe(s.name === 'SELECT q_test_one' ? 'q_test_one' : undefined);
    }
  });

  it('is idempotent: instrumenting twice gives one span per statement', async () => {
    const pool = instrumentPool(instrumentPool(newPool(), tracing.provider), tracing.provider);
    await pool.query('SELECT 1');
    expect(tracing.spans().map((s) => s.name)).toEqual(['SELECT']);
  });
});

describe('without a tracer provider', () => {
  it('creates no span objects, wraps nothing and does not fall back to the global provider', async () => {
    const counting = new CountingTracerProvider(tracing.provider);
    expect(trace.setGlobalTracerProvider(counting)).toBe(true);
    try {
      const raw = newPool();
      const listeners = raw.listenerCount('connect');
      const pool = instrumentPool(raw, undefined);
      expect(pool).toBe(raw);
      expect(raw.listenerCount('connect')).toBe(listeners);

      const tracer = qTracer(undefined);
      expect(tracer).toBeUndefined();
      const inner = Promise.resolve(7);
      // No wrapper promise either: the operation is the function's own promise.
      expect(withOperation(tracer, 'q.test.off', () => inner)).toBe(inner);
      // A synchronous throw still becomes a rejection, as with a tracer.
      const boom = () => {
        throw new Error('sync');
      };
      await expect(withOperation(tracer, 'q.test.off', boom)).rejects.toThrow('sync');
      await expect(withOperation(qTracer(tracing.provider), 'q.test.on', boom)).rejects.toThrow('sync');
      tracing.exporter.reset();

      await withOperation(tracer, 'q.test.off', async () => {
        await pool.query('SELECT $1::int AS n', [1]);
        const client = await pool.connect();
        try {
          expect(Object.prototype.hasOwnProperty.call(client, 'query')).toBe(false);
          expect(client.query).toBe(pg.Client.prototype.query);
          await client.query('SELECT 2');
        } finally {
          client.release();
        }
      });
      expect(counting.tracers).toBe(0);
      expect(counting.spans).toBe(0);
      expect(tracing.spans()).toEqual([]);
    } finally {
      trace.disable();
    }
  });

  it('counts exactly one span per statement and operation when a provider is given', async () => {
    // The counting provider itself can fail: the same flow with it passed in counts spans.
    const counting = new CountingTracerProvider(tracing.provider);
    const pool = instrumentPool(newPool(), counting);
    await withOperation(qTracer(counting), 'q.test.on', async () => {
      await pool.query('SELECT $1::int AS n', [1]);
      await pool.query('SELECT 2');
    });
    expect(counting.spans).toBe(3);
  });
});
