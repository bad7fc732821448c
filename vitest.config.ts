import { defineConfig } from 'vitest/config';
import SummaryReporter from './scripts/summary-reporter.mjs';

// One run over every workspace project: one Postgres (globalSetup is shared), one summary line.
export default defineConfig({
  test: {
    // tests/chaos runs on its own (pnpm test:chaos): it starts, kills and restarts servers;
    // tests/pooler too (pnpm test:pooler): it needs Debian's pgbouncer; and tests/versions
    // (pnpm test:versions): it starts its own PostgreSQL 13.
    projects: ['packages/*', 'apps/*', 'bench', 'examples', 'tests/telemetry', 'tests/consumers', 'tests/docs'],
    reporters: ['default', new SummaryReporter()],
    passWithNoTests: false,
  },
});
