import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config/load.js';
import { TOP_DEFAULTS } from '../src/config/schema.js';
import { configError, configQueue as queue } from './helpers.js';

describe('config', () => {
  it('applies the docs/design/dispatcher.md#configuration-defaults defaults', () => {
    // The design doc's list of top-level defaults (`field` value, …), read from the doc itself so
    // that a default changed in the code but not in the doc (or the reverse) fails here.
    const doc = fs.readFileSync(fileURLToPath(new URL('../../../docs/design/dispatcher.md', import.meta.url)), 'utf8');
    const listed = /`TOP_DEFAULTS` in `config\/schema\.ts`:([^]*?)\. Per queue:/.exec(doc)?.[1] ?? '';
    const documented = Object.fromEntries(
      [...listed.matchAll(/`([a-z_]+)`\s+(\d+|`[^`]*`)/g)].map(([, k, v]) => [k, v!.startsWith('`') ? v!.slice(1, -1) : Number(v)]),
    );
    expect(Object.keys(documented)).toHaveLength(17); // the doc lists 17; one added there is counted here
    expect(TOP_DEFAULTS).toMatchObject(documented);
    const c = loadConfig({ env: {}, document: { queues: [queue] } });
    expect(c).toMatchObject(TOP_DEFAULTS);
    expect(c.queues[0]).toMatchObject({ request_path_url: '/v1/completions', result_ttl_seconds: 0, labels: {}, gates: [] });
    expect(c.url).toBeUndefined();
  });

  it('reads YAML and JSON files; env overrides the file and flags override env', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qcfg-'));
    const y = path.join(dir, 'c.yaml');
    fs.writeFileSync(
      y,
      `concurrency: 5\nqueues:\n  - queue_name: a\n    igw_base_url: http://x:1\n    gates:\n      - kind: concurrency\n        limit: 3\n`,
    );
    const j = path.join(dir, 'c.json');
    fs.writeFileSync(j, JSON.stringify({ batch_size: 7, queues: [queue] }));
    expect(loadConfig({ file: y, env: {} }).queues[0]?.gates[0]).toEqual({
      kind: 'concurrency',
      limit: 3,
      attribute: 'userid',
      window_ms: 60000,
      prefix: 'quota:',
      wait_ms: 1000,
    });
    expect(loadConfig({ file: y, env: { Q_CONCURRENCY: '9' } }).concurrency).toBe(9);
    expect(loadConfig({ file: y, env: { Q_CONCURRENCY: '9' }, overrides: { concurrency: '11' } }).concurrency).toBe(11);
    expect(loadConfig({ file: j, env: {} }).batch_size).toBe(7);
    const dsn = 'postgres://u:secret@127.0.0.1:5432/db';
    expect(loadConfig({ file: j, env: { Q_DSN: 'postgres://a@h/x', SQL_URL: dsn } }).url).toBe(dsn);
    fs.rmSync(dir, { recursive: true });
  });

  it.each([
    [{ queues: [] }, 'queues must NOT have fewer than 1 items'],
    [{}, 'queues is required'],
    [{ queues: [{ queue_name: 'a' }] }, 'queues[0].igw_base_url is required'],
    [{ queues: [{ ...queue, gates: [{ kind: 'concurrency', limit: 0 }] }] }, 'queues[0].gates[0].limit must be >= 1'],
    [{ queues: [{ ...queue, gates: [{ kind: 'tokens', limit: 2 }] }] }, 'queues[0].gates[0].kind must be one of'],
    [{ queues: [queue], batch_size: 'ten' }, 'batch_size must be integer'],
    [{ queues: [{ ...queue, colour: 'red' }] }, 'queues[0]: unknown field "colour"'],
    [{ queues: [queue, queue] }, 'queues[1].queue_name "q1" is a duplicate'],
    [{ queues: [queue], url: 'mysql://u:pw@h/db' }, 'url must match pattern'],
  ])('rejects %j naming the field', (doc, message) => {
    const err = configError(() => loadConfig({ env: {}, document: doc }));
    expect(err.code).toBe('CONFIG');
    expect(err.message).toContain(message);
    expect(err.message).not.toContain('pw');
  });

  it('rejects bad overrides and unreadable files with the field or file named', () => {
    expect(configError(() => loadConfig({ env: { Q_CONCURRENCY: 'lots' }, document: { queues: [queue] } })).message).toContain(
      'concurrency (from Q_CONCURRENCY) must be a number',
    );
    expect(configError(() => loadConfig({ env: {}, document: { queues: [queue] }, overrides: { 'lease-ttl-seconds': '-1' } })).message).toContain(
      'lease_ttl_seconds must be > 0',
    );
    expect(configError(() => loadConfig({ file: '/nonexistent/q.yaml', env: {} })).message).toContain('cannot read /nonexistent/q.yaml');
  });
});

describe('batch_api.adaptive_concurrency', () => {
  const KEYS = [{ sha256: 'a'.repeat(64), tenant: 't' }];
  const load = (adaptive?: Record<string, unknown>, top: Record<string, unknown> = {}) =>
    loadConfig({
      env: {},
      document: { ...top, queues: [queue], batch_api: { port: 0, api_keys: KEYS, ...(adaptive ? { adaptive_concurrency: adaptive } : {}) } },
    });

  it('is on by default: initial 16, min 1, max = concurrency, 30 s latency target, step 1, factor 0.5', () => {
    expect(load(undefined, { concurrency: 64 }).batch_api?.adaptive_concurrency).toEqual({
      enabled: true,
      initial: 16,
      min: 1,
      max: 64,
      latency_target_ms: 30_000,
      increase_step: 1,
      decrease_factor: 0.5,
    });
    // A small concurrency bounds the defaults too.
    expect(load(undefined, { concurrency: 4 }).batch_api?.adaptive_concurrency).toMatchObject({ initial: 4, max: 4 });
  });

  it.each([
    [{ max: 65 }, { concurrency: 64 }, 'max (65) must be at most concurrency (64)'],
    [{ min: 9, max: 8 }, {}, 'min (9) must be at most max (8)'],
    [{ initial: 20, max: 10 }, {}, 'initial (20) must be between min (1) and max (10)'],
    [{ decrease_factor: 1 }, {}, 'decrease_factor'],
    [{ decrease_factor: 0 }, {}, 'decrease_factor'],
    [{ increase_step: 0 }, {}, 'increase_step'],
    [{ latency_target_ms: 0 }, {}, 'latency_target_ms'],
    [{ min: 0 }, {}, 'min'],
    [{ window: 3 }, {}, 'window'],
  ])('%j is refused before anything starts (CONFIG)', (adaptive, top, message) => {
    const err = configError(() => load(adaptive, top));
    expect(err.code).toBe('CONFIG');
    expect(err.message).toContain(message);
  });
});
