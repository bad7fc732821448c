// A failed attempt's error is stored in `last_error` (text) as its message, then — when the
// worker kept one — the failing call's stack after a separator line. No new column: the reader
// splits them again, so `Job.lastError` stays the message it always was.

/** Between the message and the stack in `last_error` (a record separator no message line starts with in practice). */
export const ERROR_STACK_SEPARATOR = '\n\u001estack\n';

/** The text stored for an error `message` with its `stack` (frames only), if any. */
export function joinErrorStack(message: string, stack: string | undefined): string {
  return stack ? `${message}${ERROR_STACK_SEPARATOR}${stack}` : message;
}

/** `last_error` as stored → the message and the stack kept with it (or `null`). */
export function splitErrorText(text: string | null): { message: string | null; stack: string | null } {
  if (text === null) return { message: null, stack: null };
  const at = text.lastIndexOf(ERROR_STACK_SEPARATOR);
  return at < 0 ? { message: text, stack: null } : { message: text.slice(0, at), stack: text.slice(at + ERROR_STACK_SEPARATOR.length) };
}
