// HTML is built as strings: every value from the database or the request goes through `esc`, so
// a payload holding `<script>` is shown as text. `Html` marks text already escaped.

/** Escaped HTML text. */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** `value` as HTML text (an {@link Html} as it is). */
export function esc(value: unknown): string {
  if (value instanceof Html) return value.text;
  if (value === null || value === undefined) return '';
  return String(value).replace(/[&<>"']/g, (c) => ENTITIES[c] ?? c);
}

/** A template tag escaping every interpolated value (arrays are joined, each element escaped). */
export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0] ?? '';
  values.forEach((v, i) => {
    out += Array.isArray(v) ? v.map(esc).join('') : esc(v);
    out += strings[i + 1] ?? '';
  });
  return new Html(out);
}

/** An instant as ISO text in UTC (empty for null). */
export function time(d: Date | null | undefined): string {
  return d
    ? d
        .toISOString()
        .replace('T', ' ')
        .replace(/\.\d+Z$/, 'Z')
    : '';
}
