/**
 * What `fn` throws, for tests that check more of an error than `toThrow` can (its class, `code`,
 * what its message must not contain). Throws itself, failing the test, when `fn` returns.
 */
export function thrownBy(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  throw new Error('expected the call to throw; it returned');
}
