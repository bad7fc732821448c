// The page's one script and one stylesheet, served by the handler itself (no CDN, no build step):
// the Content-Security-Policy allows scripts and styles from the dashboard's own origin only.

/**
 * Refreshes the page's live part (`#live`) every `data-refresh-ms` by fetching the same URL, and
 * sends action forms with the bearer token the user typed (kept in sessionStorage for the tab).
 */
export const APP_JS = `(() => {
  'use strict';
  const live = document.getElementById('live');
  const ms = Number(document.body.dataset.refreshMs || 3000);
  const token = document.getElementById('token');
  const KEY = 'q-dashboard-token';
  if (token) {
    token.value = sessionStorage.getItem(KEY) || '';
    token.addEventListener('input', () => sessionStorage.setItem(KEY, token.value));
  }
  let busy = false;
  async function refresh(force) {
    if (!live || busy || (!force && document.hidden)) return;
    const a = document.activeElement;
    if (!force && a && live.contains(a) && a.matches('input, select, textarea')) return;
    busy = true;
    try {
      const res = await fetch(location.href, { headers: { 'x-q-dashboard-live': '1' } });
      if (!res.ok) return;
      const next = new DOMParser().parseFromString(await res.text(), 'text/html').getElementById('live');
      if (next) {
        live.replaceChildren(...Array.from(next.childNodes));
        document.body.dataset.updated = String(Date.now());
      }
    } catch {
      // The next tick tries again.
    } finally {
      busy = false;
    }
  }
  if (live) setInterval(() => void refresh(false), ms);
  document.addEventListener('submit', async (event) => {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.hasAttribute('data-action')) return;
    event.preventDefault();
    const out = document.getElementById('action-result');
    const headers = { 'content-type': 'application/json', 'x-q-dashboard': '1' };
    if (token && token.value) headers.authorization = 'Bearer ' + token.value;
    let message;
    let ok = false;
    try {
      const res = await fetch(form.action, { method: 'POST', headers, body: JSON.stringify(Object.fromEntries(new FormData(form))) });
      const body = await res.json().catch(() => ({ message: res.statusText }));
      message = body.message;
      ok = res.ok;
    } catch (err) {
      message = String(err);
    }
    if (out) {
      out.textContent = message;
      out.className = ok ? 'ok' : 'refused';
    }
    if (ok) await refresh(true);
  });
})();
`;

/** The stylesheet. */
export const APP_CSS = `
:root { font-family: system-ui, sans-serif; color: #111827; background: #f9fafb; }
body { margin: 0; }
header { display: flex; gap: 1.5rem; align-items: center; padding: .6rem 1.2rem; background: #111827; color: #f9fafb; }
header a { color: #d1d5db; text-decoration: none; }
header a.current { color: #fff; font-weight: 600; border-bottom: 2px solid #60a5fa; }
header .brand { font-weight: 700; color: #fff; }
header .spacer { flex: 1; }
header input { font: inherit; padding: .2rem .4rem; border-radius: 4px; border: 1px solid #4b5563; background: #1f2937; color: #fff; }
main { padding: 1rem 1.2rem; }
h1 { font-size: 1.3rem; margin: .2rem 0 1rem; }
h2 { font-size: 1.05rem; margin: 1.4rem 0 .5rem; }
table { border-collapse: collapse; background: #fff; font-size: .88rem; }
th, td { border: 1px solid #e5e7eb; padding: .25rem .5rem; text-align: left; vertical-align: top; }
th { background: #f3f4f6; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
pre { background: #fff; border: 1px solid #e5e7eb; padding: .5rem; overflow: auto; max-height: 20rem; white-space: pre-wrap; }
form.filters { display: flex; gap: .5rem; flex-wrap: wrap; margin-bottom: .8rem; align-items: end; }
form.filters label { display: flex; flex-direction: column; font-size: .8rem; }
form[data-action] { display: inline; }
button { font: inherit; padding: .2rem .7rem; cursor: pointer; }
.status { padding: 0 .35rem; border-radius: 3px; background: #e5e7eb; font-size: .8rem; }
.status-succeeded { background: #bbf7d0; } .status-dead_letter { background: #fecaca; } .status-running, .status-leased { background: #bfdbfe; }
.status-retry_wait { background: #fde68a; } .status-cancelled { background: #e5e7eb; } .status-queued { background: #ddd6fe; }
.status-waiting, .status-scheduled { background: #f5f5f4; } .status-paused { background: #fde68a; }
.chart { margin: 0 0 1rem; background: #fff; border: 1px solid #e5e7eb; padding: .5rem; max-width: 760px; }
.chart figcaption { font-size: .85rem; margin-bottom: .3rem; display: flex; gap: 1rem; }
.legend svg { vertical-align: middle; }
.axis { display: flex; justify-content: space-between; font-size: .75rem; color: #6b7280; }
.muted { color: #6b7280; }
#action-result.ok { color: #047857; } #action-result.refused { color: #b91c1c; }
.hidden-value { color: #6b7280; font-style: italic; }
.grid-wrap { display: flex; gap: 1.5rem; flex-wrap: wrap; align-items: flex-start; }
nav.pager { margin-top: .6rem; }
`;
