/** Order statistics of a sample (the sample is not modified). */
export interface Summary {
  min: number;
  median: number;
  max: number;
  n: number;
}

/** Nearest-rank percentile, `p` in [0, 100]. */
export function percentile(sample: readonly number[], p: number): number {
  if (sample.length === 0) throw new Error('percentile of an empty sample');
  const sorted = [...sample].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))] as number;
}

/** Min, median (mean of the two middle values for even sizes) and max. */
export function summarize(sample: readonly number[]): Summary {
  if (sample.length === 0) throw new Error('summary of an empty sample');
  const sorted = [...sample].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  const median = sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
  return { min: sorted[0] as number, median, max: sorted[sorted.length - 1] as number, n: sorted.length };
}
