import { defineProject } from 'vitest/config';
import SummaryReporter from '../../scripts/summary-reporter.mjs';
import { qProject } from '../../vitest.shared.mjs';

// Scenarios run one file at a time: each one saturates the 2-core machine on purpose.
export default defineProject(qProject('chaos', { reporters: ['default', new SummaryReporter()], fileParallelism: false, testTimeout: 300_000 }));
