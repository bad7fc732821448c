import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const src = path.join(path.dirname(fileURLToPath(import.meta.url)), '../src');

/** Every bare module specifier reachable from `entry` through relative imports. */
function externalImports(entry: string, seen = new Set<string>()): Set<string> {
  const out = new Set<string>();
  if (seen.has(entry)) return out;
  seen.add(entry);
  const text = readFileSync(entry, 'utf8');
  for (const m of text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^'"]*?from\s+['"]([^'"]+)['"]/g)) {
    const spec = m[1]!;
    if (spec.startsWith('.')) {
      for (const dep of externalImports(path.join(path.dirname(entry), spec.replace(/\.js$/, '.ts')), seen)) out.add(dep);
    } else out.add(spec);
  }
  return out;
}

describe('package entries', () => {
  it('the library entry needs only @opentelemetry/api at runtime (and pg types)', () => {
    expect([...externalImports(path.join(src, 'index.ts'))].sort()).toEqual(['@opentelemetry/api', 'pg']);
    // `pg` is a type-only import there.
    expect(readFileSync(path.join(src, 'pool.ts'), 'utf8')).toMatch(/import type pg from 'pg'/);
  });

  it('the SDK lives behind @q/otel/sdk', () => {
    const deps = externalImports(path.join(src, 'sdk.ts'));
    expect(deps).toContain('@opentelemetry/sdk-trace-base');
    expect(deps).toContain('@opentelemetry/exporter-prometheus');
  });
});
