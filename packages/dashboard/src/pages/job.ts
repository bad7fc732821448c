import { html, time, type Html } from '../html.js';
import { badge, type Page, type PageContext } from '../page.js';
import { stepTimeline } from '../timeline.js';

/** A JSON value shown as escaped, indented text, or a note when payloads are hidden. */
export function jsonValue(ctx: PageContext, value: unknown): Html {
  if (!ctx.opts.showPayloads) return html`<span class="hidden-value">hidden (showPayloads is off)</span>`;
  return html`<pre class="json">${JSON.stringify(value, null, 2) ?? 'null'}</pre>`;
}

/** An action button: a form the page script posts with the token (a plain post is refused). */
export function actionForm(ctx: PageContext, action: string, uuid: string, label: string, field: 'uuid' | 'name' = 'uuid'): Html {
  return html`<form data-action="${action}" method="post" action="${ctx.link(`/actions/${action}`)}">
    <input type="hidden" name="${field}" value="${uuid}" /><button type="submit">${label}</button>
  </form> `;
}

/** A job's page: fields, lease, step timeline, progress, last error, payload and result, actions. */
export async function jobPage(ctx: PageContext, uuid: string): Promise<Page | null> {
  const [job, now] = await Promise.all([ctx.store.get(uuid), ctx.store.now()]);
  if (!job) return null;
  const actions: Html[] = [];
  if (ctx.opts.actions) {
    if (['queued', 'scheduled', 'retry_wait', 'leased', 'running', 'waiting'].includes(job.status))
      actions.push(actionForm(ctx, 'cancel', job.uuid, 'Cancel'));
    if (job.status === 'dead_letter') {
      actions.push(actionForm(ctx, 'retry', job.uuid, 'Retry as a new job'));
      actions.push(actionForm(ctx, 'forget', job.uuid, 'Forget'));
    }
  }
  const row = (k: string, v: unknown) =>
    html`<tr>
      <th>${k}</th>
      <td>${v}</td>
    </tr>`;
  const body = html`<h1>Job ${job.id} ${badge(job.status)}</h1>
    <p><a href="${ctx.link(`/jobs?queue=${encodeURIComponent(job.queue)}`)}">← ${job.queue}</a></p>
    <div id="job-actions">${actions}</div>
    <table id="job-fields">
      ${row('uuid', job.uuid)}${row('queue', job.queue)}${row('type', job.type)}${row('status', badge(job.status))}
      ${row('attempt', `${job.attempt} of ${job.maxAttempts}`)}${row('priority', job.priority)}${row('group', job.group ?? '')}
      ${row('run at', time(job.runAt))}${row('created', time(job.createdAt))}${row('finished', time(job.finishedAt))}
      ${row('lease holder', job.leasedBy ?? '')}${row('lease expires', time(job.leaseExpiresAt))}
      ${row('resumes after crashes', job.resumeCount)}${row('snoozes', job.snoozes)}
      ${row('retry of', job.retryOfId ?? '')}${row('cancel requested', time(job.cancelRequestedAt))}
    </table>
    <h2>Step timeline</h2>
    ${stepTimeline(job.steps, now)}
    <h2>Progress</h2>
    ${job.progress === null ? html`<p class="muted">none reported</p>` : jsonValue(ctx, job.progress)}
    <h2>Last error</h2>
    ${job.lastError === null ? html`<p class="muted">none</p>` : html`<pre id="last-error">${job.lastError}${job.lastErrorStack ? `\n${job.lastErrorStack}` : ''}</pre>`}
    <h2>Payload</h2>
    <div id="payload">${jsonValue(ctx, job.payload)}</div>
    <h2>Result</h2>
    <div id="result">${job.result === null ? html`<p class="muted">none</p>` : jsonValue(ctx, job.result)}</div>`;
  return { title: `Job ${job.id}`, nav: 'jobs', body };
}
