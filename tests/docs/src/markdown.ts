import path from 'node:path';
import { isFile, ROOT } from './repo.js';
import fs from 'node:fs';

/** Lines (1-based) where a code fence opens and is never closed. */
export function unclosedFences(markdown: string): number[] {
  let open: { line: number; char: string; len: number } | undefined;
  markdown.split('\n').forEach((text, i) => {
    const m = /^ {0,3}(`{3,}|~{3,})(.*)$/.exec(text);
    if (!m) return;
    const fence = m[1] ?? '';
    if (!open) {
      open = { line: i + 1, char: fence.charAt(0), len: fence.length };
    } else if (fence.charAt(0) === open.char && fence.length >= open.len && (m[2] ?? '').trim() === '') {
      open = undefined;
    }
  });
  return open ? [open.line] : [];
}

/** Relative links (`[text](target)`, outside code) of a Markdown file whose target file does not exist. */
export function brokenLinks(relativeFile: string, markdown: string): string[] {
  const broken: string[] = [];
  let inFence = false;
  for (const text of markdown.split('\n')) {
    if (/^ {0,3}(`{3,}|~{3,})/.test(text)) inFence = !inFence;
    if (inFence) continue;
    const prose = text.replace(/`[^`]*`/g, '');
    for (const m of prose.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const target = m[1] ?? '';
      if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('#')) continue;
      const file = decodeURIComponent(target.split('#')[0] ?? '');
      const resolved = path.posix.normalize(path.posix.join(path.posix.dirname(relativeFile), file));
      const exists = isFile(resolved) || (fs.existsSync(path.join(ROOT, resolved)) && fs.statSync(path.join(ROOT, resolved)).isDirectory());
      if (!exists) broken.push(target);
    }
  }
  return broken;
}
