import type { JobJson } from '../api/job-json.js';
import type { ScheduleJson } from '../api/schedule-json.js';
import { escapeField } from './escape.js';

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
    ['NAME', 'CRON', 'TIMEZONE', 'TYPE', 'QUEUE', 'NEXT', 'LAST SLOT'],
    schedules.map((s) => [s.name, s.cron, s.timezone, s.type, s.queue, when(s.next_fire_at), when(s.last_slot)]),
  );
}
