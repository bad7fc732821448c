import { defineProject } from 'vitest/config';
import SummaryReporter from '../../scripts/summary-reporter.mjs';
import { qProject } from '../../vitest.shared.mjs';

// One file at a time: each starts its own PgBouncer and worker processes.
export default defineProject(qProject('pooler', { reporters: ['default', new SummaryReporter()], fileParallelism: false, testTimeout: 120_000 }));
