import { html } from '../html.js';
import { notInstalled, num, type Page, type PageContext } from '../page.js';

/** The Quotas page: keys with the slots in use, holders with their lease, rate windows with this window's admissions. */
export async function quotasPage(ctx: PageContext): Promise<Page> {
  const [keys, holders, windows] = await Promise.all([ctx.reader.quotaKeys(), ctx.reader.quotaHolders(), ctx.reader.quotaWindows()]);
  if (keys === null || holders === null || windows === null) return { title: 'Quotas', nav: 'quotas', body: notInstalled('quota') };
  const keyRows = keys.map(
    (k) =>
      html`<tr data-key="${k.key}">
        <td>${k.key}</td>
        <td class="n" data-used>${k.used}</td>
        <td class="n" data-limit>${k.last_limit ?? '?'}</td>
        <td class="n">${k.holders}</td>
      </tr>`,
  );
  const holderRows = holders.map((h) => {
    const left = num(h.expires_ms) - num(h.now_ms);
    return html`<tr data-holder="${h.holder}">
      <td>${h.holder}</td>
      <td class="n">${h.slots}</td>
      <td>${new Date(num(h.expires_ms)).toISOString()}</td>
      <td>${h.lapsed || left <= 0 ? 'lapsed' : `${Math.round(left / 1000)} s left`}</td>
    </tr>`;
  });
  const windowRows = windows.map(
    (w) =>
      html`<tr data-key="${w.key}">
        <td>${w.key}</td>
        <td class="n">${num(w.window_ms) / 1000} s</td>
        <td class="n" data-admitted>${w.admitted}</td>
      </tr>`,
  );
  const body = html`<h1>Quotas</h1>
    <p class="muted">
      Limits are given by each client with its acquire or admit. A concurrency key shows the limit its latest acquire passed (<code>?</code>
      before one); clients passing different limits for one key see different ones. Rate windows show what is admitted.
    </p>
    <h2>Concurrency keys</h2>
    <table id="quota-keys">
      <thead>
        <tr>
          <th>key</th>
          <th>slots used (live holders)</th>
          <th>limit (latest acquire)</th>
          <th>holder rows</th>
        </tr>
      </thead>
      <tbody>
        ${keyRows}
      </tbody>
    </table>
    <h2>Holders</h2>
    <table id="quota-holders">
      <thead>
        <tr>
          <th>holder</th>
          <th>slots</th>
          <th>lease expires</th>
          <th>lease</th>
        </tr>
      </thead>
      <tbody>
        ${holderRows}
      </tbody>
    </table>
    <h2>Rate windows</h2>
    <table id="quota-windows">
      <thead>
        <tr>
          <th>key</th>
          <th>window</th>
          <th>admitted in the current window</th>
        </tr>
      </thead>
      <tbody>
        ${windowRows}
      </tbody>
    </table>`;
  return { title: 'Quotas', nav: 'quotas', body };
}
