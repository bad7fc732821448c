// Shared vitest settings of every workspace project (packages/*/vitest.config.ts).
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { defaultClientConditions, defaultServerConditions } from 'vite';

const root = path.dirname(fileURLToPath(import.meta.url));

/**
 * Project config: resolves workspace packages to their TypeScript sources (`q-source` export
 * condition, so tests never run stale builds) and shares one Postgres per run (globalSetup).
 */
export function qProject(name, test = {}) {
  return {
    // vite's default `module` condition points some packages (@opentelemetry/api) at ESM builds
    // Node itself cannot load: resolve as Node does, plus the source condition.
    resolve: { conditions: ['q-source', ...defaultClientConditions.filter((c) => c !== 'module')] },
    ssr: { resolve: { conditions: ['q-source', ...defaultServerConditions.filter((c) => c !== 'module')] } },
    test: {
      name,
      include: ['test/**/*.test.ts'],
      globalSetup: [path.join(root, 'packages/testing/src/global-setup.ts')],
      testTimeout: 60_000,
      hookTimeout: 120_000,
      ...test,
    },
  };
}
