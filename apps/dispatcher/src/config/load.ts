// Loads the configuration: a YAML or JSON file, then environment and flag overrides, then schema
// validation (ajv) with errors that name the offending field.
import crypto from 'node:crypto';
import fs from 'node:fs';
import nodeTls from 'node:tls';
import path from 'node:path';
import { Ajv, type ErrorObject } from 'ajv';
import YAML from 'yaml';
import { QError, QErrorCode, validateDsn } from '@q/schema';
import { checkSchemaName } from '@q/schema/internal';
import { routeProblem } from '../formats.js';
import type { TlsClientOptions } from '../http/client.js';
import { createGate } from '../gates/gates.js';
import { MetricSources } from '../gates/sources.js';
import { CONFIG_SCHEMA, secondsToMs, TOP_DEFAULTS, type AdaptiveConcurrencyConfig, type DispatcherConfig } from './schema.js';

/** Top-level fields that may be overridden by `--kebab-name` flags and `Q_UPPER_NAME` env vars. */
export const OVERRIDABLE = [
  'url',
  'owner',
  'pooler',
  'schema',
  'prometheus_url',
  'tls_ca_file',
  'tls_cert_file',
  'tls_key_file',
  'tls_server_name',
  ...Object.keys(TOP_DEFAULTS),
] as const;
const NUMERIC = new Set(
  Object.entries(TOP_DEFAULTS)
    .filter(([, v]) => typeof v === 'number')
    .map(([k]) => k),
);

/** Sources of {@link loadConfig}. */
export interface LoadOptions {
  /** Path of a `.yaml`/`.yml`/`.json` file. */
  file?: string;
  /** An already-parsed document, used when there is no file (e.g. the embedded default). */
  document?: Record<string, unknown>;
  /** Environment (default `process.env`): `Q_DSN` / `SQL_URL` (DSN, `SQL_URL` wins), `Q_<FIELD>`. */
  env?: NodeJS.ProcessEnv;
  /** Flag overrides keyed by field name (`concurrency`) or kebab name (`batch-size`). Win over env. */
  overrides?: Record<string, string | number | undefined>;
}

function configError(msg: string): QError {
  return new QError(QErrorCode.CONFIG, `config: ${msg}`);
}

const PEM_CERT = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g;

/** Checks that `data` holds one or more PEM certificates, every one of them parsable. */
function pemCertificates(field: string, file: string, data: Buffer): void {
  const blocks = data.toString('latin1').match(PEM_CERT) ?? [];
  const ok =
    blocks.length > 0 &&
    blocks.every((b) => {
      try {
        new crypto.X509Certificate(b);
        return true;
      } catch {
        return false;
      }
    });
  if (!ok) throw configError(`${field}: ${file} must hold PEM certificates (-----BEGIN CERTIFICATE-----)`);
}

/** Reads the TLS files named by the config; errors name the field and file, never the content. */
export function readTlsFiles(
  cfg: Pick<DispatcherConfig, 'tls_ca_file' | 'tls_cert_file' | 'tls_key_file' | 'tls_server_name' | 'tls_insecure_skip_verify'>,
): TlsClientOptions | undefined {
  const read = (field: string, file: string | undefined) => {
    if (file === undefined) return undefined;
    try {
      return fs.readFileSync(file);
    } catch (err) {
      throw configError(`${field}: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`);
    }
  };
  const tls: TlsClientOptions = {};
  const ca = read('tls_ca_file', cfg.tls_ca_file);
  const cert = read('tls_cert_file', cfg.tls_cert_file);
  const key = read('tls_key_file', cfg.tls_key_file);
  // Node ignores what is not a PEM certificate in `ca` and every https call then fails on an
  // unknown issuer: a file that is not what its field says is refused here, at start.
  if (ca && cfg.tls_ca_file) pemCertificates('tls_ca_file', cfg.tls_ca_file, ca);
  if (cert && cfg.tls_cert_file) pemCertificates('tls_cert_file', cfg.tls_cert_file, cert);
  if (key && cfg.tls_key_file) {
    try {
      crypto.createPrivateKey(key);
    } catch {
      throw configError(`tls_key_file: ${cfg.tls_key_file} must be a PEM private key`);
    }
  }
  if (cert && key) {
    try {
      nodeTls.createSecureContext({ cert, key });
    } catch {
      throw configError(`tls_cert_file and tls_key_file: ${cfg.tls_key_file} is not the key of ${cfg.tls_cert_file}`);
    }
  }
  if (ca) tls.ca = ca;
  if (cert) tls.cert = cert;
  if (key) tls.key = key;
  if (cfg.tls_server_name) tls.servername = cfg.tls_server_name;
  if (cfg.tls_insecure_skip_verify) tls.insecureSkipVerify = true;
  return Object.keys(tls).length > 0 ? tls : undefined;
}

/**
 * Deepest nesting a configuration may have (the documented one needs about 8, a composite of
 * composites a few more). Parsers and validators recurse per level: a document nested thousands
 * deep overflowed the stack (or, in the YAML parser, ran out of memory) instead of failing as a
 * config error, so depth is checked before and after parsing.
 */
export const MAX_CONFIG_DEPTH = 64;

/** Deepest `{`/`[` nesting of JSON or YAML flow text, skipping quoted strings and `#` comments. */
function bracketDepth(text: string): number {
  let depth = 0;
  let max = 0;
  let quote: string | undefined;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote) {
      if (c === '\\' && quote === '"') i++;
      else if (c === quote) quote = undefined;
      else if (c === '\n' && quote === "'") quote = undefined; // be lenient: never run past a line
      continue;
    }
    if (c === '"' || c === "'") quote = c;
    else if (c === '#' && (i === 0 || /\s/.test(text[i - 1] as string))) {
      const nl = text.indexOf('\n', i);
      i = nl < 0 ? text.length : nl;
    } else if (c === '{' || c === '[') max = Math.max(max, ++depth);
    else if ((c === '}' || c === ']') && depth > 0) depth--;
  }
  return max;
}

/** Nesting depth of a parsed value, computed without recursion. */
function valueDepth(root: unknown): number {
  let max = 0;
  const stack: Array<[unknown, number]> = [[root, 0]];
  while (stack.length > 0) {
    const [v, d] = stack.pop() as [unknown, number];
    if (typeof v !== 'object' || v === null) continue;
    max = Math.max(max, d + 1);
    if (max > MAX_CONFIG_DEPTH) return max;
    for (const child of Object.values(v)) stack.push([child, d + 1]);
  }
  return max;
}

const tooDeep = (what: string) => configError(`${what} is nested deeper than ${MAX_CONFIG_DEPTH} levels`);

/** Reads and parses a config file; errors name the file, never its content. */
export function readConfigFile(file: string): Record<string, unknown> {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw configError(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`);
  }
  if (bracketDepth(text) > MAX_CONFIG_DEPTH) throw tooDeep(file);
  const ext = path.extname(file).toLowerCase();
  let doc: unknown;
  try {
    doc = ext === '.json' ? JSON.parse(text) : YAML.parse(text);
  } catch (err) {
    throw configError(`${file} is not valid ${ext === '.json' ? 'JSON' : 'YAML'}: ${(err as Error).message.split('\n')[0]}`);
  }
  if (doc === null || doc === undefined) doc = {};
  if (typeof doc !== 'object' || Array.isArray(doc)) throw configError(`${file} must contain a mapping at the top level`);
  // Block-style YAML nests by indentation, which the bracket scan does not see.
  if (valueDepth(doc) > MAX_CONFIG_DEPTH) throw tooDeep(file);
  return doc as Record<string, unknown>;
}

function setOverride(doc: Record<string, unknown>, field: string, value: string | number, source: string): void {
  if (NUMERIC.has(field)) {
    const n = typeof value === 'number' ? value : Number(value);
    if (typeof value === 'string' && (value.trim() === '' || !Number.isFinite(n))) {
      throw configError(`${field} (from ${source}) must be a number, got ${JSON.stringify(value)}`);
    }
    doc[field] = n;
  } else {
    doc[field] = value;
  }
}

/** `/queues/0/gates/1/limit` → `queues[0].gates[1].limit`. */
function fieldName(instancePath: string): string {
  return instancePath
    .split('/')
    .slice(1)
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce((acc, p) => (/^\d+$/.test(p) ? `${acc}[${p}]` : acc ? `${acc}.${p}` : p), '');
}

function describe(e: ErrorObject): string {
  const at = fieldName(e.instancePath);
  const p = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case 'required':
      return `${at ? `${at}.` : ''}${String(p.missingProperty)} is required`;
    case 'additionalProperties':
      return `${at ? `${at}: ` : ''}unknown field ${JSON.stringify(p.additionalProperty)}`;
    case 'enum':
      return `${at} must be one of ${(p.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`;
    default:
      return `${at || '(root)'} ${e.message ?? 'is invalid'}`;
  }
}

const ajv = new Ajv({ useDefaults: true, allErrors: false, strict: true });
const validate = ajv.compile<DispatcherConfig>(CONFIG_SCHEMA);

/**
 * Builds the effective configuration. Precedence: flags > env > file (or `document`) > defaults.
 * Throws `QError` code `CONFIG` whose message names the field (`config: queues[0].gates[0].limit
 * must be >= 1`).
 */
export function loadConfig(opts: LoadOptions = {}): DispatcherConfig {
  const env = opts.env ?? process.env;
  if (!opts.file && valueDepth(opts.document) > MAX_CONFIG_DEPTH) throw tooDeep('the configuration');
  const doc: Record<string, unknown> = structuredClone(opts.file ? readConfigFile(opts.file) : (opts.document ?? {}));
  for (const field of OVERRIDABLE) {
    const v = env[`Q_${field.toUpperCase()}`];
    if (v !== undefined && v !== '') setOverride(doc, field, v, `Q_${field.toUpperCase()}`);
  }
  if (env.Q_DSN) doc.url = env.Q_DSN;
  if (env.SQL_URL) doc.url = env.SQL_URL;
  for (const [k, v] of Object.entries(opts.overrides ?? {})) {
    if (v === undefined) continue;
    const field = k === 'dsn' ? 'url' : k.replace(/-/g, '_');
    if (!(OVERRIDABLE as readonly string[]).includes(field)) throw configError(`unknown override ${JSON.stringify(k)}`);
    setOverride(doc, field, v, `--${field.replace(/_/g, '-')}`);
  }
  if (!validate(doc)) throw configError(describe((validate.errors ?? [])[0] as ErrorObject));
  const cfg = doc as unknown as DispatcherConfig;
  if (cfg.url !== undefined) {
    try {
      validateDsn(cfg.url);
    } catch (err) {
      throw configError(`url: ${(err as Error).message}`);
    }
  }
  if (cfg.schema !== undefined) {
    try {
      checkSchemaName('config', cfg.schema);
    } catch (err) {
      throw configError((err as Error).message.replace(/^config: /, ''));
    }
  }
  const names = new Set<string>();
  cfg.queues.forEach((q, i) => {
    if (names.has(q.queue_name)) throw configError(`queues[${i}].queue_name ${JSON.stringify(q.queue_name)} is a duplicate`);
    names.add(q.queue_name);
    try {
      new URL(q.igw_base_url);
    } catch {
      throw configError(`queues[${i}].igw_base_url is not a valid URL`);
    }
  });
  // Fractional seconds are fine (used as whole ms), but must leave at least a millisecond.
  for (const f of ['lease_ttl_seconds'] as const) {
    if (secondsToMs(cfg[f]) < 1) throw configError(`${f} must be at least 0.001 (one millisecond)`);
  }
  cfg.queues.forEach((q, i) => {
    if (q.result_queue_name !== undefined) {
      const p = routeProblem(q.result_queue_name);
      if (p) throw configError(`queues[${i}].result_queue_name ${p}`);
    }
  });
  // Build every gate once (no I/O): unknown types and bad parameters are refused here, by name.
  const sources = new MetricSources({ ttlMs: 0 });
  cfg.queues.forEach((q, i) => {
    if (q.gate_type !== undefined)
      createGate(
        { gate_type: q.gate_type, gate_params: q.gate_params },
        { sources, hasPrometheus: cfg.prometheus_url !== undefined },
        `queues[${i}]`,
        'queue',
      );
    else if (q.gate_params !== undefined) throw configError(`queues[${i}].gate_params needs gate_type`);
  });
  const pools = new Set<string>();
  (cfg.pools ?? []).forEach((pl, i) => {
    if (pools.has(pl.id)) throw configError(`pools[${i}].id ${JSON.stringify(pl.id)} is a duplicate`);
    pools.add(pl.id);
    // Lanes exist only under tier-priority: elsewhere these options would silently do nothing.
    if (pl.merge_policy !== 'tier-priority') {
      for (const f of ['priority_header', 'lane_objectives'] as const) {
        if (pl[f] !== undefined) throw configError(`pools[${i}].${f} needs merge_policy tier-priority`);
      }
    }
    if (pl.gate_type !== undefined)
      createGate(
        { gate_type: pl.gate_type, gate_params: pl.gate_params },
        { sources, hasPrometheus: cfg.prometheus_url !== undefined },
        `pools[${i}]`,
      );
  });
  cfg.queues.forEach((q, i) => {
    q.gates.forEach((g, j) => {
      if (g.gating_mode === 'classifying' && g.kind !== 'concurrency')
        throw configError(`queues[${i}].gates[${j}].gating_mode classifying needs kind concurrency`);
    });
    if (q.worker_pool_id === undefined) return;
    if (!cfg.pools) throw configError(`queues[${i}].worker_pool_id needs pools`);
    if (!pools.has(q.worker_pool_id)) throw configError(`queues[${i}].worker_pool_id ${JSON.stringify(q.worker_pool_id)} is not a pool id`);
  });
  if (cfg.pools && cfg.queues.some((q) => q.worker_pool_id === undefined) && !pools.has('default')) {
    cfg.pools.push({ id: 'default', workers: cfg.concurrency, merge_policy: 'random-robin' });
  }
  if ((cfg.tls_cert_file === undefined) !== (cfg.tls_key_file === undefined)) throw configError('tls_cert_file and tls_key_file go together');
  if (cfg.prometheus_url !== undefined) {
    try {
      new URL(cfg.prometheus_url);
    } catch {
      throw configError('prometheus_url is not a valid URL');
    }
  }
  if (cfg.retry_cap_ms < cfg.retry_base_ms) throw configError('retry_cap_ms must be >= retry_base_ms');
  const api = cfg.batch_api;
  if (api?.queue !== undefined && !names.has(api.queue)) throw configError(`batch_api.queue ${JSON.stringify(api.queue)} is not a queue_name`);
  const hashes = new Set<string>();
  api?.api_keys.forEach((k, i) => {
    if (hashes.has(k.sha256)) throw configError(`batch_api.api_keys[${i}].sha256 is a duplicate`);
    hashes.add(k.sha256);
  });
  if (api) resolveAdaptive(api.adaptive_concurrency as Partial<AdaptiveConcurrencyConfig>, cfg.concurrency);
  return cfg;
}

/** Fills the defaults of `batch_api.adaptive_concurrency` that depend on `concurrency` and checks the bounds' order. */
function resolveAdaptive(a: Partial<AdaptiveConcurrencyConfig>, concurrency: number): void {
  const where = 'batch_api.adaptive_concurrency';
  a.max ??= concurrency;
  if (a.max > concurrency) throw configError(`${where}.max (${a.max}) must be at most concurrency (${concurrency})`);
  const min = a.min ?? 1;
  if (min > a.max) throw configError(`${where}.min (${min}) must be at most max (${a.max})`);
  a.initial ??= Math.min(a.max, Math.max(min, 16));
  if (a.initial < min || a.initial > a.max) throw configError(`${where}.initial (${a.initial}) must be between min (${min}) and max (${a.max})`);
}
