import pg from 'pg';
import { expect, it } from 'vitest';
import { repeatedTimestamps } from '../src/internal.js';

const TIMESTAMPTZ = 1184;
const parser = () => repeatedTimestamps.getTypeParser(TIMESTAMPTZ, 'text') as (text: string) => unknown;
const pgParse = pg.types.getTypeParser(TIMESTAMPTZ, 'text') as (text: string) => unknown;

it('timestamptz values are what pg parses, each row its own Date, a repeated text parsed once', () => {
  const parse = parser();
  const texts = ['2026-12-01 16:18:07.123456+00', '2026-12-01 16:18:07.123456+00', '2026-12-01 18:18:07.5+02', '1999-01-08 04:05:06-08'];
  const got = texts.map(parse);
  texts.forEach((t, i) => expect(got[i]).toEqual(pgParse(t)));
  expect(got[0]).not.toBe(got[1]);
  // A row's Date can be changed without touching the next row's.
  (got[0] as Date).setTime(0);
  expect((parse(texts[0]!) as Date).getTime()).toBe((pgParse(texts[0]!) as Date).getTime());
  // What pg does not turn into a Date (infinity, a BC date it parses its own way) is passed through.
  expect(parse('infinity')).toEqual(pgParse('infinity'));
  expect(parse('0044-03-15 12:00:00+00 BC')).toEqual(pgParse('0044-03-15 12:00:00+00 BC'));
});

it('other types and binary results use pg’s own parsers; each result gets its own memo', () => {
  expect(repeatedTimestamps.getTypeParser(20, 'text')).toBe(pg.types.getTypeParser(20, 'text'));
  expect(repeatedTimestamps.getTypeParser(3802, 'text')).toBe(pg.types.getTypeParser(3802, 'text'));
  expect(parser()).not.toBe(parser());
});
