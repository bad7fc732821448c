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
