import { thrownBy } from '@q/testing';
import { describe, expect, it } from 'vitest';
import { QError } from '../src/index.js';
import { MAX_NAME_BYTES, checkName, checkText, unstorableText } from '../src/internal.js';

describe('text checks', () => {
  it('accepts any well-formed text without NUL, including astral characters', () => {
    for (const s of ['', 'plain', '日本語', '🙂 emoji', `'); DROP TABLE x; --`]) expect(unstorableText(s)).toBeUndefined();
  });

  it.each([
    ['nul\u0000byte', /NUL/],
    ['\ud800 lone high', /surrogate/],
    ['lone low \udc00', /surrogate/],
  ])('rejects %j', (s, why) => {
    expect(unstorableText(s)).toMatch(why);
    expect(() => checkText('op', 'envelope', s)).toThrow(QError);
  });

  it('checkName bounds identifiers in UTF-8 bytes and never echoes the value', () => {
    expect(checkName('op', 'id', 'x'.repeat(MAX_NAME_BYTES))).toHaveLength(MAX_NAME_BYTES);
    const err = thrownBy(() => checkName('op', 'id', 'é'.repeat(MAX_NAME_BYTES / 2 + 1)));
    expect(err).toBeInstanceOf(QError);
    expect((err as QError).code).toBe('INVALID_ARGUMENT');
    expect((err as QError).message).not.toContain('é');
    expect(() => checkName('op', 'id', '')).toThrow(/non-empty/);
    expect(checkName('op', 'owner', '', { allowEmpty: true })).toBe('');
  });
});
