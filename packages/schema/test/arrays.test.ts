import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { at, onlyRow, plainArrayLiteral, textArrayLiteral, unnestColumn } from '../src/internal.js';
import { testDatabaseUrl } from '@q/testing';

describe('array helpers', () => {
  let client: pg.Client;
  beforeAll(async () => {
    client = new pg.Client({ connectionString: testDatabaseUrl() });
    await client.connect();
  });
  afterAll(() => client.end());

  it('unnestColumn is null only when every value is null', () => {
    expect(unnestColumn([null, null])).toBeNull();
    expect(unnestColumn([])).toBeNull();
    const some = [null, 'a'];
    expect(unnestColumn(some)).toBe(some);
    expect(unnestColumn([0])).toEqual([0]);
  });

  it('a compacted column unnests to the same rows as the array of NULLs', async () => {
    const ids = [3, 1, 2];
    const nulls = [null, null, null];
    const sql = 'SELECT id, k FROM unnest($1::int8[], $2::text[]) WITH ORDINALITY AS u(id, k, ord) ORDER BY ord';
    const full = await client.query(sql, [ids, nulls]);
    const compacted = await client.query(sql, [ids, unnestColumn(nulls)]);
    expect(compacted.rows).toEqual(full.rows);
    expect(compacted.rows).toHaveLength(3);
  });

  it('plainArrayLiteral reads back as the array the driver would send', async () => {
    const ids = [1, 9_007_199_254_740_991, 42];
    const tokens = [crypto.randomUUID(), crypto.randomUUID()];
    const { rows } = await client.query<{ a: string[]; b: string[]; e: number[] }>(
      'SELECT $1::int8[]::text[] AS a, $2::uuid[]::text[] AS b, $3::int4[] AS e',
      [plainArrayLiteral(ids), plainArrayLiteral(tokens), plainArrayLiteral([])],
    );
    const row = onlyRow(rows, 'arrays');
    expect(row.a).toEqual(ids.map(String));
    expect(row.b).toEqual(tokens);
    expect(row.e).toEqual([]);
    expect(at(row.b, 1)).toBe(tokens[1]);
  });

  it('textArrayLiteral reads back as the text[] the driver would send, NULLs and all', async () => {
    const values = ['null', 'NULL', '', ' a b ', '{}', 'a,b', '"q"', 'back\\slash', '{"k":"v\\"w"}', 'ü€😀', null, '[]', 'x"y\\z'];
    const { rows } = await client.query<{ ours: (string | null)[]; driver: (string | null)[]; n: number }>(
      'SELECT $1::text[] AS ours, $2::text[] AS driver, cardinality($1::text[]) AS n',
      [textArrayLiteral(values), values],
    );
    const row = onlyRow(rows, 'text arrays');
    expect(row.ours).toEqual(values);
    expect(row.ours).toEqual(row.driver);
    expect(row.n).toBe(values.length);
    expect(textArrayLiteral([])).toBe('{}');
  });
});
