// The validation message rule (CONTRIBUTING.md, Conventions): an INVALID_ARGUMENT message for bad
// input reads `<op>: <what> must …`. Today's offenders are listed in messages-allow-list.txt; the list
// only shrinks — a new offender fails, and so does a listed one that was fixed (remove its line).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { followsRule, keyOf, messagesOf, offenders, sourceFiles } from '../src/messages.js';
import { readText } from '../src/repo.js';

const ALLOW_LIST = path.join(path.dirname(fileURLToPath(import.meta.url)), 'messages-allow-list.txt');
const allowed = fs
  .readFileSync(ALLOW_LIST, 'utf8')
  .split('\n')
  .filter((l) => l.trim() !== '' && !l.startsWith('#'));

const messages = sourceFiles().flatMap((f) => messagesOf(f, readText(f)));
const found = offenders(messages).map(keyOf);

describe('INVALID_ARGUMENT messages read `<op>: <what> must …`', () => {
  it('finds the messages (the scan sees the request store, the job store and the quota checks)', () => {
    expect(messages.length).toBeGreaterThan(150);
    for (const file of ['packages/store/src/requests/validate.ts', 'packages/store/src/jobs/validate.ts', 'packages/quota/src/validate.ts']) {
      expect(messages.some((m) => m.file === file)).toBe(true);
    }
  });

  it('no message breaks the rule unless the allow-list names it', () => {
    expect(found.filter((k) => !allowed.includes(k))).toEqual([]);
  });

  it('the allow-list names only messages that still break the rule (it shrinks as they are fixed)', () => {
    expect(allowed.filter((k) => !found.includes(k))).toEqual([]);
    // A message written twice in one file is listed twice: fixing one of them shortens the list too.
    const count = (list: string[], k: string) => list.filter((x) => x === k).length;
    expect(allowed.filter((k) => count(allowed, k) !== count(found, k))).toEqual([]);
  });

  it('the rule itself accepts and refuses (it can fail)', () => {
    for (const good of [
      'enqueue: queue must be a non-empty string',
      '${op}: ${what} must be a valid Date',
      'new Consumer: store must not be absent',
    ]) {
      expect(followsRule(good), good).toBe(true);
    }
    for (const bad of [
      'store must be a JobStore',
      'invalid cursor',
      'createQuota needs options',
      '${op}: ${what} ${bad}',
      'migrate: unknown module',
    ]) {
      expect(followsRule(bad), bad).toBe(false);
    }
    const [nonLiteral, literal] = messagesOf('x.ts', "throw invalidArgument(problem);\nthrow invalidArgument(`f: x must be ${'a'}`);\n");
    expect(nonLiteral).toMatchObject({ literal: false, text: 'problem' });
    expect(literal).toMatchObject({ literal: true, line: 2, text: "f: x must be ${'a'}" });
  });
});
