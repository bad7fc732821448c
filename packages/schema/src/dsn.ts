import { QError, QErrorCode } from './errors.js';

const ACCEPTED_SCHEMES = ['postgres:', 'postgresql:'] as const;

/**
 * Replaces the password of any URL-shaped DSN inside `text` (and the user name, which may carry a
 * token) with `redacted`. Safe on arbitrary text, so it can scrub error messages too.
 */
export function redactDsn(text: string): string {
  return (
    text
      // scheme://user:password@host — the userinfo ends at the last '@' before the next '/', '?' or '#'.
      .replace(/([a-zA-Z][a-zA-Z0-9+.-]*:\/\/)([^/?#\s]*)@/g, (_m, scheme: string) => `${scheme}redacted@`)
      // key=value DSNs and URL query parameters: password=…, passwd=…, sslpassword=…
      .replace(/\b((?:ssl)?pass(?:word|wd)?\s*=\s*)('[^']*'|[^\s&]+)/gi, '$1redacted')
  );
}

/**
 * Validates that `dsn` is a Postgres connection URL (`postgres://` or `postgresql://`) and returns
 * it unchanged. Anything else throws a {@link QError} `UNSUPPORTED_DSN` whose message shows the DSN
 * with its credentials redacted.
 */
export function validateDsn(dsn: unknown): string {
  if (typeof dsn !== 'string' || dsn.trim() === '') {
    throw new QError(QErrorCode.UNSUPPORTED_DSN, 'unsupported DSN: expected a postgres:// or postgresql:// URL');
  }
  const lower = dsn.trim().toLowerCase();
  if (!ACCEPTED_SCHEMES.some((s) => lower.startsWith(`${s}//`))) {
    throw new QError(
      QErrorCode.UNSUPPORTED_DSN,
      `unsupported DSN scheme in "${redactDsn(dsn)}" (want postgres:// or postgresql://)`,
    );
  }
  try {
    new URL(dsn);
  } catch {
    throw new QError(QErrorCode.UNSUPPORTED_DSN, `malformed DSN "${redactDsn(dsn)}"`);
  }
  return dsn;
}
