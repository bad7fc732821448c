import { defineProject } from 'vitest/config';
import SummaryReporter from '../../scripts/summary-reporter.mjs';
import { qProject } from '../../vitest.shared.mjs';

// The suite starts its own PostgreSQL 13 server: no shared server of the run (globalSetup) needed.
export default defineProject(
  qProject('versions', { reporters: ['default', new SummaryReporter()], globalSetup: [], fileParallelism: false, testTimeout: 120_000 }),
);
