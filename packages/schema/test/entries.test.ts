// The public surface of @q/schema, pinned: the root entry exports what applications use, and the
// helpers q's own packages share live in `@q/schema/internal` (not covered by semver). A helper
// exported from the root by mistake fails here, as does one removed. Both entries also load with a
// CommonJS `require` and an ESM `import` of the built package, the way an application loads them.
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import * as internal from '../src/internal.js';
import * as root from '../src/index.js';

const pkgDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The root entry's runtime exports (values). */
const ROOT_VALUES = [
  'DEFAULT_MAX_CONNS',
  'JOURNAL_TABLE',
  'MIGRATION_MODULES',
  'QError',
  'QErrorCode',
  'QuotaHolderLapsedError',
  'bundledMigrations',
  'classifyFailure',
  'installedModules',
  'invalidArgument',
  'isQError',
  'migrate',
  'migrationStatus',
  'openPool',
  'redactDsn',
  'redactSecretsOf',
  'validateDsn',
];

/** The root entry's type-only exports. */
const ROOT_TYPES = [
  'BundledMigration',
  'ConnectionPlacement',
  'FailureClass',
  'FailureKind',
  'FailureVerdict',
  'InstalledOptions',
  'MigrateOptions',
  'MigrationModule',
  'ModuleMigrationStatus',
  'PoolOptions',
  'Queryable',
  'StoreConnectionOptions',
  'StoreOpenOptions',
];

/** Every name `file` exports, values and types, as the TypeScript compiler sees them. */
function exportedNames(file: string): { values: string[]; types: string[] } {
  const program = ts.createProgram([file], {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    strict: true,
    skipLibCheck: true,
    noEmit: true,
  });
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(file);
  const moduleSymbol = source && checker.getSymbolAtLocation(source);
  if (!moduleSymbol) throw new Error(`no module symbol for ${file}`);
  const values: string[] = [];
  const types: string[] = [];
  for (const sym of checker.getExportsOfModule(moduleSymbol)) {
    const target = sym.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(sym) : sym;
    (target.flags & ts.SymbolFlags.Value ? values : types).push(sym.name);
  }
  return { values: values.sort(), types: types.sort() };
}

/** Loads both built entries in a fresh Node process and returns their export names. */
function loadBuilt(kind: 'commonjs' | 'module'): { root: string[]; internal: string[] } {
  const code =
    kind === 'commonjs'
      ? `const r = require('@q/schema'); const i = require('@q/schema/internal');
         console.log(JSON.stringify({ root: Object.keys(r).sort(), internal: Object.keys(i).sort() }));`
      : `const r = await import('@q/schema'); const i = await import('@q/schema/internal');
         console.log(JSON.stringify({ root: Object.keys(r).sort(), internal: Object.keys(i).sort() }));`;
  // The package resolves its own name through `exports` (self-reference), from the built dist/.
  const out = execFileSync(process.execPath, ['--input-type', kind, '-e', code], { cwd: pkgDir, encoding: 'utf8' });
  return JSON.parse(out.trim()) as { root: string[]; internal: string[] };
}

describe('@q/schema entries', () => {
  it('the root entry exports exactly the public values', () => {
    expect(Object.keys(root).sort()).toEqual(ROOT_VALUES);
  });

  it('the root entry exports exactly the public names, values and types', () => {
    expect(exportedNames(path.join(pkgDir, 'src', 'index.ts'))).toEqual({ values: ROOT_VALUES, types: ROOT_TYPES });
  }, 60_000);

  it('@q/schema/internal holds the shared helpers, none of them also at the root', () => {
    const names = Object.keys(internal);
    for (const helper of [
      'at',
      'onlyRow',
      'unnestColumn',
      'textArrayLiteral',
      'StatementScope',
      'statement',
      'withTransaction',
      'FailureTracker',
    ]) {
      expect(names, helper).toContain(helper);
    }
    expect(names.filter((n) => n in root)).toEqual([]);
  });

  it.each(['commonjs', 'module'] as const)('the built entries load with %s (require / import)', (kind) => {
    const loaded = loadBuilt(kind);
    expect(loaded.root).toEqual(ROOT_VALUES);
    expect(loaded.internal).toEqual(Object.keys(internal).sort());
  });
});
