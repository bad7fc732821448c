import { QError, QErrorCode } from './errors.js';

const ACCEPTED_SCHEMES = ['postgres:', 'postgresql:'] as const;
// A URL scheme as RFC 3986 spells it, short enough to be one (longer text is not shown at all).
const SCHEME = /^([a-zA-Z][a-zA-Z0-9+.-]{0,31}):/;

/**
 * Replaces the user info of any URL-shaped DSN inside `text` (user name and password: the user
 * name may carry a token) with `redacted`, and the values of `password=`-like parameters. Safe on
 * arbitrary text, so it can scrub error messages too. The user info is taken to end at the *last*
 * `@` of the URL's run of non-blank characters: a password with an unescaped `/`, `?`, `#` or `@`
 * is hidden whole (text after such a URL may be hidden too, never shown in part).
 */
export function redactDsn(text: string): string {
  return (
    text
      .replace(/([a-zA-Z][a-zA-Z0-9+.-]*:\/\/)\S*@/g, (_m, scheme: string) => `${scheme}redacted@`)
      // key=value DSNs and URL query parameters: password=…, passwd=…, sslpassword=…
      .replace(/\b((?:ssl)?pass(?:word|wd)?\s*=\s*)('[^']*'|[^\s&]+)/gi, '$1redacted')
  );
}

/**
 * One DSN (not free text) with everything between `://` and its last `@` replaced by `redacted`,
 * and `password=`-like parameters redacted: even an unescaped blank in the password stays hidden.
 */
export function redactDsnString(dsn: string): string {
  const start = dsn.indexOf('://');
  const at = dsn.lastIndexOf('@');
  const hidden = start >= 0 && at > start ? `${dsn.slice(0, start + 3)}redacted${dsn.slice(at)}` : dsn;
  return redactDsn(hidden);
}

/**
 * Validates that `dsn` is a Postgres connection URL (`postgres://` or `postgresql://`) and returns
 * it unchanged. Anything else throws a {@link QError} `UNSUPPORTED_DSN`. The message never shows
 * the DSN itself: at most its scheme. An unparsable DSN is typically one whose password holds an
 * unescaped reserved character, so any part of it could be part of the password.
 */
export function validateDsn(dsn: unknown): string {
  if (typeof dsn !== 'string' || dsn.trim() === '') {
    throw new QError(QErrorCode.UNSUPPORTED_DSN, 'unsupported DSN: expected a postgres:// or postgresql:// URL');
  }
  const lower = dsn.trim().toLowerCase();
  if (!ACCEPTED_SCHEMES.some((s) => lower.startsWith(`${s}//`))) {
    const scheme = SCHEME.exec(dsn.trim())?.[1];
    throw new QError(
      QErrorCode.UNSUPPORTED_DSN,
      scheme
        ? `unsupported DSN scheme "${scheme}:" (want postgres:// or postgresql://)`
        : 'unsupported DSN: not a URL (want postgres:// or postgresql://; key=value strings are not accepted)',
    );
  }
  let ok = true;
  try {
    new URL(dsn);
  } catch {
    ok = false;
  }
  // An `@` after the host part parses, but not as meant: a password with an unescaped `@` and then
  // `/`, `?` or `#` ends at the first `@`, and the rest of it becomes the host, the database or
  // the query, which the server's errors then quote (`database "…" does not exist`,
  // `getaddrinfo ENOTFOUND …`). So it is refused before anything connects.
  if (!ok || atAfterHost(dsn)) {
    throw new QError(
      QErrorCode.UNSUPPORTED_DSN,
      `malformed DSN: ${ok ? 'an "@" after the host part' : 'not a valid URL'} (not shown, as it may hold a password); ` +
        'percent-encode reserved characters (such as / ? # @ : and blanks) in the user name and password',
    );
  }
  return dsn;
}

/** Whether a URL DSN has an `@` after its authority (the first `/`, `?` or `#` after `://`). */
function atAfterHost(dsn: string): boolean {
  const rest = dsn.slice(dsn.indexOf('://') + 3);
  const end = rest.search(/[/?#]/);
  return end >= 0 && rest.includes('@', end);
}

/**
 * `text` with every credential of `dsn` hidden: URL user info and `password=` parameters anywhere
 * (see {@link redactDsn}), and the DSN's own password, decoded or not, wherever it appears (a
 * server or resolver error can quote part of a DSN that did not parse as meant).
 */
export function redactSecretsOf(text: string, dsn: string | { password?: unknown } | null | undefined): string {
  let out = redactDsn(text);
  for (const secret of secretsOf(dsn)) out = out.split(secret).join('redacted');
  return out;
}

// The password of `dsn` as written and decoded, and the raw user info (between :// and the last @).
function secretsOf(dsn: string | { password?: unknown } | null | undefined): string[] {
  const found: string[] = [];
  if (typeof dsn === 'string') {
    const start = dsn.indexOf('://');
    const at = dsn.lastIndexOf('@');
    if (start >= 0 && at > start + 3) {
      const info = dsn.slice(start + 3, at);
      const colon = info.indexOf(':');
      if (colon >= 0) {
        // And each run of it between reserved characters: what a misparse makes a host or a database.
        const password = info.slice(colon + 1);
        found.push(password, ...password.split(/[@/?#:\s]+/));
      }
      found.push(info);
    }
    try {
      const url = new URL(dsn);
      if (url.password) found.push(url.password, decodeURIComponentSafe(url.password));
    } catch {
      // Not a URL: the raw user info above is all there is.
    }
  } else if (dsn && typeof dsn.password === 'string') {
    found.push(dsn.password);
  }
  // A very short password would hide unrelated text; it is still never printed by q itself.
  return [...new Set(found)].filter((s) => s.length >= 4).sort((a, b) => b.length - a.length);
}

function decodeURIComponentSafe(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}
