/**
 * Loads the OpenTelemetry SDK packages `@q/otel/sdk` needs. They are optional peer dependencies
 * (libraries never pay for them), so a missing one must be a clear {@link QError} naming the
 * install line, not Node's bare `ERR_MODULE_NOT_FOUND` at import time. Loaded synchronously with
 * `require`: `startTelemetry` is synchronous, and a top-level `await` would stop CommonJS
 * consumers from `require`-ing this entry. Node resolves these packages to their CommonJS builds
 * for `import` and `require` alike, so the instances are the ones a static import would give.
 */
import { createRequire } from 'node:module';
import { QError, QErrorCode } from '@q/schema';
import type * as ContextAsyncHooks from '@opentelemetry/context-async-hooks';
import type * as Core from '@opentelemetry/core';
import type * as ExporterMetricsOtlpHttp from '@opentelemetry/exporter-metrics-otlp-http';
import type * as ExporterPrometheus from '@opentelemetry/exporter-prometheus';
import type * as ExporterTraceOtlpHttp from '@opentelemetry/exporter-trace-otlp-http';
import type * as Resources from '@opentelemetry/resources';
import type * as SdkMetrics from '@opentelemetry/sdk-metrics';
import type * as SdkTraceBase from '@opentelemetry/sdk-trace-base';
import type * as SemanticConventions from '@opentelemetry/semantic-conventions';

/**
 * The one command that installs `@q/otel` with every package `@q/otel/sdk` needs (the optional
 * peer dependencies, at the ranges of package.json). Documented in the README and
 * docs/telemetry.md; a test keeps the three in step.
 */
export const SDK_INSTALL_COMMAND =
  'npm install @q/otel @opentelemetry/sdk-trace-base@^2.12.1 @opentelemetry/sdk-metrics@^2.12.1 ' +
  '@opentelemetry/resources@^2.12.1 @opentelemetry/core@^2.12.1 @opentelemetry/context-async-hooks@^2.12.1 ' +
  '@opentelemetry/semantic-conventions@^1.45.0 @opentelemetry/exporter-trace-otlp-http@^0.223.0 ' +
  '@opentelemetry/exporter-metrics-otlp-http@^0.223.0 @opentelemetry/exporter-prometheus@^0.223.0';

/** The SDK modules, by role. */
export interface SdkModules {
  contextAsyncHooks: typeof ContextAsyncHooks;
  core: typeof Core;
  exporterMetricsOtlpHttp: typeof ExporterMetricsOtlpHttp;
  exporterPrometheus: typeof ExporterPrometheus;
  exporterTraceOtlpHttp: typeof ExporterTraceOtlpHttp;
  resources: typeof Resources;
  sdkMetrics: typeof SdkMetrics;
  sdkTraceBase: typeof SdkTraceBase;
  semanticConventions: typeof SemanticConventions;
}

const PEERS: ReadonlyArray<readonly [keyof SdkModules, string]> = [
  ['contextAsyncHooks', '@opentelemetry/context-async-hooks'],
  ['core', '@opentelemetry/core'],
  ['exporterMetricsOtlpHttp', '@opentelemetry/exporter-metrics-otlp-http'],
  ['exporterPrometheus', '@opentelemetry/exporter-prometheus'],
  ['exporterTraceOtlpHttp', '@opentelemetry/exporter-trace-otlp-http'],
  ['resources', '@opentelemetry/resources'],
  ['sdkMetrics', '@opentelemetry/sdk-metrics'],
  ['sdkTraceBase', '@opentelemetry/sdk-trace-base'],
  ['semanticConventions', '@opentelemetry/semantic-conventions'],
];

let loaded: SdkModules | undefined;

/**
 * The SDK modules, loaded once. Throws `QError` `CONFIG` naming every missing package and
 * {@link SDK_INSTALL_COMMAND}.
 */
export function loadSdk(): SdkModules {
  if (loaded) return loaded;
  const require = createRequire(import.meta.url);
  const modules: Partial<Record<keyof SdkModules, unknown>> = {};
  const missing: string[] = [];
  for (const [key, name] of PEERS) {
    try {
      modules[key] = require(name);
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      // Only the package itself missing; a broken install of a present package is its own error.
      if ((code === 'MODULE_NOT_FOUND' || code === 'ERR_MODULE_NOT_FOUND') && String((err as Error).message).includes(`'${name}'`)) {
        missing.push(name);
      } else {
        throw err;
      }
    }
  }
  if (missing.length > 0) {
    throw new QError(
      QErrorCode.CONFIG,
      `@q/otel/sdk needs the OpenTelemetry SDK packages, missing: ${missing.join(', ')}. Install them with: ${SDK_INSTALL_COMMAND}`,
    );
  }
  loaded = modules as SdkModules;
  return loaded;
}
