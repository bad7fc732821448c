import type { IncomingMessage, ServerResponse } from 'node:http';
import { isQError, QErrorCode } from '@q/schema';
import type { JobStore } from '@q/store';
import { ACTIONS, runAction, type ActionBody, type ActionName } from './actions.js';
import { APP_CSS, APP_JS } from './assets.js';
import { refusal } from './auth.js';
import { html } from './html.js';
import type { ResolvedOptions } from './options.js';
import { layout, type Page, type PageContext } from './page.js';
import { flowPage, flowsPage } from './pages/flows.js';
import { jobPage } from './pages/job.js';
import { jobsPage } from './pages/jobs.js';
import { quotasPage } from './pages/quotas.js';
import { requestsPage } from './pages/requests.js';
import { schedulesPage } from './pages/schedules.js';
import type { Reader } from './reader.js';

// Scripts and styles from the dashboard's own origin only: a value that slipped past escaping
// still could not run. No framing, forms post only to the dashboard.
const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const MAX_BODY = 4096;

function send(res: ServerResponse, status: number, type: string, body: string, extra: Record<string, string> = {}): void {
  res.writeHead(status, {
    'content-type': type,
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'same-origin',
    'content-security-policy': CSP,
    ...extra,
  });
  res.end(body);
}

async function readBody(req: IncomingMessage): Promise<string> {
  let size = 0;
  const parts: Buffer[] = [];
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY) throw new Error('body too large');
    parts.push(chunk);
  }
  return Buffer.concat(parts).toString('utf8');
}

/** The parts a request is served from. */
export interface HandlerDeps {
  reader: Reader;
  store: JobStore;
  schema: string;
  opts: ResolvedOptions;
}

/** Serves one request; returns false when the path is not the dashboard's (for `next()`). */
export async function serve(deps: HandlerDeps, req: IncomingMessage, res: ServerResponse): Promise<boolean> {
  const url = new URL(req.url ?? '/', 'http://dashboard.invalid');
  let path = url.pathname;
  const base = deps.opts.basePath;
  if (base !== '' && (path === base || path.startsWith(`${base}/`))) path = path.slice(base.length);
  if (path === '') path = '/';
  const ctx: PageContext = {
    reader: deps.reader,
    store: deps.store,
    opts: deps.opts,
    url,
    schema: deps.schema,
    link: (p) => `${base}${p}`,
  };
  const method = req.method ?? 'GET';

  if (path.startsWith('/actions/')) {
    const action = path.slice('/actions/'.length);
    if (method !== 'POST') {
      send(res, 405, 'application/json', JSON.stringify({ message: 'POST only' }), { allow: 'POST' });
      return true;
    }
    if (!(ACTIONS as readonly string[]).includes(action)) {
      send(res, 404, 'application/json', JSON.stringify({ message: 'no such action' }));
      return true;
    }
    const refused = await refusal(req, deps.opts.actions);
    if (refused) {
      send(res, refused.status, 'application/json', JSON.stringify({ message: `refused: ${refused.reason}` }));
      return true;
    }
    if (!/^application\/json\b/.test(req.headers['content-type'] ?? '')) {
      send(res, 415, 'application/json', JSON.stringify({ message: 'send JSON' }));
      return true;
    }
    try {
      const body = JSON.parse(await readBody(req)) as ActionBody | null;
      const result = await runAction(deps.store, action as ActionName, body ?? {});
      send(res, 200, 'application/json', JSON.stringify(result));
    } catch (err) {
      const status = isQError(err) ? (err.code === QErrorCode.NOT_FOUND ? 404 : err.code === QErrorCode.INVALID_STATE ? 409 : 400) : 400;
      const message = isQError(err) ? err.message : err instanceof SyntaxError ? 'body is not JSON' : 'bad request';
      send(res, status, 'application/json', JSON.stringify({ message }));
    }
    return true;
  }

  if (method !== 'GET' && method !== 'HEAD') {
    send(res, 405, 'text/plain; charset=utf-8', 'GET only', { allow: 'GET, HEAD' });
    return true;
  }
  if (path === '/assets/app.js') {
    send(res, 200, 'text/javascript; charset=utf-8', APP_JS);
    return true;
  }
  if (path === '/assets/app.css') {
    send(res, 200, 'text/css; charset=utf-8', APP_CSS);
    return true;
  }
  if (path === '/') {
    send(res, 302, 'text/plain; charset=utf-8', '', { location: ctx.link(`/${deps.opts.home}`) });
    return true;
  }

  let page: Page | null;
  try {
    const job = /^\/jobs\/([^/]+)$/.exec(path)?.[1];
    const flow = /^\/flows\/([^/]+)$/.exec(path)?.[1];
    if (path === '/jobs') page = await jobsPage(ctx);
    else if (job !== undefined) page = UUID.test(job) ? await jobPage(ctx, job) : null;
    else if (path === '/flows') page = await flowsPage(ctx);
    else if (flow !== undefined) page = UUID.test(flow) ? await flowPage(ctx, flow) : null;
    else if (path === '/schedules') page = await schedulesPage(ctx);
    else if (path === '/requests') page = await requestsPage(ctx);
    else if (path === '/quotas') page = await quotasPage(ctx);
    else return false;
  } catch (err) {
    if (isQError(err) && err.code === QErrorCode.INVALID_ARGUMENT) {
      send(
        res,
        400,
        'text/html; charset=utf-8',
        layout(ctx, {
          title: 'Bad request',
          nav: 'jobs',
          body: html`<h1>Bad request</h1>
            <p>${err.message}</p>`,
        }),
      );
      return true;
    }
    throw err;
  }
  if (!page) {
    send(res, 404, 'text/html; charset=utf-8', layout(ctx, { title: 'Not found', nav: 'jobs', body: html`<h1>Not found</h1>` }));
    return true;
  }
  send(res, 200, 'text/html; charset=utf-8', layout(ctx, page));
  return true;
}
