// The inference client (docs/design/dispatcher.md#http-request, #http-classification): one POST per attempt over a keep-alive undici
// agent, bounded by the attempt deadline, classified into success / retryable / fatal.
import { Agent, request } from 'undici';
import { parseRetryAfter } from './retry.js';

/** Error categories of docs/design/dispatcher.md#http-classification. */
export type ErrorCategory = 'INVALID_REQ' | 'UNKNOWN' | 'SERVER_ERROR' | 'RATE_LIMIT';

/** How one attempt ended. */
export type AttemptOutcome =
  | { kind: 'success'; status: number; body: string }
  /**
   * 429, 5xx or a body read error: retry within the deadline. `incomplete`: the status arrived
   * but the body broke off (a reset); such a response is never a result of its own. (A body
   * still arriving when the attempt's bound ends it is `fatal`, without a status.)
   */
  | {
      kind: 'retryable';
      category: 'RATE_LIMIT' | 'SERVER_ERROR';
      status: number;
      body: string;
      retryAfter?: number;
      message: string;
      incomplete?: boolean;
    }
  /**
   * Other 4xx (with `status`/`body`), or a transport error (no status). `timeout` tells which
   * bound ended the attempt: the request's own deadline or the per-attempt request timeout.
   */
  | {
      kind: 'fatal';
      category: 'INVALID_REQ' | 'UNKNOWN';
      status?: number;
      body?: string;
      message: string;
      timeout?: 'deadline' | 'request-timeout';
    }
  /** The caller's signal (drain timeout at shutdown) aborted the call: re-enqueue, no result. */
  | { kind: 'aborted' };

/** Options of {@link InferenceClient}. */
export interface InferenceClientOptions {
  /** Idle connections kept per origin (default 64: the worker count). */
  connections?: number;
  /** Bound of one attempt, ms (default 5 min). */
  requestTimeoutMs?: number;
  /**
   * Largest response body read, bytes (default {@link DEFAULT_MAX_RESPONSE_BYTES}). A longer
   * body ends the attempt as a fatal transport error (`INFERENCE_ERROR`), not a truncated result.
   */
  maxResponseBytes?: number;
  /** TLS options of the connections to `https://` endpoints. */
  tls?: TlsClientOptions;
}

/** TLS client options (docs/design/dispatcher.md#http-request): CA bundle, client certificate, server name, verification. */
export interface TlsClientOptions {
  /** PEM CA certificate(s) trusted for the endpoint (instead of the system store). */
  ca?: string | Buffer;
  /** PEM client certificate and key (mutual TLS); both or neither. */
  cert?: string | Buffer;
  key?: string | Buffer;
  /** SNI and certificate host name to expect (default: the URL's host). */
  servername?: string;
  /** Skip certificate verification. Insecure: for test endpoints only. */
  insecureSkipVerify?: boolean;
}

/**
 * The undici `Agent` options of {@link TlsClientOptions}: shared by the inference client and the
 * metric sources, so an `endpoint-scrape` of the https server the dispatcher calls trusts the same CA.
 */
export function tlsAgentOptions(tls: TlsClientOptions | undefined): Pick<Agent.Options, 'connect'> {
  if (!tls) return {};
  return {
    connect: {
      minVersion: 'TLSv1.2' as const,
      ...(tls.ca !== undefined ? { ca: tls.ca } : {}),
      ...(tls.cert !== undefined ? { cert: tls.cert } : {}),
      ...(tls.key !== undefined ? { key: tls.key } : {}),
      ...(tls.servername !== undefined ? { servername: tls.servername } : {}),
      rejectUnauthorized: !tls.insecureSkipVerify,
    },
  };
}

/** Default cap of a response body: 16 MiB (a result is stored as one row). */
export const DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024;

const DROPPED_HEADER = 'x-llm-d-request-dropped-reason';

/** Sends inference requests; reuse one per process (keep-alive connection pool). */
export class InferenceClient {
  readonly #agent: Agent;
  readonly #requestTimeoutMs: number;
  readonly #maxResponseBytes: number;

  constructor(opts: InferenceClientOptions = {}) {
    this.#requestTimeoutMs = opts.requestTimeoutMs ?? 300_000;
    this.#maxResponseBytes = opts.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
    this.#agent = new Agent({
      ...tlsAgentOptions(opts.tls),
      connections: opts.connections ?? 64,
      keepAliveTimeout: 90_000,
      keepAliveMaxTimeout: 90_000,
      // The attempt deadline bounds the call; undici's own timeouts would cut long inferences.
      headersTimeout: 0,
      bodyTimeout: 0,
    });
  }

  /**
   * POSTs `body` to `url` under the deadline `min(now + requestTimeout, deadlineMs)`. `signal`
   * aborts the attempt from outside (shutdown); the outcome is then `aborted`.
   */
  async send(url: string, body: Uint8Array, headers: Record<string, string>, deadlineMs: number, signal?: AbortSignal): Promise<AttemptOutcome> {
    const now = Date.now();
    const byDeadline = deadlineMs <= now + this.#requestTimeoutMs;
    const timeout: 'deadline' | 'request-timeout' = byDeadline ? 'deadline' : 'request-timeout';
    const budget = Math.max(0, (byDeadline ? deadlineMs : now + this.#requestTimeoutMs) - now);
    if (budget <= 0) return { kind: 'fatal', category: 'UNKNOWN', message: 'context deadline exceeded', timeout };
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(new Error('attempt deadline')), budget);
    const onOuter = () => ac.abort(new Error('shutdown'));
    signal?.addEventListener('abort', onOuter, { once: true });
    let status: number | undefined;
    let dropped: string | undefined;
    let retryAfter: number | undefined;
    try {
      const res = await request(url, { method: 'POST', body, headers, dispatcher: this.#agent, signal: ac.signal });
      status = res.statusCode;
      const d = res.headers[DROPPED_HEADER];
      dropped = Array.isArray(d) ? d[0] : d;
      const ra = res.headers['retry-after'];
      retryAfter = parseRetryAfter(Array.isArray(ra) ? ra[0] : ra, Date.now());
      // Read with a cap: an endless or huge body must end the attempt, not exhaust memory, and a
      // body that did not finish arriving is never mistaken for a complete answer.
      const chunks: Buffer[] = [];
      let size = 0;
      try {
        for await (const chunk of res.body) {
          const b = chunk as Buffer;
          size += b.length;
          if (size > this.#maxResponseBytes) {
            res.body.destroy();
            return {
              kind: 'fatal',
              category: 'UNKNOWN',
              message: describe('UNKNOWN', `response body larger than ${this.#maxResponseBytes} bytes (max_response_bytes)`, dropped),
            };
          }
          chunks.push(b);
        }
      } catch (err) {
        if (signal?.aborted) return { kind: 'aborted' };
        // Stalled until this attempt's bound (the request's deadline or request_timeout_ms): the
        // answer is INFERENCE_ERROR now, like a call that never answered. As a retry it ran into
        // the deadline later and ended DEADLINE_EXCEEDED, with no word of the stalled body.
        if (ac.signal.aborted) {
          return { kind: 'fatal', category: 'UNKNOWN', message: describe('UNKNOWN', 'reading body: context deadline exceeded', dropped) };
        }
        const why = errText(err);
        return {
          kind: 'retryable',
          category: 'SERVER_ERROR',
          status,
          body: '',
          retryAfter,
          incomplete: true,
          message: describe('SERVER_ERROR', `reading body: ${why}`, dropped),
        };
      }
      return classify(status, Buffer.concat(chunks, size).toString('utf8'), retryAfter, dropped);
    } catch (err) {
      if (signal?.aborted) return { kind: 'aborted' };
      const timedOut = ac.signal.aborted;
      const msg = timedOut ? 'context deadline exceeded' : errText(err);
      return { kind: 'fatal', category: 'UNKNOWN', message: describe('UNKNOWN', msg, dropped), ...(timedOut ? { timeout } : {}) };
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onOuter);
    }
  }

  /** Closes idle connections; waits for none of the in-flight calls. */
  async close(): Promise<void> {
    await this.#agent.close();
  }
}

function classify(status: number, body: string, retryAfter: number | undefined, dropped: string | undefined): AttemptOutcome {
  if (status === 429)
    return { kind: 'retryable', category: 'RATE_LIMIT', status, body, retryAfter, message: describe('RATE_LIMIT', `status ${status}`, dropped) };
  if (status >= 500 && status <= 599)
    return {
      kind: 'retryable',
      category: 'SERVER_ERROR',
      status,
      body,
      retryAfter,
      message: describe('SERVER_ERROR', `status ${status}`, dropped),
    };
  if (status >= 400 && status <= 499)
    return { kind: 'fatal', category: 'INVALID_REQ', status, body, message: describe('INVALID_REQ', `status ${status}`, dropped) };
  return { kind: 'success', status, body };
}

function describe(category: ErrorCategory, msg: string, dropped: string | undefined): string {
  return `${category}: ${msg}${dropped ? ` (dropped: ${dropped})` : ''}`;
}

function errText(err: unknown): string {
  const e = err as { code?: string; message?: string; cause?: { code?: string; message?: string } };
  const code = e.code ?? e.cause?.code;
  const message = e.message ?? String(err);
  return code ? `${code}: ${message}` : message;
}
