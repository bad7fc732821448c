import type { FlowInfo } from '@q/store';
import { html, type Html } from './html.js';

const NODE_COLOURS: Record<string, string> = {
  succeeded: '#bbf7d0',
  dead_letter: '#fecaca',
  running: '#bfdbfe',
  leased: '#bfdbfe',
  retry_wait: '#fde68a',
  queued: '#ddd6fe',
  cancelled: '#e5e7eb',
};

/** Each node's layer: 0 for a root, else one more than its deepest parent. */
export function layers(refs: readonly string[], edges: FlowInfo['edges']): Map<string, number> {
  const parents = new Map<string, string[]>(refs.map((r) => [r, []]));
  for (const e of edges) parents.get(e.child)?.push(e.parent);
  const depth = new Map<string, number>();
  const visit = (ref: string, seen: Set<string>): number => {
    const known = depth.get(ref);
    if (known !== undefined) return known;
    // A flow is acyclic (the store refuses cycles); `seen` only guards against a corrupted row.
    if (seen.has(ref)) return 0;
    seen.add(ref);
    const d = Math.max(-1, ...(parents.get(ref) ?? []).map((p) => visit(p, seen))) + 1;
    depth.set(ref, d);
    return d;
  };
  for (const r of refs) visit(r, new Set());
  return depth;
}

function duration(from: Date | null, to: Date | null): string {
  if (!from || !to) return '';
  const ms = to.getTime() - from.getTime();
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

/** A flow as a layered SVG graph: nodes by depth left to right, coloured by status, with edges and timings. */
export function flowGraph(flow: FlowInfo, link: (path: string) => string): Html {
  const refs = Object.keys(flow.nodes).sort();
  const depth = layers(refs, flow.edges);
  const columns = new Map<number, string[]>();
  for (const r of refs) {
    const d = depth.get(r) ?? 0;
    columns.set(d, [...(columns.get(d) ?? []), r]);
  }
  const nw = 170;
  const nh = 50;
  const gx = 70;
  const gy = 20;
  const pos = new Map<string, { x: number; y: number }>();
  for (const [d, col] of columns) col.forEach((r, i) => pos.set(r, { x: 10 + d * (nw + gx), y: 10 + i * (nh + gy) }));
  const width = 20 + columns.size * (nw + gx);
  const height = 20 + Math.max(1, ...[...columns.values()].map((c) => c.length)) * (nh + gy);
  const edges = flow.edges.map((e) => {
    const a = pos.get(e.parent);
    const b = pos.get(e.child);
    if (!a || !b) return html``;
    return html`<path
      class="edge"
      d="M${a.x + nw},${a.y + nh / 2} C${a.x + nw + gx / 2},${a.y + nh / 2} ${b.x - gx / 2},${b.y + nh / 2} ${b.x},${b.y + nh / 2}"
      fill="none"
      stroke="#6b7280"
      marker-end="url(#arrow)"
      ><title>${e.parent} → ${e.child} (on failure: ${e.onFailure})</title></path
    >`;
  });
  const nodes = refs.map((r) => {
    const j = flow.nodes[r];
    const p = pos.get(r);
    if (!j || !p) return html``;
    return html`<a href="${link(`/jobs/${j.uuid}`)}"
      ><g class="flow-node" data-ref="${r}" data-status="${j.status}"
        ><rect x="${p.x}" y="${p.y}" width="${nw}" height="${nh}" rx="6" fill="${NODE_COLOURS[j.status] ?? '#f5f5f4'}" stroke="#6b7280" /><text
          x="${p.x + 8}"
          y="${p.y + 18}"
          font-size="12"
          font-weight="600"
          >${r}</text
        ><text x="${p.x + 8}" y="${p.y + 36}" font-size="11">${j.status} ${duration(j.createdAt, j.finishedAt)}</text></g
      ></a
    >`;
  });
  return html`<svg class="flow" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-label="flow graph">
    <defs>
      <marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" orient="auto">
        <path d="M0,0 L10,5 L0,10 z" fill="#6b7280" />
      </marker>
    </defs>
    ${edges}${nodes}
  </svg>`;
}
