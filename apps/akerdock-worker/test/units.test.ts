// Pure parts: config resolution, durations, signatures, status classification, OpenAPI document.
import { describe, expect, it } from 'vitest';
import { isQError } from '@q/schema';
import { parseConfig, type WorkerConfig } from '../src/config.js';
import { parseDuration } from '../src/duration.js';
import { classifyStatus } from '../src/handlers/http-post.js';
import { signWebhook, verifyWebhook } from '../src/signing.js';
import { openApiDocument } from '../src/api/openapi.js';

const TOKEN = 'a-very-long-admin-token';
const cfg = (argv: string[], env: NodeJS.ProcessEnv = {}): WorkerConfig => {
  const r = parseConfig(argv, env);
  if (r.help) throw new Error('help');
  return r.config;
};
const configError = (fn: () => unknown) => {
  try {
    fn();
  } catch (err) {
    expect(isQError(err, 'CONFIG')).toBe(true);
    return (err as Error).message;
  }
  throw new Error('no error');
};

describe('config', () => {
  it('takes the per-host webhook limit from --webhook-host-concurrency or the environment (0 = none), and refuses a bad one', () => {
    expect(cfg(['--webhook-host-concurrency', '2'], { AKERDOCK_ADMIN_TOKEN: TOKEN }).webhookHostConcurrency).toBe(2);
    expect(cfg([], { AKERDOCK_ADMIN_TOKEN: TOKEN, AKERDOCK_WEBHOOK_HOST_CONCURRENCY: '0' }).webhookHostConcurrency).toBe(0);
    expect(configError(() => cfg(['--webhook-host-concurrency', '-1'], { AKERDOCK_ADMIN_TOKEN: TOKEN }))).toMatch(/webhook-host-concurrency/);
  });

  it('serves the dashboard with --dashboard or AKERDOCK_DASHBOARD=1', () => {
    expect(cfg(['--dashboard'], { AKERDOCK_ADMIN_TOKEN: TOKEN }).dashboard).toBe(true);
    expect(cfg([], { AKERDOCK_ADMIN_TOKEN: TOKEN, AKERDOCK_DASHBOARD: '1' }).dashboard).toBe(true);
    expect(cfg([], { AKERDOCK_ADMIN_TOKEN: TOKEN, AKERDOCK_DASHBOARD: '0' }).dashboard).toBe(false);
  });

  it('has the documented defaults (docs/akerdock-worker.md#process)', () => {
    const c = cfg([], { AKERDOCK_ADMIN_TOKEN: TOKEN });
    expect(c).toMatchObject({
      dsn: undefined,
      dataDir: '.q/pgdata',
      concurrency: 10,
      retryBaseMs: 5_000,
      shutdownTimeoutMs: 30_000,
      host: '127.0.0.1',
      port: 8080,
      adminToken: TOKEN,
      insecureLocal: false,
      dashboard: false,
      bodyLimit: 65_536,
      webhookHostConcurrency: 4,
      purgeAfterMs: 30 * 86_400_000,
      purgeCron: '*/5 * * * *',
    });
    expect(c.queues).toEqual(['default', 'deploy', 'backup', 'cleanup', 'notify', 'maintenance', 'webhook', 'task']);
  });

  it('takes the purge schedule from --purge-cron, or maps the older --purge-interval when a cron pattern can repeat at it', () => {
    const env = { AKERDOCK_ADMIN_TOKEN: TOKEN };
    expect(cfg(['--purge-cron', '0 3 * * *'], env).purgeCron).toBe('0 3 * * *');
    expect(cfg([], { ...env, AKERDOCK_PURGE_CRON: '*/10 * * * * *' }).purgeCron).toBe('*/10 * * * * *');
    expect(cfg(['--purge-cron', 'off'], env).purgeCron).toBeUndefined();
    const mapped = ['0', '1s', '15s', '1m', '5m', '30m', '1h', '6h', '1d', '1m0s'].map((d) => cfg(['--purge-interval', d], env).purgeCron);
    expect(mapped).toEqual([
      undefined,
      '* * * * * *',
      '*/15 * * * * *',
      '* * * * *',
      '*/5 * * * *',
      '*/30 * * * *',
      '0 * * * *',
      '0 */6 * * *',
      '0 0 * * *',
      '* * * * *',
    ]);
    for (const d of ['7m', '90s', '1500ms', '5h', '2d']) {
      expect(configError(() => cfg(['--purge-interval', d], env))).toMatch(/does not divide a minute, an hour or a day evenly.*--purge-cron/);
    }
    expect(configError(() => cfg(['--purge-cron', '0 3 * * *', '--purge-interval', '5m'], env))).toMatch(/not both/);
    expect(configError(() => cfg(['--purge-interval', '5m'], { ...env, AKERDOCK_PURGE_CRON: '0 3 * * *' }))).toMatch(/not both/);
    expect(configError(() => cfg(['--purge-cron', 'hourly'], env))).toMatch(/--purge-cron must be a cron pattern of 5 fields/);
    expect(configError(() => cfg(['--purge-interval', 'soon'], env))).toMatch(/--purge-interval/);
  });

  it('prefers flags over environment', () => {
    const c = cfg(['--concurrency', '3', '--retry-base', '200ms', '--dsn', 'postgres://x@h/db'], {
      AKERDOCK_WORKER_CONCURRENCY: '7',
      AKERDOCK_RETRY_BASE: '9s',
      DATABASE_URL: 'postgres://y@h/db',
      AKERDOCK_ADMIN_TOKEN: TOKEN,
    });
    expect(c.concurrency).toBe(3);
    expect(c.retryBaseMs).toBe(200);
    expect(c.dsn).toBe('postgres://x@h/db');
    expect(cfg([], { AKERDOCK_SHUTDOWN_TIMEOUT: '1m30s', AKERDOCK_ADMIN_TOKEN: TOKEN }).shutdownTimeoutMs).toBe(90_000);
  });

  it('refuses to serve the API without a token unless --insecure-local on loopback', () => {
    expect(configError(() => cfg([]))).toMatch(/AKERDOCK_ADMIN_TOKEN/);
    expect(cfg(['--insecure-local']).insecureLocal).toBe(true);
    expect(cfg(['--insecure-local', '--listen', '[::1]:0']).host).toBe('::1');
    expect(configError(() => cfg(['--insecure-local', '--listen', '0.0.0.0:8080']))).toMatch(/loopback/);
    expect(configError(() => cfg(['--admin-token', 'short']))).toMatch(/16 characters/);
  });

  it('rejects bad values before anything starts', () => {
    const env = { AKERDOCK_ADMIN_TOKEN: TOKEN };
    expect(configError(() => cfg(['--concurrency', '0'], env))).toMatch(/concurrency/);
    expect(configError(() => cfg(['--retry-base', 'soon'], env))).toMatch(/retry-base/);
    expect(configError(() => cfg(['--queues', 'default,nope'], env))).toMatch(/nope/);
    expect(configError(() => cfg(['--listen', 'nowhere'], env))).toMatch(/HOST:PORT/);
    expect(configError(() => cfg(['--notify-url', 'ftp://x'], env))).toMatch(/http/);
    expect(configError(() => cfg(['--bogus'], env))).toMatch(/bogus/);
  });

  it('rejects an unknown log level or format and a DSN that is not Postgres as CONFIG errors', () => {
    const env = { AKERDOCK_ADMIN_TOKEN: TOKEN };
    expect(configError(() => cfg(['--log-level', 'loud'], env))).toMatch(
      /--log-level must be one of fatal, error, warn, info, debug, trace, silent, got "loud"/,
    );
    expect(configError(() => cfg([], { ...env, AKERDOCK_LOG_LEVEL: 'verbose' }))).toMatch(/verbose/);
    expect(configError(() => cfg(['--log-format', 'xml'], env))).toMatch(/--log-format must be one of auto, pretty, json/);
    const dsn = configError(() => cfg(['--dsn', 'mysql://app:hunter2-secret@db/app'], env));
    expect(dsn).toMatch(/--dsn: unsupported DSN scheme/);
    expect(dsn).not.toContain('hunter2-secret');
    expect(configError(() => cfg([], { ...env, DATABASE_URL: 'sqlite:///tmp/x' }))).toMatch(/--dsn/);
    expect(cfg(['--dsn', 'postgresql://u@h/db', '--log-level', 'debug', '--log-format', 'json'], env)).toMatchObject({
      dsn: 'postgresql://u@h/db',
      logLevel: 'debug',
      logFormat: 'json',
    });
    expect(cfg([], env)).toMatchObject({ logLevel: 'info', logFormat: 'auto', serviceName: 'akerdock-worker' });
    expect(cfg(['--service-name', 'billing-worker'], env).serviceName).toBe('billing-worker');
    expect(cfg([], { ...env, OTEL_SERVICE_NAME: 'from-env' }).serviceName).toBe('from-env');
  });

  it('answers --version and --help without a config', () => {
    expect(parseConfig(['--version'], {})).toEqual({ help: true, version: true });
    expect(parseConfig(['-V'], {})).toEqual({ help: true, version: true });
    expect(parseConfig(['--help'], {})).toEqual({ help: true, version: false });
  });

  it('parses durations', () => {
    expect(parseDuration('250ms', 'x')).toBe(250);
    expect(parseDuration('1h2m3s', 'x')).toBe(3_723_000);
    expect(parseDuration('1.5s', 'x')).toBe(1_500);
    expect(parseDuration('30d', 'x')).toBe(30 * 86_400_000);
    expect(parseDuration('42', 'x')).toBe(42);
    expect(() => parseDuration('5 s', 'x')).toThrow(/duration/);
    expect(() => parseDuration('', 'x')).toThrow(/duration/);
  });
});

describe('webhook signature', () => {
  it('verifies its own signature and nothing else', () => {
    const sig = signWebhook('s3cret', '{"a":1}', 1_700_000_000);
    expect(sig).toMatch(/^t=1700000000,v1=[0-9a-f]{64}$/);
    const at = { nowSeconds: 1_700_000_010 };
    expect(verifyWebhook('s3cret', '{"a":1}', sig, at)).toBe(true);
    expect(verifyWebhook('s3cret', '{"a":2}', sig, at)).toBe(false);
    expect(verifyWebhook('other', '{"a":1}', sig, at)).toBe(false);
    expect(verifyWebhook('s3cret', '{"a":1}', sig, { nowSeconds: 1_700_001_000 })).toBe(false); // replayed later
    expect(verifyWebhook('s3cret', '{"a":1}', undefined, at)).toBe(false);
    expect(verifyWebhook('s3cret', '{"a":1}', 't=1700000000,v1=zz', at)).toBe(false);
  });

  it('classifies receiver answers', () => {
    expect([200, 201, 204, 299].map(classifyStatus)).toEqual(['delivered', 'delivered', 'delivered', 'delivered']);
    expect([400, 401, 404, 410, 422].map(classifyStatus)).toEqual(['give_up', 'give_up', 'give_up', 'give_up', 'give_up']);
    expect([408, 429, 500, 502, 503, 301].map(classifyStatus)).toEqual(['retry', 'retry', 'retry', 'retry', 'retry', 'retry']);
  });
});

describe('OpenAPI document', () => {
  it('describes every route from the validation schemas', () => {
    const doc = openApiDocument('1.2.3') as {
      openapi: string;
      paths: Record<string, Record<string, { parameters?: Array<{ name: string; in: string }> }>>;
    };
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths).sort()).toEqual([
      '/flows/{id}',
      '/flows/{id}/cancel',
      '/flows/{id}/retry',
      '/groups',
      '/healthz',
      '/jobs',
      '/jobs/{uuid}',
      '/jobs/{uuid}/cancel',
      '/jobs/{uuid}/forget',
      '/jobs/{uuid}/retry',
      '/readyz',
      '/schedules',
      '/schedules/{name}',
      '/schedules/{name}/pause',
      '/schedules/{name}/resume',
    ]);
    expect(Object.keys(doc.paths['/jobs'] ?? {}).sort()).toEqual(['get', 'post']);
    const listParams = doc.paths['/jobs']?.get?.parameters?.map((p) => `${p.in}:${p.name}`);
    expect(listParams).toEqual(['query:status', 'query:queue', 'query:type', 'query:cursor', 'query:limit']);
    expect(doc.paths['/jobs']?.post?.parameters?.map((p) => p.name)).toEqual(['Idempotency-Key']);
    expect(doc.paths['/groups']?.get?.parameters?.map((p) => `${p.in}:${p.name}`)).toEqual(['query:queue', 'query:limit']);
  });
});
