#!/usr/bin/env node
// How much `npm i <package>` puts on disk: packs every publishable package (pnpm rewrites
// workspace: ranges), installs the named one with the q packages it needs into a new project,
// and reports node_modules' size and package count. Usage: node scripts/installed-size.mjs quota job-worker
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const names = process.argv.slice(2);
if (names.length === 0) {
  process.stderr.write('usage: node scripts/installed-size.mjs <package dir name>…  (e.g. quota job-worker)\n');
  process.exit(2);
}
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'q-size-'));
const manifest = (dir) => JSON.parse(fs.readFileSync(path.join(repo, 'packages', dir, 'package.json'), 'utf8'));
const dirOf = new Map(
  fs
    .readdirSync(path.join(repo, 'packages'))
    .filter((d) => fs.existsSync(path.join(repo, 'packages', d, 'package.json')))
    .map((d) => [manifest(d).name, d]),
);
const tarball = new Map();
function pack(dir) {
  if (!tarball.has(dir)) {
    const out = execFileSync('pnpm', ['pack', '--pack-destination', tmp], { cwd: path.join(repo, 'packages', dir), encoding: 'utf8' });
    tarball.set(dir, out.trim().split('\n').pop().trim());
  }
  return tarball.get(dir);
}
/** The package and every q package it depends on at run time, transitively. */
function closure(dir, seen = new Set()) {
  if (seen.has(dir)) return seen;
  seen.add(dir);
  for (const dep of Object.keys(manifest(dir).dependencies ?? {})) if (dirOf.has(dep)) closure(dirOf.get(dep), seen);
  return seen;
}
function du(dir) {
  let bytes = 0;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) bytes += du(p);
    else if (e.isFile()) bytes += fs.statSync(p).size;
  }
  return bytes;
}
try {
  for (const name of names) {
    const project = path.join(tmp, `project-${name}`);
    fs.mkdirSync(project);
    fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: `size-${name}`, private: true }));
    const tarballs = [...closure(name)].map(pack);
    execFileSync('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', ...tarballs], { cwd: project, stdio: 'inherit' });
    const modules = path.join(project, 'node_modules');
    // Every installed package once, as npm lists them (deduplicated paths under node_modules).
    const listed = execFileSync('npm', ['ls', '--all', '--parseable'], { cwd: project, encoding: 'utf8' });
    const packages = new Set(listed.split('\n').filter((l) => l.includes('node_modules')));
    process.stdout.write(`${manifest(name).name}: ${(du(modules) / 1e6).toFixed(1)} MB in node_modules, ${packages.size} packages\n`);
  }
} finally {
  fs.rmSync(tmp, { recursive: true, force: true });
}
