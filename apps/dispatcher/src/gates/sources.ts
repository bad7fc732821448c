// Metric sources of the budget gates (docs/design/dispatcher.md#gates): Prometheus text scraped from model
// servers' `/metrics`, and instant queries against a Prometheus HTTP API. Every source is cached
// per URL/query for `prometheus_cache_ttl_ms` and shared by all gates of a process, so N gates
// reading one server scrape it once per TTL; concurrent reads share one fetch.
import { Agent, request } from 'undici';
import { tlsAgentOptions, type TlsClientOptions } from '../http/client.js';

/** One sample of a Prometheus text exposition. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Longest wait of one poll's metric read (one scrape, one query, or a whole cascade); slower counts as unavailable. */
export const SOURCE_TIMEOUT_MS = 2000;
/** Largest scraped page read (a model server's `/metrics` is a few hundred KiB at most). */
const MAX_SOURCE_BYTES = 8 * 1024 * 1024;

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?\s*$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?\s*/gy;

/** Parses the Prometheus text format (version 0.0.4); comments and malformed lines are skipped. */
export function parsePrometheusText(text: string): Sample[] {
  const out: Sample[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const m = LINE.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    if (m[3]) {
      LABEL.lastIndex = 0;
      let l: RegExpExecArray | null;
      while ((l = LABEL.exec(m[3])) !== null) {
        labels[l[1] as string] = (l[2] as string).replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
      }
    }
    const value = parseValue(m[4] as string);
    if (value !== undefined) out.push({ name: m[1] as string, labels, value });
  }
  return out;
}

function parseValue(s: string): number | undefined {
  if (s === 'NaN') return Number.NaN;
  if (s === '+Inf') return Infinity;
  if (s === '-Inf') return -Infinity;
  const n = Number(s);
  return Number.isNaN(n) ? undefined : n;
}

/** Sum of the samples named `metric` whose labels include `labels`; `undefined` when none match. */
export function sumMatching(samples: Sample[], metric: string, labels: Record<string, string> = {}): number | undefined {
  let sum: number | undefined;
  for (const s of samples) {
    if (s.name !== metric) continue;
    if (Object.entries(labels).some(([k, v]) => s.labels[k] !== v)) continue;
    sum = (sum ?? 0) + s.value;
  }
  return sum;
}

/**
 * A metrics URL without its credentials, plus the `authorization` header they make (HTTP basic
 * auth, RFC 7617): fetch APIs refuse a URL carrying `user:password@`, and a credential must never
 * reach a log or an error message, so the URL is only ever shown without it.
 */
export function splitCredentials(raw: string): { url: string; authorization?: string } {
  const u = new URL(raw);
  if (u.username === '' && u.password === '') return { url: raw };
  let user: string;
  let pass: string;
  try {
    user = decodeURIComponent(u.username);
    pass = decodeURIComponent(u.password);
  } catch {
    throw new Error('credentials are not valid percent-encoding');
  }
  // RFC 7617: a user id with a colon cannot be told from the password.
  if (user.includes(':')) throw new Error('user name must not contain ":"');
  u.username = '';
  u.password = '';
  return { url: u.toString(), authorization: `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}` };
}

/** `url` as it may be shown: credentials removed. */
export function redactUrl(raw: string): string {
  try {
    return splitCredentials(raw).url;
  } catch {
    return '(invalid URL)';
  }
}

interface Entry<T> {
  at: number;
  value: Promise<T>;
}

/** Fetches and caches scrapes and Prometheus queries. One per dispatcher process. */
export class MetricSources {
  readonly #ttlMs: number;
  #agent: Agent | undefined; // created on first use: building gates to validate a config opens nothing
  readonly #cache = new Map<string, Entry<unknown>>();
  readonly #prometheusUrl: string | undefined;
  readonly #now: () => number;
  /** Fetches made (not served from the cache); tests read it. */
  fetches = 0;

  readonly #tls: TlsClientOptions | undefined;

  /**
   * `ttlMs` 0 disables caching; `prometheusUrl` is required by the `prometheus-*` gates; `tls`: the
   * dispatcher's TLS options (`tls_ca_file` …), used for https sources as for the endpoints.
   */
  constructor(opts: { ttlMs: number; prometheusUrl?: string; now?: () => number; tls?: TlsClientOptions }) {
    this.#ttlMs = opts.ttlMs;
    this.#tls = opts.tls;
    this.#prometheusUrl = opts.prometheusUrl;
    this.#now = opts.now ?? Date.now;
  }

  /** The samples of a `/metrics` page. Rejects when the page cannot be read (status ≥ 400, timeout). */
  scrape(url: string): Promise<Sample[]> {
    return this.#cached(`scrape ${url}`, async () => parsePrometheusText(await this.#get(url)));
  }

  /**
   * The value of an instant query (`/api/v1/query`): the first sample of a vector, or a
   * scalar. Rejects on an error status, `status != success`, no sample, or NaN (no data).
   */
  query(promql: string): Promise<number> {
    const base = this.#prometheusUrl;
    if (!base) return Promise.reject(new Error('prometheus_url is not configured'));
    return this.#cached(`query ${promql}`, async () => {
      const u = new URL('api/v1/query', base.endsWith('/') ? base : `${base}/`);
      u.searchParams.set('query', promql);
      const body = JSON.parse(await this.#get(u.toString())) as {
        status?: string;
        data?: { resultType?: string; result?: unknown };
      };
      if (body.status !== 'success' || !body.data) throw new Error(`query failed: status ${String(body.status)}`);
      const { resultType, result } = body.data;
      let raw: unknown;
      if (resultType === 'scalar' && Array.isArray(result)) raw = result[1];
      else if (resultType === 'vector' && Array.isArray(result) && result.length > 0) raw = (result[0] as { value?: unknown[] }).value?.[1];
      if (raw === undefined) throw new Error('query returned no data');
      const v = Number(raw);
      if (!Number.isFinite(v)) throw new Error('query returned no number');
      return v;
    });
  }

  async close(): Promise<void> {
    await this.#agent?.close();
  }

  #cached<T>(key: string, fetcher: () => Promise<T>): Promise<T> {
    const now = this.#now();
    const hit = this.#cache.get(key) as Entry<T> | undefined;
    if (hit && now - hit.at < this.#ttlMs) return hit.value;
    this.fetches++;
    const value = fetcher();
    // Failures are cached for the TTL too: a source that is down is not hammered every poll.
    this.#cache.set(key, { at: now, value });
    value.catch(() => undefined);
    return value;
  }

  async #get(raw: string): Promise<string> {
    const { url, authorization } = splitCredentials(raw);
    const res = await request(url, {
      method: 'GET',
      dispatcher: (this.#agent ??= new Agent({ ...tlsAgentOptions(this.#tls), connections: 8, keepAliveTimeout: 30_000 })),
      signal: AbortSignal.timeout(SOURCE_TIMEOUT_MS),
      headers: { accept: 'text/plain, application/json', ...(authorization ? { authorization } : {}) },
    });
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const c of res.body) {
      size += (c as Buffer).length;
      if (size > MAX_SOURCE_BYTES) {
        res.body.destroy();
        throw new Error(`metrics source ${url}: page larger than ${MAX_SOURCE_BYTES} bytes`); // url: credentials already removed
      }
      chunks.push(c as Buffer);
    }
    if (res.statusCode >= 400) throw new Error(`metrics source answered ${res.statusCode}`);
    return Buffer.concat(chunks).toString('utf8');
  }
}
