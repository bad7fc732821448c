// `@dwmkerr/mock-llm` (the OpenAI-compatible mock server published on npm, a pinned
// devDependency) as a child process on 127.0.0.1, for end-to-end tests against a model server no
// one in this project wrote.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { freePort } from '@q/devdb';
import { waitFor } from '@q/testing';

/** The running mock server (its `url` is set once the `beforeAll` ran). */
export interface MockLlm {
  readonly url: string;
}

/**
 * Registers the file's hooks: `beforeAll` starts the server in an empty working directory (no
 * `mock-llm.yaml`, so its default rules apply: a chat completion echoing the last user message)
 * and waits for `/ready`; `afterAll` stops it and removes the directory.
 */
export function useMockLlm(): MockLlm {
  let child: ChildProcess | undefined;
  let tmp: string | undefined;
  const mock = { url: '' };
  beforeAll(async () => {
    const pkg = createRequire(import.meta.url).resolve('@dwmkerr/mock-llm/package.json');
    const main = path.join(path.dirname(pkg), 'dist', 'main.js');
    const port = await freePort();
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'mock-llm-'));
    child = spawn(process.execPath, [main], { cwd: tmp, env: { ...process.env, HOST: '127.0.0.1', PORT: String(port) }, stdio: 'ignore' });
    mock.url = `http://127.0.0.1:${port}`;
    await waitFor(async () => (await fetch(`${mock.url}/ready`).catch(() => undefined))?.ok, 20_000, 'mock-llm ready');
  });
  afterAll(() => {
    child?.kill('SIGTERM');
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });
  return mock;
}
