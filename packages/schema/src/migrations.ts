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
