// Issue 38: recurring jobs in the admin API (GET /schedules, PUT and DELETE /schedules/{name}) and
// in q-jobs (schedules list|add|remove), on real HTTP and real Postgres: the round trip, the
// refusals before anything is written (bad cron, unknown type or queue, auth, Host, cross-origin).
import http from 'node:http';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestSchema, type TestSchema } from '@q/testing';
import { startWorkerApp, type WorkerApp } from '../src/app.js';
import type { ScheduleJson } from '../src/api/schedule-json.js';
import { openApiDocument } from '../src/api/openapi.js';
import { runCli } from '../src/cli/q-jobs.js';
import { api, testConfig, TOKEN, TEST_HANDLERS } from './helpers.js';
import { runQJobs } from './spawn.js';

let schema: TestSchema;
let app: WorkerApp;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  schema = await createTestSchema('akw_sched');
  // Consumes only `notify`; the schedules below fire at 03:00 at the earliest, so no job appears.
  app = await startWorkerApp(testConfig(schema.dsn, ['--queues', 'notify']), { handlers: TEST_HANDLERS });
  env = { AKERDOCK_API_URL: app.url, AKERDOCK_ADMIN_TOKEN: TOKEN };
});
afterAll(async () => {
  await app?.stop();
  await schema?.drop();
});
beforeEach(async () => {
  for (const s of await app.queue.schedules()) await app.queue.unschedule(s.name);
});

const errorOf = (json: unknown) => (json as { error: { code: string; message: string } }).error;
const names = async () => (await app.queue.schedules()).map((s) => s.name);

const cli = async (args: string[], envOverride: NodeJS.ProcessEnv = {}) => {
  let stdout = '';
  let stderr = '';
  const code = await runCli(args, { ...env, ...envOverride }, { out: (t) => (stdout += `${t}\n`), err: (t) => (stderr += `${t}\n`) });
  return { code, stdout, stderr };
};

/** One request with exactly these headers (Host included): fetch cannot set Host. */
function raw(method: string, path: string, headers: Record<string, string>, body?: string): Promise<{ status: number; json: unknown }> {
  const u = new URL(app.url);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, method, path, headers, setHost: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode ?? 0, json: text ? JSON.parse(text) : undefined });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('admin API /schedules', () => {
  it('creates (201), lists with the next fire time, replaces (200), deletes (204), then 404', async () => {
    const put = await api(app.url, 'PUT', '/schedules/nightly.report', {
      body: {
        cron: '0 3 * * *',
        timezone: 'Europe/Paris',
        type: 'report.build',
        payload: { team: 7 },
        priority: 5,
        max_attempts: 2,
        group: 'team-7',
      },
    });
    expect(put.status, JSON.stringify(put.json)).toBe(201);
    const created = put.json as ScheduleJson;
    expect(created).toMatchObject({
      name: 'nightly.report',
      cron: '0 3 * * *',
      timezone: 'Europe/Paris',
      type: 'report.build',
      queue: 'default',
      payload: { team: 7 },
      priority: 5,
      max_attempts: 2,
      group: 'team-7',
      backfill_ms: null,
      last_slot: null,
    });
    // 03:00 in Paris is 01:00 or 02:00 UTC, within the next day.
    const next = new Date(created.next_fire_at);
    expect(next.getTime()).toBeGreaterThan(Date.now());
    expect(next.getTime() - Date.now()).toBeLessThanOrEqual(86_400_000);
    expect([1, 2]).toContain(next.getUTCHours());

    const list = await api(app.url, 'GET', '/schedules');
    expect(list.status).toBe(200);
    expect(list.json).toEqual({ data: [created] });

    // The same pattern again: replaced, its next fire time kept; another field changes at once.
    const same = await api(app.url, 'PUT', '/schedules/nightly.report', {
      body: { cron: '0 3 * * *', timezone: 'Europe/Paris', type: 'report.build', backfill_ms: 3_600_000 },
    });
    expect(same.status).toBe(200);
    expect(same.json).toMatchObject({ next_fire_at: created.next_fire_at, backfill_ms: 3_600_000, payload: {}, priority: 0, group: null });
    // A new pattern starts at its own first slot.
    const moved = await api(app.url, 'PUT', '/schedules/nightly.report', { body: { cron: '30 4 * * *', type: 'report.build' } });
    expect(moved.status).toBe(200);
    expect(new Date((moved.json as ScheduleJson).next_fire_at).getUTCHours()).toBe(4);
    expect(await names()).toEqual(['nightly.report']);

    // Paused: shown with paused_at; resumed: at the first slot after now, paused_at null again.
    const paused = await api(app.url, 'POST', '/schedules/nightly.report/pause');
    expect(paused.status, JSON.stringify(paused.json)).toBe(200);
    expect((paused.json as ScheduleJson).paused_at).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(((await api(app.url, 'GET', '/schedules')).json as { data: ScheduleJson[] }).data[0]!.paused_at).toBe(
      (paused.json as ScheduleJson).paused_at,
    );
    const resumed = await api(app.url, 'POST', '/schedules/nightly.report/resume');
    expect(resumed.status).toBe(200);
    expect(resumed.json).toMatchObject({ paused_at: null });
    expect(new Date((resumed.json as ScheduleJson).next_fire_at).getUTCHours()).toBe(4);
    expect((await api(app.url, 'POST', '/schedules/no.such/pause')).status).toBe(404);
    expect((await api(app.url, 'POST', '/schedules/no.such/resume')).status).toBe(404);

    const del = await api(app.url, 'DELETE', '/schedules/nightly.report');
    expect(del.status).toBe(204);
    expect(await names()).toEqual([]);
    const again = await api(app.url, 'DELETE', '/schedules/nightly.report');
    expect(again.status).toBe(404);
    expect(errorOf(again.json)).toEqual({ code: 'not_found', message: 'no such schedule' });
  });

  it('takes any name in the path, percent-encoded', async () => {
    const put = await api(app.url, 'PUT', `/schedules/${encodeURIComponent('team/7 nightly ✓')}`, { body: { cron: '0 3 * * *', type: 'x' } });
    expect(put.status, JSON.stringify(put.json)).toBe(201);
    expect(await names()).toEqual(['team/7 nightly ✓']);
    const cli = await runCli(['schedules', 'remove', 'team/7 nightly ✓'], env, { out: () => undefined, err: () => undefined });
    expect(cli).toBe(0);
    expect(await names()).toEqual([]);
  });

  it('refuses bad input with 400 before writing anything', async () => {
    const cases: Array<[Record<string, unknown>, string, RegExp]> = [
      [{ cron: 'every day', type: 'x' }, 'invalid_request', /cron must be a cron pattern/],
      [{ cron: '61 * * * *', type: 'x' }, 'invalid_request', /cron must be a cron pattern/],
      [{ cron: '0 3 * * *', timezone: 'Mars/Olympus', type: 'x' }, 'invalid_request', /timezone must be an IANA time zone/],
      [{ cron: '0 3 * * *', type: 'x', payload: { scheduledFor: 'x' } }, 'invalid_request', /scheduledFor/],
      [{ cron: '0 3 * * *', type: 'x', payload: [1] }, 'invalid_request', /payload/],
      [{ cron: '0 3 * * *', type: 'x', every: '1d' }, 'invalid_request', /additional properties/],
      [{ type: 'x' }, 'invalid_request', /cron/],
      [{ cron: '0 3 * * *', type: 'x', backfill_ms: 0 }, 'invalid_request', /backfill_ms/],
      [{ cron: '0 3 * * *', type: 'x', group: '' }, 'invalid_request', /group/],
      [{ cron: '0 3 * * *', type: 'x', group: 'a\u0000b' }, 'invalid_request', /group/],
      [{ cron: '0 3 * * *', type: 'nobody.serves' }, 'unknown_type', /no handler serves job type "nobody.serves" \(served: .*report\.build/],
      [{ cron: '0 3 * * *', type: 'x', queue: 'nope' }, 'unknown_queue', /unknown queue "nope"/],
    ];
    for (const [body, code, message] of cases) {
      const r = await api(app.url, 'PUT', '/schedules/bad', { body });
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(errorOf(r.json).code, JSON.stringify(body)).toBe(code);
      expect(errorOf(r.json).message, JSON.stringify(body)).toMatch(message);
    }
    expect(await names()).toEqual([]);
  });

  it('needs the token (401/403) and refuses a foreign Host and cross-origin writes (403), writing nothing', async () => {
    await app.queue.schedule({ name: 'kept', cron: '0 3 * * *', type: 'x' });
    const body = { cron: '0 3 * * *', type: 'x' };
    for (const [method, path] of [
      ['GET', '/schedules'],
      ['PUT', '/schedules/intruder'],
      ['DELETE', '/schedules/kept'],
    ] as const) {
      const b = method === 'PUT' ? { body } : {};
      const none = await api(app.url, method, path, { ...b, token: null });
      expect(none.status, `${method} ${path}`).toBe(401);
      expect(errorOf(none.json).code).toBe('unauthorized');
      const wrong = await api(app.url, method, path, { ...b, token: `${TOKEN}x` });
      expect(wrong.status, `${method} ${path}`).toBe(403);
      expect(errorOf(wrong.json).code).toBe('forbidden');
    }
    const host = new URL(app.url).host;
    const auth = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
    const foreign = await raw('PUT', '/schedules/intruder', { ...auth, host: 'evil.example' }, JSON.stringify(body));
    expect(foreign.status).toBe(403);
    expect(errorOf(foreign.json).code).toBe('host_not_allowed');
    for (const headers of [{ origin: 'http://evil.example' }, { 'sec-fetch-site': 'cross-site' }] as Array<Record<string, string>>) {
      const put = await raw('PUT', '/schedules/intruder', { ...auth, host, ...headers }, JSON.stringify(body));
      expect(put.status, JSON.stringify(headers)).toBe(403);
      expect(errorOf(put.json).code).toBe('cross_origin');
      const del = await raw('DELETE', '/schedules/kept', { authorization: `Bearer ${TOKEN}`, host, ...headers });
      expect(del.status).toBe(403);
      expect(errorOf(del.json).code).toBe('cross_origin');
    }
    expect(await names()).toEqual(['kept']);
  });

  it('is described in /openapi.json', async () => {
    const doc = (await api(app.url, 'GET', '/openapi.json', { token: null })).json as { paths: Record<string, Record<string, unknown>> };
    expect(doc).toEqual(JSON.parse(JSON.stringify(openApiDocument('0.1.0'))));
    expect(Object.keys(doc.paths['/schedules'] ?? {})).toEqual(['get']);
    const byName = doc.paths['/schedules/{name}'] as Record<string, { operationId: string; responses: Record<string, { content?: unknown }> }>;
    expect(Object.keys(byName)).toEqual(['put', 'delete']);
    expect(byName.put?.operationId).toBe('putSchedule');
    expect(Object.keys(byName.put?.responses ?? {})).toEqual(expect.arrayContaining(['200', '201', '400']));
    expect(byName.delete?.responses['204']).toEqual({ description: 'Deleted' });
  });
});

describe('q-jobs schedules', () => {
  it('add → list → remove round trip, with --json, exit 0; a second remove exits 1 with a hint', async () => {
    const add = await cli([
      'schedules',
      'add',
      'weekly.digest',
      '--cron',
      '0 9 * * 1',
      '--type',
      'report.build',
      '--timezone',
      'America/New_York',
      '--payload',
      '{"scope":"all"}',
      '--priority',
      '3',
      '--max-attempts',
      '4',
      '--group',
      'tenant-9',
      '--backfill-ms',
      '86400000',
    ]);
    expect(add.code, add.stderr).toBe(0);
    expect(add.stdout).toMatch(/^scheduled weekly\.digest \(report\.build on default, 0 9 \* \* 1 America\/New_York; next \d{4}-/);

    // The real bin, --json: exactly GET /schedules.
    const child = await runQJobs(['schedules', 'list', '--json'], env);
    expect(child.code, child.stderr).toBe(0);
    const fromApi = (await api(app.url, 'GET', '/schedules')).json as { data: ScheduleJson[] };
    expect(JSON.parse(child.stdout)).toEqual(fromApi);
    expect(fromApi.data[0]).toMatchObject({
      name: 'weekly.digest',
      timezone: 'America/New_York',
      payload: { scope: 'all' },
      priority: 3,
      max_attempts: 4,
      group: 'tenant-9',
      backfill_ms: 86_400_000,
    });

    const table = await cli(['schedules', 'list']);
    expect(table.code).toBe(0);
    const [head, row] = table.stdout.split('\n');
    expect(head).toMatch(/^NAME\s+CRON\s+TIMEZONE\s+TYPE\s+QUEUE\s+NEXT\s+LAST SLOT\s+PAUSED$/);
    expect(row).toMatch(/^weekly\.digest\s+0 9 \* \* 1\s+America\/New_York\s+report\.build\s+default\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ\s+-\s+-$/);

    const pause = await cli(['schedules', 'pause', 'weekly.digest']);
    expect(pause.code, pause.stderr).toBe(0);
    expect(pause.stdout).toBe('paused schedule weekly.digest\n');
    expect((await cli(['schedules', 'list'])).stdout.split('\n')[1]).toMatch(/\d\dZ\s+-\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ$/);
    const resume = await cli(['schedules', 'resume', 'weekly.digest']);
    expect(resume.code, resume.stderr).toBe(0);
    expect(resume.stdout).toMatch(/^resumed schedule weekly\.digest, next fire \d{4}-/);
    expect((await cli(['schedules', 'pause', 'no.such'])).code).toBe(1);

    const removed = await cli(['schedules', 'remove', 'weekly.digest']);
    expect(removed.code, removed.stderr).toBe(0);
    expect(removed.stdout).toBe('removed schedule weekly.digest\n');
    expect((await cli(['schedules', 'list'])).stdout).toBe('no schedules\n');

    const gone = await cli(['schedules', 'remove', 'weekly.digest']);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toBe('error: not_found (HTTP 404): no such schedule\nhint: q-jobs schedules list shows the names\n');
  }, 120_000);

  it('usage errors exit 2 and write nothing; the API refusing exits 1', async () => {
    for (const args of [
      ['schedules'],
      ['schedules', 'frob'],
      ['schedules', 'add', 'n', '--type', 'x'],
      ['schedules', 'add', 'n', '--cron', '0 3 * * *'],
      ['schedules', 'add', '--cron', '0 3 * * *', '--type', 'x'],
      ['schedules', 'add', 'n', '--cron', '0 3 * * *', '--type', 'x', '--payload', '[1]'],
      ['schedules', 'add', 'n', '--cron', '0 3 * * *', '--type', 'x', '--payload', '{nope'],
      ['schedules', 'add', 'n', '--cron', '0 3 * * *', '--type', 'x', '--payload-file', '/nonexistent/p.json'],
      ['schedules', 'add', 'n', '--cron', '0 3 * * *', '--type', 'x', '--backfill-ms', 'soon'],
      ['schedules', 'remove'],
      ['schedules', 'pause'],
      ['schedules', 'resume', 'a', 'b'],
      ['schedules', 'list', 'extra'],
    ]) {
      const r = await cli(args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr, args.join(' ')).toContain('usage: q-jobs schedules list|add|pause|resume|remove');
    }
    const badCron = await cli(['schedules', 'add', 'n', '--cron', '61 * * * *', '--type', 'x']);
    expect(badCron.code).toBe(1);
    expect(badCron.stderr).toMatch(/^error: invalid_request \(HTTP 400\): schedule: cron must be a cron pattern/);
    const unknownType = await cli(['schedules', 'add', 'n', '--cron', '0 3 * * *', '--type', 'nobody.serves', '--json']);
    expect(unknownType.code).toBe(1);
    expect(JSON.parse(unknownType.stderr)).toMatchObject({ error: { status: 400, code: 'unknown_type' } });
    const denied = await cli(['schedules', 'list'], { AKERDOCK_ADMIN_TOKEN: undefined });
    expect(denied.code).toBe(1);
    expect(denied.stderr).toMatch(/hint: set AKERDOCK_ADMIN_TOKEN or pass --token/);
    expect(await names()).toEqual([]);
    expect((await cli(['help', 'schedules'])).stdout).toContain('--backfill-ms N');
  });
});
