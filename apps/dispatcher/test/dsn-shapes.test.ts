// Issue 34 item 11: a password with an unescaped "@" then "/" parsed into other parts than meant
// (the rest of the password read as the host or the database) and reached the server; the
// dispatcher's url (config file, Q_DSN, SQL_URL, --dsn) now refuses it, showing no part of it.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config/load.js';
import { configQueue as queue } from './helpers.js';

const SHAPES = ['postgres://u:mf7Qz@Wr2kV/x@127.0.0.1:1/db', 'postgres://u:mf7Qz@127.0.0.1:1/Wr2kV@h/db'];

describe('a url with an "@" after the host part', () => {
  it.each(SHAPES)('%s is refused from the file, Q_DSN, SQL_URL and --dsn, with no part of the password', (dsn) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qdsn-'));
    try {
      const plain = path.join(dir, 'plain.json');
      fs.writeFileSync(plain, JSON.stringify({ queues: [queue] }));
      const withUrl = path.join(dir, 'url.json');
      fs.writeFileSync(withUrl, JSON.stringify({ queues: [queue], url: dsn }));
      for (const load of [
        () => loadConfig({ file: withUrl, env: {} }),
        () => loadConfig({ file: plain, env: { Q_DSN: dsn } }),
        () => loadConfig({ file: plain, env: { SQL_URL: dsn } }),
        () => loadConfig({ file: plain, env: {}, overrides: { dsn } }),
      ]) {
        let err: unknown;
        try {
          load();
        } catch (e) {
          err = e;
        }
        expect(err).toMatchObject({ message: expect.stringMatching(/url: malformed DSN: an "@" after the host part/) });
        expect((err as Error).message).not.toMatch(/mf7Qz|Wr2kV/);
      }
    } finally {
      fs.rmSync(dir, { recursive: true });
    }
  });
});
