// Issue 34 item 11: a password with an unescaped "@" then "/" parsed into other parts than meant
// (the rest of the password read as the host or the database) and reached the server; --dsn now
// refuses it at startup, showing no part of it.
import { isQError } from '@q/schema';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../src/config.js';

const TOKEN = 'a-very-long-admin-token';
const SHAPES = ['postgres://u:mf7Qz@Wr2kV/x@127.0.0.1:1/db', 'postgres://u:mf7Qz@127.0.0.1:1/Wr2kV@h/db'];

describe('--dsn with an "@" after the host part', () => {
  it.each(SHAPES)('%s is a CONFIG error naming --dsn, with no part of the password', (dsn) => {
    for (const [argv, env] of [
      [['--dsn', dsn], { AKERDOCK_ADMIN_TOKEN: TOKEN }],
      [[], { AKERDOCK_DATABASE_URL: dsn, AKERDOCK_ADMIN_TOKEN: TOKEN }],
    ] as const) {
      let err: unknown;
      try {
        parseConfig([...argv], { ...env });
      } catch (e) {
        err = e;
      }
      expect(isQError(err, 'CONFIG')).toBe(true);
      expect((err as Error).message).toMatch(/^--dsn: malformed DSN/);
      expect((err as Error).message).not.toMatch(/mf7Qz|Wr2kV/);
    }
  });
});
