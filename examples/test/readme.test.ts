import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createTestSchema } from '@q/testing';
import { afterAll, describe, expect, it } from 'vitest';

// Every code block of the README files is either a TypeScript/JavaScript program, extracted and
// run here against a fresh schema of the test database (it must exit 0), or a shell/config/SQL
// fragment marked `<!-- not-run: why -->` on the line before it. A README example that stops
// compiling or working fails this suite.

const here = path.dirname(fileURLToPath(import.meta.url));
const examplesDir = path.resolve(here, '..');
const repoRoot = path.resolve(examplesDir, '..');
// Inside examples/, so the blocks resolve @q/* and their dependencies as the examples do.
const scratch = path.join(examplesDir, '.readme-blocks');
const RUNNABLE = new Set(['ts', 'typescript', 'js', 'javascript']);

interface Block {
  file: string;
  line: number;
  lang: string;
  code: string;
  notRun: string | undefined;
}

function readmeFiles(): string[] {
  const out = [path.join(repoRoot, 'README.md')];
  for (const group of ['packages', 'apps']) {
    for (const dir of fs.readdirSync(path.join(repoRoot, group)).sort()) {
      const f = path.join(repoRoot, group, dir, 'README.md');
      if (fs.existsSync(f)) out.push(f);
    }
  }
  return out;
}

/** The fenced blocks of a markdown file, with the `not-run` marker on the line before each. */
export function blocksOf(file: string): Block[] {
  const lines = fs.readFileSync(file, 'utf8').split('\n');
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && !/^```\s*$/.test(lines[i]!); i++) body.push(lines[i]!);
    let prev = start - 1;
    while (prev >= 0 && lines[prev]!.trim() === '') prev--;
    const marker = prev >= 0 ? /^<!--\s*not-run:\s*(.*?)\s*-->$/.exec(lines[prev]!.trim()) : null;
    blocks.push({ file: path.relative(repoRoot, file), line: start + 1, lang: open[1]!, code: body.join('\n'), notRun: marker?.[1] });
  }
  return blocks;
}

function runBlock(file: string, dsn: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--conditions=q-source', '--import', 'tsx', file], {
      cwd: repoRoot,
      env: { ...process.env, DATABASE_URL: dsn },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const timer = setTimeout(() => {
      output += '\n[killed: still running after 60 s]';
      child.kill('SIGKILL');
    }, 60_000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

const all = readmeFiles().flatMap(blocksOf);

afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));

describe('README code blocks', () => {
  it('finds the README files and their blocks', () => {
    expect(all.filter((b) => b.file === 'README.md' && RUNNABLE.has(b.lang)).length).toBeGreaterThanOrEqual(5);
  });

  it('marks only shell, config and SQL fragments not-run, each with a reason, and every other block is runnable', () => {
    const wrong = all
      .filter((b) => (RUNNABLE.has(b.lang) ? b.notRun !== undefined : !b.notRun))
      .map((b) => `${b.file}:${b.line} (${b.lang || 'no language'})`);
    expect(wrong).toEqual([]);
  });

  for (const [i, b] of all.entries()) {
    if (!RUNNABLE.has(b.lang)) continue;
    it(`${b.file}:${b.line} runs and exits 0`, async () => {
      fs.mkdirSync(scratch, { recursive: true });
      const file = path.join(scratch, `block-${i}.${b.lang.startsWith('j') ? 'mjs' : 'mts'}`);
      fs.writeFileSync(file, `${b.code}\nexport {};\n`);
      const schema = await createTestSchema('readme');
      try {
        const { code, output } = await runBlock(file, schema.dsn);
        expect({ code, output: code === 0 ? '' : output }).toEqual({ code: 0, output: '' });
      } finally {
        await schema.drop();
      }
    }, 90_000);
  }
});
