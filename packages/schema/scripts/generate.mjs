// Regenerates the SQL migrations of every module from src/tables/*.ts with drizzle-kit, then
// removes the "public". qualifier drizzle-kit writes on types and sequences, so every migration
// lands in the connection's current schema (search_path), as migrate() promises.
//   node scripts/generate.mjs                 # schema changes of all modules
//   node scripts/generate.mjs --custom quota name   # an empty hand-written migration
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const modules = ['requests', 'quota', 'jobs'];
const args = process.argv.slice(2);
const run = (mod, extra) =>
  execFileSync('npx', ['drizzle-kit', 'generate', '--config', `drizzle.${mod}.config.ts`, ...extra], { stdio: 'inherit' });

if (args[0] === '--custom') {
  const [, mod, name] = args;
  if (!modules.includes(mod) || !name) throw new Error('usage: generate.mjs --custom <module> <name>');
  run(mod, ['--custom', '--name', name]);
} else {
  for (const mod of modules) run(mod, []);
}
for (const mod of modules) {
  const dir = path.join('drizzle', mod);
  for (const f of fs.readdirSync(dir).filter((f) => f.endsWith('.sql'))) {
    const file = path.join(dir, f);
    const sql = fs.readFileSync(file, 'utf8');
    const fixed = sql.replaceAll('"public".', '');
    if (fixed !== sql) fs.writeFileSync(file, fixed);
  }
}
