// The real browser the tests drive: Debian's chromium through playwright-core (no bundled
// browser download). CHROMIUM_PATH overrides where it is.
import fs from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';

const CANDIDATES = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'].filter((p): p is string => !!p);

/** Launches headless chromium; throws (failing the tests) when none is installed. */
export async function launch(): Promise<Browser> {
  const executablePath = CANDIDATES.find((p) => fs.existsSync(p));
  if (!executablePath) throw new Error('chromium is not installed: apt-get install -y chromium (or set CHROMIUM_PATH)');
  return chromium.launch({ executablePath, headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
}

/** A page that records every console error and uncaught exception into `errors`. */
export async function watchedPage(browser: Browser, errors: string[]): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(`${page.url()}: ${m.text()}`);
  });
  page.on('pageerror', (e) => errors.push(`${page.url()}: ${e.message}`));
  return page;
}
