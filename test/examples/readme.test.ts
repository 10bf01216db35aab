/**
 * README and docs code is tested code. Every TypeScript block of the README and of the pages in
 * docs/ is marked, on the line above it, either `<!-- example: examples/<file>.ts -->` (the block is
 * that file below its header comment, character for character) or `<!-- extracted: <name> -->` (a
 * complete program that lives only in that page; names are unique across the pages). Each block,
 * and every file under examples/, is type-checked under `strict`
 * in a fresh ESM app (`"type": "module"`, this checkout linked in as `managed-agents-worker`, the
 * SDK beside it), compiled, and run with node against the emulator:
 * - the poll daemon serves a memory session with info logs, in a workdir of its own, and exits 0
 *   on SIGTERM; a missing variable and a refused key each end it with one line and exit 1;
 * - the webhook example answers a signed delivery (202), serves the session, and on SIGTERM
 *   mid-session ends it with its final sync and exits within the final-flush bound;
 * - the launcher example serves an item through `managed-agents-worker handle`;
 * - the tracing block exports an `anthropic.environment.work` span; the testing-kit, emulator API
 *   and faults programs run to the end (their assertions hold).
 * Needs the build (`npm test` builds first): the app loads `dist/` as an installed package would.
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/testing/index.js';
import { generateWebhookSecret, postWebhooksTo } from '../../src/testing/webhook-signing.js';

const exec = promisify(execFile);
const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** The final-flush bound (30 s) plus the process's start and stop. */
const WEBHOOK_EXIT_BOUND_MS = 35_000;

interface Block {
  /** `examples/poll-daemon.ts`, or `readme/<name>.ts` for a block that lives in one page only. */
  file: string;
  kind: 'example' | 'extracted';
  code: string;
  /** `README.md:130`, `docs/operating.md:140`: where the block opens. */
  at: string;
}

/** The README and the pages right in docs/ (docs/api/ is generated). */
const PAGES = [
  'README.md',
  ...readdirSync(path.join(REPO, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** Every ```ts block of a page with the marker above it (a block without one fails the first test). */
function pageBlocks(page: string, text: string): Array<Block | { unmarked: string }> {
  const lines = text.split('\n');
  const blocks: Array<Block | { unmarked: string }> = [];
  for (let i = 0; i < lines.length; i++) {
    if (!/^```(ts|typescript|tsx|mts)\s*$/.test(lines[i]!)) continue;
    const end = lines.findIndex((l, j) => j > i && l === '```');
    const code = lines.slice(i + 1, end).join('\n') + '\n';
    const marker = /^<!-- (example|extracted): (\S+) -->$/.exec(lines[i - 1] ?? '');
    if (!marker) blocks.push({ unmarked: `${page}:${i + 1}` });
    else
      blocks.push({
        kind: marker[1] as Block['kind'],
        file: marker[1] === 'example' ? marker[2]! : `readme/${marker[2]}.ts`,
        code,
        at: `${page}:${i + 1}`,
      });
    i = end;
  }
  return blocks;
}

/** An example file without its leading doc comment: what the README shows. */
function withoutHeader(text: string): string {
  return text.startsWith('/**') ? text.slice(text.indexOf('*/\n') + 3) : text;
}

let app: string;
let blocks: Block[];
let allBlocks: ReturnType<typeof pageBlocks>;
let typeCheck: { code: number; output: string };

async function link(target: string, at: string): Promise<void> {
  await fs.mkdir(path.dirname(at), { recursive: true });
  await fs.symlink(target, at);
}

beforeAll(async () => {
  if (!existsSync(path.join(REPO, 'dist/index.js')) || !existsSync(path.join(REPO, 'dist/cli/main.js'))) {
    throw new Error('dist/ is missing: run `npm run build` (or `npx tsup`) before this test (npm test does)');
  }
  allBlocks = [];
  for (const page of PAGES) allBlocks.push(...pageBlocks(page, await fs.readFile(path.join(REPO, page), 'utf8')));
  blocks = allBlocks.filter((b): b is Block => 'file' in b);
  app = await fs.mkdtemp(path.join(os.tmpdir(), 'maw-readme-app-'));
  // A fresh ESM app as `npm init` + `"type": "module"` + a strict tsconfig make it.
  await fs.writeFile(path.join(app, 'package.json'), JSON.stringify({ name: 'readme-app', private: true, type: 'module' }, null, 2));
  await fs.writeFile(
    path.join(app, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'es2022',
        module: 'nodenext',
        moduleResolution: 'nodenext',
        strict: true,
        skipLibCheck: true,
        types: ['node'],
        outDir: 'out',
        rootDir: '.',
      },
      include: ['examples', 'readme'],
    }),
  );
  // Installed packages: this checkout as `managed-agents-worker` (its dist/ and bin), and the SDK,
  // Node's types and the OpenTelemetry packages the tracing block imports.
  const nm = path.join(app, 'node_modules');
  await link(REPO, path.join(nm, 'managed-agents-worker'));
  for (const dep of [
    '@anthropic-ai/sdk',
    '@types/node',
    '@opentelemetry/api',
    '@opentelemetry/context-async-hooks',
    '@opentelemetry/sdk-trace-base',
  ]) {
    await link(path.join(REPO, 'node_modules', dep), path.join(nm, dep));
  }
  await link(path.join(REPO, 'dist/cli/main.js'), path.join(nm, '.bin', 'managed-agents-worker'));
  const exampleFiles = (await fs.readdir(path.join(REPO, 'examples'))).filter((f) => f.endsWith('.ts'));
  await fs.mkdir(path.join(app, 'examples'));
  await fs.mkdir(path.join(app, 'readme'));
  for (const f of exampleFiles) await fs.copyFile(path.join(REPO, 'examples', f), path.join(app, 'examples', f));
  for (const b of blocks.filter((x) => x.kind === 'extracted')) await fs.writeFile(path.join(app, b.file), b.code);
  const tsc = path.join(REPO, 'node_modules', 'typescript', 'bin', 'tsc');
  typeCheck = await exec(process.execPath, [tsc, '-p', app], { cwd: app }).then(
    (r) => ({ code: 0, output: r.stdout + r.stderr }),
    (e: { code?: number; stdout?: string; stderr?: string }) => ({ code: e.code ?? 1, output: (e.stdout ?? '') + (e.stderr ?? '') }),
  );
}, 120_000);

afterAll(async () => {
  if (app) await fs.rm(app, { recursive: true, force: true });
});

describe('the README and docs code blocks', () => {
  it('are each an examples/ file shown as is, or a marked complete program', async () => {
    expect(allBlocks.filter((b) => 'unmarked' in b)).toEqual([]);
    const extracted = blocks.filter((b) => b.kind === 'extracted').map((b) => b.file);
    expect(extracted, 'extracted names are unique across the pages').toEqual([...new Set(extracted)]);
    expect(blocks.map((b) => b.file)).toEqual(
      expect.arrayContaining([
        'examples/poll-daemon.ts',
        'examples/webhook-handler.ts',
        'examples/launcher.ts',
        'readme/tracing.ts',
        'readme/testing-kit.ts',
        'readme/emulator-api.ts',
        'readme/faults.ts',
      ]),
    );
    for (const b of blocks.filter((x) => x.kind === 'example')) {
      const file = await fs.readFile(path.join(REPO, b.file), 'utf8');
      expect(b.code, `${b.at} differs from ${b.file}`).toBe(withoutHeader(file));
      // Pasteable: imports the package by name, not the checkout's sources.
      expect(b.code).not.toMatch(/from '\.\.?\//);
    }
  });

  it('type-check under strict in a fresh ESM app', () => {
    expect(typeCheck.output).toBe('');
    expect(typeCheck.code).toBe(0);
  });
});

interface Run {
  output(): string;
  exited: Promise<number | null>;
  kill(signal: NodeJS.Signals): void;
  waitFor(re: RegExp, timeoutMs?: number): Promise<RegExpExecArray>;
  alive(): boolean;
}

describe('the README and docs programs against the emulator', () => {
  let dir: string;
  let emu: Emulator;
  const runs: Run[] = [];

  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'maw-readme-run-'));
    emu = await startEmulator({ mountRoot: dir, leaseTtlSeconds: 4 });
  });
  afterEach(async () => {
    for (const r of runs.splice(0)) if (r.alive()) r.kill('SIGKILL');
    await emu.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  /** Run a compiled block (`examples/x.ts` → `out/examples/x.js`) with node, in the app's folder. */
  function run(file: string, env: Record<string, string>): Run {
    const js = path.join(app, 'out', file.replace(/\.ts$/, '.js'));
    const child = spawn(process.execPath, [js], {
      cwd: app,
      // PATH as `npx` gives a script: the app's bin folder first.
      env: {
        PATH: `${path.join(app, 'node_modules', '.bin')}:${process.env['PATH']}`,
        HOME: dir,
        XDG_STATE_HOME: path.join(dir, 'state'),
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const r: Run = {
      output: () => out,
      exited,
      kill: (signal) => void child.kill(signal),
      alive: () => child.exitCode === null && child.signalCode === null,
      async waitFor(re, timeoutMs = 20_000) {
        const deadline = Date.now() + timeoutMs;
        for (;;) {
          const m = re.exec(out);
          if (m) return m;
          if (Date.now() > deadline || !r.alive()) throw new Error(`${file}: output never matched ${String(re)}:\n${out}`);
          await new Promise((res) => setTimeout(res, 100));
        }
      },
    };
    runs.push(r);
    return r;
  }

  const apiEnv = (): Record<string, string> => ({
    ANTHROPIC_ENVIRONMENT_ID: emu.environmentId,
    ANTHROPIC_ENVIRONMENT_KEY: emu.environmentKey,
    ANTHROPIC_BASE_URL: emu.baseURL,
  });

  async function exitCode(r: Run, timeoutMs: number): Promise<number | null> {
    const timer = new Promise<'timeout'>((res) => setTimeout(() => res('timeout'), timeoutMs));
    const code = await Promise.race([r.exited, timer]);
    if (code === 'timeout') throw new Error(`did not exit within ${timeoutMs} ms:\n${r.output()}`);
    return code;
  }

  it('poll daemon: serves a memory session with info logs in its own workdir, and exits 0 on SIGTERM', async () => {
    const before = await fs.readdir(app);
    const store = await emu.createMemoryStore({ name: 'Team Notes', memories: { '/hello.md': 'hi' } });
    const daemon = run('examples/poll-daemon.ts', apiEnv());
    const { sessionId } = await emu.createSession({
      resources: [{ memoryStoreId: store.id }],
      script: [
        { tool: 'read', input: { file_path: path.join(dir, 'team-notes/hello.md') } },
        { tool: 'write', input: { file_path: path.join(dir, 'team-notes/added.md'), content: 'from the README' } },
        { tool: 'bash', input: { command: 'pwd' } },
      ],
    });
    const done = await emu.waitForSession(sessionId, { timeoutMs: 30_000 });
    expect(done.toolResults.map((r) => r.isError)).toEqual([false, false, false]);
    expect(emu.memories(store.id)['/added.md']).toBe('from the README');
    // The agent's tools ran in a folder of their own, not in the app's; the app gained nothing.
    const pwd = done.toolResults[2]!.text.trim();
    expect(pwd.startsWith(path.join(os.tmpdir(), 'maw-work-'))).toBe(true);
    await daemon.waitFor(/session ended/);
    daemon.kill('SIGTERM');
    expect(await exitCode(daemon, 20_000)).toBe(0);
    expect(await fs.readdir(app)).toEqual(before);
    // Info level: the claim, the mount and the end are on the log.
    for (const msg of ['worker polling for work', 'poll daemon stopped']) expect(daemon.output()).toContain(msg);
    await fs.rm(pwd, { recursive: true, force: true });
  });

  it('poll daemon: a missing variable and a refused key each end it with one line and exit 1, no stack trace', async () => {
    const missing = run('examples/poll-daemon.ts', { ANTHROPIC_BASE_URL: emu.baseURL, METRICS_PORT: '0' });
    expect(await exitCode(missing, 20_000)).toBe(1);
    const missingLines = missing
      .output()
      .split('\n')
      .filter((l) => l !== '');
    expect(missingLines).toHaveLength(1);
    expect(missingLines[0]).toContain('ANTHROPIC_ENVIRONMENT_ID');
    expect(missingLines[0]).toContain('ANTHROPIC_ENVIRONMENT_KEY');
    // Refused in the constructor: the metrics port was never bound.
    expect(missingLines[0]).not.toContain('serving metrics');

    const refused = run('examples/poll-daemon.ts', { ...apiEnv(), ANTHROPIC_ENVIRONMENT_KEY: 'not-the-key' });
    expect(await exitCode(refused, 30_000)).toBe(1);
    const fatal = refused
      .output()
      .split('\n')
      .filter((l) => l.includes('"level":60'));
    expect(fatal).toHaveLength(1);
    expect(fatal[0]).toMatch(/poll daemon stopped: .*401/);
    expect(refused.output()).not.toMatch(/\n\s+at /);
    expect(refused.output()).not.toContain('not-the-key');
  });

  it('webhook: answers a signed delivery with 202, serves the session, and on SIGTERM mid-session exits within its bound after the final sync', async () => {
    const secret = generateWebhookSecret();
    const store = await emu.createMemoryStore({ name: 'Team Notes', memories: { '/hello.md': 'hi' } });
    const server = run('examples/webhook-handler.ts', { ...apiEnv(), PORT: '0', ANTHROPIC_WEBHOOK_SIGNING_KEY: secret });
    const url = (await server.waitFor(/"url":"(http:\/\/[^"]+)"/))[1]!;
    const poster = postWebhooksTo(emu, url, secret);
    try {
      const first = await emu.createSession({ script: [{ tool: 'bash', input: { command: 'echo via-webhook' } }] });
      const done = await emu.waitForSession(first.sessionId, { timeoutMs: 30_000 });
      expect(done.toolResults.map((r) => r.text.trim())).toEqual(['via-webhook']);
      // The next session writes a note, then works for long: SIGTERM lands mid-session.
      const second = await emu.createSession({
        resources: [{ memoryStoreId: store.id }],
        script: [
          { tool: 'write', input: { file_path: path.join(dir, 'team-notes/late.md'), content: 'before SIGTERM' } },
          { sleepMs: 120_000 },
        ],
      });
      const deadline = Date.now() + 20_000;
      while (emu.session(second.sessionId).toolResults.length === 0) {
        if (Date.now() > deadline) throw new Error(`the second session never ran:\n${server.output()}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      await poster.settled();
      expect(poster.deliveries.map((d) => d.status)).toEqual([202, 202]);
      const t = Date.now();
      server.kill('SIGTERM');
      expect(await exitCode(server, WEBHOOK_EXIT_BOUND_MS)).toBe(0);
      console.log(`webhook example exited ${Date.now() - t} ms after SIGTERM (bound ${WEBHOOK_EXIT_BOUND_MS} ms)`);
      expect(server.output()).toContain('webhook handler stopped');
      expect(emu.workItem(second.workId).stopped).toBe(true);
      expect(emu.memories(store.id)['/late.md']).toBe('before SIGTERM');
      // One worker concurrency for the handler and the worker: no warning about them.
      expect(server.output()).not.toMatch(/"level":(40|50)/);
    } finally {
      poster.stop();
    }
  });

  it('launcher: serves an item through `managed-agents-worker handle` and exits 0 on SIGTERM', async () => {
    const store = await emu.createMemoryStore({ name: 'Team Notes', memories: { '/hello.md': 'hi' } });
    const launcher = run('examples/launcher.ts', apiEnv());
    const { sessionId, workId } = await emu.createSession({
      resources: [{ memoryStoreId: store.id }],
      script: [{ tool: 'write', input: { file_path: path.join(dir, 'team-notes/from-sandbox.md'), content: 'served by handle' } }],
    });
    const done = await emu.waitForSession(sessionId, { timeoutMs: 30_000 });
    expect(done.toolResults.map((r) => r.isError)).toEqual([false]);
    expect(emu.memories(store.id)['/from-sandbox.md']).toBe('served by handle');
    // The sandbox's handle held the item with its sessions token; the launcher only polled and acked.
    const itemCalls = emu.requests.filter((r) => r.path.includes(`/work/${workId}/`));
    expect(new Set(itemCalls.filter((r) => r.route.endsWith('/heartbeat') || r.route.endsWith('/stop')).map((r) => r.credential))).toEqual(
      new Set(['sessions_token']),
    );
    await launcher.waitFor(/"status":"completed"/);
    launcher.kill('SIGTERM');
    expect(await exitCode(launcher, 20_000)).toBe(0);
    expect(launcher.output()).toContain('launcher stopped');
  });

  it('tracing: the worker exports an anthropic.environment.work span for the item it serves', async () => {
    const tracing = run('readme/tracing.ts', apiEnv());
    const { sessionId } = await emu.createSession({ script: [{ tool: 'bash', input: { command: 'echo traced' } }] });
    await emu.waitForSession(sessionId, { timeoutMs: 30_000 });
    await tracing.waitFor(/name: 'anthropic\.environment\.work'/);
    tracing.kill('SIGTERM');
    expect(await exitCode(tracing, 20_000)).toBe(0);
  });

  it.each(['readme/testing-kit.ts', 'readme/emulator-api.ts', 'readme/faults.ts'])(
    '%s runs to the end against its own emulator',
    async (file) => {
      const program = run(file, {});
      expect(await exitCode(program, 45_000), program.output()).toBe(0);
    },
  );
});
