// What a batch's input line must be (the reference Batch API's rules): a JSON object with a
// non-empty `custom_id` unique in the file, `method` POST, `url` the batch's endpoint, and an
// object `body`. A batch with any bad line fails at validation, naming each line.
import type { BatchLineError } from '@q/store';

/** The endpoints a batch may target. */
export const BATCH_ENDPOINTS = ['/v1/chat/completions', '/v1/completions', '/v1/embeddings', '/v1/responses'] as const;

/** Errors kept per batch (the first ones): enough to fix a file, bounded for a 50,000-line one. */
export const MAX_REPORTED_ERRORS = 1000;

/** A valid request line. */
export interface CheckedLine {
  lineNo: number;
  customId: string;
  url: string;
  body: Record<string, unknown>;
}

const err = (code: string, message: string, line: number, param: string | null = null): BatchLineError => ({ code, message, param, line });

/**
 * Checks line `lineNo` (its text without the terminator) of a batch for `endpoint`; `seen` holds
 * the custom ids met so far (this one is added). `null` for a blank line (skipped).
 */
export function checkLine(text: string, lineNo: number, endpoint: string, seen: Set<string>): CheckedLine | BatchLineError | null {
  if (text.trim() === '') return null;
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return err('invalid_json_line', `Line ${lineNo} is not valid JSON.`, lineNo);
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return err('invalid_json_line', `Line ${lineNo} is not a JSON object.`, lineNo);
  const o = v as Record<string, unknown>;
  if (typeof o.custom_id !== 'string' || o.custom_id === '') {
    return err('invalid_request', `Line ${lineNo}: custom_id must be a non-empty string.`, lineNo, 'custom_id');
  }
  if (seen.has(o.custom_id)) {
    return err('duplicate_custom_id', `Line ${lineNo}: custom_id ${JSON.stringify(o.custom_id)} is used more than once.`, lineNo, 'custom_id');
  }
  seen.add(o.custom_id);
  if (o.method !== 'POST') return err('invalid_method', `Line ${lineNo}: method must be POST.`, lineNo, 'method');
  if (typeof o.url !== 'string' || !(BATCH_ENDPOINTS as readonly string[]).includes(o.url)) {
    return err('invalid_url', `Line ${lineNo}: url must be one of ${BATCH_ENDPOINTS.join(', ')}.`, lineNo, 'url');
  }
  if (o.url !== endpoint) {
    return err('mismatched_endpoint', `Line ${lineNo}: url ${o.url} does not match the batch's endpoint ${endpoint}.`, lineNo, 'url');
  }
  if (typeof o.body !== 'object' || o.body === null || Array.isArray(o.body)) {
    return err('invalid_request', `Line ${lineNo}: body must be a JSON object.`, lineNo, 'body');
  }
  return { lineNo, customId: o.custom_id, url: o.url, body: o.body as Record<string, unknown> };
}
