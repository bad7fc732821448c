// Outgoing headers of docs/design/dispatcher.md#headers, applied in order (later wins).

const TOKEN = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/;
// A legal header value: visible ASCII, space and tab, no leading/trailing whitespace.
const VALUE = /^[\x21-\x7e]([\x20-\x7e\t]*[\x21-\x7e])?$/;

/** What the headers depend on. */
export interface HeaderInput {
  /** Queue's `inference_objective`, if any. */
  objective?: string;
  /** The message's `headers`. */
  headers?: Record<string, string>;
  metadata?: Record<string, string>;
  /** Fairness header name ("" disables it) and the metadata attribute it carries. */
  fairnessHeader: string;
  fairnessAttribute: string;
  /**
   * `tier-priority` pools (step 5): the request's lane, and either the header that carries it
   * (`header`, "" = none) or the objective that replaces the queue's for that lane (`objective`).
   */
  priority?: { lane: number; header: string; objective?: string };
}

/** Builds the header map (lower-case names). Illegal custom header names are skipped. */
export function buildHeaders(input: HeaderInput): Record<string, string> {
  const out: Record<string, string> = { 'content-type': 'application/json' };
  if (input.objective) out['x-llm-d-inference-objective'] = input.objective;
  for (const [k, v] of Object.entries(input.headers ?? {})) {
    if (TOKEN.test(k) && (v === '' || VALUE.test(v))) out[k.toLowerCase()] = v;
  }
  if (input.fairnessHeader) {
    const id = input.metadata?.[input.fairnessAttribute];
    if (id && Buffer.byteLength(id) <= 256 && VALUE.test(id)) out[input.fairnessHeader.toLowerCase()] = id;
  }
  const p = input.priority;
  if (p) {
    // A lane objective names the priority itself (the gateway maps objectives to priorities),
    // so it replaces the lane index rather than adding a second, possibly conflicting signal.
    if (p.objective !== undefined) out['x-llm-d-inference-objective'] = p.objective;
    else if (p.header) out[p.header.toLowerCase()] = String(p.lane);
  }
  return out;
}

/** `url.JoinPath(base, path)`: one slash between them, the base's own path kept. */
export function joinUrl(base: string, path: string): string {
  const u = new URL(base);
  const left = u.pathname.replace(/\/+$/, '');
  const right = path.replace(/^\/+/, '');
  u.pathname = right ? `${left}/${right}` : left || '/';
  return u.toString();
}
