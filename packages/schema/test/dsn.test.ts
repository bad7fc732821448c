import { thrownBy } from '@q/testing';
import { describe, expect, it } from 'vitest';
import { QError, openPool, redactDsn, redactSecretsOf, validateDsn } from '../src/index.js';
import { checkPlacement, databaseError, redactDsnString } from '../src/internal.js';

describe('validateDsn', () => {
  it('accepts postgres:// and postgresql:// URLs', () => {
    expect(validateDsn('postgres://u:p@h/db')).toBe('postgres://u:p@h/db');
    expect(validateDsn('postgresql://u:p@h:5433/db?sslmode=disable')).toBe('postgresql://u:p@h:5433/db?sslmode=disable');
  });

  it.each(['sqlite:///tmp/x.db', 'file:/tmp/x.db?mode=ro', 'mysql://u:secret@h/db', '', 'host=localhost password=secret'])(
    'rejects %s with UNSUPPORTED_DSN and no password in the message',
    (dsn) => {
      const err = thrownBy(() => validateDsn(dsn));
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

// Issue #14 item 14: a password with an unescaped reserved character makes the DSN unparsable
// (or parsable into other parts than meant); no part of such a DSN may be echoed.
describe('DSNs whose password holds an unescaped reserved character', () => {
  const SHAPES = ['postgres://u:Zq9/Xk7@h/db', 'postgres://u:Zq9#Xk7@h/db', 'postgres://u:Zq9?Xk7@h/db', 'postgresql://u:Zq9?Xk7@h:5432/db?x=1'];

  it.each(SHAPES)('validateDsn(%s) is UNSUPPORTED_DSN and shows no part of it', (dsn) => {
    const err = thrownBy(() => validateDsn(dsn));
    expect(err).toBeInstanceOf(QError);
    expect((err as QError).code).toBe('UNSUPPORTED_DSN');
    expect((err as QError).message).not.toMatch(/Zq9|Xk7|u:|@h/);
  });

  it('an unsupported scheme shows the scheme only', () => {
    const err = thrownBy(() => validateDsn('mysql://u:Zq9/Xk7@h/db')) as QError;
    expect(err.message).toContain('"mysql:"');
    expect(err.message).not.toMatch(/Zq9|Xk7/);
  });

  it('redaction hides everything between :// and the last @', () => {
    for (const dsn of ['postgres://u:Zq9/Xk7@h/db', 'postgres://u:Zq9#Xk7@h/db', 'postgres://u:Zq9?Xk7@h/db', 'postgres://u:Zq9@Xk7@h/db']) {
      expect(redactDsn(`failed: ${dsn} now`)).toBe('failed: postgres://redacted@h/db now');
      expect(redactDsnString(dsn)).toBe('postgres://redacted@h/db');
    }
    expect(redactDsnString('postgres://u:Zq9 Xk7@h/db')).toBe('postgres://redacted@h/db');
    expect(redactDsnString('postgres://h/db?password=Zq9')).toBe('postgres://h/db?password=redacted');
  });

  // Round 3: these parse, into other parts than meant (the password's rest read as the host, the
  // database or the query), and the server's or the resolver's error quoted that rest.
  it.each([
    'postgres://u:Zq9@Xk7/x@127.0.0.1:1/db',
    'postgres://u:Zq9@127.0.0.1:1/Xk7@h/db',
    'postgres://u:Zq9@127.0.0.1:1/db?Xk7@h',
    'postgres://localhost:1/Zq9#Xk7@127.0.0.1/db',
    'postgres://localhost:1/Zq9?Xk7@127.0.0.1/db',
  ])('an "@" after the host part (%s) is UNSUPPORTED_DSN, before any connect, and shows no part of it', async (dsn) => {
    expect(thrownBy(() => validateDsn(dsn))).toMatchObject({ code: 'UNSUPPORTED_DSN', message: expect.stringContaining('after the host part') });
    const err = await openPool(dsn).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'UNSUPPORTED_DSN' });
    expect((err as QError).message).not.toMatch(/Zq9|Xk7/);
  });

  it('listenDsn is checked as a DSN is, and named', () => {
    for (const listenDsn of ['postgres://u:Zq9@Xk7/x@127.0.0.1:1/db', 'mysql://u:Zq9@h/db', 'postgres://u:Zq9/Xk7@h/db']) {
      const err = thrownBy(() => checkPlacement('JobStore.open', { listenDsn })) as QError;
      expect(err).toMatchObject({ code: 'UNSUPPORTED_DSN', message: expect.stringMatching(/^JobStore\.open: listenDsn: /) });
      expect(err.message).not.toMatch(/Zq9|Xk7/);
    }
    expect(() => checkPlacement('JobStore.open', { listenDsn: 'postgres://u:p%40ss@h/db' })).not.toThrow();
  });

  it('redactSecretsOf hides the password of its DSN wherever a message quotes it, written or decoded', () => {
    expect(redactSecretsOf('database "Xk7q@h/db" does not exist', 'postgres://u:Zq9q@127.0.0.1:1/Xk7q@h/db')).not.toMatch(/Xk7q|Zq9q/);
    expect(redactSecretsOf('getaddrinfo ENOTFOUND Xk7q', 'postgres://u:Zq9q@Xk7q/x@h/db')).not.toMatch(/Xk7q|Zq9q/);
    expect(redactSecretsOf('auth failed for p@ss word', 'postgres://u:p%40ss%20word@h/db')).toBe('auth failed for redacted');
    expect(redactSecretsOf('auth failed for s3cret!', { password: 's3cret!' })).toBe('auth failed for redacted');
    expect(redactSecretsOf('connect ECONNREFUSED 127.0.0.1:1', 'postgres://u:pw@127.0.0.1:1/db')).toBe('connect ECONNREFUSED 127.0.0.1:1');
  });

  it.each(['postgres://u:Zq9 Xk7@127.0.0.1:1/db'])(
    'a DSN that parses into other parts than meant (%s) fails to connect without any part of its password',
    async (dsn) => {
      const err = await openPool(dsn).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(QError);
      expect((err as QError).code).toBe('CONNECTION');
      expect((err as QError).message).not.toMatch(/Zq9|Xk7/);
    },
  );
});

describe('databaseError', () => {
  const pgError = (code: string, message: string) => Object.assign(new Error(message), { code });

  it('maps unique violations, data exceptions, oversized statements and the rest', () => {
    const dup = databaseError('enqueue', pgError('23505', 'duplicate key value violates unique constraint "x"'), { duplicate: 'taken' });
    expect(dup).toMatchObject({ code: 'DUPLICATE', message: 'enqueue: taken' });
    const range = databaseError('claim', pgError('22008', 'timestamp out of range: "271822-04-20T00:00:00.000+00:00 BC"'));
    expect(range).toMatchObject({ code: 'INVALID_ARGUMENT', message: 'claim: timestamp out of range (SQLSTATE 22008)' });
    const nul = databaseError('list', pgError('22021', 'invalid byte sequence for encoding "UTF8": 0x00'));
    expect(nul.code).toBe('INVALID_ARGUMENT');
    expect(databaseError('x', pgError('54000', 'index row size 9000 exceeds maximum 2712')).code).toBe('INVALID_ARGUMENT');
    expect(databaseError('enqueue', new RangeError('Invalid string length')).code).toBe('INVALID_ARGUMENT');
    const lost = databaseError('get', pgError('57P01', 'terminating connection due to administrator command'));
    expect(lost).toMatchObject({ code: 'CONNECTION', message: 'get failed: terminating connection due to administrator command' });
    const dsn = databaseError('get', new Error('connect to postgres://u:Zq9/Xk7@h/db refused'));
    expect(dsn.message).not.toMatch(/Zq9|Xk7/);
    const q = new QError('CLOSED', 'closed');
    expect(databaseError('get', q)).toBe(q);
    expect(databaseError('get', 'a string')).toMatchObject({ code: 'CONNECTION', message: 'get failed: a string' });
  });
});
