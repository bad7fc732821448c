import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { context, propagation, trace } from '@opentelemetry/api';
import { afterEach, describe, expect, it } from 'vitest';
import {
  flowMetrics,
  jobGroupMetrics,
  jobMetrics,
  quotaMetrics,
  requestMetrics,
  observeGauge,
  DEPRECATED_METRIC,
  METRIC,
  currentTraceparent,
  type Logger,
} from '../src/index.js';
import { startTelemetry, type Telemetry } from '../src/sdk.js';

const started: Telemetry[] = [];
const servers: http.Server[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((t) => t.shutdown()));
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

function start(opts: Parameters<typeof startTelemetry>[0]): Telemetry {
  const t = startTelemetry(opts);
  started.push(t);
  return t;
}

async function listen(handler: http.RequestListener): Promise<number> {
  const server = http.createServer(handler);
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return (server.address() as AddressInfo).port;
}

async function get(url: string): Promise<{ status: number; body: string }> {
  const res = await fetch(url);
  return { status: res.status, body: await res.text() };
}

describe('startTelemetry', () => {
  it('serves every q metric on the Prometheus endpoint', async () => {
    const t = start({ serviceName: 'q-test', prometheusPort: 0, prometheusHost: '127.0.0.1', registerGlobals: false });
    await t.ready;
    expect(t.prometheusPort).toBeGreaterThan(0);
    const jobs = jobMetrics(t.meterProvider);
    const reqs = requestMetrics(t.meterProvider);
    const quota = quotaMetrics(t.meterProvider);
    jobs.completed.add(1, { 'job.type': 'email', 'job.status': 'succeeded' });
    jobs.duration.record(0.2, { 'job.type': 'email', 'job.status': 'succeeded' });
    jobs.claimed.add(1, { 'job.queue': 'default' });
    jobs.leaseLost.add(1, { 'job.type': 'email' });
    jobs.workerFailures?.add(1, { 'q.operation': 'claim', 'error.kind': 'persistent', 'db.sqlstate': '25006' });
    jobs.idleRounds?.add(1, { 'q.operation': 'claim' });
    for (const c of Object.values(reqs)) c.add(2, { queue: 'q1' });
    quota.grants.add(3, { 'quota.kind': 'slots', 'quota.key_class': 'tenant' });
    quota.refusals.add(1, { 'quota.kind': 'rate', 'quota.key_class': 'tenant' });
    const groups = jobGroupMetrics(t.meterProvider);
    const limit = { 'q.limit.queue': 'webhooks', 'q.limit.type': '*' };
    groups.grants.add(1, limit);
    groups.refusals.add(2, { ...limit, 'q.limit.kind': 'concurrency' });
    groups.wait.record(0.3, limit);
    flowMetrics(t.meterProvider).started.add(1);
    jobs.flowReleaseLatency?.record(0.01, { 'job.type': 'join' });
    const stopBacklog = observeGauge(t.meterProvider, METRIC.requestsBacklog, { unit: '{request}', description: 'Pending requests' }, () => [
      { value: 42, attributes: { queue: 'q1' } },
    ]);
    const stopOwned = observeGauge(
      t.meterProvider,
      METRIC.partitionsOwned,
      { unit: '{partition}', description: 'Partitions leased' },
      async () => [{ value: 16, attributes: { queue: 'q1', owner: 'd1' } }],
    );

    const { status, body } = await get(`http://127.0.0.1:${t.prometheusPort}/metrics`);
    expect(status).toBe(200);
    for (const name of Object.values(METRIC)) expect(body).toContain(name.replace(/\./g, '_'));
    expect(body).toMatch(/q_jobs_completed(_total)?\{[^}]*job_type="email"[^}]*\} 1/);
    expect(body).toMatch(/q_requests_backlog\{[^}]*queue="q1"[^}]*\} 42/);
    expect(body).toMatch(/q_partitions_owned\{[^}]*owner="d1"[^}]*\} 16/);
    expect(body).toMatch(/q_jobs_group_refusals(_total)?\{[^}]*q_limit_kind="concurrency"[^}]*\} 2/);
    // A unit other than a count is part of the name: the Prometheus exporter appends none.
    expect(body).toMatch(/q_jobs_duration_seconds_bucket\{[^}]*le="0.25"[^}]*\} 1/);
    expect(body).toMatch(/# UNIT q_jobs_duration_seconds s/);
    // The former name is still served for one release, with the same data.
    expect(body).toMatch(/q_jobs_duration_bucket\{[^}]*le="0.25"[^}]*\} 1/);
    expect(body).toMatch(/HELP q_jobs_duration Deprecated: use q.jobs.duration.seconds/);
    expect(DEPRECATED_METRIC.jobsDuration).toBe('q.jobs.duration');

    expect((await get(`http://127.0.0.1:${t.prometheusPort}/other`)).status).toBe(404);
    stopBacklog();
    stopOwned();
  });

  it('rejects ready when the Prometheus port is taken', async () => {
    const port = await listen((_, res) => res.end());
    const t = start({ serviceName: 'q-test', prometheusPort: port, prometheusHost: '127.0.0.1', registerGlobals: false });
    await expect(t.ready).rejects.toMatchObject({ code: 'EADDRINUSE' });
    expect(t.prometheusPort).toBeUndefined();
  });

  it('validates its options', () => {
    expect(() => startTelemetry({ serviceName: '' })).toThrow(/serviceName/);
    expect(() => startTelemetry({ serviceName: 's', prometheusPort: 70000, registerGlobals: false })).toThrow(/prometheusPort/);
    expect(() => startTelemetry({ serviceName: 's', exportTimeoutMs: 0, registerGlobals: false })).toThrow(/exportTimeoutMs/);
  });

  it('exports traces and metrics over OTLP/HTTP, flushed by shutdown()', async () => {
    const received: Array<{ path: string; body: string }> = [];
    const port = await listen((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (c: string) => (body += c));
      req.on('end', () => {
        received.push({ path: req.url ?? '', body });
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    const t = startTelemetry({
      serviceName: 'q-otlp-test',
      otlpEndpoint: `http://127.0.0.1:${port}/`,
      otlpHeaders: { 'x-test': '1' },
      metricExportIntervalMs: 3_600_000, // only shutdown() can export them
    });
    // Globals: context manager (spans nest across await), propagator, providers.
    const tracer = trace.getTracer('q-test');
    let inner: string | undefined;
    let outer: string | undefined;
    await tracer.startActiveSpan('q.test.outer', async (span) => {
      outer = currentTraceparent();
      await new Promise((r) => setTimeout(r, 5));
      inner = currentTraceparent(); // the context survived the await
      const carrier: Record<string, string> = {};
      propagation.inject(context.active(), carrier);
      expect(carrier.traceparent).toBe(outer);
      span.end();
    });
    expect(inner).toBe(outer);
    jobMetrics(t.meterProvider).completed.add(1, { 'job.type': 'otlp', 'job.status': 'failed' });
    expect(received).toEqual([]); // batched, nothing sent yet

    await t.shutdown();
    const traces = received.filter((r) => r.path === '/v1/traces');
    const metrics = received.filter((r) => r.path === '/v1/metrics');
    expect(traces).toHaveLength(1);
    expect(metrics).toHaveLength(1);
    expect(traces[0]!.body).toContain('q.test.outer');
    expect(traces[0]!.body).toContain('q-otlp-test');
    expect(metrics[0]!.body).toContain(METRIC.jobsCompleted);
    // Globals are released: a later startTelemetry can register again.
    expect(currentTraceparent()).toBeUndefined();
    await t.shutdown(); // idempotent
    const again = start({ serviceName: 'again', registerGlobals: true });
    let seen: string | undefined;
    trace.getTracer('x').startActiveSpan('s', (s) => {
      seen = currentTraceparent();
      s.end();
    });
    expect(seen).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    expect(again.prometheusPort).toBeUndefined();
    await again.ready;
  });

  it('shutdown() resolves and logs when the collector is unreachable', async () => {
    // A port that just stopped listening on 127.0.0.1: connections are refused.
    const port = await listen((_, res) => res.end());
    await new Promise((r) => servers.pop()!.close(r));
    const warnings: Array<{ fields: Record<string, unknown>; msg?: string }> = [];
    const logger: Logger = {
      debug: () => undefined,
      info: () => undefined,
      error: () => undefined,
      warn: (fields, msg) => warnings.push({ fields, msg }),
    };
    const t = startTelemetry({
      serviceName: 'q-unreachable',
      otlpEndpoint: `http://127.0.0.1:${port}`,
      exportTimeoutMs: 1_500,
      logger,
      registerGlobals: false,
    });
    t.tracerProvider.getTracer('t').startSpan('lost').end();
    jobMetrics(t.meterProvider).completed.add(1, { 'job.type': 'x', 'job.status': 'succeeded' });
    const t0 = Date.now();
    await expect(t.shutdown()).resolves.toBeUndefined();
    const took = Date.now() - t0;
    expect(took).toBeLessThan(1_500 + 2_000 + 1_000);
    expect(warnings.map((w) => w.fields.what).sort()).toEqual(['metrics', 'traces']);
    for (const w of warnings) {
      expect(w.msg).toBe('telemetry export failed; the data was dropped');
      expect(w.fields.otlpEndpoint).toBe(`http://127.0.0.1:${port}`);
      expect(JSON.stringify(w.fields.err)).toMatch(/ECONNREFUSED|timeout|Timeout/);
    }
    await expect(t.shutdown()).resolves.toBeUndefined(); // idempotent, nothing logged again
    expect(warnings).toHaveLength(2);
  });

  it('shutdown() with the default logger writes the failure to stderr and resolves', async () => {
    const port = await listen((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(400).end('bad'));
    });
    const written: string[] = [];
    const write = process.stderr.write.bind(process.stderr);
    process.stderr.write = ((chunk: string | Uint8Array) => {
      written.push(String(chunk));
      return true;
    }) as typeof process.stderr.write;
    try {
      const t = startTelemetry({ serviceName: 'q-test', otlpEndpoint: `http://user:pw-secret@127.0.0.1:${port}`, registerGlobals: false });
      t.tracerProvider.getTracer('t').startSpan('lost').end();
      await expect(t.shutdown()).resolves.toBeUndefined();
    } finally {
      process.stderr.write = write;
    }
    const lines = written.filter((l) => l.startsWith('q telemetry: telemetry export failed'));
    expect(lines.length).toBeGreaterThanOrEqual(1);
    expect(lines.join('')).toContain('"what":"traces"');
    expect(lines.join('')).not.toContain('pw-secret');
  });

  it('reports a refused OTLP export from forceFlush', async () => {
    // 400 is not retryable, so the export fails at once (a closed port is retried for seconds).
    const port = await listen((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(400).end('bad'));
    });
    const warnings: string[] = [];
    const logger: Logger = { debug: () => undefined, info: () => undefined, error: () => undefined, warn: (_f, msg) => warnings.push(msg ?? '') };
    const t = startTelemetry({ serviceName: 'q-test', otlpEndpoint: `http://127.0.0.1:${port}`, registerGlobals: false, logger });
    t.tracerProvider.getTracer('t').startSpan('lost').end();
    await expect(t.forceFlush()).rejects.toBeDefined();
    expect(warnings).toContain('telemetry export failed; the data was dropped');
    await t.shutdown().catch(() => undefined);
  });
});
