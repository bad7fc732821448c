import { PNG } from 'pngjs';
import { ratioMark, type ScenarioResult } from '../harness.js';
import { CELL_W, GLYPH_H, glyph } from './font.js';

type RGB = [number, number, number];

const WHITE: RGB = [255, 255, 255];
const INK: RGB = [33, 33, 33];
const GRID: RGB = [224, 224, 224];
const BETTER: RGB = [46, 125, 50];
const WORSE: RGB = [198, 40, 40];

/** A tiny RGB raster on top of pngjs. */
class Canvas {
  readonly png: PNG;
  constructor(
    readonly width: number,
    readonly height: number,
  ) {
    this.png = new PNG({ width, height });
    this.rect(0, 0, width, height, WHITE);
  }
  rect(x0: number, y0: number, w: number, h: number, c: RGB): void {
    const x1 = Math.min(this.width, Math.round(x0 + w));
    const y1 = Math.min(this.height, Math.round(y0 + h));
    for (let y = Math.max(0, Math.round(y0)); y < y1; y++) {
      for (let x = Math.max(0, Math.round(x0)); x < x1; x++) {
        const i = (y * this.width + x) * 4;
        this.png.data[i] = c[0];
        this.png.data[i + 1] = c[1];
        this.png.data[i + 2] = c[2];
        this.png.data[i + 3] = 255;
      }
    }
  }
  text(x: number, y: number, s: string, c: RGB, scale = 2): void {
    let cx = x;
    for (const ch of s) {
      for (const [gx, gy] of glyph(ch)) this.rect(cx + gx * scale, y + gy * scale, scale, scale, c);
      cx += CELL_W * scale;
    }
  }
  static textWidth(s: string, scale = 2): number {
    return [...s].length * CELL_W * scale;
  }
}

/** One bar: how many times better q is than `system` on one scenario metric. */
export interface Bar {
  label: string;
  advantage: number;
  /** `≥` / `≤` when a median is at its metric's cap, so the ratio is a bound (see `ratioMark`). */
  mark?: string;
}

/** The bars of a run: every ratio of every scenario, in order. */
export function barsOf(results: ScenarioResult[]): Bar[] {
  const bars: Bar[] = [];
  for (const r of results) {
    for (const ratio of r.ratios) {
      const metric = r.metrics.length > 1 ? ` ${ratio.metric}` : '';
      const mark = ratioMark(r, ratio);
      // Both at the cap: the ratio says nothing.
      if (mark === '?') continue;
      bars.push({ label: `${r.name}${metric} vs ${ratio.system}`, advantage: ratio.advantage, ...(mark ? { mark } : {}) });
    }
  }
  return bars;
}

/**
 * A horizontal bar chart of the ratios on a log axis centred on 1×: green bars to the right mean
 * the baseline (q) is better, red bars to the left mean it is worse.
 */
export function renderChart(title: string, subtitle: string, bars: Bar[]): Buffer {
  const scale = 2;
  const rowH = 26;
  const labelW = Math.max(200, ...bars.map((b) => Canvas.textWidth(b.label, scale))) + 20;
  const plotW = 640;
  const top = 70;
  const width = labelW + plotW + 110;
  const height = top + Math.max(1, bars.length) * rowH + 50;
  const cv = new Canvas(width, height);
  cv.text(12, 12, title, INK, 3);
  cv.text(12, 44, subtitle, INK, 1);

  const values = bars.map((b) => b.advantage).filter((v) => v > 0);
  const lo = Math.min(0.1, ...values.map((v) => v / 1.2));
  const hi = Math.max(10, ...values.map((v) => v * 1.2));
  const x = (v: number) => labelW + ((Math.log10(v) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * plotW;
  const plotBottom = top + bars.length * rowH;

  for (const t of [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500]) {
    if (t < lo || t > hi) continue;
    cv.rect(x(t), top - 4, 1, plotBottom - top + 8, t === 1 ? INK : GRID);
    const label = `${t}×`;
    cv.text(x(t) - Canvas.textWidth(label, 1) / 2, plotBottom + 10, label, INK, 1);
  }
  cv.text(labelW, plotBottom + 26, '<- peer better          q better ->', INK, 1);

  bars.forEach((b, i) => {
    const y = top + i * rowH;
    cv.text(labelW - 10 - Canvas.textWidth(b.label, scale), y + (rowH - GLYPH_H * scale) / 2, b.label, INK, scale);
    const x0 = x(1);
    const x1 = x(Math.min(hi, Math.max(lo, b.advantage)));
    const good = b.advantage >= 1;
    cv.rect(Math.min(x0, x1), y + 5, Math.max(2, Math.abs(x1 - x0)), rowH - 10, good ? BETTER : WORSE);
    const v = `${b.mark ?? ''}${b.advantage >= 10 ? b.advantage.toFixed(0) : b.advantage.toFixed(2)}×`;
    const tx = good ? x1 + 6 : x1 - 6 - Canvas.textWidth(v, scale);
    cv.text(Math.max(labelW + 2, tx), y + (rowH - GLYPH_H * scale) / 2, v, INK, scale);
  });
  return PNG.sync.write(cv.png);
}
