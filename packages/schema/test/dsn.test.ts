import { describe, expect, it } from 'vitest';
import { QError, openPool, redactDsn, validateDsn } from '../src/index.js';

describe('validateDsn', () => {
  it('accepts postgres:// and postgresql:// URLs', () => {
    expect(validateDsn('postgres://u:p@h/db')).toBe('postgres://u:p@h/db');
    expect(validateDsn('postgresql://u:p@h:5433/db?sslmode=disable')).toBe('postgresql://u:p@h:5433/db?sslmode=disable');
  });

  it.each(['sqlite:///tmp/x.db', 'file:/tmp/x.db?mode=ro', 'mysql://u:secret@h/db', '', 'host=localhost password=secret'])(
    'rejects %s with UNSUPPORTED_DSN and no password in the message',
    (dsn) => {
      let err: unknown;
      try {
        validateDsn(dsn);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(QError);
      expect((err as QError).code).toBe('UNSUPPORTED_DSN');
      expect((err as QError).message).not.toContain('secret');
    },
  );

  it('redacts userinfo anywhere in a text', () => {
    expect(redactDsn('failed for postgres://alice:hunter2@db:5432/x today')).toBe('failed for postgres://redacted@db:5432/x today');
    expect(redactDsn('mysql://u:secret@h/db')).not.toContain('secret');
  });

  it('a failing connect reports the DSN without its password', async () => {
    const err = await openPool('postgres://alice:hunter2@127.0.0.1:1/db').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(QError);
    expect((err as QError).code).toBe('CONNECTION');
    expect((err as QError).message).toContain('127.0.0.1:1');
    expect((err as QError).message).not.toContain('hunter2');
  });
});
