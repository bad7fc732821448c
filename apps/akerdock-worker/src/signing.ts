import { createHmac, timingSafeEqual } from 'node:crypto';

/** Header carrying `t=<unix seconds>,v1=<hex HMAC-SHA256>` on every webhook and notification. */
export const SIGNATURE_HEADER = 'x-q-signature';
/** Header carrying the delivery's idempotency key: the same on every attempt of one job. */
export const IDEMPOTENCY_HEADER = 'idempotency-key';
/** Header carrying the attempt number (1 on the first try). */
export const ATTEMPT_HEADER = 'x-q-delivery-attempt';

/**
 * Signs `body` the way receivers verify it: HMAC-SHA256 over `"<t>.<body>"` with the shared
 * secret, `t` in Unix seconds. Including `t` lets a receiver refuse replays of old deliveries.
 */
export function signWebhook(secret: string, body: string, unixSeconds: number): string {
  const mac = createHmac('sha256', secret).update(`${unixSeconds}.${body}`).digest('hex');
  return `t=${unixSeconds},v1=${mac}`;
}

/**
 * Receiver side of {@link signWebhook}: true when `header` is a valid signature of `body`, made
 * no more than `toleranceSeconds` from `nowSeconds`. Constant-time comparison.
 */
export function verifyWebhook(
  secret: string,
  body: string,
  header: string | undefined,
  opts: { nowSeconds?: number; toleranceSeconds?: number } = {},
): boolean {
  if (!header) return false;
  const parts = new Map(
    header.split(',').map((kv) => {
      const i = kv.indexOf('=');
      return [kv.slice(0, i).trim(), kv.slice(i + 1).trim()] as const;
    }),
  );
  const t = Number(parts.get('t'));
  const v1 = parts.get('v1') ?? '';
  if (!Number.isInteger(t) || !/^[0-9a-f]{64}$/.test(v1)) return false;
  const now = opts.nowSeconds ?? Math.floor(Date.now() / 1000);
  if (Math.abs(now - t) > (opts.toleranceSeconds ?? 300)) return false;
  const want = Buffer.from(signWebhook(secret, body, t).slice(`t=${t},v1=`.length), 'hex');
  return timingSafeEqual(want, Buffer.from(v1, 'hex'));
}
