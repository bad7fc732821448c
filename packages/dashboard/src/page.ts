import type { JobStore } from '@q/store';
import { html, type Html } from './html.js';
import type { Reader } from './reader.js';
import type { ResolvedOptions } from './options.js';

/** What a page renders from. */
export interface PageContext {
  reader: Reader;
  store: JobStore;
  opts: ResolvedOptions;
  url: URL;
  schema: string;
  /** A link to `path` (starting with `/`) under the mount point. */
  link(path: string): string;
}

/** A rendered page: its title, its nav entry and its live body (refreshed in place). */
export interface Page {
  title: string;
  nav: NavKey;
  body: Html;
}

/** The nav entries, in order. */
export const NAV = [
  ['jobs', 'Jobs', '/jobs'],
  ['flows', 'Workflows', '/flows'],
  ['schedules', 'Schedules', '/schedules'],
  ['requests', 'Request queues', '/requests'],
  ['quotas', 'Quotas', '/quotas'],
] as const;

/** A nav entry's key. */
export type NavKey = (typeof NAV)[number][0];

/** The whole document around a page's body. */
export function layout(ctx: PageContext, page: Page): string {
  const nav = NAV.map(
    ([key, label, path]) => html`<a href="${ctx.link(path)}" ${key === page.nav ? html` class="current" aria-current="page"` : ''}>${label}</a>`,
  );
  const token =
    ctx.opts.actions?.token !== undefined
      ? html`<input id="token" type="password" placeholder="action token" autocomplete="off" aria-label="action token" />`
      : '';
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>${page.title} · q dashboard</title>
        <link rel="stylesheet" href="${ctx.link('/assets/app.css')}" />
        <link rel="icon" href="data:," />
        <script src="${ctx.link('/assets/app.js')}" defer></script>
      </head>
      <body data-refresh-ms="${ctx.opts.refreshMs}">
        <header>
          <span class="brand">q</span>${nav}<span class="spacer"></span
          ><span class="muted">schema ${ctx.schema}${ctx.opts.actions ? '' : ' · read-only'}</span>${token}
        </header>
        <main>
          <div id="action-result" role="status"></div>
          <div id="live">${page.body}</div>
        </main>
      </body>
    </html>`.text;
}

/** A count of a bigint column, as a number. */
export function num(s: string | number | null | undefined): number {
  return s === null || s === undefined ? 0 : Number(s);
}

/** The note shown where a module's tables are missing from the schema. */
export function notInstalled(module: string): Html {
  return html`<p class="muted">The ${module} module is not installed in this schema.</p>`;
}

/** A status badge. */
export function badge(status: string): Html {
  return html`<span class="status status-${status}">${status}</span>`;
}
