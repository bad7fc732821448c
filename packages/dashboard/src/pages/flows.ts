import { flowGraph } from '../flow-graph.js';
import { html, time } from '../html.js';
import { notInstalled, type Page, type PageContext } from '../page.js';

/** The Workflows page: the most recent flows. */
export async function flowsPage(ctx: PageContext): Promise<Page> {
  const rows = await ctx.reader.recentFlows(100);
  if (rows === null) return { title: 'Workflows', nav: 'flows', body: notInstalled('jobs') };
  const list = rows.map(
    (f) =>
      html`<tr data-flow="${f.id}">
        <td><a href="${ctx.link(`/flows/${f.id}`)}">${f.id}</a></td>
        <td>${f.name ?? ''}</td>
        <td>${time(f.created_at)}</td>
      </tr>`,
  );
  const body = html`<h1>Workflows</h1>
    <table id="flows">
      <thead>
        <tr>
          <th>flow</th>
          <th>name</th>
          <th>created</th>
        </tr>
      </thead>
      <tbody>
        ${list}
      </tbody>
    </table>
    ${rows.length === 0 ? html`<p class="muted">No flows.</p>` : ''}`;
  return { title: 'Workflows', nav: 'flows', body };
}

/** One flow: its graph with node statuses, edges and timings. */
export async function flowPage(ctx: PageContext, id: string): Promise<Page | null> {
  const flow = await ctx.store.flows.get(id);
  if (!flow) return null;
  const nodes = Object.entries(flow.nodes).sort(([a], [b]) => a.localeCompare(b));
  const table = nodes.map(
    ([ref, j]) =>
      html`<tr>
        <td>${ref}</td>
        <td><a href="${ctx.link(`/jobs/${j.uuid}`)}">${j.id}</a></td>
        <td>${j.status}</td>
        <td>${time(j.createdAt)}</td>
        <td>${time(j.finishedAt)}</td>
      </tr>`,
  );
  const body = html`<h1>Flow ${flow.name ?? flow.id}</h1>
    <p class="muted">${flow.id} · created ${time(flow.createdAt)}${flow.finishedAt ? ` · finished ${time(flow.finishedAt)}` : ' · running'}</p>
    ${flowGraph(flow, ctx.link)}
    <h2>Nodes</h2>
    <table id="flow-nodes">
      <thead>
        <tr>
          <th>ref</th>
          <th>job</th>
          <th>status</th>
          <th>created</th>
          <th>finished</th>
        </tr>
      </thead>
      <tbody>
        ${table}
      </tbody>
    </table>`;
  return { title: `Flow ${flow.name ?? flow.id}`, nav: 'flows', body };
}
