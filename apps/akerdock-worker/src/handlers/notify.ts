import type { Logger } from '../logger.js';
import type { HandlerFunc, Job } from '../job-types.js';
import { GiveUpError } from './give-up.js';
import { deliverAsStep } from './http-post.js';

/** Payload of a `notify.send` job. */
export interface NotifyPayload {
  message: string;
  subject?: string;
  /** Free-form routing hint for the receiver (e.g. `ops`, `billing`). */
  channel?: string;
}

/** Options of {@link notifySend}. */
export interface NotifyOptions {
  /** Where notifications are POSTed; absent: each notification becomes one structured log line. */
  url: string | undefined;
  /** Signs the POST like a webhook when set. */
  secret: string | undefined;
  timeoutMs: number;
  logger: Logger;
}

/**
 * `notify.send`: POSTs `{ job_uuid, channel, subject, message }` to the configured notification
 * URL (signed, idempotency key = job uuid, same retry rules as webhooks), or, with none
 * configured, writes it as an `info` log line with `notification` fields — the line is the delivery.
 */
export function notifySend(opts: NotifyOptions): HandlerFunc {
  return async (job, { signal, steps }) => {
    const n = parseNotifyPayload(job);
    if (opts.url === undefined) {
      await steps.start('log');
      opts.logger.info({ job_uuid: job.uuid, notification: n }, 'notification');
      await steps.succeed('no notification URL configured: written to the log');
      return { delivered: 'log' };
    }
    const out = await deliverAsStep(
      job,
      steps,
      { step: 'post', op: 'notify.send', what: 'notification' },
      { url: opts.url, body: JSON.stringify({ job_uuid: job.uuid, ...n }), secret: opts.secret, timeoutMs: opts.timeoutMs, signal },
    );
    return { delivered: 'http', status: out.status };
  };
}

/** Validates a job's payload as {@link NotifyPayload}. */
export function parseNotifyPayload(job: Pick<Job, 'payload'>): NotifyPayload {
  const p = job.payload as Partial<NotifyPayload> | null;
  if (typeof p !== 'object' || p === null || typeof p.message !== 'string') {
    throw new GiveUpError('notify.send: payload needs a "message" string');
  }
  for (const k of ['subject', 'channel'] as const) {
    if (p[k] !== undefined && typeof p[k] !== 'string') throw new GiveUpError(`notify.send: "${k}" must be a string`);
  }
  const out: NotifyPayload = { message: p.message };
  if (p.subject !== undefined) out.subject = p.subject;
  if (p.channel !== undefined) out.channel = p.channel;
  return out;
}
