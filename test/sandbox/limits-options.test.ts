// `sandbox.limits`: a field left out takes its default, a field set to null is unbounded,
// `limits: null` leaves every limit unbounded, and a bad value is a ConfigError naming the option
// and the accepted ranges; the view sizes /tmp and /dev/shm and leaves /dev read-only.
import Anthropic from '@anthropic-ai/sdk';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.js';
import { bwrapArgs } from '../../src/sandbox/bwrap-args.js';
import { resolveSandboxLimits, SANDBOX_LIMITS_DEFAULT } from '../../src/sandbox/limits/limits.js';
import { resolveSandboxOption } from '../../src/sandbox/options.js';
import { EnvironmentWorker } from '../../src/worker/environment-worker.js';

describe('sandbox.limits', () => {
  const rows = [
    { description: 'left out: every default', value: undefined, expected: SANDBOX_LIMITS_DEFAULT },
    {
      description: 'null: every limit unbounded',
      value: null,
      expected: { memoryMiB: null, maxProcesses: null, cpuWeight: null, tmpMiB: null, openFiles: null },
    },
    {
      description: 'a field set wins, a field null is unbounded, the rest default',
      value: { memoryMiB: 256, maxProcesses: null },
      expected: { ...SANDBOX_LIMITS_DEFAULT, memoryMiB: 256, maxProcesses: null },
    },
  ];
  it.each(rows)('$description', ({ value, expected }) => {
    expect(resolveSandboxLimits(value)).toEqual(expected);
  });

  it("a plain mode string ('auto', 'bwrap') takes the default limits", () => {
    expect(resolveSandboxOption('bwrap').limits).toEqual(SANDBOX_LIMITS_DEFAULT);
    expect(resolveSandboxOption({ limits: { tmpMiB: 64 } }).limits.tmpMiB).toBe(64);
  });

  it('refuses a bad limit with a ConfigError naming the ranges', () => {
    const client = new Anthropic({ apiKey: 'sk-unused', baseURL: 'http://127.0.0.1:9' });
    for (const limits of [{ memoryMiB: 8 }, { maxProcesses: 1.5 }, { cpuWeight: 0 }, { tmpMiB: '64' }, { openFiles: 10 }, { swapMiB: 1 }]) {
      let err: unknown;
      try {
        new EnvironmentWorker({ client, sandbox: { limits } as never });
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as Error).message).toContain('memoryMiB (16..1048576)');
    }
  });
});

describe('the view of a sandbox with sized temporary folders', () => {
  const view = {
    system: [{ path: '/usr' }],
    readOnly: [],
    workdir: '/w',
    stores: [],
    readWrite: [],
    hide: [],
    network: 'host' as const,
    userNamespace: false,
    env: {},
    command: ['/bin/true'],
  };
  it('sizes /dev/shm and /tmp and remounts /dev read-only after its shm is mounted', () => {
    const args = bwrapArgs({ ...view, tmpBytes: 64 * 1024 * 1024 }).join(' ');
    expect(args).toContain('--dev /dev --size 67108864 --tmpfs /dev/shm --remount-ro /dev --size 67108864 --tmpfs /tmp');
  });
  it('leaves them at the kernel default when unbounded', () => {
    const args = bwrapArgs({ ...view, tmpBytes: null }).join(' ');
    expect(args).toContain('--dev /dev --tmpfs /dev/shm --remount-ro /dev --tmpfs /tmp');
    expect(args).not.toContain('--size');
  });
});
