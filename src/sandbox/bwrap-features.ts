import { spawn } from 'node:child_process';

/** What the installed bubblewrap can do beyond the options every supported version has. */
export interface BwrapFeatures {
  /** `--disable-userns` (bubblewrap 0.8): the sandbox cannot create a user namespace of its own. */
  disableUserns: boolean;
}

const HELP_TIMEOUT_MS = 5_000;

/** Read the options `bwrap --help` lists. A bubblewrap that does not answer is taken to have none of them. */
export function bwrapFeatures(bwrap: string): Promise<BwrapFeatures> {
  return new Promise((resolve) => {
    // Killed when it does not answer in time: what it printed by then is all it is taken to have.
    const child = spawn(bwrap, ['--help'], { stdio: ['ignore', 'pipe', 'pipe'], env: {}, timeout: HELP_TIMEOUT_MS, killSignal: 'SIGKILL' });
    let help = '';
    const collect = (d: Buffer): void => {
      if (help.length < 64_000) help += d.toString('utf8');
    };
    child.stdout?.on('data', collect);
    child.stderr?.on('data', collect);
    const done = (): void => resolve({ disableUserns: /^\s*--disable-userns\b/m.test(help) });
    child.once('error', done);
    child.once('close', done);
  });
}

/**
 * The descriptor bubblewrap reads the seccomp filter from, as an extra stdio pipe of its process:
 * `index` is the pipe's place in the spawn's stdio array. Returns the arguments to put first.
 */
export function seccompArgs(index: number): string[] {
  return ['--seccomp', String(index)];
}

/**
 * Write the filter into the pipe at `stream` and close it: bubblewrap reads it to the end while
 * it sets the sandbox up (a few hundred bytes, well within a pipe's buffer). A bubblewrap that
 * dies before reading it breaks the pipe; that error is its exit's to report, not this write's.
 */
export function feedSeccomp(stream: NodeJS.WritableStream | null | undefined, filter: Buffer): void {
  if (!stream) return;
  stream.on('error', () => {});
  stream.end(filter);
}
