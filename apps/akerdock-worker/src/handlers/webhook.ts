import type { HandlerFunc, Job } from '../job-types.js';
import { GiveUpError } from './give-up.js';
import { deliverAsStep } from './http-post.js';

/** Payload of a `webhook.deliver` job. */
export interface WebhookPayload {
  /** http(s) URL the body is POSTed to. */
  url: string;
  /** Any JSON value: sent serialised, byte for byte as signed. Absent: `{}`. */
  body?: unknown;
  /** Extra request headers (the signature and idempotency headers cannot be overridden). */
  headers?: Record<string, string>;
}

/** Options of {@link webhookDeliver}. */
export interface WebhookOptions {
  /** HMAC-SHA256 signing key; without one every delivery dead-letters (receivers could not verify). */
  secret: string | undefined;
  /** Per-attempt timeout (ms). */
  timeoutMs: number;
}

/** Result stored on a delivered job. */
export interface WebhookResult {
  status: number;
  durationMs: number;
  attempt: number;
}

/**
 * `webhook.deliver`: POSTs the payload's body to its URL, signed, with the job uuid as the
 * idempotency key (the same on every attempt, so receivers can drop duplicates). 2xx succeeds,
 * 4xx other than 408/429 dead-letters at once, anything else is retried with backoff.
 */
export function webhookDeliver(opts: WebhookOptions): HandlerFunc {
  return async (job, { signal, steps }) => {
    const payload = parseWebhookPayload(job);
    if (opts.secret === undefined) {
      await steps.skip('deliver', 'no signing secret configured (AKERDOCK_WEBHOOK_SECRET)');
      throw new GiveUpError('webhook.deliver: no signing secret configured (AKERDOCK_WEBHOOK_SECRET)');
    }
    const out = await deliverAsStep(
      job,
      steps,
      { step: 'deliver', op: 'webhook.deliver', what: 'delivery' },
      {
        url: payload.url,
        body: JSON.stringify(payload.body ?? {}),
        secret: opts.secret,
        timeoutMs: opts.timeoutMs,
        signal,
        headers: payload.headers,
      },
    );
    return { status: out.status as number, durationMs: out.durationMs, attempt: job.attempt } satisfies WebhookResult;
  };
}

const RESERVED = new Set(['content-type', 'idempotency-key', 'x-q-signature', 'x-q-delivery-attempt', 'host', 'content-length']);

/** Validates a job's payload as {@link WebhookPayload}; a malformed one can never succeed. */
export function parseWebhookPayload(job: Pick<Job, 'payload'>): WebhookPayload {
  const p = job.payload as Partial<WebhookPayload> | null;
  if (typeof p !== 'object' || p === null || typeof p.url !== 'string') {
    throw new GiveUpError('webhook.deliver: payload needs a "url" string');
  }
  let u: URL;
  try {
    u = new URL(p.url);
  } catch {
    throw new GiveUpError('webhook.deliver: payload "url" is not a URL');
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new GiveUpError('webhook.deliver: payload "url" must be http(s)');
  const headers: Record<string, string> = {};
  if (p.headers !== undefined) {
    if (typeof p.headers !== 'object' || p.headers === null) throw new GiveUpError('webhook.deliver: "headers" must be an object');
    for (const [k, v] of Object.entries(p.headers)) {
      if (typeof v !== 'string') throw new GiveUpError('webhook.deliver: header values must be strings');
      if (!RESERVED.has(k.toLowerCase())) headers[k] = v;
    }
  }
  return { url: p.url, body: p.body, headers };
}
