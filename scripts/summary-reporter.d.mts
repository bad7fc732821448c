import type { Reporter } from 'vitest/reporters';
export default class SummaryReporter implements Reporter {}
