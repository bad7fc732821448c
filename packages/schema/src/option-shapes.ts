import { invalidArgument } from './errors.js';

// An option object of the wrong shape (a `logger: {}`, a `metrics: {}`) used to surface much
// later as a raw TypeError, or as an unhandled rejection inside a loop (which ends a Node
// process). Every object-shaped option is checked by the methods q calls on it, before anything
// is opened or written.

/** Throws `INVALID_ARGUMENT` unless `opts` is an object (the options argument of `op`). */
export function checkOptionsObject(op: string, opts: unknown): asserts opts is object {
  if (typeof opts !== 'object' || opts === null || Array.isArray(opts)) throw invalidArgument(`${op}: options must be an object`);
}

/**
 * Throws `INVALID_ARGUMENT` unless `v` is absent or an object on which each of `methods` is a
 * function (an OpenTelemetry provider, a logger, an instrument).
 */
export function checkOptionalMethods(op: string, what: string, v: unknown, methods: readonly string[]): void {
  if (v === undefined) return;
  const o = v as Record<string, unknown> | null;
  if (typeof v !== 'object' || o === null || methods.some((m) => typeof o[m] !== 'function')) {
    throw invalidArgument(`${op}: ${what} must be an object with ${methods.map((m) => `${m}()`).join(', ')}`);
  }
}

/** Throws `INVALID_ARGUMENT` unless `v` is absent or a function. */
export function checkOptionalFunction(op: string, what: string, v: unknown): void {
  if (v !== undefined && typeof v !== 'function') throw invalidArgument(`${op}: ${what} must be a function`);
}

/** The methods of q's `Logger` (pino's call shape). */
export const LOGGER_METHODS: readonly string[] = Object.freeze(['debug', 'info', 'warn', 'error']);

/** Checks the telemetry providers every store's options take (`tracerProvider`, `meterProvider`). */
export function checkProviders(op: string, opts: { tracerProvider?: unknown; meterProvider?: unknown }): void {
  checkOptionalMethods(op, 'tracerProvider', opts.tracerProvider, ['getTracer']);
  checkOptionalMethods(op, 'meterProvider', opts.meterProvider, ['getMeter']);
}
