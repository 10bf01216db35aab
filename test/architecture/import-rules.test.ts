// The import rules (.dependency-cruiser.cjs, run by `npm run lint:imports`) hold on the tree, and
// each one fails when a copy of src/ breaks it: a rule that could never fire would guard nothing.
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const CRUISER = path.join(REPO, 'node_modules', 'dependency-cruiser', 'bin', 'dependency-cruise.mjs');

interface Run {
  code: number;
  output: string;
}

async function cruise(cwd: string): Promise<Run> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [CRUISER, 'src', '--config', '.dependency-cruiser.cjs'], {
      cwd,
    });
    return { code: 0, output: stdout + stderr };
  } catch (e) {
    const err = e as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof err.code === 'number' ? err.code : -1, output: `${err.stdout ?? ''}${err.stderr ?? ''}` };
  }
}

/** The rule names a run reports as errors. */
function brokenRules(output: string): string[] {
  return [...new Set([...output.matchAll(/^\s*error ([\w-]+):/gm)].map((m) => m[1]!))].sort();
}

describe('the import rules', () => {
  let copy: string;

  beforeAll(async () => {
    copy = await fs.mkdtemp(path.join(os.tmpdir(), 'maw-import-rules-'));
    await fs.cp(path.join(REPO, 'src'), path.join(copy, 'src'), { recursive: true });
    for (const file of ['.dependency-cruiser.cjs', 'tsconfig.json', 'package.json'])
      await fs.copyFile(path.join(REPO, file), path.join(copy, file));
    // Packages resolve as in the checkout (an unresolvable import is itself a broken rule).
    await fs.symlink(path.join(REPO, 'node_modules'), path.join(copy, 'node_modules'), 'dir');
  });

  afterAll(async () => {
    if (copy) await fs.rm(copy, { recursive: true, force: true });
  });

  it('hold on the tree as it is', async () => {
    const run = await cruise(REPO);
    expect(run.output).toContain('no dependency violations found');
    expect(run.code).toBe(0);
  });

  /** Add each line at the top of its file in the copy, cruise the copy, and put the files back. */
  async function cruiseWith(edits: Record<string, string>): Promise<Run> {
    const originals = new Map<string, string>();
    try {
      for (const [file, line] of Object.entries(edits)) {
        const target = path.join(copy, file);
        const original = await fs.readFile(target, 'utf8');
        originals.set(target, original);
        await fs.writeFile(target, `${line}\n${original}`);
      }
      return await cruise(copy);
    } finally {
      for (const [target, original] of originals) await fs.writeFile(target, original);
    }
  }

  /** Each `error <rule>: <from> → ...` line of a run, as `<rule> <from>`. */
  function violations(output: string): string[] {
    return [...new Set([...output.matchAll(/^\s*error ([\w-]+): (\S+)/gm)].map((m) => `${m[1]} ${m[2]}`))].sort();
  }

  it('fail on each forbidden import, naming the rule and the importing file', async () => {
    // One forbidden import per file, each breaking only the rules listed for it: a copy that broke
    // others (say, by failing to resolve a package) would show up as extra lines.
    const run = await cruiseWith({
      'src/memory/rules/marker.ts': "import 'node:fs';",
      'src/memory/rules/sync-rules.ts': "import '../../api/classify.js';",
      'src/memory/disk/local-scan.ts': "import type { PageBudget } from '../remote/page-budget.js';",
      'src/memory/mount/mounter.ts': "import '../../worker/poller.js';",
      'src/internal/logger.ts': "import '../memory/rules/marker.js';",
      'src/memory/sync/sync-loop.ts': "import './no-such-file.js';",
      'src/webhook/options.ts': "import 'zod';",
    });
    expect(run.code).not.toBe(0);
    expect(violations(run.output)).toEqual(
      [
        'memory-rules-no-node src/memory/rules/marker.ts',
        'memory-rules-only-rules src/memory/rules/marker.ts',
        'memory-rules-only-rules src/memory/rules/sync-rules.ts',
        'memory-api-not-in-rules-disk src/memory/rules/sync-rules.ts',
        // type-only imports count like the others
        'memory-disk-imports-down src/memory/disk/local-scan.ts',
        'memory-no-outer-rooms src/memory/mount/mounter.ts',
        'internal-no-rooms src/internal/logger.ts',
        'no-unresolvable src/memory/sync/sync-loop.ts',
        'zod-v3-outside-the-test-kit src/webhook/options.ts',
      ].sort(),
    );
  });

  it.each([
    { case: 'inside a room', file: 'src/memory/rules/marker.ts', line: "import './paths.js';", through: 'src/memory/rules/paths.ts' },
    {
      case: 'across src/ through a type-only import',
      file: 'src/internal/clock.ts',
      line: "import type {} from './abort.js';",
      through: 'src/internal/abort.ts',
    },
  ])('fail on an import cycle $case, naming the rule and the cycle', async ({ file, line, through }) => {
    const run = await cruiseWith({ [file]: line });
    expect(run.code).not.toBe(0);
    expect(brokenRules(run.output)).toEqual(['no-circular']);
    expect(run.output).toContain(file);
    expect(run.output).toContain(through);
  });
});
