import { html, time } from '../html.js';
import { notInstalled, type Page, type PageContext } from '../page.js';

/** The Schedules page: each schedule's pattern, next and last slot. */
export async function schedulesPage(ctx: PageContext): Promise<Page> {
  const rows = await ctx.reader.schedules();
  if (rows === null) return { title: 'Schedules', nav: 'schedules', body: notInstalled('jobs') };
  const list = rows.map(
    (s) =>
      html`<tr data-schedule="${s.name}">
        <td>${s.name}</td>
        <td><code>${s.cron}</code></td>
        <td>${s.timezone}</td>
        <td>${s.queue}</td>
        <td>${s.job_type}</td>
        <td>${time(s.next_fire_at)}</td>
        <td>${time(s.last_slot)}</td>
      </tr>`,
  );
  const body = html`<h1>Schedules</h1>
    <table id="schedules">
      <thead>
        <tr>
          <th>name</th>
          <th>pattern</th>
          <th>time zone</th>
          <th>queue</th>
          <th>type</th>
          <th>next fire</th>
          <th>last fire</th>
        </tr>
      </thead>
      <tbody>
        ${list}
      </tbody>
    </table>
    ${rows.length === 0 ? html`<p class="muted">No schedules.</p>` : ''}`;
  return { title: 'Schedules', nav: 'schedules', body };
}
