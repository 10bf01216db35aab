import type Anthropic from '@anthropic-ai/sdk';
import { coerceError, ConfigError } from '../../errors.js';
import { monotonicClock, type Clock } from '../../internal/clock.js';
import { MEMORY_DEFAULTS } from '../../internal/defaults.js';
import { resolveLogger, type Logger } from '../../internal/logger.js';
import { fromJournalState, Journal, type JournalEntry } from '../journal/journal.js';
import { LocalDir } from '../disk/local-dir.js';
import { scanLocal } from '../disk/local-scan.js';
import { isUnderSkipped } from '../rules/scan.js';
import { MountedSession, MountedStore } from '../sync/mounted.js';
import { currentOwner } from '../journal/owner.js';
import { deadEntries, dropIfNothingToSave } from '../journal/sweep.js';
import { remotePathToRel } from '../rules/paths.js';
import { planSync, type RemoteEntry } from '../rules/plan.js';
import { RemoteStore } from '../remote/remote-store.js';
import { defaultStateDir } from '../disk/state-dir.js';
import { StatCache } from '../disk/stat-cache.js';
import { SyncLoop } from '../sync/sync-loop.js';
import type { MemoryDeleteMode } from '../rules/types.js';

/**
 * What is done with the journal's leftovers: the folders a worker that is gone left behind.
 *
 * - `sweepJournal` (journal/sweep.ts, at `run()` start, no credential needed): an entry whose owner
 *   is gone and whose folder is gone, no longer ours, empty, or still downloading (nothing in it is
 *   an edit) is removed (with the folder, when ours); a leftover holding files is kept and named in
 *   one log line, waiting for the next mount of its store to adopt it (that mount has the
 *   session's credential) or for `recover`.
 * - {@link recoverLeftovers} (`managed-agents-worker recover`, an API key): each such leftover is
 *   reconciled with its store like a session's final sync (edits uploaded with preconditions, the
 *   store wins conflicts with the local bytes kept as a copy, only deletions an earlier sync saw
 *   are carried out), every file that still differs is copied to the state folder, then the folder
 *   and its entry are removed.
 * Entries whose owner still runs are never touched.
 */

export interface RecoverLine {
  root: string;
  storeId: string;
  /** What happened (or, in a dry run, would happen), as one line for the operator. */
  text: string;
  uploaded: number;
  keptAsCopy: number;
  removed: boolean;
}

export interface RecoverOptions {
  /**
   * A client with an API key: the memory endpoints refuse the environment key. Only a dry run may
   * go without one: it then plans against the journal's record of the store instead of the store.
   */
  client: Anthropic | undefined;
  stateDir?: string | undefined;
  logger?: Logger | undefined;
  /** Plan and report only; nothing is uploaded, copied or removed. */
  dryRun?: boolean;
  deletions?: MemoryDeleteMode;
  /** Bound of each leftover's final sync and flush, ms. Default 30 000. */
  finalFlushMs?: number;
  /** @internal */
  clock?: Clock;
}

/** Recover every leftover of a worker that is gone; one line per folder. */
export async function recoverLeftovers(opts: RecoverOptions): Promise<RecoverLine[]> {
  const client = opts.client;
  if (!opts.dryRun && client === undefined)
    throw new ConfigError('recovering leftovers needs a client with an API key (only a dry run goes without one)');
  const log = resolveLogger(opts.logger).child({ component: 'memory-recovery' });
  const stateDir = opts.stateDir ?? defaultStateDir();
  const journal = new Journal(stateDir);
  const clock = opts.clock ?? monotonicClock;
  const lines: RecoverLine[] = [];
  for (const d of await deadEntries(journal, log)) {
    const { root, storeId } = d.entry;
    const base = { root, storeId, uploaded: 0, keptAsCopy: 0 };
    if (d.leftover !== 'holds-files') {
      if (opts.dryRun) {
        lines.push({ ...base, removed: false, text: `${root}: nothing to save (${d.leftover}); would remove the journal entry` });
      } else {
        await dropIfNothingToSave(journal, d, log);
        lines.push({ ...base, removed: true, text: `${root}: nothing to save (${d.leftover}); removed` });
      }
      continue;
    }
    try {
      lines.push(
        opts.dryRun || client === undefined
          ? await planOne(client, d.entry, clock)
          : await recoverOne({ ...opts, client }, stateDir, journal, d.entry, clock, log),
      );
    } catch (err) {
      lines.push({ ...base, removed: false, text: `${root}: not recovered: ${coerceError(err).message}; left as is` });
    }
  }
  return lines;
}

async function recoverOne(
  opts: RecoverOptions & { client: Anthropic },
  stateDir: string,
  journal: Journal,
  entry: JournalEntry,
  clock: Clock,
  log: Logger,
): Promise<RecoverLine> {
  const storeLog = log.child({ memory_store_id: entry.storeId });
  const store = new MountedStore({
    storeId: entry.storeId,
    name: entry.name,
    root: entry.root,
    access: entry.access,
    memories: Object.keys(entry.state.baseline).length,
    dir: new LocalDir(entry.root),
    cache: new StatCache(),
    caseInsensitive: false,
    log: storeLog,
    state: fromJournalState(entry.state, clock.now()),
    journal: { journal, sessionId: entry.sessionId, workId: entry.workId, owner: await currentOwner(), clock },
  });
  // From here this process owns the leftover: a crash now leaves it recoverable again.
  await store.writeJournal();
  const loop = new SyncLoop({
    client: opts.client,
    mounted: new MountedSession(entry.sessionId, [store], () => {}),
    logger: storeLog,
    stateDir,
    clock,
    deletions: opts.deletions ?? 'enabled',
    finalDeletes: 'corroborated',
    ...(opts.finalFlushMs !== undefined ? { finalFlushMs: opts.finalFlushMs } : {}),
  });
  const report = await loop.finish({ clean: true, keepIfIncomplete: true });
  const uploaded = (report.final?.uploads ?? 0) + report.flush.uploads;
  const conflicts = report.final?.conflicts ?? 0;
  const keptAsCopy = conflicts + report.unsavedCopies.length;
  const removed = report.removed.includes(entry.root);
  const parts = [`uploaded ${uploaded}`, `kept as copy ${keptAsCopy}`];
  if ((report.final?.deletes ?? 0) > 0) parts.push(`deleted ${report.final!.deletes}`);
  const copies = report.unsavedCopies.length > 0 ? ` (copies in ${stateDir})` : '';
  return {
    root: entry.root,
    storeId: entry.storeId,
    uploaded,
    keptAsCopy,
    removed,
    text: `${entry.root}: ${parts.join(', ')}; ${removed ? 'removed' : 'kept: the store could not be reached for all of it; run recover again'}${copies}`,
  };
}

/**
 * The plan a recovery would run, without running it. Without a client the store is not read: the
 * plan takes the store to be as the last sync left it (the journal's baseline), so edits made in
 * the store since (which would become conflicts) are not counted.
 */
async function planOne(client: Anthropic | undefined, entry: JournalEntry, clock: Clock): Promise<RecoverLine> {
  const dir = new LocalDir(entry.root);
  const scan = await scanLocal(dir, new StatCache());
  const remote = new Map<string, RemoteEntry>();
  if (client === undefined) {
    for (const [rel, b] of Object.entries(entry.state.baseline)) remote.set(rel, { id: b.id, sha: b.sha });
  } else {
    const listed = await new RemoteStore(client, entry.storeId).listBasic(AbortSignal.timeout(MEMORY_DEFAULTS.requestTimeoutMs));
    for (const m of listed) {
      const check = remotePathToRel(m.path);
      if (check.ok) remote.set(check.rel, { id: m.id, sha: m.sha });
    }
  }
  const skipped = new Set(scan.skipped.map((s) => s.rel));
  const plan = planSync({
    state: fromJournalState(entry.state, clock.now()),
    local: scan.entries,
    remote,
    deletions: 'enabled',
    phase: 'final',
    finalDeletes: 'corroborated',
    skipped: (p) => isUnderSkipped(p, skipped),
  });
  const uploads = plan.actions.filter((a) => a.kind === 'push-create' || a.kind === 'push-update').length;
  const conflicts = plan.actions.filter((a) => a.kind === 'pull' && a.why === 'conflict').length;
  const deletes = plan.actions.filter((a) => a.kind === 'delete-remote').length;
  const refused = [...scan.entries.values()].filter((e) => e.kind === 'unsyncable').length + scan.reserved.length;
  return {
    root: entry.root,
    storeId: entry.storeId,
    uploaded: uploads,
    keptAsCopy: conflicts + refused,
    removed: false,
    text:
      `${entry.root}: would upload ${uploads}, keep as copy ${conflicts + refused}, delete ${deletes}, then remove ` +
      (client === undefined
        ? '(dry run without an API key: the store was not read, so edits made there since the last sync are not counted; nothing done)'
        : '(dry run: nothing done)'),
  };
}
