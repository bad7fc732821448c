import { createHash, timingSafeEqual } from 'node:crypto';

/** Outcome of checking a request's `Authorization` header. */
export type AuthVerdict = 'ok' | 'missing' | 'wrong';

/**
 * Bearer-token check. Both sides are hashed first so the comparison is constant-time whatever
 * the lengths. `token === undefined` means the server runs `--insecure-local`: everything passes.
 */
export function bearerChecker(token: string | undefined): (authorization: string | undefined) => AuthVerdict {
  if (token === undefined) return () => 'ok';
  const want = createHash('sha256').update(token).digest();
  return (authorization) => {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
    if (!m) return 'missing';
    const got = createHash('sha256')
      .update(m[1] as string)
      .digest();
    return timingSafeEqual(want, got) ? 'ok' : 'wrong';
  };
}

/** The realm a browser shows when it asks for the dashboard's password. */
export const DASHBOARD_REALM = 'q dashboard';

/**
 * HTTP Basic check of the dashboard's pages, which a browser opens without a bearer token: any
 * user name, the admin token as the password (hashed and compared in constant time, as above).
 * `token === undefined` (`--insecure-local`): everything passes.
 */
export function basicChecker(token: string | undefined): (authorization: string | undefined) => AuthVerdict {
  if (token === undefined) return () => 'ok';
  const want = createHash('sha256').update(token).digest();
  return (authorization) => {
    const m = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(authorization ?? '');
    if (!m) return 'missing';
    const decoded = Buffer.from(m[1] as string, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon < 0) return 'wrong';
    const got = createHash('sha256')
      .update(decoded.slice(colon + 1))
      .digest();
    return timingSafeEqual(want, got) ? 'ok' : 'wrong';
  };
}
