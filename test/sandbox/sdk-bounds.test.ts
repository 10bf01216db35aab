// What the sandbox assumes of the installed SDK, checked against the SDK's own files: the runner's
// per-call bound (the default of `toolTimeoutMs`) and whether the runner passes, and the toolset
// reads, the private session thread context `_sessionThread`. Fails on any SDK version where
// `sdk-bounds.ts` no longer describes what is installed (CI runs it with 1.14 and 1.16).
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { resolveSandboxOption } from '../../src/sandbox/options.js';
import { INSTALLED_SDK_VERSION, runnerToolTimeoutMs, toolsetShellPerThread } from '../../src/sandbox/sdk-bounds.js';

const require = createRequire(import.meta.url);
const sdkFile = (subpath: string): string => fs.readFileSync(require.resolve(`@anthropic-ai/sdk/${subpath}`), 'utf8');

describe('the SDK bounds table', () => {
  it.each([
    { version: '1.14.0', timeoutMs: 120_000, perThread: false },
    { version: '1.15.3', timeoutMs: 120_000, perThread: false },
    { version: '1.16.0', timeoutMs: 325_000, perThread: true },
    { version: '1.17.0-beta.1', timeoutMs: 325_000, perThread: true },
    { version: '2.0.0', timeoutMs: 325_000, perThread: true },
    { version: '0.99.0', timeoutMs: 120_000, perThread: false },
    { version: 'unreadable', timeoutMs: 325_000, perThread: true },
  ])('$version: $timeoutMs ms, a shell per thread: $perThread', ({ version, timeoutMs, perThread }) => {
    expect(runnerToolTimeoutMs(version)).toBe(timeoutMs);
    expect(toolsetShellPerThread(version)).toBe(perThread);
  });
});

describe(`the installed SDK (${INSTALLED_SDK_VERSION})`, () => {
  it("bounds a call in its runner as long as toolTimeoutMs's default", () => {
    const bound = /\bTOOL_TIMEOUT_MS\s*=\s*([\d_]+)/.exec(sdkFile('lib/tools/SessionToolRunner'));
    expect(bound).not.toBeNull();
    expect(Number(bound![1]!.replace(/_/g, ''))).toBe(runnerToolTimeoutMs());
    expect(resolveSandboxOption('auto').toolTimeoutMs).toBe(runnerToolTimeoutMs());
    expect(resolveSandboxOption({ toolTimeoutMs: 5_000 }).toolTimeoutMs).toBe(5_000);
  });

  it('passes and reads the session thread context exactly where the table says so', () => {
    // The runner builds it for each call; the toolset keys its shells by it.
    expect(sdkFile('lib/tools/SessionToolRunner').includes('_sessionThread:')).toBe(toolsetShellPerThread());
    expect(/_sessionThread\b/.test(sdkFile('tools/agent-toolset/node'))).toBe(toolsetShellPerThread());
  });
});
