import { createHash } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import path from 'node:path';
import { setupSkills, type AgentToolContext } from '@anthropic-ai/sdk/tools/agent-toolset/node';
import { ConfigError, coerceError } from '../errors.js';
import { errorSummary, type Logger } from '../internal/logger.js';
import { agentMayHaveSkills } from './agent-skills.js';

/** Runs under way per session tool folder in one worker: the count each folder's runs share. */
export type SessionFolderCounts = Map<string, number>;

/**
 * The folder a session's tools work in, and who cleans it. With one session at a time every
 * session works in `workdir` itself, and each run cleans its own skills. With several at once
 * each session gets `<workdir>/sessions/<session id>` of its own, so sessions share no file, nor
 * the `skills/<name>` folders the skills setup writes and its cleanup removes. A session's item
 * can come back while its previous run is still tearing down: runs of one session share its
 * folder, counted in `SessionFolderCounts`, and only the last run out cleans the skills and
 * removes the folder (if the session left it empty; files in it are kept for a later turn).
 */
export class ToolFolder {
  readonly path: string;
  readonly #counts: SessionFolderCounts | undefined;
  readonly #own: boolean;
  #cleanupSkills: () => Promise<void> = async () => {};
  /** The session's agent or one of its subagents has skills, so `skills/` is the worker's to write and clean. */
  #hasSkills = false;
  #left = false;

  private constructor(dir: string, own: boolean, counts: SessionFolderCounts | undefined) {
    this.path = dir;
    this.#own = own;
    this.#counts = counts;
  }

  /** The shared workdir: never counted, never removed. */
  static shared(workdir: string): ToolFolder {
    return new ToolFolder(workdir, false, undefined);
  }

  /** The session's own folder, counted in from now on (call {@link leave} whatever happens next). */
  static enter(counts: SessionFolderCounts | undefined, workdir: string, sessionId: string): ToolFolder {
    const dir = sessionWorkdir(workdir, sessionId);
    counts?.set(dir, (counts.get(dir) ?? 0) + 1);
    return new ToolFolder(dir, true, counts);
  }

  /**
   * Create the session's own folder (0700); a ConfigError says why it cannot be.
   *
   * `sessions/` and `sessions/<id>` are created one at a time, never through a symlink: with one
   * session at a time every session works in `workdir` itself, so an agent (of any tenant) may have
   * left a symlink at `sessions` (or a folder of links in it). Followed, it would put a later
   * session's folder, its skills and its files wherever the link points: another store's mount
   * folder, where another tenant's agent reads them. Whatever is there and is not a plain folder is
   * moved aside, never followed, and logged.
   */
  async create(ids: { workId: string; sessionId: string }, log: Logger): Promise<void> {
    if (!this.#own) return;
    const sessions = path.dirname(this.path);
    try {
      await fsp.mkdir(path.dirname(sessions), { recursive: true, mode: 0o700 });
      for (const dir of [sessions, this.path]) {
        await plainFolderOrMovedAside(dir, log, "before the session's tool folder was created");
        await fsp.mkdir(dir, { mode: 0o700 }).catch((e: unknown) => {
          if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
        });
        // Created meanwhile by someone else as anything but a folder: refused, not followed.
        if (!(await fsp.lstat(dir)).isDirectory()) throw Object.assign(new Error(`${dir} is not a folder`), { code: 'ENOTDIR' });
      }
    } catch (e) {
      throw new ConfigError(
        `work item ${ids.workId}: cannot create the tool folder ${this.path} of session ${ids.sessionId} ` +
          `(${(e as NodeJS.ErrnoException).code ?? coerceError(e).message}); with concurrency > 1 every session works in ` +
          '`<workdir>/sessions/<session id>`, so `workdir` must be a directory the worker can write to.',
        [],
        { cause: e },
      );
    }
  }

  /**
   * Set up the session's skills in the folder (`context.workdir`); {@link leave} cleans them. A
   * failure is only logged, as the official worker does: the session runs without them. `setUp` is
   * the SDK's skills setup unless a test gives another.
   *
   * The setup removes and writes `skills/<name>` with the worker's rights, outside any sandbox, in
   * a folder the agent writes to. An earlier turn (or, with one session at a time, another
   * session) may have left a symlink at `skills`: followed, it would make the worker delete and
   * write wherever it points (another tenant's store among them). Whatever is at `skills` and is
   * not a plain folder is first moved aside, under a name that says so, and the setup then makes
   * a plain one. The guard runs whenever the setup may write there: the agent's own skills, and
   * its subagents' (a multi-agent session's), which some SDK versions download too.
   */
  async setUpSkills(
    context: AgentToolContext,
    log: Logger,
    setUp: (context: AgentToolContext) => Promise<() => Promise<void>> = setupSkills,
  ): Promise<void> {
    try {
      this.#hasSkills = agentMayHaveSkills(context.session?.agent);
      if (this.#hasSkills) await plainFolderOrMovedAside(path.join(this.path, 'skills'), log, "before the session's skills were set up");
      this.#cleanupSkills = await setUp(context);
    } catch (e) {
      log.warn({ error: errorSummary(coerceError(e)) }, 'skill setup failed; the session runs without them');
    }
  }

  /**
   * Count this run out. Unless another run of the session still works in the folder, run the
   * skills cleanup and remove the folder if it is empty. Never throws; runs once.
   */
  async leave(log: Logger): Promise<void> {
    if (this.#left) return;
    this.#left = true;
    const shared = this.#own && countOut(this.#counts, this.path) > 0;
    if (shared) return;
    try {
      // The cleanup removes `skills/<name>`: through a symlink the agent put at `skills` meanwhile,
      // that would be a folder of its choosing. Then the link is moved aside and nothing is removed.
      if (
        !this.#hasSkills ||
        (await plainFolderOrMovedAside(path.join(this.path, 'skills'), log, "before the session's skills were cleaned up"))
      ) {
        await this.#cleanupSkills();
      }
    } catch (e) {
      log.warn({ error: errorSummary(coerceError(e)) }, 'skill cleanup failed');
    }
    if (!this.#own) return;
    // The skills cleanup removes `skills/<name>` but leaves `skills/` itself, which would keep the folder.
    await removeIfEmpty(path.join(this.path, 'skills'), log);
    await removeIfEmpty(this.path, log);
  }
}

/**
 * Whether `dir` is a plain folder or absent. Anything else there (a symlink, a file) is renamed
 * aside (`<dir>.moved-aside-<ms>`), never followed, and logged with where it went.
 */
async function plainFolderOrMovedAside(dir: string, log: Logger, when: string): Promise<boolean> {
  let kind: string;
  try {
    const st = await fsp.lstat(dir);
    if (st.isDirectory()) return true;
    kind = st.isSymbolicLink() ? 'a symlink' : 'not a folder';
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return true;
    throw e;
  }
  const aside = `${dir}.moved-aside-${Date.now()}`;
  try {
    await fsp.rename(dir, aside);
  } catch (e) {
    // Moved aside meanwhile by another run entering the same folder.
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw e;
  }
  log.warn(
    { path: dir, moved_to: aside, fix: 'nothing to do: the agent (or an earlier session) put it there; the worker never follows it' },
    `${dir} was ${kind} ${when}; it was moved to ${aside} and not followed`,
  );
  return false;
}

/**
 * The tool workdir of one session when the worker serves several at once:
 * `<workdir>/sessions/<session id>` (a hash of the id if it is not a plain id).
 */
export function sessionWorkdir(workdir: string, sessionId: string): string {
  const name = /^[A-Za-z0-9][A-Za-z0-9_-]{0,199}$/.test(sessionId)
    ? sessionId
    : `session-${createHash('sha256').update(sessionId).digest('hex').slice(0, 32)}`;
  return path.join(path.resolve(workdir), 'sessions', name);
}

/** Count one run out of a session folder; returns how many runs still use it. */
function countOut(counts: SessionFolderCounts | undefined, dir: string): number {
  if (!counts) return 0;
  const left = (counts.get(dir) ?? 1) - 1;
  if (left > 0) counts.set(dir, left);
  else counts.delete(dir);
  return left;
}

/** Remove a folder if it is empty; files in it are kept. */
async function removeIfEmpty(dir: string, log: Logger): Promise<void> {
  try {
    await fsp.rmdir(dir);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code !== 'ENOTEMPTY' && code !== 'EEXIST' && code !== 'ENOENT') {
      log.debug({ err: coerceError(e), dir }, 'could not remove the empty session folder');
    }
  }
}
