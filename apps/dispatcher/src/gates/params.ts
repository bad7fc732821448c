// Validation of `gate_params` (docs/design/dispatcher.md#gates), shared by the gates: every gate
// type reads its parameters through `Params`, so unknown/bad fields fail the same way (`QError`
// `CONFIG` naming the field) before any gate is built.
import { QError, QErrorCode } from '@q/schema';
import { redactUrl, splitCredentials } from './sources.js';
import type { GateDeps, GateSpec } from './types.js';

/** The `CONFIG` error for the field `msg` starts with, under the config path `at`. */
export function bad(at: string, msg: string): QError {
  return new QError(QErrorCode.CONFIG, `config: ${at}.${msg}`);
}

/** Reads `gate_params` (values may be numbers or numeric strings, docs/design/dispatcher.md#gates), naming bad fields. */
export class Params {
  constructor(
    readonly at: string,
    readonly p: Record<string, unknown>,
    known: readonly string[],
  ) {
    if (typeof p !== 'object' || p === null || Array.isArray(p)) throw new QError(QErrorCode.CONFIG, `config: ${at} must be an object`);
    for (const k of Object.keys(p)) if (!known.includes(k)) throw bad(at, `${k}: unknown parameter (known: ${known.join(', ')})`);
  }
  num(name: string, dflt: number | undefined, min = -Infinity, max = Infinity): number {
    const v = this.p[name];
    if (v === undefined) {
      if (dflt === undefined) throw bad(this.at, `${name} is required`);
      return dflt;
    }
    const n = typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' ? Number(v) : Number.NaN;
    if (!Number.isFinite(n) || n < min || n > max) throw bad(this.at, `${name} must be a number from ${min} to ${max}`);
    return n;
  }
  str(name: string, dflt?: string): string {
    const v = this.p[name];
    if (v === undefined) {
      if (dflt === undefined) throw bad(this.at, `${name} is required`);
      return dflt;
    }
    if (typeof v !== 'string' || v === '') throw bad(this.at, `${name} must be a non-empty string`);
    return v;
  }
  labels(name: string): Record<string, string> {
    const v = this.p[name];
    if (v === undefined) return {};
    if (typeof v !== 'object' || v === null || Array.isArray(v) || Object.values(v).some((x) => typeof x !== 'string')) {
      throw bad(this.at, `${name} must be an object of strings`);
    }
    return v as Record<string, string>;
  }
  urls(name: string, required: boolean): string[] {
    const v = this.p[name];
    if (v === undefined && !required) return [];
    const list =
      typeof v === 'string'
        ? v
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean)
        : v;
    if (!Array.isArray(list) || list.length === 0 || list.some((u) => typeof u !== 'string' || !/^https?:\/\//.test(u))) {
      throw bad(this.at, `${name} must be an http(s) URL, a comma-separated list or an array of them`);
    }
    for (const u of list as string[]) {
      try {
        splitCredentials(u);
      } catch (err) {
        throw bad(
          this.at,
          `${name}: ${JSON.stringify(redactUrl(u))} is not a valid URL${err instanceof TypeError ? '' : ` (${(err as Error).message})`}`,
        );
      }
    }
    return list as string[];
  }
}

/** Checks that a nested gate (composite, wait-on-refuse) is `{ gate_type, gate_params }`. */
export function gateSpec(v: unknown, at: string): GateSpec {
  if (typeof v !== 'object' || v === null || typeof (v as GateSpec).gate_type !== 'string')
    throw new QError(QErrorCode.CONFIG, `config: ${at} must be { gate_type, gate_params }`);
  return v as GateSpec;
}

/** The `prometheus-*` gates cannot work without `prometheus_url`: refuse the config up front. */
export function needsPrometheus(deps: GateDeps, at: string, type: string): void {
  if (!deps.hasPrometheus) throw new QError(QErrorCode.CONFIG, `config: ${at}.gate_type ${type} needs prometheus_url`);
}
