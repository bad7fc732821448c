import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The migration modules; each package migrates only the ones it owns. */
export const MIGRATION_MODULES = ['requests', 'quota', 'jobs'] as const;
/** One of {@link MIGRATION_MODULES}. */
export type MigrationModule = (typeof MIGRATION_MODULES)[number];

/** One migration shipped with this build. */
export interface BundledMigration {
  module: MigrationModule;
  /** drizzle-kit tag, e.g. `0000_init`; migrations apply in tag order. */
  tag: string;
  /** sha256 of the SQL file: a journal row with another hash was written by another build. */
  hash: string;
  statements: string[];
}

// dist/ and src/ both sit one level below the package root, next to drizzle/.
const migrationsRoot = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'drizzle');
const cache = new Map<MigrationModule, BundledMigration[]>();

/** The migrations this build ships for `module`, in apply order. Read once per process. */
export function bundledMigrations(module: MigrationModule): BundledMigration[] {
  const hit = cache.get(module);
  if (hit) return hit;
  const dir = path.join(migrationsRoot, module);
  const journal = JSON.parse(fs.readFileSync(path.join(dir, 'meta', '_journal.json'), 'utf8')) as {
    entries: Array<{ idx: number; tag: string }>;
  };
  const list = [...journal.entries]
    .sort((a, b) => a.idx - b.idx)
    .map(({ tag }) => {
      const sql = fs.readFileSync(path.join(dir, `${tag}.sql`), 'utf8');
      return {
        module,
        tag,
        hash: createHash('sha256').update(sql).digest('hex'),
        statements: sql
          .split('--> statement-breakpoint')
          .map((s) => s.trim())
          .filter((s) => s.replace(/--[^\n]*\n?/g, '').trim() !== ''),
      };
    });
  cache.set(module, list);
  return list;
}

/**
 * A module's consolidated starting point: one script creating what its migrations up to and
 * including `through` leave. `migrate()` runs it instead of those migrations on a schema that has
 * none of the module's migrations yet, so a fresh install goes straight to the current names.
 */
export interface MigrationBaseline {
  module: MigrationModule;
  /** The last migration tag the script stands for. */
  through: string;
  /** The script: several statements, run in one simple-protocol query. */
  sql: string;
}

const baselines = new Map<MigrationModule, MigrationBaseline | null>();

/** The baseline shipped for `module` (`drizzle/<module>/baseline.sql`), if any. Read once per process. */
export function bundledBaseline(module: MigrationModule): MigrationBaseline | undefined {
  if (!baselines.has(module)) {
    const file = path.join(migrationsRoot, module, 'baseline.sql');
    let found: MigrationBaseline | null = null;
    if (fs.existsSync(file)) {
      const sql = fs.readFileSync(file, 'utf8');
      const through = /^-- q-baseline through (\S+)/.exec(sql)?.[1];
      if (!through || !bundledMigrations(module).some((m) => m.tag === through)) {
        throw new Error(`${file}: the first line must be "-- q-baseline through <a shipped tag>"`);
      }
      found = { module, through, sql };
    }
    baselines.set(module, found);
  }
  return baselines.get(module) ?? undefined;
}
