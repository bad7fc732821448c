// Browser-borne attacks on the admin API, refused in every mode (with or without a token):
//  - DNS rebinding: a page on a name its attacker controls re-points that name to the bound
//    address and reads the API as same-origin. The browser still sends the attacker's name in
//    `Host`, so only Host names this server answers to are accepted.
//  - Cross-site writes: any page can POST (a `text/plain` body needs no CORS preflight), e.g. a
//    cancel. Browsers mark such requests with `Origin` / `Sec-Fetch-Site`; a write whose origin is
//    not this server's own is refused. Clients that send neither (curl, q-jobs) are not browsers.
import { isIP } from 'node:net';

/** Why a request is refused, or `undefined` when it may go on. */
export type OriginVerdict = undefined | { status: 403; code: 'host_not_allowed' | 'cross_origin'; message: string };

/** What {@link originGuard} checks against. */
export interface OriginGuardOptions {
  /** The address the server is bound to (`127.0.0.1`, `::1`, `localhost`, `0.0.0.0`, a name). */
  host: string;
  /** Further `Host` names the API answers to (a DNS name in front of it); compared case-insensitively. */
  allowedHosts?: readonly string[];
}

const WILDCARD = new Set(['0.0.0.0', '::', '']);
const LOOPBACK_NAMES = ['localhost', '127.0.0.1', '::1'];

/** The host name of a `Host` header (`[::1]:8080` → `::1`), lower-case; `undefined` when malformed. */
export function hostName(header: string): string | undefined {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]\s/@]+))(?::(\d{1,5}))?$/.exec(header.trim());
  if (!m) return undefined;
  return (m[1] ?? m[2] ?? '').toLowerCase().replace(/\.$/, '');
}

const isLoopbackAddress = (h: string) => h === 'localhost' || h === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);

/**
 * The `Host` names a server bound to `host` answers to: the bound address itself; the loopback
 * names when bound to loopback; any IP literal when bound to every interface (an IP literal cannot
 * be rebound); and `allowedHosts`.
 */
export function hostAllowed(opts: OriginGuardOptions): (name: string) => boolean {
  const bound = opts.host.toLowerCase();
  const names = new Set<string>([bound, ...(opts.allowedHosts ?? []).map((h) => h.toLowerCase())]);
  if (isLoopbackAddress(bound)) for (const n of LOOPBACK_NAMES) names.add(n);
  const anyIp = WILDCARD.has(bound);
  return (name) => names.has(name) || (anyIp && isIP(name) !== 0);
}

const WRITE = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** Checks a request's `Host`, and for a write its `Origin` and `Sec-Fetch-Site`. */
export function originGuard(opts: OriginGuardOptions): (method: string, headers: Record<string, string | string[] | undefined>) => OriginVerdict {
  const allowed = hostAllowed(opts);
  return (method, headers) => {
    const hostHeader = typeof headers.host === 'string' ? headers.host : undefined;
    const name = hostHeader === undefined ? undefined : hostName(hostHeader);
    if (name === undefined || !allowed(name)) {
      return {
        status: 403,
        code: 'host_not_allowed',
        message: 'the Host header does not name this server (see --allowed-hosts)',
      };
    }
    if (!WRITE.has(method.toUpperCase())) return undefined;
    const site = headers['sec-fetch-site'];
    if (typeof site === 'string' && site !== 'same-origin' && site !== 'none') {
      return { status: 403, code: 'cross_origin', message: `cross-site writes are refused (Sec-Fetch-Site: ${site})` };
    }
    const origin = headers.origin;
    if (origin === undefined) return undefined;
    let same = false;
    if (typeof origin === 'string' && origin !== 'null') {
      try {
        const o = new URL(origin);
        same = (o.protocol === 'http:' || o.protocol === 'https:') && o.host.toLowerCase() === (hostHeader ?? '').trim().toLowerCase();
      } catch {
        same = false;
      }
    }
    if (!same) return { status: 403, code: 'cross_origin', message: 'cross-origin writes are refused (Origin is not this server)' };
    return undefined;
  };
}
