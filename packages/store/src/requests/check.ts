// RequestStore's own input checks, for callers that want to know before they write (the
// partition runner checks each handler outcome with these, so one bad result fails alone
// instead of failing the whole ack batch it would have joined).
import type { Completion } from './types.js';
import * as v from './validate.js';

/**
 * Checks one completion exactly as {@link RequestStore.ack} does and returns it normalised (`expiresAt`
 * 0 when absent). Throws `INVALID_ARGUMENT` naming the field as `ack: <what>.<field>`, never its
 * value: ids, tokens and routes must be non-empty, storable text (no NUL, no lone surrogate) of
 * at most 2,048 bytes; the payload storable text of at most {@link MAX_VALUE_BYTES}; `attempt`
 * and `expiresAt` non-negative safe integers.
 */
export function checkCompletion(completion: unknown, what = 'completion'): Required<Completion> {
  return v.completionAs('ack', what, completion);
}

/**
 * Checks an envelope exactly as {@link RequestStore.retry} does (storable text of at most
 * {@link MAX_VALUE_BYTES}). Throws `INVALID_ARGUMENT` naming `what`, never the value.
 */
export function checkEnvelope(envelope: unknown, what = 'envelope'): string {
  return v.envelope('retry', what, envelope);
}

/**
 * Checks a time in Unix seconds exactly as {@link RequestStore.retry} and {@link RequestStore.defer} check
 * `notBefore`: a non-negative safe integer. Throws `INVALID_ARGUMENT` naming `what`.
 */
export function checkUnixSeconds(seconds: unknown, what = 'notBefore'): number {
  return v.count('retry', what, seconds);
}
