import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { testDatabaseUrl } from '@q/testing';

const benchDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const out = fs.mkdtempSync(path.join(os.tmpdir(), 'q-bench-smoke-'));

afterAll(() => fs.rmSync(out, { recursive: true, force: true }));

/** Runs the CLI from its sources (as `pnpm bench` runs it from dist) against the test server. */
function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--conditions=q-source', '--import', 'tsx', path.join(benchDir, 'src/cli.ts'), ...args], {
      cwd: benchDir,
      env: { ...process.env, DATABASE_URL: testDatabaseUrl() },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('pnpm bench --smoke', () => {
  it('runs every scenario with tiny sizes, verifies each, writes the table, the JSON and the chart', { timeout: 180_000 }, async () => {
    const r = await cli(['--smoke', '--out', out]);
    expect(r.stderr, r.stderr).not.toMatch(/FAILED/);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('| scenario | metric | system | min | median | max | runs | q advantage |');

    const listed = await cli(['--list']);
    const names = listed.stdout
      .trim()
      .split('\n')
      .map((l) => l.split('\t')[0]);
    expect(names.length).toBeGreaterThan(5);
    const files = fs.readdirSync(out);
    const json = files.find((f) => f.endsWith('.json'));
    const png = files.find((f) => f.endsWith('.png'));
    expect(json && png).toBeTruthy();
    const data = JSON.parse(fs.readFileSync(path.join(out, json as string), 'utf8')) as {
      smoke: boolean;
      results: Array<{ name: string; systems: Array<{ system: string; samples: unknown[]; skipped?: string }> }>;
    };
    expect(data.smoke).toBe(true);
    const ran = data.results.map((x) => x.name);
    expect(ran.length).toBeGreaterThanOrEqual(8);
    for (const n of ran) expect(names).toContain(n);
    for (const s of data.results) {
      for (const sys of s.systems) {
        if (!sys.skipped) expect(sys.samples, `${s.name}/${sys.system}`).toHaveLength(1);
      }
      // The peers and the raw-SQL limit never depend on a q package: they always run.
      for (const sys of s.systems.filter((x) => !x.system.startsWith('q'))) expect(sys.skipped, `${s.name}/${sys.system}`).toBeUndefined();
    }
    expect(
      fs
        .readFileSync(path.join(out, png as string))
        .subarray(1, 4)
        .toString(),
    ).toBe('PNG');
  });

  it('rejects an unknown scenario before touching the database', async () => {
    const r = await cli(['no-such-scenario', '--smoke', '--out', out]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/unknown scenario/);
  });
});
