import path from 'node:path';
import { isFile, readText } from './repo.js';

/** One row of a table in `docs/architecture.md`. */
export interface MapRow {
  section: string;
  /** 1-based line in the Markdown file. */
  line: number;
  /** The question (index table) or the hop (path tables): how a failure names the row. */
  label: string;
  /** Paths named in the file and function columns, as written. */
  files: string[];
  /** Identifiers named in the function column. */
  symbols: string[];
}

/** The tables of `docs/architecture.md` the map test checks, with what `sql/` abbreviates in each. */
export const CHECKED_SECTIONS: Record<string, string | undefined> = {
  'Job path': 'packages/store/src/jobs/sql/',
  'Request path': 'packages/store/src/requests/sql/',
  'Where is X decided': undefined,
};

const PATH_LIKE = /^[\w./-]+\.(?:ts|mts|mjs|js|sql|json|md)$/;
const IDENTIFIER = /^[A-Za-z_$][\w$]*(?:[.#][A-Za-z_$][\w$]*)*(?:\(\))?$/;

function backticked(cell: string): string[] {
  return [...cell.matchAll(/`([^`]+)`/g)].map((m) => (m[1] ?? '').trim());
}

function cells(line: string): string[] {
  return line
    .trim()
    .replace(/^\||\|$/g, '')
    .split('|')
    .map((c) => c.trim());
}

/** The rows of the checked tables of `docs/architecture.md`. */
export function parseMap(markdown: string): MapRow[] {
  const rows: MapRow[] = [];
  const lines = markdown.split('\n');
  let section = '';
  let header: string[] | undefined;
  lines.forEach((text, i) => {
    const heading = /^##\s+(.*)$/.exec(text);
    if (heading) {
      section = (heading[1] ?? '').trim();
      header = undefined;
      return;
    }
    if (!(section in CHECKED_SECTIONS) || !text.trim().startsWith('|')) {
      if (!text.trim().startsWith('|')) header = undefined;
      return;
    }
    const row = cells(text);
    if (!header) {
      header = row;
      return;
    }
    if (row.every((c) => /^:?-+:?$/.test(c))) return;
    const fileCol = header.indexOf('file');
    const fnCol = header.indexOf('function');
    const labelCol = header.indexOf('question') >= 0 ? header.indexOf('question') : header.indexOf('hop');
    const fileTokens = backticked(row[fileCol] ?? '');
    const fnTokens = backticked(row[fnCol] ?? '');
    rows.push({
      section,
      line: i + 1,
      label: row[labelCol] ?? text,
      files: [...fileTokens, ...fnTokens].filter((t) => PATH_LIKE.test(t)),
      symbols: fnTokens.filter((t) => !PATH_LIKE.test(t) && IDENTIFIER.test(t)),
    });
  });
  return rows;
}

/**
 * Resolves a path as the map writes it: from the root, `sql/…` by the section's abbreviation, and a
 * short path (`retry-policy.ts`, `runner/run.ts`) beside a full path of the same row or in one of
 * that path's parent folders inside its package.
 */
export function resolvePath(written: string, row: MapRow): string | undefined {
  const sqlDir = CHECKED_SECTIONS[row.section];
  const candidates = [written];
  if (sqlDir && written.startsWith('sql/')) candidates.push(sqlDir + written.slice('sql/'.length));
  for (const other of row.files) {
    if (other === written || !isFile(other)) continue;
    let dir = path.posix.dirname(other);
    // Up to the package's root (the folder holding `src`).
    while (dir !== '.' && dir !== '') {
      candidates.push(path.posix.join(dir, written));
      if (path.posix.basename(dir) === 'src') break;
      dir = path.posix.dirname(dir);
    }
  }
  return candidates.find(isFile);
}

function mentions(source: string, word: string): boolean {
  return new RegExp(`(?<![\\w$])${word.replace(/\$/g, '\\$')}(?![\\w$])`).test(source);
}

/** What is wrong with one row: paths that resolve to no file, symbols no named file mentions. */
export function problemsOf(row: MapRow): string[] {
  const problems: string[] = [];
  const sources: string[] = [];
  for (const written of row.files) {
    const found = resolvePath(written, row);
    if (found) sources.push(readText(found));
    else problems.push(`no file ${written}`);
  }
  if (row.files.length === 0 && row.section in CHECKED_SECTIONS) problems.push('names no file');
  for (const symbol of row.symbols) {
    const parts = symbol.replace(/\(\)$/, '').split(/[.#]/);
    if (!sources.some((source) => parts.every((part) => mentions(source, part)))) {
      problems.push(`${symbol} is in none of ${row.files.join(', ')}`);
    }
  }
  return problems;
}

/**
 * The rows of `docs/glossary.md`: every path a row names must exist, and each identifier in its
 * "decided in" column must be mentioned by one of those files.
 */
export function parseGlossary(markdown: string): MapRow[] {
  const rows: MapRow[] = [];
  let section = '';
  markdown.split('\n').forEach((text, i) => {
    const heading = /^##\s+(.*)$/.exec(text);
    if (heading) section = (heading[1] ?? '').trim();
    if (!text.trim().startsWith('|')) return;
    const row = cells(text);
    if (row[0] === 'term' || row.every((c) => /^:?-+:?$/.test(c))) return;
    const all = row.flatMap(backticked);
    const decided = backticked(row[2] ?? '');
    rows.push({
      section,
      line: i + 1,
      label: row[0] ?? text,
      files: all.filter((t) => PATH_LIKE.test(t)),
      symbols: decided.filter((t) => !PATH_LIKE.test(t) && IDENTIFIER.test(t)),
    });
  });
  return rows;
}
