import { VERSION } from '@anthropic-ai/sdk/version';

/**
 * What the installed `@anthropic-ai/sdk` does with a tool call, read from its version: the SDK
 * exports neither its runner's per-call bound nor whether its toolset keeps a shell per session
 * thread. Both changed together in 1.16.0; `test/sandbox/sdk-bounds.test.ts` reads the installed
 * SDK's files and fails when this table no longer describes them.
 */

/** The installed SDK's version, as it reports it. */
export const INSTALLED_SDK_VERSION: string = VERSION;

/** The first version whose runner bounds a call at 325 s and whose toolset keeps a shell per session thread. */
const THREAD_SHELLS_SINCE: readonly [number, number] = [1, 16];

/** Milliseconds the session tool runner of `version` lets one tool call run before it aborts it. */
export function runnerToolTimeoutMs(version: string = INSTALLED_SDK_VERSION): number {
  return atLeast(version, THREAD_SHELLS_SINCE) ? 325_000 : 120_000;
}

/**
 * Whether the agent toolset of `version` runs `bash` in one shell per session thread (keyed by the
 * run context's `_sessionThread.key`, killed when its signal aborts) rather than one shell for all.
 */
export function toolsetShellPerThread(version: string = INSTALLED_SDK_VERSION): boolean {
  return atLeast(version, THREAD_SHELLS_SINCE);
}

function atLeast(version: string, [major, minor]: readonly [number, number]): boolean {
  const m = /^(\d+)\.(\d+)\./.exec(version);
  // A version this code cannot read is taken as the newest behaviour.
  if (!m) return true;
  const [vMajor, vMinor] = [Number(m[1]), Number(m[2])];
  return vMajor > major || (vMajor === major && vMinor >= minor);
}
