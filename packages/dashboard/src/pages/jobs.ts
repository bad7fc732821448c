import { invalidArgument } from '@q/schema';
import { barChart } from '../chart.js';
import { html, time, type Html } from '../html.js';
import { badge, notInstalled, num, type Page, type PageContext } from '../page.js';
import { JOB_STATUSES, type JobFilter } from '../reader.js';

/** Rows of one page of the job list. */
export const PAGE_SIZE = 50;

/**
 * How many job ids one page searches when it filters by type or group, which no index covers: a
 * rare value would otherwise have the whole history read for one page. A page that finds fewer
 * rows in its window links to the next window ("Search older").
 */
export const SEARCH_WINDOW = 100_000;

/** The job list's filters from the query string; a bad value is `INVALID_ARGUMENT`. */
export function jobFilter(url: URL): JobFilter {
  const get = (k: string) => {
    const v = url.searchParams.get(k);
    return v === null || v === '' ? null : v;
  };
  const status = get('status');
  if (status !== null && !(JOB_STATUSES as readonly string[]).includes(status))
    throw invalidArgument(`jobs: status must be one of ${JOB_STATUSES.join(', ')}`);
  const before = get('before');
  if (before !== null && !/^[1-9][0-9]{0,18}$/.test(before)) throw invalidArgument('jobs: before must be a job id');
  return { status, queue: get('queue'), type: get('type'), group: get('group'), beforeId: before, lowestId: null };
}

/**
 * How far the Jobs page counts each queue × status: above it a figure reads `10,000+`, so a page
 * of a queue with a backlog of millions costs what one of 10,000 does.
 */
export const COUNT_CAP = 10_000;

const COUNT_COLUMNS = ['queued', 'scheduled', 'waiting', 'leased', 'running', 'retry_wait', 'dead_letter', 'succeeded', 'cancelled'] as const;

/** The Jobs page: counts by queue and status, the last hour's chart, the filtered list. */
export async function jobsPage(ctx: PageContext): Promise<Page> {
  const filter = jobFilter(ctx.url);
  if (filter.type !== null || filter.group !== null) {
    const top = filter.beforeId ?? (await ctx.reader.maxJobId());
    if (top !== null) filter.lowestId = String(Math.max(0, Number(top) - SEARCH_WINDOW));
  }
  const [counts, throughput, rows] = await Promise.all([
    ctx.reader.jobCounts(COUNT_CAP),
    ctx.reader.throughput(),
    ctx.reader.listJobs(filter, PAGE_SIZE + 1),
  ]);
  if (counts === null || throughput === null || rows === null) return { title: 'Jobs', nav: 'jobs', body: notInstalled('jobs') };

  const byQueue = new Map<string, Map<string, string>>();
  for (const c of counts) {
    const m = byQueue.get(c.queue) ?? new Map<string, string>();
    const n = Math.min(num(c.n), COUNT_CAP).toLocaleString('en-US');
    m.set(c.status, c.capped ? `${n}+` : n);
    byQueue.set(c.queue, m);
  }
  const countRows = [...byQueue].map(
    ([queue, m]) =>
      html`<tr data-queue="${queue}">
        <th><a href="${ctx.link(`/jobs?queue=${encodeURIComponent(queue)}`)}">${queue}</a></th>
        ${COUNT_COLUMNS.map((s) => html`<td class="n" data-status="${s}">${m.get(s) ?? '0'}</td>`)}
      </tr>`,
  );

  const succeeded = new Array<number>(60).fill(0);
  const failed = new Array<number>(60).fill(0);
  const cancelled = new Array<number>(60).fill(0);
  for (const t of throughput) {
    const i = 59 - Math.min(59, Math.max(0, t.ago));
    const target = t.status === 'succeeded' ? succeeded : t.status === 'dead_letter' ? failed : cancelled;
    target[i] = (target[i] ?? 0) + num(t.n);
  }
  const chart = barChart(
    'Finished per minute, last hour',
    [
      { name: 'succeeded', colour: '#34d399', values: succeeded },
      { name: 'dead letter', colour: '#f87171', values: failed },
      { name: 'cancelled', colour: '#9ca3af', values: cancelled },
    ],
    (i) => (i === 59 ? 'now' : `-${59 - i} min`),
  );

  const more = rows.length > PAGE_SIZE;
  const shown = rows.slice(0, PAGE_SIZE);
  const list = shown.map(
    (r) =>
      html`<tr data-uuid="${r.uuid}">
        <td class="n">${r.id}</td>
        <td><a href="${ctx.link(`/jobs/${r.uuid}`)}">${r.uuid}</a></td>
        <td>${r.queue}</td>
        <td>${r.job_type}</td>
        <td>${badge(r.status)}</td>
        <td class="n">${r.attempt}/${r.max_attempts}</td>
        <td>${r.job_group ?? ''}</td>
        <td>${time(r.created_at)}</td>
        <td>${time(r.finished_at)}</td>
      </tr>`,
  );
  const params = new URLSearchParams();
  for (const k of ['queue', 'type', 'status', 'group'] as const) {
    const v = filter[k];
    if (v !== null) params.set(k, v);
  }
  const last = shown.at(-1);
  const next =
    more && last
      ? html`<a rel="next" href="${ctx.link(`/jobs?${new URLSearchParams([...params, ['before', last.id]]).toString()}`)}">Older →</a>`
      : '';
  const first = filter.beforeId !== null ? html`<a href="${ctx.link(`/jobs?${params.toString()}`)}">← Newest</a> ` : '';
  const statusOptions = ['', ...JOB_STATUSES].map(
    (s) => html`<option value="${s}" ${s === (filter.status ?? '') ? html` selected` : ''}>${s === '' ? 'any' : s}</option>`,
  );
  const input = (k: 'queue' | 'type' | 'group'): Html => html`<label>${k}<input name="${k}" value="${filter[k] ?? ''}" /></label>`;

  const body = html`<h1>Jobs</h1>
    <h2>By queue and status</h2>
    <p class="muted">
      Live statuses and the whole dead letter; succeeded and cancelled over the last hour. Each figure is counted up to
      ${COUNT_CAP.toLocaleString('en-US')}: <code>${COUNT_CAP.toLocaleString('en-US')}+</code> means more. A status other than queued that holds
      more than that in all queues together is counted on its first ${COUNT_CAP.toLocaleString('en-US')} jobs, and its figures read
      <code>n+</code> (at least n).
    </p>
    <table id="counts">
      <thead>
        <tr>
          <th>queue</th>
          ${COUNT_COLUMNS.map((s) => html`<th>${s}</th>`)}
        </tr>
      </thead>
      <tbody>
        ${countRows}
      </tbody>
    </table>
    <h2>Throughput</h2>
    ${chart}
    <h2>Jobs</h2>
    <form class="filters" method="get" action="${ctx.link('/jobs')}">
      ${input('queue')}${input('type')}<label
        >status<select name="status">
          ${statusOptions}
        </select></label
      >${input('group')}<button type="submit">Filter</button>
    </form>
    <table id="jobs">
      <thead>
        <tr>
          <th>id</th>
          <th>uuid</th>
          <th>queue</th>
          <th>type</th>
          <th>status</th>
          <th>attempt</th>
          <th>group</th>
          <th>created</th>
          <th>finished</th>
        </tr>
      </thead>
      <tbody>
        ${list}
      </tbody>
    </table>
    ${shown.length === 0 ? html`<p class="muted">No jobs match.</p>` : ''}
    <nav class="pager">${first}${next}</nav>`;
  return { title: 'Jobs', nav: 'jobs', body };
}
