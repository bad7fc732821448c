import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { DashboardActions } from './options.js';

/** Why an action request was refused, or `null` when it may run. */
export type Refusal = { status: 403 | 401; reason: string } | null;

/** The header every action request carries: a custom header a cross-site form or image cannot send. */
export const ACTION_HEADER = 'x-q-dashboard';

function digest(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}

/**
 * Whether `req` may run an action. CSRF: the request must carry {@link ACTION_HEADER} (which a
 * cross-site page can only send after a CORS preflight the dashboard never answers), and an
 * `Origin` or `Sec-Fetch-Site` header, when the browser sends one, must say same origin. Then
 * the host's `authorize` decides, or else the bearer token must match.
 */
export async function refusal(req: IncomingMessage, actions: DashboardActions | null): Promise<Refusal> {
  if (!actions) return { status: 403, reason: 'actions are off (read-only dashboard)' };
  if (req.headers[ACTION_HEADER] !== '1') return { status: 403, reason: `missing ${ACTION_HEADER} header` };
  const site = req.headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin' && site !== 'none') return { status: 403, reason: 'cross-site request' };
  const origin = req.headers.origin;
  if (origin !== undefined && origin !== 'null') {
    let host: string;
    try {
      host = new URL(origin).host;
    } catch {
      return { status: 403, reason: 'bad origin' };
    }
    if (host !== req.headers.host) return { status: 403, reason: 'cross-origin request' };
  } else if (origin === 'null') {
    return { status: 403, reason: 'opaque origin' };
  }
  if (actions.authorize) {
    return (await actions.authorize(req)) ? null : { status: 403, reason: 'not authorized' };
  }
  const header = req.headers.authorization ?? '';
  const m = /^Bearer (.+)$/.exec(header);
  const presented = m?.[1];
  if (presented === undefined || !actions.token) return { status: 401, reason: 'a bearer token is required' };
  return timingSafeEqual(digest(presented), digest(actions.token)) ? null : { status: 401, reason: 'wrong token' };
}
