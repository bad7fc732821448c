// Which failed outcome writes the worker tries again (for as long as the lease holds).
import { QError, QErrorCode, invalidArgument } from '@q/schema';
import { expect, it } from 'vitest';
import { isTransient } from '../src/completer.js';

const pgError = (code: string) => Object.assign(new Error(`pg ${code}`), { code });

it('connection failures, lock timeouts, serialization failures and shutdowns are transient', () => {
  for (const code of ['08006', '08P01', '40001', '40P01', '53300', '55P03', '57P01', '57014'])
    expect(isTransient(pgError(code)), code).toBe(true);
  expect(isTransient(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }))).toBe(true);
  expect(isTransient(new Error('Connection terminated unexpectedly'))).toBe(true);
  expect(isTransient(new QError(QErrorCode.CONNECTION, 'database unreachable'))).toBe(true);
  expect(isTransient(new QError(QErrorCode.INVALID_STATE, 'wrapped', { cause: pgError('55P03') }))).toBe(true);
});

it('bad arguments, data and integrity errors, a closed store and driver errors are not', () => {
  for (const code of ['22P02', '22021', '23505', '42601', '54000']) expect(isTransient(pgError(code)), code).toBe(false);
  expect(isTransient(invalidArgument('bad outcome'))).toBe(false);
  expect(isTransient(new QError(QErrorCode.CLOSED, 'the job store is closed'))).toBe(false);
  expect(isTransient(new RangeError('Invalid string length'))).toBe(false);
  expect(isTransient(undefined)).toBe(false);
});
