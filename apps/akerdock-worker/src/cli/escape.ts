// What q-jobs prints comes from job fields anyone who can enqueue (or any handler's error) can
// fill. Raw control characters would reach the operator's terminal: an escape sequence can
// rewrite the screen, retitle the window or forge lines, and bidi controls reorder what is shown.
// So every such character is shown as a visible escape instead.

// C0 controls, DEL, C1 controls (U+009B is a one-character CSI), and the Unicode line/paragraph
// separators and bidirectional controls.
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL_BUT_NEWLINE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

const NAMED: Readonly<Record<string, string>> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

function visible(c: string): string {
  const named = NAMED[c];
  if (named) return named;
  const code = c.charCodeAt(0);
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
}

/** One field for a terminal: every control character (newlines included) shown as `\n`, `\x1b`, `\u202e`. */
export function escapeField(s: string): string {
  return s.replace(CONTROL, visible);
}

/**
 * A whole block of human output whose own line breaks are kept: every other control character
 * is shown escaped. The last line of defence after {@link escapeField} on each field.
 */
export function escapeBlock(s: string): string {
  return s.replace(CONTROL_BUT_NEWLINE, visible);
}

/**
 * JSON text for a terminal: `JSON.stringify` already escapes C0 controls, but not DEL, C1 or the
 * bidi controls; those become `\uXXXX` escapes, so the text stays the same JSON value.
 */
export function escapeJson(json: string): string {
  return json.replace(CONTROL_BUT_NEWLINE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
