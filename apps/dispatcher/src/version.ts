import fs from 'node:fs';

/** This package's version (`--version`), read from package.json (one level above src/ and dist/). */
export const VERSION: string = (JSON.parse(fs.readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;
