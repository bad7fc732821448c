import { ownerColours, UNOWNED } from '../colour.js';
import { html, type Html } from '../html.js';
import { notInstalled, num, type Page, type PageContext } from '../page.js';

type PartitionRow = { queue: string; partition_id: number; owner: string; epoch: string; draining: boolean; in_flight: string };

/** The 64 partitions of a queue as an 8 × 8 SVG grid, each cell coloured by its owner. */
function partitionGrid(queue: string, parts: PartitionRow[], colours: Map<string, string>): Html {
  const cell = 58;
  const cells = parts.map((p) => {
    const x = (p.partition_id % 8) * cell;
    const y = Math.floor(p.partition_id / 8) * cell;
    return html`<g
      class="partition"
      data-partition="${p.partition_id}"
      data-owner="${p.owner}"
      data-epoch="${p.epoch}"
      data-draining="${p.draining ? '1' : '0'}"
      data-in-flight="${p.in_flight}"
      ><rect
        x="${x + 1}"
        y="${y + 1}"
        width="${cell - 2}"
        height="${cell - 2}"
        rx="4"
        fill="${colours.get(p.owner) ?? UNOWNED}"
        stroke="${p.draining ? '#b91c1c' : 'none'}"
        stroke-width="${p.draining ? 3 : 0}"
        stroke-dasharray="${p.draining ? '4 3' : ''}"
        ><title>
          partition ${p.partition_id}: ${p.owner === '' ? 'unowned' : p.owner}, epoch ${p.epoch}${p.draining ? ', draining' : ''}, ${p.in_flight}
          in flight
        </title></rect
      ><text x="${x + 6}" y="${y + 16}" font-size="11">#${p.partition_id}</text><text x="${x + 6}" y="${y + 32}" font-size="10">e${p.epoch}</text
      ><text x="${x + 6}" y="${y + 48}" font-size="10">${p.in_flight} ⇢</text></g
    >`;
  });
  return html`<svg
    class="partitions"
    data-queue="${queue}"
    viewBox="0 0 ${cell * 8} ${cell * 8}"
    width="${cell * 8}"
    height="${cell * 8}"
    role="img"
    aria-label="partitions of ${queue}"
  >
    ${cells}
  </svg>`;
}

/** The Request queues page: partition grids, live dispatchers and shares, pending depth, routes, batches. */
export async function requestsPage(ctx: PageContext): Promise<Page> {
  const [parts, members, pending, routes, batches] = await Promise.all([
    ctx.reader.partitions(),
    ctx.reader.dispatchers(),
    ctx.reader.pendingDepth(),
    ctx.reader.resultRoutes(),
    ctx.reader.batches(20),
  ]);
  if (parts === null || members === null || pending === null || routes === null) {
    return { title: 'Request queues', nav: 'requests', body: notInstalled('requests') };
  }
  const queues = [...new Set([...parts.map((p) => p.queue), ...pending.map((p) => p.queue)])].sort();
  const sections = queues.map((queue) => {
    const qp = parts.filter((p) => p.queue === queue);
    const live = members.filter((m) => m.queue === queue);
    const share = live.length === 0 ? 0 : Math.ceil(64 / live.length);
    const colours = ownerColours([...qp.map((p) => p.owner), ...live.map((m) => m.owner)]);
    const owners = new Map<string, number>();
    for (const p of qp) owners.set(p.owner, (owners.get(p.owner) ?? 0) + 1);
    const memberRows = live.map(
      (m) =>
        html`<tr class="member" data-owner="${m.owner}">
          <td>
            <svg width="10" height="10" aria-hidden="true"><rect width="10" height="10" fill="${colours.get(m.owner) ?? UNOWNED}" /></svg>
            ${m.owner}
          </td>
          <td class="n" data-held>${owners.get(m.owner) ?? 0}</td>
          <td class="n">${share}</td>
        </tr>`,
    );
    const unowned = owners.get('') ?? 0;
    const depth = pending.find((p) => p.queue === queue);
    return html`<section class="request-queue" data-queue="${queue}">
      <h2>${queue}</h2>
      <div class="grid-wrap">
        ${qp.length > 0 ? partitionGrid(queue, qp, colours) : html`<p class="muted">No partition rows yet.</p>`}
        <div>
          <h3>Live dispatchers</h3>
          <table class="members">
            <thead>
              <tr>
                <th>dispatcher</th>
                <th>held</th>
                <th>share</th>
              </tr>
            </thead>
            <tbody>
              ${memberRows}
            </tbody>
          </table>
          <p class="muted">
            ${unowned} unowned · ${qp.filter((p) => p.draining).length} draining · ${qp.reduce((s, p) => s + num(p.in_flight), 0)} in flight
          </p>
          <h3>Pending by deadline</h3>
          <table class="pending">
            <thead>
              <tr>
                <th>pending</th>
                <th>expired</th>
                <th>&lt; 1 min</th>
                <th>&lt; 10 min</th>
                <th>later</th>
              </tr>
            </thead>
            <tbody>
              <tr>
                <td class="n">${depth?.pending ?? 0}</td>
                <td class="n">${depth?.expired ?? 0}</td>
                <td class="n">${depth?.within_1m ?? 0}</td>
                <td class="n">${depth?.within_10m ?? 0}</td>
                <td class="n">${depth?.later ?? 0}</td>
              </tr>
            </tbody>
          </table>
        </div>
      </div>
    </section>`;
  });
  const routeRows = routes.map(
    (r) =>
      html`<tr>
        <td>${r.route}</td>
        <td class="n">${r.depth}</td>
      </tr>`,
  );
  const batchRows = (batches ?? []).map(
    (b) =>
      html`<tr>
        <td>${b.id}</td>
        <td>${b.tenant}</td>
        <td>${b.queue}</td>
        <td>${b.status}</td>
        <td class="n">${b.completed}/${b.total}</td>
        <td class="n">${b.failed}</td>
        <td>${new Date(num(b.created_at) * 1000).toISOString()}</td>
      </tr>`,
  );
  const body = html`<h1>Request queues</h1>
    <p class="muted">
      Each cell is one of a queue's 64 partitions, coloured by the dispatcher holding it (grey: unowned); e = epoch, ⇢ = requests in flight; a
      dashed red border marks a draining partition.
    </p>
    ${sections.length > 0 ? sections : html`<p class="muted">No request queues yet.</p>`}
    <h2>Result routes</h2>
    <table id="routes">
      <thead>
        <tr>
          <th>route</th>
          <th>depth</th>
        </tr>
      </thead>
      <tbody>
        ${routeRows}
      </tbody>
    </table>
    <h2>Batches</h2>
    ${
      batches === null
        ? html`<p class="muted">The Batch API tables are not installed.</p>`
        : html`<table id="batches">
            <thead>
              <tr>
                <th>id</th>
                <th>tenant</th>
                <th>queue</th>
                <th>status</th>
                <th>done</th>
                <th>failed</th>
                <th>created</th>
              </tr>
            </thead>
            <tbody>
              ${batchRows}
            </tbody>
          </table>`
    }`;
  return { title: 'Request queues', nav: 'requests', body };
}
