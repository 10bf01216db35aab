// Pins the API reference generated from the source by TypeDoc (typedoc.json; `npm run docs:api`
// writes it to docs/api/, which is not committed): both entries, `managed-agents-worker` and
// `managed-agents-worker/testing`, convert and validate without a single warning. A warning is an
// export, a member of an exported class or interface, or a field of an option or event payload
// without a doc comment, a type the public API refers to that the reference leaves out, or a
// `{@link}` that resolves to nothing; every one is listed. Members marked `@internal` are
// test-only and stay out of the reference. The reference then renders to HTML, and every value
// either entry exports at run time has its page entry with its comment.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  Application,
  DeclarationReflection,
  Logger,
  LogLevel,
  ReflectionKind,
  TSConfigReader,
  TypeDocReader,
  type ProjectReflection,
} from 'typedoc';
import * as main from '../../src/index.js';
import * as testing from '../../src/testing/index.js';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** Converting type-checks the whole program once; rendering the HTML comes on top. */
const TYPEDOC_TIMEOUT_MS = 180_000;

/** Keeps every warning and error TypeDoc reports, as it words them. */
class CollectingLogger extends Logger {
  readonly problems: string[] = [];
  override log(message: string, level: LogLevel): void {
    if (level >= LogLevel.Warn) this.problems.push(`${LogLevel[level]}: ${message}`);
  }
}

async function typedocApp(logger: CollectingLogger): Promise<Application> {
  // typedoc.json is read from the current directory; the repository root is where npm runs it.
  const cwd = process.cwd();
  process.chdir(REPO);
  try {
    const app = await Application.bootstrapWithPlugins({ options: path.join(REPO, 'typedoc.json') }, [
      new TypeDocReader(),
      new TSConfigReader(),
    ]);
    app.logger = logger;
    return app;
  } finally {
    process.chdir(cwd);
  }
}

describe('the API reference', () => {
  const logger = new CollectingLogger();
  let app: Application;
  let project: ProjectReflection | undefined;
  let outDir: string;

  beforeAll(async () => {
    outDir = fs.mkdtempSync(path.join(os.tmpdir(), 'maw-api-reference-'));
    app = await typedocApp(logger);
    project = await app.convert();
    if (project) app.validate(project);
  }, TYPEDOC_TIMEOUT_MS);

  afterAll(() => {
    fs.rmSync(outDir, { recursive: true, force: true });
  });

  it('converts both entries and validates without a warning: every export documented, every link resolved', () => {
    expect(project, logger.problems.join('\n')).toBeDefined();
    expect(logger.problems, `TypeDoc reported ${logger.problems.length} problem(s):\n${logger.problems.join('\n')}`).toEqual([]);
    expect(project!.children?.map((m) => m.name).sort()).toEqual(['index', 'testing']);
  });

  it.each([
    { description: 'managed-agents-worker', module: 'index', exports: main as Record<string, unknown> },
    { description: 'managed-agents-worker/testing', module: 'testing', exports: testing as Record<string, unknown> },
  ])('every value $description exports at run time has a documented entry', ({ module, exports }) => {
    const entry = project!.getChildByName(module);
    expect(entry?.kindOf(ReflectionKind.Module)).toBe(true);
    const undocumented = Object.keys(exports).filter((name) => {
      const reflection = project!.getChildByName([module, name]);
      if (!(reflection instanceof DeclarationReflection)) return true;
      return !(reflection.hasComment() || reflection.getAllSignatures().some((s) => s.hasComment()));
    });
    expect(undocumented).toEqual([]);
  });

  it(
    'renders to HTML with a page per class',
    async () => {
      await app.generateDocs(project!, outDir);
      expect(logger.problems).toEqual([]);
      expect(fs.existsSync(path.join(outDir, 'index.html'))).toBe(true);
      expect(fs.existsSync(path.join(outDir, 'classes', 'index.EnvironmentWorker.html'))).toBe(true);
      expect(fs.existsSync(path.join(outDir, 'classes', 'testing.Emulator.html'))).toBe(true);
    },
    TYPEDOC_TIMEOUT_MS,
  );
});
