// JSON Schema of the dispatcher configuration (docs/design/dispatcher.md#configuration-defaults, SQL transport). Field names
// are snake_case, as in the documented configuration.

/** A quota gate: concurrency slots or rate admissions per key (`metadata[attribute]`). */
export interface GateConfig {
  /** `concurrency`: at most `limit` requests of a key in flight; `rate`: at most `limit` per `window_ms`. */
  kind: 'concurrency' | 'rate';
  /** Metadata attribute that names the key (the tenant). Default `userid`. */
  attribute: string;
  limit: number;
  /** Sliding window of a rate gate, ms. */
  window_ms: number;
  /** Quota key prefix; key = `<prefix><attribute>:<value>`. Default `quota:`. */
  prefix: string;
  /**
   * How long a refused request waits in memory for the gate before going back to the queue
   * (undispatched, no result). Default 1000 ms; 0 = undispatch at once.
   */
  wait_ms: number;
  /**
   * `blocking` (default): a refused request waits / goes back to the queue. `classifying`
   * (concurrency gates): never blocks; a granted request is labelled `classification: reserved`
   * (and holds its slot), a refused one `overflow` and goes on (docs/design/dispatcher.md#gates) — for `tier-priority`.
   */
  gating_mode?: 'blocking' | 'classifying';
}

/** A worker pool (docs/design/dispatcher.md#components, #gates). */
export interface PoolConfig {
  id: string;
  /** HTTP calls in flight at once for all the pool's queues. */
  workers: number;
  /** Who gets the next free worker among the pool's waiting requests. */
  merge_policy: 'random-robin' | 'tier-priority';
  /** The pool gate: Continue / Wait (parked) / Refuse (back to the queue) / Drop (result). */
  gate_type?: string;
  gate_params?: Record<string, unknown>;
  /**
   * `tier-priority` pools only: header stamped on every request the pool sends, valued with the
   * request's lane (`0`..`5`). Absent: `x-gateway-priority`; `""` stamps nothing.
   */
  priority_header?: string;
  /**
   * `tier-priority` pools only: lane (`"0"`..`"5"`) → inference objective. A request of a listed
   * lane carries this objective (`x-llm-d-inference-objective`, replacing the queue's) instead of
   * the priority header: the objective names its priority.
   */
  lane_objectives?: Record<string, string>;
}

/** One request queue. */
export interface QueueConfig {
  queue_name: string;
  igw_base_url: string;
  request_path_url: string;
  inference_objective?: string;
  /** Result route of this queue's results; absent: the request's own route, else `result-sql`. */
  result_queue_name?: string;
  /** 0 = results never expire. */
  result_ttl_seconds: number;
  labels: Record<string, string>;
  gates: GateConfig[];
  /**
   * The queue gate (docs/design/dispatcher.md#gates): a budget gate sizes every poll (`floor(batch_size × budget)`),
   * and its per-message decision runs before the quota gates. Absent: none (budget 1).
   */
  gate_type?: string;
  /** Parameters of `gate_type` (numbers may be given as strings). */
  gate_params?: Record<string, unknown>;
  /** The worker pool serving this queue (`pools[].id`); absent: `default` when pools are configured. */
  worker_pool_id?: string;
}

/** A bearer API key of the Batch API, kept as its SHA-256 (never the key itself), and the tenant it names. */
export interface ApiKeyConfig {
  /** Lower-case hex SHA-256 of the key (`printf %s "$KEY" | sha256sum`). */
  sha256: string;
  /** The tenant: owner of the files and batches the key creates, and the quota key of their requests. */
  tenant: string;
}

/** The OpenAI-compatible Batch API (`/v1/files`, `/v1/batches`) the dispatcher serves when this section is present. */
export interface BatchApiConfig {
  /** Listening port; 0 = any free port. */
  port: number;
  /** Listening address (default `127.0.0.1`). */
  host: string;
  /** The request queue batch lines go to (`queues[].queue_name`); default the first queue. */
  queue?: string;
  api_keys: ApiKeyConfig[];
  /** Largest upload, bytes (default 200 MB, the reference API's). */
  max_file_bytes: number;
  /** Most lines of an upload (default 50,000). */
  max_file_lines: number;
  /** Seconds of the one completion window clients may ask for, `24h` (default 86,400; shorter for tests). */
  completion_window_seconds: number;
  /** How often the batch driver looks for work, ms. */
  driver_interval_ms: number;
  /** Lease of a batch to the process driving it, ms; another process takes it over once it lapses. */
  driver_lease_ms: number;
  /** Adaptive concurrency of batch traffic per endpoint (AIMD); on by default. */
  adaptive_concurrency: AdaptiveConcurrencyConfig;
}

/** `batch_api.adaptive_concurrency`: the AIMD window of batch calls in flight per endpoint. */
export interface AdaptiveConcurrencyConfig {
  /** Off: batch calls are bounded by `concurrency`, the pools and the gates only. */
  enabled: boolean;
  /** Window of an endpoint when it is first called (default 16, at most `max`). */
  initial: number;
  /** Smallest window (default 1). */
  min: number;
  /** Largest window (default `concurrency`; at most `concurrency`). */
  max: number;
  /** A call slower than this, ms, shrinks the window like a 429 (default 30,000). */
  latency_target_ms: number;
  /** Window growth per window's worth of calls that went well (default 1). */
  increase_step: number;
  /** Window multiplier on a 429, a 5xx or a slow call, in (0, 1) (default 0.5). */
  decrease_factor: number;
}

/** The whole configuration, defaults applied. */
export interface DispatcherConfig {
  /** Postgres DSN; absent → the embedded Postgres under `.q/pgdata` (`run`/`demo`). */
  url?: string;
  /** Dispatcher identity; default `<hostname>-<8 hex>` per process. */
  owner?: string;
  /**
   * `transaction`: `url` points at a transaction pooler (PgBouncer `pool_mode = transaction`):
   * every store (requests, quota) sends unnamed statements. Absent: a direct connection.
   */
  pooler?: 'transaction';
  /** The schema of q's tables (every store, quota included); absent: the connection's current schema. */
  schema?: string;
  lease_ttl_seconds: number;
  handoff_timeout_seconds: number;
  poll_interval_ms: number;
  batch_size: number;
  concurrency: number;
  result_batch_size: number;
  max_connections: number;
  cancel_check_batch_size: number;
  cancel_check_linger_ms: number;
  /** Bound of each HTTP attempt (capped by the request deadline). */
  request_timeout_ms: number;
  /** Wait for in-flight work after SIGTERM. */
  drain_timeout_ms: number;
  /** Retry backoff base and cap (docs/design/dispatcher.md#retry-algorithm: 2 s, 60 s). */
  retry_base_ms: number;
  retry_cap_ms: number;
  /** Fairness header name; "" disables it. */
  fairness_header: string;
  fairness_attribute: string;
  /** `/healthz` + `/readyz` port; -1 = off, 0 = any free port. */
  health_port: number;
  /** Prometheus `/metrics` port; -1 = off, 0 = any free port. */
  metrics_port: number;
  /**
   * Largest endpoint response body read (bytes, default 16 MiB, at most
   * {@link MAX_RESPONSE_BYTES_LIMIT}); a longer one ends the request with `INFERENCE_ERROR`
   * naming the limit.
   */
  max_response_bytes: number;
  /** Prometheus HTTP API base URL; required by the `prometheus-*` gates. */
  prometheus_url?: string;
  /** Cache lifetime of every metric source (scrape or query), ms; 0 disables the cache. */
  prometheus_cache_ttl_ms: number;
  /** How often the backlog gauge (`…_broker_backlog`) is refreshed, ms; 0 disables it. */
  metrics_backlog_poll_interval_ms: number;
  /** Bound of a pool-gate wait, ms (0 = until the request's deadline); then back to the queue. */
  gate_wait_timeout_ms: number;
  /** PEM CA bundle trusted for `https://` endpoints (instead of the system store). */
  tls_ca_file?: string;
  /** PEM client certificate and key for mutual TLS (both or neither). */
  tls_cert_file?: string;
  tls_key_file?: string;
  /** Server name (SNI and certificate check) to expect instead of the URL's host. */
  tls_server_name?: string;
  /** Skip certificate verification. Insecure; logged loudly at start. */
  tls_insecure_skip_verify: boolean;
  /** Worker pools; absent: no pool (each queue runs up to `concurrency` calls). */
  pools?: PoolConfig[];
  queues: QueueConfig[];
  /** The Batch API; absent: not served. */
  batch_api?: BatchApiConfig;
  /** The web dashboard (`@q/dashboard`, read-only) on its own port; absent: not served. */
  dashboard?: DashboardConfig;
}

/** The `dashboard` section: where `q-dispatcher run` serves the read-only web dashboard. */
export interface DashboardConfig {
  /** 0 = any free port. */
  port: number;
  /** Bind address (default 127.0.0.1). */
  host: string;
}

// Timers take at most 2^31 − 1 ms; a longer delay makes Node fire them every millisecond.
const MAX_MS = 2_147_483_647;
const MAX_SECONDS = 2_147_483;
const posInt = { type: 'integer', minimum: 1, maximum: MAX_MS } as const;
const nonNegInt = { type: 'integer', minimum: 0, maximum: MAX_MS } as const;
const port = { type: 'integer', minimum: -1, maximum: 65535 } as const;
/** A pool id or a queue name. */
const id200 = { type: 'string', minLength: 1, maxLength: 200 } as const;
/** The gate of a pool or a queue: a type from the gate catalogue, its parameters checked against it at load. */
const gateFields = { gate_type: { type: 'string', minLength: 1 }, gate_params: { type: 'object' } } as const;

/** A (possibly fractional) seconds value as whole milliseconds, the unit of every timer and lease. */
export function secondsToMs(seconds: number): number {
  return Math.round(seconds * 1000);
}

/** The default priority header of a `tier-priority` pool (docs/design/dispatcher.md#headers). */
export const DEFAULT_PRIORITY_HEADER = 'x-gateway-priority';
// An HTTP header name (token) or "" (off), and a legal header value (visible ASCII, inner spaces).
const HEADER_NAME = "^[A-Za-z0-9!#$%&'*+.^_`|~-]*$";
const HEADER_VALUE = '^[\\x21-\\x7e]([\\x20-\\x7e\\t]*[\\x21-\\x7e])?$';
/** A header value or "" (no header). */
const OPTIONAL_HEADER_VALUE = '^([\\x21-\\x7e]([\\x20-\\x7e\\t]*[\\x21-\\x7e])?)?$';

/**
 * Largest `max_response_bytes` (40 MiB): a body is stored JSON-escaped inside its result (or a
 * retry's envelope), which can grow it 6× (a control byte becomes `\u0001`), and a row holds at
 * most 256,000,000 bytes (`MAX_VALUE_BYTES` of `@q/store`); 6 × 40 MiB leaves 4 MB for the rest.
 */
export const MAX_RESPONSE_BYTES_LIMIT = 40 * 1024 * 1024;

/** Defaults of top-level scalar fields (docs/design/dispatcher.md#configuration-defaults). */
export const TOP_DEFAULTS = {
  lease_ttl_seconds: 30,
  handoff_timeout_seconds: 900,
  poll_interval_ms: 1000,
  batch_size: 10,
  concurrency: 64,
  result_batch_size: 32,
  max_connections: 32,
  cancel_check_batch_size: 256,
  cancel_check_linger_ms: 5,
  request_timeout_ms: 300_000,
  drain_timeout_ms: 120_000,
  retry_base_ms: 2000,
  retry_cap_ms: 60_000,
  fairness_header: 'x-llm-d-inference-fairness-id',
  fairness_attribute: 'userid',
  health_port: 8081,
  metrics_port: 9090,
  max_response_bytes: 16 * 1024 * 1024,
  prometheus_cache_ttl_ms: 5000,
  gate_wait_timeout_ms: 300_000,
  metrics_backlog_poll_interval_ms: 15_000,
} as const;

/** The JSON schema (ajv, `useDefaults`). */
export const CONFIG_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['queues'],
  properties: {
    url: { type: 'string', pattern: '^postgres(ql)?://' },
    owner: { type: 'string', minLength: 1, maxLength: 200 },
    pooler: { enum: ['transaction'] },
    schema: { type: 'string', minLength: 1 },
    // Seconds may be fractional (4.07); they are used as whole milliseconds (`secondsToMs`).
    lease_ttl_seconds: { type: 'number', exclusiveMinimum: 0, maximum: MAX_SECONDS, default: TOP_DEFAULTS.lease_ttl_seconds },
    handoff_timeout_seconds: { type: 'number', minimum: 0, maximum: MAX_SECONDS, default: TOP_DEFAULTS.handoff_timeout_seconds },
    poll_interval_ms: { ...posInt, default: TOP_DEFAULTS.poll_interval_ms },
    batch_size: { ...posInt, default: TOP_DEFAULTS.batch_size },
    concurrency: { ...posInt, default: TOP_DEFAULTS.concurrency },
    result_batch_size: { ...posInt, default: TOP_DEFAULTS.result_batch_size },
    max_connections: { ...posInt, default: TOP_DEFAULTS.max_connections },
    cancel_check_batch_size: { ...posInt, default: TOP_DEFAULTS.cancel_check_batch_size },
    cancel_check_linger_ms: { ...nonNegInt, default: TOP_DEFAULTS.cancel_check_linger_ms },
    request_timeout_ms: { ...posInt, default: TOP_DEFAULTS.request_timeout_ms },
    drain_timeout_ms: { ...nonNegInt, default: TOP_DEFAULTS.drain_timeout_ms },
    retry_base_ms: { ...nonNegInt, default: TOP_DEFAULTS.retry_base_ms },
    retry_cap_ms: { ...nonNegInt, default: TOP_DEFAULTS.retry_cap_ms },
    fairness_header: { type: 'string', pattern: HEADER_NAME, default: TOP_DEFAULTS.fairness_header },
    fairness_attribute: { type: 'string', minLength: 1, default: TOP_DEFAULTS.fairness_attribute },
    health_port: { ...port, default: TOP_DEFAULTS.health_port },
    metrics_port: { ...port, default: TOP_DEFAULTS.metrics_port },
    max_response_bytes: { type: 'integer', minimum: 1, maximum: MAX_RESPONSE_BYTES_LIMIT, default: TOP_DEFAULTS.max_response_bytes },
    prometheus_url: { type: 'string', pattern: '^https?://' },
    prometheus_cache_ttl_ms: { ...nonNegInt, default: TOP_DEFAULTS.prometheus_cache_ttl_ms },
    gate_wait_timeout_ms: { ...nonNegInt, default: TOP_DEFAULTS.gate_wait_timeout_ms },
    metrics_backlog_poll_interval_ms: { ...nonNegInt, default: TOP_DEFAULTS.metrics_backlog_poll_interval_ms },
    tls_ca_file: { type: 'string', minLength: 1 },
    tls_cert_file: { type: 'string', minLength: 1 },
    tls_key_file: { type: 'string', minLength: 1 },
    tls_server_name: { type: 'string', minLength: 1 },
    tls_insecure_skip_verify: { type: 'boolean', default: false },
    dashboard: {
      type: 'object',
      additionalProperties: false,
      required: ['port'],
      properties: {
        port: { type: 'integer', minimum: 0, maximum: 65535 },
        host: { type: 'string', minLength: 1, default: '127.0.0.1' },
      },
    },
    batch_api: {
      type: 'object',
      additionalProperties: false,
      required: ['port', 'api_keys'],
      properties: {
        port: { type: 'integer', minimum: 0, maximum: 65535 },
        host: { type: 'string', minLength: 1, default: '127.0.0.1' },
        queue: id200,
        api_keys: {
          type: 'array',
          items: {
            type: 'object',
            additionalProperties: false,
            required: ['sha256', 'tenant'],
            properties: { sha256: { type: 'string', pattern: '^[0-9a-f]{64}$' }, tenant: { type: 'string', minLength: 1, maxLength: 200 } },
          },
        },
        max_file_bytes: { type: 'integer', minimum: 1, maximum: 200 * 1024 * 1024, default: 200 * 1024 * 1024 },
        max_file_lines: { type: 'integer', minimum: 1, maximum: 50_000, default: 50_000 },
        completion_window_seconds: { type: 'integer', minimum: 1, maximum: 86_400, default: 86_400 },
        driver_interval_ms: { ...posInt, default: 250 },
        driver_lease_ms: { ...posInt, default: 30_000 },
        adaptive_concurrency: {
          type: 'object',
          additionalProperties: false,
          default: {},
          properties: {
            enabled: { type: 'boolean', default: true },
            initial: { type: 'integer', minimum: 1, maximum: 1_000_000 },
            min: { type: 'integer', minimum: 1, maximum: 1_000_000, default: 1 },
            max: { type: 'integer', minimum: 1, maximum: 1_000_000 },
            latency_target_ms: { ...posInt, default: 30_000 },
            increase_step: { type: 'number', exclusiveMinimum: 0, maximum: 1_000_000, default: 1 },
            decrease_factor: { type: 'number', exclusiveMinimum: 0, exclusiveMaximum: 1, default: 0.5 },
          },
        },
      },
    },
    pools: {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['id', 'workers'],
        properties: {
          id: id200,
          workers: posInt,
          merge_policy: { enum: ['random-robin', 'tier-priority'], default: 'random-robin' },
          ...gateFields,
          priority_header: { type: 'string', pattern: HEADER_NAME },
          lane_objectives: {
            type: 'object',
            additionalProperties: false,
            patternProperties: { '^[0-5]$': { type: 'string', pattern: HEADER_VALUE } },
          },
        },
      },
    },
    queues: {
      type: 'array',
      minItems: 1,
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['queue_name', 'igw_base_url'],
        properties: {
          queue_name: id200,
          igw_base_url: { type: 'string', pattern: '^https?://' },
          request_path_url: { type: 'string', default: '/v1/completions' },
          // Sent as a header: a CR/LF (or other control) would make every request fail at send.
          inference_objective: { type: 'string', pattern: OPTIONAL_HEADER_VALUE },
          result_queue_name: { type: 'string', minLength: 1 },
          result_ttl_seconds: { ...nonNegInt, default: 0 },
          labels: { type: 'object', additionalProperties: { type: 'string' }, default: {} },
          ...gateFields,
          worker_pool_id: { type: 'string', minLength: 1 },
          gates: {
            type: 'array',
            default: [],
            items: {
              type: 'object',
              additionalProperties: false,
              required: ['kind', 'limit'],
              properties: {
                kind: { enum: ['concurrency', 'rate'] },
                attribute: { type: 'string', minLength: 1, default: 'userid' },
                limit: posInt,
                window_ms: { ...posInt, default: 60_000 },
                prefix: { type: 'string', default: 'quota:' },
                wait_ms: { ...nonNegInt, default: 1000 },
                gating_mode: { enum: ['blocking', 'classifying'] },
              },
            },
          },
        },
      },
    },
  },
} as const;
