/**
 * Names the @anthropic-ai/sdk version this test process runs with, and, when the run asked for one
 * (`MAW_EXPECT_SDK_VERSION`, set by `npm run test:sdk-floor`), fails unless it is that one: a floor
 * run cannot silently test the locked version twice.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';

const require = createRequire(import.meta.url);

describe('the SDK under test', () => {
  it('is the version the run asked for', async () => {
    // The package's manifest is not among its exports: read it next to the entry point Node resolves.
    const manifest = join(dirname(require.resolve('@anthropic-ai/sdk')), 'package.json');
    const installed = (JSON.parse(readFileSync(manifest, 'utf8')) as { version: string }).version;
    // The version the client itself reports, from the module the suites import.
    const { VERSION } = await import('@anthropic-ai/sdk/version');
    console.log(`@anthropic-ai/sdk ${installed} (client reports ${VERSION})`);
    expect(VERSION).toBe(installed);
    const expected = process.env['MAW_EXPECT_SDK_VERSION'];
    if (expected !== undefined && expected !== '') expect(installed).toBe(expected);
  });
});
