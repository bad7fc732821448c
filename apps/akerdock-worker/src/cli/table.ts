import type { FlowJson, JobJson } from '../api/job-json.js';
import type { ScheduleJson } from '../api/schedule-json.js';
import { escapeField } from './escape.js';

/** `FLOW_REQUEST_TYPE` of `@q/job-worker`, the job type of an inference step: a literal, so the CLI loads no job store. */
const FLOW_REQUEST_TYPE = 'q:request';

/**
 * The request an inference step's node names in its payload (`{ request: { id, queue } }`; no id
 * while it waits for its parents, the request not sent yet), if it does.
 */
function requestOf(payload: unknown): { id: string; queue: string } | undefined {
  const r = (payload as { request?: { id?: unknown; queue?: unknown } } | null)?.request;
  if (typeof r?.queue !== 'string') return undefined;
  return { id: typeof r.id === 'string' ? r.id : '(not sent)', queue: r.queue };
}

/** Renders rows as a left-aligned text table with a header line. */
export function table(headers: string[], rawRows: string[][]): string {
  const rows = rawRows.map((r) => r.map(escapeField));
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i] as number))
      .join('  ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n');
}

/** Shortens `s` to `n` characters with an ellipsis; first line only. */
export function clip(s: string, n: number): string {
  const first = s.split('\n')[0] ?? '';
  return first.length > n ? `${first.slice(0, n - 1)}…` : first;
}

/** A job's progress as JSON text clipped to `n` characters (`-` when none was reported). */
function progressText(progress: unknown, n: number): string {
  return progress === null || progress === undefined ? '-' : clip(JSON.stringify(progress), n);
}

const when = (iso: string | null | undefined) => (iso ? iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '-');

/** The `q-jobs list` table. */
export function jobsTable(jobs: JobJson[]): string {
  if (jobs.length === 0) return 'no jobs';
  return table(
    ['UUID', 'QUEUE', 'TYPE', 'STATUS', 'ATTEMPT', 'PROGRESS', 'CREATED', 'ERROR'],
    jobs.map((j) => [
      j.uuid,
      j.queue,
      j.type,
      j.status,
      `${j.attempt}/${j.max_attempts}`,
      progressText(j.progress, 20),
      when(j.created_at),
      clip(j.error?.message ?? '', 50),
    ]),
  );
}

/** The `q-jobs steps` table. */
export function stepsTable(job: JobJson): string {
  if (job.steps.length === 0) return 'no steps recorded';
  return table(
    ['STEP', 'STATUS', 'STARTED', 'FINISHED', 'MESSAGE'],
    job.steps.map((s) => [s.name, s.status, when(s.started_at), when(s.finished_at), clip(s.message ?? '', 70)]),
  );
}

/** The `q-jobs get` view: fields, then the step timeline. */
export function jobDetail(job: JobJson): string {
  const fields: Array<[string, string]> = [
    ['uuid', job.uuid],
    ['queue', job.queue],
    ['type', job.type],
    ['status', job.status],
    ['attempt', `${job.attempt} of ${job.max_attempts}${job.resume_count ? ` (resumed ${job.resume_count}×)` : ''}`],
    ['progress', progressText(job.progress, 200)],
    ['priority', String(job.priority)],
    ['run at', when(job.run_at)],
    ['created', when(job.created_at)],
    ['finished', when(job.finished_at)],
  ];
  if (job.lock_key) fields.push(['lock key', job.lock_key]);
  if (job.idempotency_key) fields.push(['idempotency key', job.idempotency_key]);
  if (job.retry_of_id !== null) fields.push(['retry of (id)', String(job.retry_of_id)]);
  if (job.snoozes) fields.push(['snoozed', `${job.snoozes}×`]);
  if (job.dead_lettered_at) fields.push(['dead-lettered', when(job.dead_lettered_at)]);
  if (job.error) fields.push(['error', job.error.message]);
  if (job.result !== null && job.result !== undefined) fields.push(['result', JSON.stringify(job.result)]);
  const w = Math.max(...fields.map(([k]) => k.length));
  // The stack goes below the fields, one frame a line (each escaped), indented like a Node stack.
  const stack = job.error?.stack
    ? `\nstack\n${job.error.stack
        .split('\n')
        .map((f) => `    ${escapeField(f)}`)
        .join('\n')}\n`
    : '';
  return `${fields.map(([k, v]) => `${k.padEnd(w)}  ${escapeField(v)}`).join('\n')}\n${stack}\n${stepsTable(job)}`;
}

/** The `q-jobs schedules list` table. */
export function schedulesTable(schedules: ScheduleJson[]): string {
  if (schedules.length === 0) return 'no schedules';
  return table(
    ['NAME', 'CRON', 'TIMEZONE', 'TYPE', 'QUEUE', 'NEXT', 'LAST SLOT', 'PAUSED'],
    schedules.map((s) => [
      s.name,
      s.cron,
      s.timezone,
      s.type,
      s.queue,
      when(s.next_fire_at),
      when(s.last_slot),
      s.paused_at === null ? '-' : when(s.paused_at),
    ]),
  );
}

/**
 * The `q-jobs flow show` view: the flow's header, then its graph as a text tree from its roots.
 * A node with several parents is drawn in full under the first of them (by job id) and named again
 * under the others (`↑ shown above`), so every node is drawn once and every edge is shown. An edge
 * whose failure policy is not the default `fail` says it. An inference step shows its request
 * queue and request id instead of a job type and attempts.
 */
export function flowTree(flow: FlowJson): string {
  const byRef = new Map(flow.nodes.map((n) => [n.ref, n.job]));
  const children = new Map<string, Array<{ ref: string; onFailure: string }>>();
  const parents = new Map<string, string[]>();
  for (const e of flow.edges) {
    children.set(e.parent, [...(children.get(e.parent) ?? []), { ref: e.child, onFailure: e.on_failure }]);
    parents.set(e.child, [...(parents.get(e.child) ?? []), e.parent]);
  }
  const order = new Map(flow.nodes.map((n, i) => [n.ref, i]));
  const byOrder = (a: string, b: string) => (order.get(a) ?? 0) - (order.get(b) ?? 0);
  const counts = new Map<string, number>();
  for (const n of flow.nodes) counts.set(n.job.status, (counts.get(n.job.status) ?? 0) + 1);
  const lines = [
    `flow ${flow.id}${flow.name === null ? '' : ` ${JSON.stringify(flow.name)}`}: ${flow.nodes.length} nodes (${[...counts]
      .map(([st, k]) => `${k} ${st}`)
      .join(', ')}), created ${when(flow.created_at)}, ${flow.finished_at ? `finished ${when(flow.finished_at)}` : 'not finished'}`,
  ];
  const label = (ref: string): string => {
    const job = byRef.get(ref);
    if (!job) return `${ref}  (gone)`;
    const error = job.error ? `  ${clip(job.error.message, 60)}` : '';
    const request = job.type === FLOW_REQUEST_TYPE ? requestOf(job.payload) : undefined;
    // An inference step runs on the request queue, not as attempts: its queue and request id say more.
    if (request) return `${ref}  ${job.status}  request ${request.queue} ${request.id}${error}`;
    return `${ref}  ${job.status}  ${job.type}  ${job.attempt}/${job.max_attempts}${error}`;
  };
  const drawn = new Set<string>();
  const draw = (ref: string, prefix: string, branch: string, policy: string | undefined): void => {
    const note = policy !== undefined && policy !== 'fail' ? `  [on parent failure: ${policy}]` : '';
    if (drawn.has(ref)) {
      lines.push(`${prefix}${branch}${escapeField(ref)}  ↑ shown above${note}`);
      return;
    }
    drawn.add(ref);
    lines.push(`${prefix}${branch}${escapeField(label(ref))}${note}`);
    const kids = [...(children.get(ref) ?? [])].sort((a, b) => byOrder(a.ref, b.ref));
    const next = prefix + (branch === '' ? '' : branch === '└─ ' ? '   ' : '│  ');
    kids.forEach((k, i) => draw(k.ref, next, i === kids.length - 1 ? '└─ ' : '├─ ', k.onFailure));
  };
  const roots = flow.nodes.map((n) => n.ref).filter((r) => (parents.get(r) ?? []).length === 0);
  for (const r of roots) draw(r, '', '', undefined);
  // Nodes no root reaches (their parents' edges were dropped by hand): drawn on their own.
  for (const n of flow.nodes) if (!drawn.has(n.ref)) draw(n.ref, '', '', undefined);
  return lines.join('\n');
}
