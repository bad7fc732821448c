// Issue 41: flows in the admin API (GET /flows/{id}, POST /flows/{id}/cancel) and in q-jobs
// (flow show|cancel), on real HTTP and real Postgres: the graph as JSON and as a text tree, the
// cancel of every live node, and the refusals (auth, bad id, unknown flow).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestSchema, type TestSchema } from '@q/testing';
import { startWorkerApp, type WorkerApp } from '../src/app.js';
import type { FlowJson } from '../src/api/job-json.js';
import { openApiDocument } from '../src/api/openapi.js';
import { runCli } from '../src/cli/q-jobs.js';
import { api, testConfig, TOKEN, TEST_HANDLERS } from './helpers.js';

let schema: TestSchema;
let app: WorkerApp;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  schema = await createTestSchema('akw_flows');
  // Consumes only `notify`: the flows below live on `backup`, so no node runs unless a test says so.
  app = await startWorkerApp(testConfig(schema.dsn, ['--queues', 'notify']), { handlers: TEST_HANDLERS });
  env = { AKERDOCK_API_URL: app.url, AKERDOCK_ADMIN_TOKEN: TOKEN };
});
afterAll(async () => {
  await app?.stop();
  await schema?.drop();
});

const errorOf = (json: unknown) => (json as { error: { code: string; message: string } }).error;

const cli = async (args: string[]) => {
  let stdout = '';
  let stderr = '';
  const code = await runCli(args, env, { out: (t) => (stdout += `${t}\n`), err: (t) => (stderr += `${t}\n`) });
  return { code, stdout, stderr };
};

/** A diamond on queue `backup`: a → b, a → c (policy continue), b + c → d. */
async function diamond(name: string): Promise<string> {
  const { flowId } = await app.queue.flow({
    name,
    nodes: [
      { ref: 'a', type: 'x', queue: 'backup' },
      { ref: 'b', type: 'x', queue: 'backup', dependsOn: ['a'] },
      { ref: 'c', type: 'report.build', queue: 'backup', dependsOn: [{ ref: 'a', onFailure: 'continue' }] },
      { ref: 'd', type: 'x', queue: 'backup', dependsOn: ['b', 'c'] },
    ],
  });
  return flowId;
}

describe('admin API /flows', () => {
  it('GET /flows/{id} shows every node with its job, in id order, and the edges with their policies', async () => {
    const id = await diamond('nightly');
    const res = await api(app.url, 'GET', `/flows/${id}`);
    expect(res.status).toBe(200);
    const flow = res.json as FlowJson;
    expect(flow.id).toBe(id);
    expect(flow.name).toBe('nightly');
    expect(flow.finished_at).toBeNull();
    expect(flow.nodes.map((n) => [n.ref, n.job.status, n.job.type])).toEqual([
      ['a', 'queued', 'x'],
      ['b', 'waiting', 'x'],
      ['c', 'waiting', 'report.build'],
      ['d', 'waiting', 'x'],
    ]);
    const ids = flow.nodes.map((n) => n.job.id);
    expect([...ids].sort((x, y) => x - y)).toEqual(ids);
    expect(flow.edges.map((e) => `${e.parent}>${e.child}:${e.on_failure}`).sort()).toEqual(['a>b:fail', 'a>c:continue', 'b>d:fail', 'c>d:fail']);
  });

  it('POST /flows/{id}/cancel cancels every live node (202, counts and the flow); nothing is left to run', async () => {
    const id = await diamond('to-cancel');
    const res = await api(app.url, 'POST', `/flows/${id}/cancel`);
    expect(res.status).toBe(202);
    const ans = res.json as { cancelled: number; cancel_requested: number; flow: FlowJson };
    expect(ans.cancelled).toBe(4);
    expect(ans.cancel_requested).toBe(0);
    expect(ans.flow.nodes.map((n) => n.job.status)).toEqual(['cancelled', 'cancelled', 'cancelled', 'cancelled']);
    expect(ans.flow.finished_at).not.toBeNull();
    // The database agrees, and a second cancel finds nothing live.
    const info = await app.queue.getFlow(id);
    expect(Object.values(info?.nodes ?? {}).map((j) => j.status)).toEqual(['cancelled', 'cancelled', 'cancelled', 'cancelled']);
    const again = await api(app.url, 'POST', `/flows/${id}/cancel`);
    expect(again.status).toBe(202);
    expect((again.json as { cancelled: number }).cancelled).toBe(0);
  });

  it('refuses an unknown flow (404), an id that is no uuid (400), no token (401) and a wrong one (403), writing nothing', async () => {
    const id = await diamond('guarded');
    const unknown = await api(app.url, 'GET', '/flows/7d0f3a52-6f1e-4c41-9d35-0b7a2b0f0c11');
    expect(unknown.status).toBe(404);
    expect(errorOf(unknown.json).code).toBe('not_found');
    const cancelUnknown = await api(app.url, 'POST', '/flows/7d0f3a52-6f1e-4c41-9d35-0b7a2b0f0c11/cancel');
    expect(cancelUnknown.status).toBe(404);
    const bad = await api(app.url, 'GET', '/flows/not-a-uuid');
    expect(bad.status).toBe(400);
    expect((await api(app.url, 'POST', `/flows/${id}/cancel`, { token: null })).status).toBe(401);
    expect((await api(app.url, 'POST', `/flows/${id}/cancel`, { token: 'wrong-token-0123456789' })).status).toBe(403);
    const info = await app.queue.getFlow(id);
    expect(info?.nodes.a?.status).toBe('queued');
  });

  it('POST /flows/{id}/retry puts a cancelled flow back to run: the root queued, the others waiting on it again', async () => {
    const id = await diamond('to-retry');
    expect((await api(app.url, 'POST', `/flows/${id}/cancel`)).status).toBe(202);
    const res = await api(app.url, 'POST', `/flows/${id}/retry`, { body: { mode: 'failed' } });
    expect(res.status).toBe(202);
    const ans = res.json as { retried: number; flow: FlowJson };
    expect(ans.retried).toBe(4);
    expect(ans.flow.nodes.map((n) => [n.ref, n.job.status])).toEqual([
      ['a', 'queued'],
      ['b', 'waiting'],
      ['c', 'waiting'],
      ['d', 'waiting'],
    ]);
    expect(ans.flow.finished_at).toBeNull();
    const badMode = await api(app.url, 'POST', `/flows/${id}/retry`, { body: { mode: 'everything' } });
    expect(badMode.status).toBe(400);
    expect(errorOf(badMode.json).code).toBe('invalid_request');
  });

  it('is in /openapi.json', () => {
    const doc = openApiDocument('test') as { paths: Record<string, Record<string, { operationId: string }>> };
    expect(doc.paths['/flows/{id}']?.get?.operationId).toBe('getFlow');
    expect(doc.paths['/flows/{id}/cancel']?.post?.operationId).toBe('cancelFlow');
    expect(doc.paths['/flows/{id}/retry']?.post?.operationId).toBe('retryFlow');
  });
});

describe('q-jobs flow', () => {
  it('flow show draws the graph as a tree from its root: a node with two parents in full once, named under the other', async () => {
    const id = await diamond('tree');
    const r = await cli(['flow', 'show', id]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(new RegExp(`^flow ${id} "tree": 4 nodes \\(1 queued, 3 waiting\\), created .+, not finished$`));
    expect(lines.slice(1)).toEqual([
      'a  queued  x  0/5',
      '├─ b  waiting  x  0/5',
      '│  └─ d  waiting  x  0/5',
      '└─ c  waiting  report.build  0/5  [on parent failure: continue]',
      '   └─ d  ↑ shown above',
    ]);
    const json = await cli(['flow', 'show', id, '--json']);
    expect((JSON.parse(json.stdout) as FlowJson).nodes.map((n) => n.ref)).toEqual(['a', 'b', 'c', 'd']);
  });

  it('flow cancel cancels the live nodes and flow retry puts them back; an unknown flow is exit 1 with a hint; a missing id is exit 2', async () => {
    const id = await diamond('cli-cancel');
    const r = await cli(['flow', 'cancel', id]);
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe(`flow ${id}: 4 nodes cancelled, 0 running nodes asked to stop`);
    const retried = await cli(['flow', 'retry', id, '--downstream']);
    expect(retried.code).toBe(0);
    expect(retried.stdout.trim()).toBe(`flow ${id}: 4 nodes put back to run`);
    expect((await app.queue.getFlow(id))?.nodes.a?.status).toBe('queued');
    const misplaced = await cli(['flow', 'show', id, '--downstream']);
    expect(misplaced.code).toBe(2);
    expect(misplaced.stderr).toContain('--downstream goes with flow retry');
    const unknown = await cli(['flow', 'show', '7d0f3a52-6f1e-4c41-9d35-0b7a2b0f0c11']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('error: not_found (HTTP 404): no such flow');
    expect(unknown.stderr).toContain('hint: a flow id is the flowId JobQueue.flow returned');
    const usage = await cli(['flow', 'show']);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('flow show needs exactly one flow ID');
  });
});
