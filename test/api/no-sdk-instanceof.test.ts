// Pins that no source file recognises an @anthropic-ai/sdk error with `instanceof` or imports an
// SDK error class as a value: the app may hold another copy of the SDK, whose classes differ from
// ours, so errors are read by status and shape through src/api/classify.ts.
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const SRC = path.join(REPO, 'src');

/** Every error class the SDK declares (core/error.d.ts). */
async function sdkErrorClasses(): Promise<Set<string>> {
  const text = await fs.readFile(path.join(REPO, 'node_modules/@anthropic-ai/sdk/core/error.d.ts'), 'utf8');
  return new Set([...text.matchAll(/export declare class (\w+)/g)].map((m) => m[1]!));
}

describe('the sources', () => {
  it('never test an SDK error class with instanceof nor import one as a value', async () => {
    const sdkErrors = await sdkErrorClasses();
    expect(sdkErrors).toContain('APIError');
    const offences: string[] = [];
    for (const file of await fs.readdir(SRC, { recursive: true })) {
      if (!file.endsWith('.ts')) continue;
      const text = await fs.readFile(path.join(SRC, file), 'utf8');
      for (const m of text.matchAll(/import\s+(?!type\b)([^;]*?)\s+from\s+'@anthropic-ai\/sdk[^']*'/g)) {
        const names = m[1]!.replace(/\btype\s+\w+/g, '').match(/\w+/g) ?? [];
        if (names.some((n) => sdkErrors.has(n))) offences.push(`${file}: ${m[0]}`);
      }
      for (const m of text.matchAll(/instanceof\s+(\w+)/g)) {
        if (sdkErrors.has(m[1]!)) offences.push(`${file}: ${m[0]}`);
      }
    }
    expect(offences).toEqual([]);
  });
});
