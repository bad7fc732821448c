import { thrownBy } from '@q/testing';
import { describe, expect, it } from 'vitest';
import { QError } from '../src/index.js';
import { SCHEMA_TOKEN, StatementScope, statement } from '../src/internal.js';

const ping = statement('q_test_ping', `SELECT 1 FROM ${SCHEMA_TOKEN}.t JOIN ${SCHEMA_TOKEN}.u USING (id)`);

describe('StatementScope', () => {
  it('qualifies every schema token and suffixes the name with a hash of the schema', () => {
    const a = new StatementScope('app jobs');
    const b = new StatementScope('other');
    const ba = a.bind(ping);
    expect(ba.text).toBe('SELECT 1 FROM "app jobs".t JOIN "app jobs".u USING (id)');
    expect(ba.name).toMatch(/^q_test_ping_[0-9a-f]{8}$/);
    expect(b.bind(ping).name).not.toBe(ba.name);
    expect(a.bind(ping)).toBe(ba);
  });

  it('quotes a double quote inside the schema name', () => {
    expect(new StatementScope('we"ird').sql(`${SCHEMA_TOKEN}.t`)).toBe('"we""ird".t');
  });

  it('doubles a single quote of the schema name where the name opens a string literal', () => {
    const s = new StatementScope("o'hara");
    expect(s.sql(`SELECT nextval('${SCHEMA_TOKEN}.q_jobs_id_seq'::regclass) FROM ${SCHEMA_TOKEN}.t`)).toBe(
      `SELECT nextval('"o''hara".q_jobs_id_seq'::regclass) FROM "o'hara".t`,
    );
  });

  it('sends statements unnamed when named is false', () => {
    const cfg = new StatementScope('s', { named: false }).config(ping, [1]);
    expect(cfg).toEqual({ text: 'SELECT 1 FROM "s".t JOIN "s".u USING (id)', values: [1] });
  });

  it('carries rowMode array into the query config, named or not', () => {
    const rows = statement('q_test_rows', 'SELECT 1, 2', { rowMode: 'array' });
    expect(new StatementScope('s').config(rows, [])).toMatchObject({ name: expect.stringMatching(/^q_test_rows_/), rowMode: 'array' });
    expect(new StatementScope('s', { named: false }).config(rows, [])).toEqual({ text: 'SELECT 1, 2', values: [], rowMode: 'array' });
    expect(new StatementScope('s').config(ping, [])).not.toHaveProperty('rowMode');
  });

  it('refuses an empty, NUL-holding or over-long schema with INVALID_ARGUMENT', () => {
    for (const bad of ['', 'a\u0000b', 'x'.repeat(64)]) {
      const err = thrownBy(() => new StatementScope(bad));
      expect(err).toBeInstanceOf(QError);
      expect((err as QError).code).toBe('INVALID_ARGUMENT');
    }
  });

  it('refuses a statement name outside q_[a-z0-9_]+', () => {
    expect(() => statement('jobs_claim', 'SELECT 1')).toThrow(/q_/);
  });
});
