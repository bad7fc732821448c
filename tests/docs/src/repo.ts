import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root (this package is `tests/docs`). */
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

const SKIPPED_DIRS = new Set(['node_modules', 'dist', '.git', '.turbo', '.q', 'coverage']);

/** Every Markdown file of the repository, as paths relative to the root (build output and dependencies left out). */
export function markdownFiles(dir = ROOT): string[] {
  const out: string[] = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    if (entry.isDirectory()) {
      if (!SKIPPED_DIRS.has(entry.name)) out.push(...markdownFiles(path.join(dir, entry.name)));
    } else if (entry.isFile() && entry.name.endsWith('.md')) {
      out.push(path.relative(ROOT, path.join(dir, entry.name)));
    }
  }
  return out.sort();
}

export function readText(relative: string): string {
  return fs.readFileSync(path.join(ROOT, relative), 'utf8');
}

export function isFile(relative: string): boolean {
  try {
    return fs.statSync(path.join(ROOT, relative)).isFile();
  } catch {
    return false;
  }
}
