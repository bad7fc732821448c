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
    resolve: { conditions: ['q-source', ...defaultClientConditions] },
    ssr: { resolve: { conditions: ['q-source', ...defaultServerConditions] } },
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
