import { parseArgs } from 'node:util';
import { QError, QErrorCode, isQError, validateDsn } from '@q/schema';
import { parseDuration } from './duration.js';

/** The logical queues the reference worker consumes (docs/design/jobs.md#known-queues). */
export const KNOWN_QUEUES: readonly string[] = ['default', 'deploy', 'backup', 'cleanup', 'notify', 'maintenance', 'webhook', 'task'];

/** Everything the worker process needs, resolved from flags and environment. */
export interface WorkerConfig {
  /** Postgres DSN; `undefined` = start the embedded server under {@link WorkerConfig.dataDir}. */
  dsn: string | undefined;
  /** Data directory of the embedded server (only used without a DSN). */
  dataDir: string;
  /** Jobs run at once by this process (≥ 1). */
  concurrency: number;
  /** First retry delay, doubled at every attempt (ms). */
  retryBaseMs: number;
  /** How long SIGTERM/SIGINT waits for running jobs before giving them back (ms). */
  shutdownTimeoutMs: number;
  /** Queues consumed; every one must be known. */
  queues: string[];
  /** Admin API bind address. */
  host: string;
  /** Admin API port; 0 = any free port (logged at start). */
  port: number;
  /** Bearer token of the admin API; `undefined` only with {@link WorkerConfig.insecureLocal}. */
  adminToken: string | undefined;
  /** Serve the admin API without a token (refused unless bound to loopback). */
  insecureLocal: boolean;
  /**
   * Serve the `@q/dashboard` web pages at `/dashboard` on the admin port: the pages ask for the
   * admin token as an HTTP Basic password (a browser sends no bearer token when it opens a page),
   * the actions need it as a bearer token; neither with `--insecure-local`.
   */
  dashboard: boolean;
  /** `Host` names the admin API answers to besides {@link WorkerConfig.host} (DNS-rebinding guard). */
  allowedHosts: string[];
  /** Largest accepted request body (bytes). */
  bodyLimit: number;
  /** HMAC-SHA256 key of outgoing webhooks and notifications; `undefined` = webhook jobs dead-letter. */
  webhookSecret: string | undefined;
  /** Per-attempt timeout of one webhook or notification POST (ms). */
  webhookTimeoutMs: number;
  /**
   * `webhook.deliver` jobs of one destination host (their group, see `POST /jobs`) running at once
   * across every worker of the database; `0` = no limit.
   */
  webhookHostConcurrency: number;
  /** Where `notify.send` posts; `undefined` = notifications become log lines. */
  notifyUrl: string | undefined;
  /**
   * Cron pattern (UTC) of the schedule {@link PURGE_SCHEDULE_NAME} that enqueues `maintenance.purge`;
   * `undefined` = off (a worker consuming `maintenance` then removes the schedule).
   */
  purgeCron: string | undefined;
  /** Finished jobs older than this are purged (ms). */
  purgeAfterMs: number;
  /** pino level, one of {@link LOG_LEVELS}. */
  logLevel: LogLevel;
  /** `pretty`: human lines; `json`: pino JSON lines; `auto`: pretty when stdout is a terminal. */
  logFormat: LogFormat;
  /** OTLP/HTTP endpoint of traces and metrics; `undefined` = no export. */
  otlpEndpoint: string | undefined;
  /** Port of a Prometheus `/metrics` endpoint; `undefined` = none. */
  prometheusPort: number | undefined;
  /** `service.name` of the exported traces and metrics. */
  serviceName: string;
}

/** The accepted `--log-level` values (pino's levels). */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
/** A `--log-level` value. */
export type LogLevel = (typeof LOG_LEVELS)[number];
/** The accepted `--log-format` values. */
export const LOG_FORMATS = ['auto', 'pretty', 'json'] as const;
/** A `--log-format` value. */
export type LogFormat = (typeof LOG_FORMATS)[number];

const OPTIONS = {
  dsn: { type: 'string' },
  'data-dir': { type: 'string' },
  concurrency: { type: 'string' },
  'retry-base': { type: 'string' },
  'shutdown-timeout': { type: 'string' },
  queues: { type: 'string' },
  listen: { type: 'string' },
  'admin-token': { type: 'string' },
  'insecure-local': { type: 'boolean' },
  dashboard: { type: 'boolean' },
  'allowed-hosts': { type: 'string' },
  'body-limit': { type: 'string' },
  'webhook-secret': { type: 'string' },
  'webhook-timeout': { type: 'string' },
  'webhook-host-concurrency': { type: 'string' },
  'notify-url': { type: 'string' },
  'purge-cron': { type: 'string' },
  'purge-interval': { type: 'string' },
  'purge-after': { type: 'string' },
  'log-level': { type: 'string' },
  'log-format': { type: 'string' },
  'otlp-endpoint': { type: 'string' },
  'prometheus-port': { type: 'string' },
  'service-name': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean', short: 'V' },
} as const;

/** Flag and environment reference printed by `--help` (and kept in docs/akerdock-worker.md). */
export const USAGE = `usage: akerdock-worker [flags]

  --dsn URL               AKERDOCK_DATABASE_URL, DATABASE_URL   (none: embedded Postgres in --data-dir)
  --data-dir DIR          AKERDOCK_DATA_DIR                     (.q/pgdata)
  --concurrency N         AKERDOCK_WORKER_CONCURRENCY           (10)
  --retry-base DUR        AKERDOCK_RETRY_BASE                   (5s)
  --shutdown-timeout DUR  AKERDOCK_SHUTDOWN_TIMEOUT             (30s)
  --queues A,B            AKERDOCK_QUEUES                       (all known queues)
  --listen HOST:PORT      AKERDOCK_LISTEN                       (127.0.0.1:8080)
  --admin-token TOKEN     AKERDOCK_ADMIN_TOKEN                  (required unless --insecure-local)
  --insecure-local        no token; only allowed on a loopback address
  --dashboard             AKERDOCK_DASHBOARD=1                  (off; web pages at /dashboard, the
                          admin token as the HTTP Basic password)
  --allowed-hosts A,B     AKERDOCK_ALLOWED_HOSTS                (Host names the API answers to besides
                          the --listen address; see DNS rebinding in docs/akerdock-worker.md)
  --body-limit BYTES      AKERDOCK_BODY_LIMIT                   (65536)
  --webhook-secret KEY    AKERDOCK_WEBHOOK_SECRET               (HMAC-SHA256 signing key)
  --webhook-timeout DUR   AKERDOCK_WEBHOOK_TIMEOUT              (10s per attempt)
  --webhook-host-concurrency N  AKERDOCK_WEBHOOK_HOST_CONCURRENCY (4 deliveries per destination
                          host at once, across all workers; 0 = no limit)
  --notify-url URL        AKERDOCK_NOTIFY_URL                   (none: notifications are logged)
  --purge-cron CRON       AKERDOCK_PURGE_CRON                   (*/5 * * * *; UTC; off = never; the
                          schedule akerdock.purge, set by the workers consuming maintenance)
  --purge-interval DUR    AKERDOCK_PURGE_INTERVAL               (older form of --purge-cron: an interval
                          dividing a minute, hour or day evenly; 0 = off)
  --purge-after DUR       AKERDOCK_PURGE_AFTER                  (30d)
  --log-level LEVEL       AKERDOCK_LOG_LEVEL                    (info; fatal error warn info debug trace silent)
  --log-format FMT        AKERDOCK_LOG_FORMAT                   (auto: pretty on a terminal, else JSON; pretty; json)
  --otlp-endpoint URL     OTEL_EXPORTER_OTLP_ENDPOINT           (none)
  --prometheus-port N     AKERDOCK_PROMETHEUS_PORT              (none)
  --service-name NAME     OTEL_SERVICE_NAME                     (akerdock-worker; service.name of traces and metrics)
  -h, --help              this text
  -V, --version           the version
Durations: 250ms, 5s, 1m30s, 30d; a bare number is milliseconds.
Exit status: 0 after a graceful stop; 1 a failure while running (database unreachable, port in
use); 2 bad flags or config. The cause is one stderr line; --log-level debug adds its stack.`;

/** Raised for bad flags or environment; the process prints it with {@link USAGE} and exits 2. */
export function configError(message: string): QError {
  return new QError(QErrorCode.CONFIG, message);
}

/**
 * Result of {@link parseConfig}: the config, or a request to print something and exit 0 (the
 * usage text, or the version when `version` is set).
 */
export type ParsedConfig = { help: true; version: boolean } | { help: false; config: WorkerConfig };

/**
 * Resolves the worker configuration: a flag wins over its environment variable, which wins over
 * the default. Throws `QError` `CONFIG` on any bad value, before anything is started.
 */
export function parseConfig(argv: string[], env: NodeJS.ProcessEnv = process.env): ParsedConfig {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({ args: argv, options: OPTIONS, allowPositionals: false, strict: true }));
  } catch (err) {
    throw configError((err as Error).message);
  }
  if (values.help) return { help: true, version: false };
  if (values.version) return { help: true, version: true };
  const pick = (flag: keyof typeof OPTIONS, ...vars: string[]): string | undefined => {
    const v = values[flag];
    if (typeof v === 'string') return v;
    for (const name of vars) if (env[name] !== undefined && env[name] !== '') return env[name];
    return undefined;
  };
  const duration = (flag: keyof typeof OPTIONS, envName: string, dflt: string, min: number): number => {
    const text = pick(flag, envName) ?? dflt;
    let ms: number;
    try {
      ms = parseDuration(text, `--${flag}`);
    } catch (err) {
      throw configError((err as Error).message);
    }
    if (ms < min) throw configError(`--${flag} must be at least ${min} ms, got "${text}"`);
    return ms;
  };
  const integer = (flag: keyof typeof OPTIONS, envName: string, dflt: number, min: number, max: number): number => {
    const text = pick(flag, envName);
    if (text === undefined) return dflt;
    if (!/^\d+$/.test(text.trim()) || Number(text) < min || Number(text) > max) {
      throw configError(`--${flag} must be an integer from ${min} to ${max}, got "${text}"`);
    }
    return Number(text);
  };

  const queues = (pick('queues', 'AKERDOCK_QUEUES') ?? KNOWN_QUEUES.join(','))
    .split(',')
    .map((q) => q.trim())
    .filter(Boolean);
  const unknown = queues.filter((q) => !KNOWN_QUEUES.includes(q));
  if (queues.length === 0 || unknown.length > 0) {
    throw configError(`--queues: unknown queue(s) ${JSON.stringify(unknown)} (known: ${KNOWN_QUEUES.join(', ')})`);
  }

  const { host, port } = parseListen(pick('listen', 'AKERDOCK_LISTEN') ?? '127.0.0.1:8080');
  const adminToken = pick('admin-token', 'AKERDOCK_ADMIN_TOKEN');
  const insecureLocal = values['insecure-local'] === true;
  if (adminToken !== undefined && adminToken.length < 16) {
    throw configError('the admin token must be at least 16 characters');
  }
  // A client sends it as `Authorization: Bearer <token>`: a blank, a control or a non-ASCII
  // character could never arrive intact, so such a token would lock everyone out.
  if (adminToken !== undefined && !/^[\x21-\x7e]+$/.test(adminToken)) {
    throw configError('the admin token must be printable ASCII without blanks (a Bearer header cannot carry it otherwise)');
  }
  if (adminToken === undefined && !insecureLocal) {
    throw configError('the admin API needs a token: set AKERDOCK_ADMIN_TOKEN (or --insecure-local on a loopback address)');
  }
  if (adminToken === undefined && !isLoopback(host)) {
    throw configError(`--insecure-local is only allowed on a loopback address, not "${host}"`);
  }

  const allowedHosts = (pick('allowed-hosts', 'AKERDOCK_ALLOWED_HOSTS') ?? '')
    .split(',')
    .map((h) => h.trim())
    .filter(Boolean);
  for (const h of allowedHosts) {
    if (!/^[A-Za-z0-9.-]+$|^[0-9A-Fa-f:.]+$/.test(h)) throw configError(`--allowed-hosts: ${JSON.stringify(h)} is not a host name`);
  }

  const optionalUrl = (flag: keyof typeof OPTIONS, ...vars: string[]): string | undefined => {
    const text = pick(flag, ...vars);
    if (text === undefined) return undefined;
    let u: URL;
    try {
      u = new URL(text);
    } catch {
      throw configError(`--${flag} is not a URL`);
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw configError(`--${flag} must be http(s)`);
    return text;
  };
  const prometheus = pick('prometheus-port', 'AKERDOCK_PROMETHEUS_PORT');
  const oneOf = <T extends string>(flag: keyof typeof OPTIONS, envName: string, allowed: readonly T[], dflt: T): T => {
    const text = pick(flag, envName) ?? dflt;
    if (!(allowed as readonly string[]).includes(text)) {
      throw configError(`--${flag} must be one of ${allowed.join(', ')}, got "${text}"`);
    }
    return text as T;
  };
  const dsn = pick('dsn', 'AKERDOCK_DATABASE_URL', 'DATABASE_URL');
  if (dsn !== undefined) {
    try {
      validateDsn(dsn);
    } catch (err) {
      // The message already shows the DSN with its credentials redacted.
      if (isQError(err, 'UNSUPPORTED_DSN')) throw configError(`--dsn: ${err.message}`);
      throw err;
    }
  }

  return {
    help: false,
    config: {
      dsn,
      dataDir: pick('data-dir', 'AKERDOCK_DATA_DIR') ?? '.q/pgdata',
      concurrency: integer('concurrency', 'AKERDOCK_WORKER_CONCURRENCY', 10, 1, 1000),
      retryBaseMs: duration('retry-base', 'AKERDOCK_RETRY_BASE', '5s', 1),
      shutdownTimeoutMs: duration('shutdown-timeout', 'AKERDOCK_SHUTDOWN_TIMEOUT', '30s', 0),
      queues,
      host,
      port,
      adminToken,
      insecureLocal: adminToken === undefined,
      dashboard: values.dashboard === true || ['1', 'true', 'on'].includes(env.AKERDOCK_DASHBOARD ?? ''),
      allowedHosts,
      bodyLimit: integer('body-limit', 'AKERDOCK_BODY_LIMIT', 65_536, 1_024, 16 * 1024 * 1024),
      webhookSecret: pick('webhook-secret', 'AKERDOCK_WEBHOOK_SECRET'),
      webhookTimeoutMs: duration('webhook-timeout', 'AKERDOCK_WEBHOOK_TIMEOUT', '10s', 1),
      webhookHostConcurrency: integer('webhook-host-concurrency', 'AKERDOCK_WEBHOOK_HOST_CONCURRENCY', 4, 0, 10_000),
      notifyUrl: optionalUrl('notify-url', 'AKERDOCK_NOTIFY_URL'),
      purgeCron: purgeCron(pick('purge-cron', 'AKERDOCK_PURGE_CRON'), pick('purge-interval', 'AKERDOCK_PURGE_INTERVAL')),
      purgeAfterMs: duration('purge-after', 'AKERDOCK_PURGE_AFTER', '30d', 0),
      logLevel: oneOf('log-level', 'AKERDOCK_LOG_LEVEL', LOG_LEVELS, 'info'),
      logFormat: oneOf('log-format', 'AKERDOCK_LOG_FORMAT', LOG_FORMATS, 'auto'),
      otlpEndpoint: optionalUrl('otlp-endpoint', 'OTEL_EXPORTER_OTLP_ENDPOINT'),
      prometheusPort: prometheus === undefined ? undefined : integer('prometheus-port', 'AKERDOCK_PROMETHEUS_PORT', 0, 1, 65_535),
      serviceName: pick('service-name', 'OTEL_SERVICE_NAME') ?? 'akerdock-worker',
    },
  };
}

/** Name of the schedule that enqueues `maintenance.purge` (docs/akerdock-worker.md#maintenancepurge-queue-maintenance). */
export const PURGE_SCHEDULE_NAME = 'akerdock.purge';
/** Default of `--purge-cron`: every 5 minutes, the old `--purge-interval` default. */
export const DEFAULT_PURGE_CRON = '*/5 * * * *';

/**
 * The purge schedule's pattern from `--purge-cron` or the older `--purge-interval` (kept because
 * deployments set it): an interval becomes the pattern of the same cadence when it divides a
 * minute, an hour or a day evenly, since a cron pattern can only repeat on such boundaries; any
 * other interval is refused, pointing at `--purge-cron`. `undefined` = off.
 */
function purgeCron(cronText: string | undefined, intervalText: string | undefined): string | undefined {
  if (cronText !== undefined && intervalText !== undefined) {
    throw configError('set --purge-cron (AKERDOCK_PURGE_CRON) or --purge-interval (AKERDOCK_PURGE_INTERVAL), not both');
  }
  if (cronText !== undefined) {
    const cron = cronText.trim();
    if (cron === 'off') return undefined;
    // The full check (croner's) runs at start through JobQueue.schedule; this catches the usual slip.
    const fields = cron.split(/\s+/).length;
    if (fields !== 5 && fields !== 6) {
      throw configError(`--purge-cron must be a cron pattern of 5 fields, or 6 with seconds first, or off; got "${cronText}"`);
    }
    return cron;
  }
  if (intervalText === undefined) return DEFAULT_PURGE_CRON;
  let ms: number;
  try {
    ms = parseDuration(intervalText, '--purge-interval');
  } catch (err) {
    throw configError((err as Error).message);
  }
  if (ms === 0) return undefined;
  const cron = intervalCron(ms);
  if (cron === undefined) {
    throw configError(
      `--purge-interval "${intervalText}" does not divide a minute, an hour or a day evenly, so no cron pattern repeats at it: ` +
        `set --purge-cron (AKERDOCK_PURGE_CRON) instead, e.g. "*/5 * * * *"`,
    );
  }
  return cron;
}

/** The cron pattern repeating every `ms`, when `ms` divides a minute, an hour or a day; else `undefined`. */
export function intervalCron(ms: number): string | undefined {
  if (ms <= 0 || ms % 1_000 !== 0) return undefined;
  const s = ms / 1_000;
  if (s < 60) return 60 % s === 0 ? (s === 1 ? '* * * * * *' : `*/${s} * * * * *`) : undefined;
  if (s % 60 !== 0) return undefined;
  const m = s / 60;
  if (m < 60) return 60 % m === 0 ? (m === 1 ? '* * * * *' : `*/${m} * * * *`) : undefined;
  if (m % 60 !== 0) return undefined;
  const h = m / 60;
  if (h < 24) return 24 % h === 0 ? (h === 1 ? '0 * * * *' : `0 */${h} * * *`) : undefined;
  return h === 24 ? '0 0 * * *' : undefined;
}

/** Splits `host:port` (`[::1]:8080` for IPv6). */
function parseListen(text: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(text.trim());
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65_535) throw configError(`--listen must be HOST:PORT, got "${text}"`);
  return { host: (m[1] ?? m[2]) as string, port };
}

/** True for addresses only this machine can reach. */
export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}
