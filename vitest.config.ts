import { defineConfig } from 'vitest/config';
import SummaryReporter from './scripts/summary-reporter.mjs';

// One run over every workspace project: one Postgres (globalSetup is shared), one summary line.
export default defineConfig({
  test: {
    projects: ['packages/*', 'apps/*', 'bench', 'examples', 'tests/*'],
    reporters: ['default', new SummaryReporter()],
    passWithNoTests: false,
  },
});
