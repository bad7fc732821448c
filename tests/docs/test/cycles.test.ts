// No import cycles between the source modules of a package (issue 36): a reader can take the
// modules of packages/*/src and apps/*/src in an order where each only imports those before it.
// Relative imports only (packages depend on each other without cycles by their package.json), type
// imports included: a type cycle still makes a reader go round.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../src/repo.js';

const SKIPPED_DIRS = new Set(['node_modules', 'dist', '.git', '.turbo', 'coverage']);
const IMPORT = /^\s*(?:import|export)\s+(?:type\s+)?[^'";]*?from\s+['"](\.[^'"]+)['"]|^\s*import\s+['"](\.[^'"]+)['"]/gm;

/** Every `.ts` source file (absolute) below `dir`. */
function sources(dir: string): string[] {
  const out: string[] = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      if (!SKIPPED_DIRS.has(entry.name)) out.push(...sources(full));
    } else if (entry.isFile() && entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) {
      out.push(full);
    }
  }
  return out;
}

/** The files `file` imports by relative path (`./x.js` is `x.ts`, or `x/index.ts`). */
function relativeImports(file: string): string[] {
  const deps: string[] = [];
  for (const m of fs.readFileSync(file, 'utf8').matchAll(IMPORT)) {
    const spec = (m[1] ?? m[2]) as string;
    const base = path.resolve(path.dirname(file), spec);
    const target = [base.replace(/\.js$/, '.ts'), path.join(base, 'index.ts')].find((f) => fs.existsSync(f));
    if (target) deps.push(target);
  }
  return deps;
}

/** The strongly connected groups of more than one file (Tarjan): each is at least one cycle. */
function cycles(graph: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const groups: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const group: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      group.push(path.relative(ROOT, w));
    } while (w !== v);
    if (group.length > 1) groups.push(group.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return groups;
}

describe('import cycles', () => {
  const srcDirs = ['packages', 'apps'].flatMap((top) =>
    fs
      .readdirSync(path.join(ROOT, top))
      .map((name) => path.join(ROOT, top, name, 'src'))
      .filter((dir) => fs.existsSync(dir)),
  );
  const graph = new Map(srcDirs.flatMap(sources).map((f) => [f, relativeImports(f)] as const));

  it('reads the imports (the job store imports its claim positions)', () => {
    const store = path.join(ROOT, 'packages/store/src/jobs/job-store.ts');
    expect(graph.get(store)).toContain(path.join(ROOT, 'packages/store/src/jobs/claim-starts.ts'));
  });

  it('finds a cycle when there is one', () => {
    expect(
      cycles(
        new Map([
          ['a', ['b']],
          ['b', ['a']],
          ['c', ['a']],
        ]),
      ),
    ).toHaveLength(1);
  });

  it('no source module of packages/ or apps/ imports itself through others', () => {
    expect(cycles(graph)).toEqual([]);
  });
});
