// Test helper: run the CLI from source (through tsx) in a child process, as an operator would.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const CLI_MAIN = path.join(REPO_ROOT, 'src/cli/main.ts');
/** The command line that runs the CLI from source: `node --import tsx src/cli/main.ts`. */
export const CLI_COMMAND = `'${process.execPath}' --import tsx '${CLI_MAIN}'`;

export interface CliRun {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves once stderr (JSON logs) contains `text`. */
  waitForStderr(text: string | RegExp, timeoutMs?: number): Promise<void>;
  /** Resolves once stdout contains `text`. */
  waitForStdout(text: string | RegExp, timeoutMs?: number): Promise<void>;
}

export function spawnCli(args: string[], env: NodeJS.ProcessEnv, opts: { stdin?: 'ignore' | 'pipe' } = {}): CliRun {
  const child = spawn(process.execPath, ['--import', 'tsx', CLI_MAIN, ...args], {
    cwd: REPO_ROOT,
    env,
    stdio: [opts.stdin ?? 'ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  const waiters: Array<() => void> = [];
  child.stdout!.on('data', (d: Buffer) => {
    out += d.toString();
    for (const w of waiters.splice(0)) w();
  });
  child.stderr!.on('data', (d: Buffer) => {
    err += d.toString();
    for (const w of waiters.splice(0)) w();
  });
  async function waitFor(stream: string, current: () => string, text: string | RegExp, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    const has = (): boolean => (typeof text === 'string' ? current().includes(text) : text.test(current()));
    while (!has()) {
      if (Date.now() > deadline || child.exitCode !== null)
        throw new Error(`${stream} never contained ${String(text)}; got:\n${current()}\nstderr:\n${err}`);
      await new Promise<void>((resolve) => {
        waiters.push(resolve);
        setTimeout(resolve, 200);
      });
    }
  }
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    exited,
    waitForStderr: (text, timeoutMs = 20_000) => waitFor('stderr', () => err, text, timeoutMs),
    waitForStdout: (text, timeoutMs = 20_000) => waitFor('stdout', () => out, text, timeoutMs),
  };
}

/** A minimal environment for the child: PATH and HOME only, plus `extra` (no ambient credentials). */
export function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  return { PATH: process.env['PATH'], HOME: process.env['HOME'], ...extra };
}
