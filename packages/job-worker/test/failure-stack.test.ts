// The stack kept with a failed attempt's error is bounded and sanitised (issue 34 item 16).
import { expect, it } from 'vitest';
import { MAX_STACK_CHARS, MAX_STACK_FRAMES, failureStack } from '../src/retry-policy.js';

function deep(n: number): Error {
  return n === 0 ? new Error('line one {"token":"SECRET"}\nline two SECRET') : deep(n - 1);
}

it('keeps the frames only (not the message lines), at most 30 frames, then an ellipsis', () => {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 200;
  try {
    const stack = failureStack(deep(100))!;
    const lines = stack.split('\n');
    expect(lines.length).toBe(MAX_STACK_FRAMES + 1);
    expect(lines.at(-1)).toBe('…');
    expect(lines.slice(0, -1).every((l) => l.startsWith('at '))).toBe(true);
    expect(stack).not.toContain('SECRET');
  } finally {
    Error.stackTraceLimit = limit;
  }
});

it('is at most 4 KB, redacts a DSN in a frame, and is undefined without frames', () => {
  const err = new Error('x');
  err.stack = `Error: x\n${Array.from({ length: 20 }, (_, i) => `    at f${i} (postgres://u:pw-SECRET@db/x/${'a'.repeat(400)}.js:1:1)`).join('\n')}`;
  const stack = failureStack(err)!;
  expect(stack.length).toBeLessThanOrEqual(MAX_STACK_CHARS + 2);
  expect(stack).not.toContain('pw-SECRET');
  expect(stack.endsWith('…')).toBe(true);
  expect(failureStack('a string')).toBeUndefined();
  expect(failureStack({ stack: 'at x' })).toBeUndefined();
  const bare = new Error('no frames');
  bare.stack = 'Error: no frames';
  expect(failureStack(bare)).toBeUndefined();
});
