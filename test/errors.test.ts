// Pins the error contract: every error the library throws is a WorkerError subclass exported from
// the package root, each class has a code of its own that errors.ts documents, and no source file
// under src/ throws a plain Error, TypeError or RangeError (except the emulator's test assertions).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import * as pkg from '../src/index.js';
import {
  ConfigError,
  InternalError,
  LeaseLostError,
  MemoryMountError,
  MemoryUnavailableError,
  MissingInputError,
  PlatformError,
  RemoteApiError,
  RemoteLimitError,
  SandboxUnavailableError,
  StateFileError,
  WorkerError,
  WorkItemFailedError,
} from '../src/errors.js';

const rows: Array<{ description: string; make: () => WorkerError; code: string }> = [
  { description: 'a refused option', make: () => new ConfigError('bad'), code: 'MAW_CONFIG' },
  { description: 'a Windows host', make: () => new PlatformError('win32'), code: 'MAW_UNSUPPORTED_PLATFORM' },
  { description: 'a failed API call', make: () => new RemoteApiError('down', { retryable: true }), code: 'MAW_REMOTE_API' },
  { description: 'a lost lease', make: () => new LeaseLostError('work_1'), code: 'MAW_LEASE_LOST' },
  { description: 'a refused mount', make: () => new MemoryMountError('no'), code: 'MAW_MEMORY_MOUNT' },
  {
    description: 'stores without a sessions token',
    make: () => new MemoryUnavailableError('work_1', 'sesn_1'),
    code: 'MAW_MEMORY_UNAVAILABLE',
  },
  { description: 'a missing input', make: () => new MissingInputError('workId'), code: 'MAW_MISSING_INPUT' },
  {
    description: 'a failed work item',
    make: () => new WorkItemFailedError({ workId: 'w', sessionId: undefined, status: 'failed', durationMs: 0 }),
    code: 'MAW_WORK_FAILED',
  },
  { description: 'a server answer past a bound', make: () => new RemoteLimitError('body-size', 'big'), code: 'MAW_REMOTE_LIMIT' },
  { description: 'an unreadable state file', make: () => new StateFileError('bad journal'), code: 'MAW_STATE_FILE' },
  {
    description: 'no sandbox can start',
    make: () => new SandboxUnavailableError('missing', 'bubblewrap is not on PATH'),
    code: 'MAW_SANDBOX',
  },
  { description: 'a broken rule of the library', make: () => new InternalError('unhandled case'), code: 'MAW_INTERNAL' },
];

/** Every class the package root exports that is WorkerError or extends it. */
const exportedErrorClasses: Function[] = (Object.values(pkg) as unknown[]).filter(
  (v): v is Function => typeof v === 'function' && (v === WorkerError || v.prototype instanceof WorkerError),
);

describe('the errors a caller can match on', () => {
  for (const row of rows) {
    it(`${row.description} is a ${row.make().name} with code ${row.code}, exported from the package root`, () => {
      const e = row.make();
      expect(e).toBeInstanceOf(WorkerError);
      expect(e.code).toBe(row.code);
      expect(e.name).toBe(e.constructor.name);
      expect(exportedErrorClasses).toContain(e.constructor);
    });
  }

  it('gives every class a code of its own', () => {
    const codes = rows.map((r) => r.make().code);
    expect(new Set(codes).size).toBe(codes.length);
  });

  it('has a row above for every exported error class, so a new class gets its code checked', () => {
    const tested = new Set(rows.map((r) => r.make().constructor));
    expect(exportedErrorClasses.filter((c) => c !== WorkerError && !tested.has(c)).map((c) => c.name)).toEqual([]);
  });

  it('documents each code in the table of errors.ts', () => {
    const doc = fs.readFileSync(path.join(__dirname, '../src/errors.ts'), 'utf8');
    for (const row of rows) expect(doc).toContain(`| \`${row.code}\``);
  });
});

describe('the throw sites under src/', () => {
  // The emulator's own assertions (a timed-out wait, an item stopped before its session started,
  // pending work, a test's failing console step) fail the caller's test the way an `expect` does. The page transport stands in for
  // `fetch` and `Response`, so it throws what they throw (a `TypeError` for a body read twice),
  // which is what the SDK expects of them. The sandbox's tool host is a process of its own that
  // loads nothing but Node and the SDK: a start it cannot make ends it, its reason on its stderr,
  // which the worker reads and reports as the sandbox's failure.
  const allowed = new Set([
    'testing/emulator/emulator.ts:3',
    'testing/emulator/script.ts:1',
    'api/page-response.ts:2',
    'sandbox/tool-host.ts:1',
  ]);

  it('throw no plain Error, TypeError or RangeError', () => {
    const src = path.join(__dirname, '../src');
    const plain = /\bthrow new (Error|TypeError|RangeError)\(|\breject\(new (Error|TypeError|RangeError)\(/g;
    const offenders: string[] = [];
    const walk = (dir: string): void => {
      for (const ent of fs.readdirSync(dir, { withFileTypes: true })) {
        const file = path.join(dir, ent.name);
        if (ent.isDirectory()) walk(file);
        else if (ent.name.endsWith('.ts')) {
          const count = (fs.readFileSync(file, 'utf8').match(plain) ?? []).length;
          const key = `${path.relative(src, file)}:${count}`;
          if (count > 0 && !allowed.has(key)) offenders.push(key);
        }
      }
    };
    walk(src);
    expect(offenders).toEqual([]);
  });
});
