import type { Step } from '@q/store';
import { html, type Html } from './html.js';

const STEP_COLOURS: Record<string, string> = { succeeded: '#34d399', failed: '#f87171', running: '#60a5fa', skipped: '#d1d5db' };

/**
 * A job's step timeline as inline SVG: one row per step, a bar from its start to its end (or to
 * `now` while it runs), on a shared time axis.
 */
export function stepTimeline(steps: readonly Step[], now: Date): Html {
  const timed = steps.map((s) => ({
    s,
    start: s.started_at ? Date.parse(s.started_at) : NaN,
    end: s.finished_at ? Date.parse(s.finished_at) : NaN,
  }));
  const starts = timed.map((t) => t.start).filter((x) => !Number.isNaN(x));
  if (starts.length === 0) return html`<p class="muted">No step timeline recorded.</p>`;
  const t0 = Math.min(...starts);
  const t1 = Math.max(t0 + 1, ...timed.map((t) => (Number.isNaN(t.end) ? (Number.isNaN(t.start) ? t0 : now.getTime()) : t.end)));
  const w = 720;
  const label = 180;
  const rowH = 22;
  const scale = (t: number) => label + ((t - t0) / (t1 - t0)) * (w - label - 10);
  const rows = timed.map(({ s, start, end }, i) => {
    const y = i * rowH + 4;
    const x0 = Number.isNaN(start) ? label : scale(start);
    const x1 = Number.isNaN(end) ? (Number.isNaN(start) ? label : scale(now.getTime())) : scale(end);
    const ms = !Number.isNaN(start) && !Number.isNaN(end) ? `${end - start} ms` : s.status;
    return html`<g class="step" data-step="${s.name}"
      ><text x="0" y="${y + 14}" font-size="12">${s.name}</text
      ><rect
        x="${x0.toFixed(1)}"
        y="${y}"
        width="${Math.max(2, x1 - x0).toFixed(1)}"
        height="${rowH - 8}"
        fill="${STEP_COLOURS[s.status] ?? '#a78bfa'}"
        ><title>${s.name}: ${s.status}, ${ms}${s.message ? ` — ${s.message}` : ''}</title></rect
      ><text x="${(Math.max(x1, x0 + 2) + 4).toFixed(1)}" y="${y + 12}" font-size="11" fill="#6b7280">${ms}</text></g
    >`;
  });
  const h = steps.length * rowH + 8;
  return html`<svg class="timeline" viewBox="0 0 ${w} ${h}" width="${w}" height="${h}" role="img" aria-label="step timeline">${rows}</svg>`;
}
