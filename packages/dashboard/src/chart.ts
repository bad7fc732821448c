import { html, type Html } from './html.js';

/** One bar series of {@link barChart}. */
export interface Series {
  name: string;
  colour: string;
  /** One value per bucket, oldest first. */
  values: number[];
}

/**
 * A stacked bar chart as inline SVG (no script, no library): one bar per bucket, the series stacked
 * in order. Drawn on the server so the page needs nothing but HTML.
 */
export function barChart(title: string, series: Series[], bucketLabel: (i: number) => string): Html {
  const n = series[0]?.values.length ?? 0;
  const totals = Array.from({ length: n }, (_, i) => series.reduce((s, x) => s + (x.values[i] ?? 0), 0));
  const max = Math.max(1, ...totals);
  const w = 720;
  const h = 160;
  const bw = w / Math.max(1, n);
  const bars: Html[] = [];
  for (let i = 0; i < n; i++) {
    let y = h;
    for (const s of series) {
      const v = s.values[i] ?? 0;
      if (v === 0) continue;
      const bh = (v / max) * (h - 10);
      y -= bh;
      bars.push(
        html`<rect
          x="${(i * bw + 1).toFixed(1)}"
          y="${y.toFixed(1)}"
          width="${Math.max(1, bw - 2).toFixed(1)}"
          height="${bh.toFixed(1)}"
          fill="${s.colour}"
          ><title>${bucketLabel(i)}: ${v} ${s.name}</title></rect
        >`,
      );
    }
  }
  const legend = series.map(
    (s) =>
      html`<span class="legend"
        ><svg width="10" height="10" aria-hidden="true"><rect width="10" height="10" fill="${s.colour}" /></svg> ${s.name}
        ${s.values.reduce((a, b) => a + b, 0)}</span
      >`,
  );
  return html`<figure class="chart">
    <figcaption>${title} ${legend}</figcaption>
    <svg viewBox="0 0 ${w} ${h}" width="100%" height="${h}" role="img" aria-label="${title}" preserveAspectRatio="none">
      ${bars}
      <line x1="0" y1="${h}" x2="${w}" y2="${h}" stroke="#9ca3af" />
    </svg>
    <div class="axis"><span>${bucketLabel(0)}</span><span>max ${max}/min</span><span>${bucketLabel(n - 1)}</span></div>
  </figure>`;
}
