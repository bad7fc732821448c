// The validation message rule: a `QError` `INVALID_ARGUMENT` thrown for bad input reads
// `<op>: <what> must …` (`enqueue: queue must be a non-empty string`), so a reader sees the call,
// the argument and what it should have been. This module finds those messages in the source.
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from './repo.js';

/** One INVALID_ARGUMENT message found in the source. */
export interface FoundMessage {
  /** Path relative to the repository root. */
  file: string;
  /** 1-based line of the call. */
  line: number;
  /** The message literal as written (a template keeps its `${…}` parts), or the expression when it is not a literal. */
  text: string;
  /** Whether the first argument is a string or template literal. */
  literal: boolean;
}

const CALL = /\binvalidArgument\(|\bnew QError\(\s*(?:QErrorCode\.INVALID_ARGUMENT|'INVALID_ARGUMENT'|"INVALID_ARGUMENT")\s*,/g;

/** `<op>: <what> must …`: an op and a what without colons, then `must`. */
const RULE = /^[^:\s][^:]*: [^:]+? must /;

/** Whether a message literal follows the rule. */
export function followsRule(text: string): boolean {
  return RULE.test(text);
}

/** Reads the literal starting at `i` (a quote or backtick); returns its body and the index after it. */
function readLiteral(src: string, i: number): { body: string; end: number } {
  const quote = src[i] ?? '';
  let j = i + 1;
  let depth = 0;
  while (j < src.length) {
    const c = src[j] ?? '';
    if (c === '\\') {
      j += 2;
      continue;
    }
    if (quote === '`') {
      if (depth === 0 && c === '`') break;
      if (c === '$' && src[j + 1] === '{') {
        depth++;
        j += 2;
        continue;
      }
      if (depth > 0 && c === '}') depth--;
      else if (depth > 0 && (c === '`' || c === "'" || c === '"')) {
        j = readLiteral(src, j).end;
        continue;
      }
    } else if (c === quote) break;
    j++;
  }
  return { body: src.slice(i + 1, j), end: j + 1 };
}

/** The INVALID_ARGUMENT messages of one source text (comments and the helper's own definition skipped). */
export function messagesOf(file: string, src: string): FoundMessage[] {
  const out: FoundMessage[] = [];
  for (const m of src.matchAll(CALL)) {
    const start = m.index;
    const lineStart = src.lastIndexOf('\n', start) + 1;
    const before = src.slice(lineStart, start).trim();
    if (before.startsWith('*') || before.startsWith('//') || before.startsWith('/*') || /\bfunction\s*$/.test(before)) continue;
    let i = start + m[0].length;
    while (/\s/.test(src[i] ?? '')) i++;
    const line = src.slice(0, start).split('\n').length;
    const c = src[i];
    if (c === "'" || c === '"' || c === '`') {
      const { body, end } = readLiteral(src, i);
      // A literal that is only the start of a concatenation is not checkable as written.
      const rest = src.slice(end).trimStart();
      out.push({ file, line, text: body, literal: !rest.startsWith('+') });
    } else {
      let j = i;
      let depth = 0;
      while (j < src.length && !(depth === 0 && (src[j] === ')' || src[j] === ','))) {
        if (src[j] === '(') depth++;
        if (src[j] === ')') depth--;
        j++;
      }
      out.push({ file, line, text: src.slice(i, j).trim(), literal: false });
    }
  }
  return out;
}

/** Every `.ts` file under each `src/` of `packages/*` and `apps/*`. */
export function sourceFiles(): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, e.name);
      if (e.isDirectory()) walk(full);
      else if (e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.d.ts')) out.push(path.relative(ROOT, full));
    }
  };
  for (const top of ['packages', 'apps']) {
    for (const pkg of fs.readdirSync(path.join(ROOT, top), { withFileTypes: true })) {
      const src = path.join(ROOT, top, pkg.name, 'src');
      if (pkg.isDirectory() && fs.existsSync(src)) walk(src);
    }
  }
  return out.sort();
}

/** The key of a message in the allow-list: `file` and the message as written, tab-separated. */
export function keyOf(m: FoundMessage): string {
  return `${m.file}\t${m.text.replace(/\s+/g, ' ')}`;
}

/** The messages that break the rule (non-literal messages cannot be checked, so they count too). */
export function offenders(messages: FoundMessage[]): FoundMessage[] {
  return messages.filter((m) => !m.literal || !followsRule(m.text));
}
