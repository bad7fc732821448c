import { html, time } from '../html.js';
import { badge, notInstalled, type Page, type PageContext } from '../page.js';
import { actionForm } from './job.js';

/** The Schedules page: each schedule's pattern, next and last slot, whether it is paused, and pause/resume actions. */
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
        <td data-paused="${s.paused_at !== null ? 'yes' : 'no'}">
          ${s.paused_at !== null ? html`${badge('paused')} since ${time(s.paused_at)}` : badge('running')}
        </td>
        ${
          ctx.opts.actions
            ? html`<td>
                ${
                  s.paused_at !== null
                    ? actionForm(ctx, 'resume-schedule', s.name, 'Resume', 'name')
                    : actionForm(ctx, 'pause-schedule', s.name, 'Pause', 'name')
                }
              </td>`
            : ''
        }
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
          <th>state</th>
          ${ctx.opts.actions ? html`<th></th>` : ''}
        </tr>
      </thead>
      <tbody>
        ${list}
      </tbody>
    </table>
    ${rows.length === 0 ? html`<p class="muted">No schedules.</p>` : ''}
    <p class="muted">A resumed schedule starts at its next slot: the slots of the paused time are not enqueued.</p>`;
  return { title: 'Schedules', nav: 'schedules', body };
}
