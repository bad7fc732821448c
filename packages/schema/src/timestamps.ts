import pg from 'pg';

const TIMESTAMPTZ = 1184;

/**
 * Result parsing for statements whose rows repeat the same instants: a claim's lease expiry and
 * update time are one `now()` for every row, and the jobs of one enqueue batch share their
 * creation and run times. `pg` parses every `timestamptz` text on its own (a regular expression
 * and a `Date` per value: about a tenth of a no-op job's cost in the worker); here each query
 * parses a text once and hands every later row a fresh `Date` of the same instant. Values are
 * exactly those `pg` gives (its own parser decides, user overrides of `pg.types` included); only
 * the work is shared, and no two rows share one `Date` object.
 */
export const repeatedTimestamps: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') => {
    const base = pg.types.getTypeParser(oid, format ?? 'text') as (text: string) => unknown;
    if (oid !== TIMESTAMPTZ || (format ?? 'text') !== 'text') return base;
    // One memo per query result (pg asks for the parsers once per result's row description).
    let lastText: string | undefined;
    let lastMs = 0;
    return (text: string): unknown => {
      if (text === lastText) return new Date(lastMs);
      const value = base(text);
      if (!(value instanceof Date)) return value;
      lastText = text;
      lastMs = value.getTime();
      return value;
    };
  }) as pg.CustomTypesConfig['getTypeParser'],
};
