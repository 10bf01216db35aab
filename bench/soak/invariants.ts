/**
 * The soak's verdict, computed from what the emulator and the disk showed at the end: nothing the
 * agent had on disk is lost (it is in the store, was in the store before a later write replaced it,
 * or was kept as a copy in the state folder), no memory is duplicated or misplaced, no tool call ran
 * twice, every acknowledged item ended stopped, no promise rejection went unhandled and no folder
 * was left behind. Pure: it reads the observation and does no I/O.
 */
import { AGENT_TAG } from './scenario.js';

/** One version of one file the agent had on disk when an item's run (or its session) ended. */
export interface EditOnDisk {
  storeId: string;
  /** Store-relative path without the leading slash. */
  path: string;
  content: string;
  sessionId: string;
}

export interface StoreWrite {
  op: 'create' | 'update' | 'delete';
  path: string;
  content: string | null;
}

export interface StoreObservation {
  storeId: string;
  /** `{ '/path': content }` now. */
  current: Record<string, string>;
  /** Every write the store took, oldest first. */
  history: StoreWrite[];
}

export interface SoakObservation {
  edits: EditOnDisk[];
  stores: StoreObservation[];
  /** Where the agent wrote each tagged content: `content` → `storeId` + path. */
  agentWrites: Map<string, { storeId: string; path: string }>;
  /** Contents of every file in the state folder (conflict and unsaved copies). */
  copies: ReadonlySet<string>;
  /** Times each tool call (by tool_use id) really ran. */
  toolRuns: ReadonlyMap<string, number>;
  /** Tool calls whose runs happened in more than one item run of their session (a redelivery ran them again). */
  toolRunsAcrossItems?: ReadonlySet<string>;
  workItems: Array<{ id: string; acknowledged: boolean; state: string }>;
  unhandledRejections: string[];
  /** Paths left in the mount parent and the per-session tool folders. */
  leftovers: string[];
  /** Sessions that never ended (their agent did not finish, or their item was never stopped). */
  unfinished: string[];
}

export interface SoakCounts {
  editsChecked: number;
  onStore: number;
  replacedOnStore: number;
  keptAsCopy: number;
  lost: number;
  duplicated: number;
  toolCallsRunTwice: number;
  stranded: number;
  unhandledRejections: number;
  leftBehind: number;
  unfinished: number;
}

export interface SoakVerdict {
  counts: SoakCounts;
  /** One sentence per broken invariant; empty when every invariant holds. */
  violations: string[];
}

export function judgeSoak(o: SoakObservation): SoakVerdict {
  const violations: string[] = [];
  const byStore = new Map(o.stores.map((s) => [s.storeId, s]));
  const counts: SoakCounts = {
    editsChecked: 0,
    onStore: 0,
    replacedOnStore: 0,
    keptAsCopy: 0,
    lost: 0,
    duplicated: 0,
    toolCallsRunTwice: 0,
    stranded: 0,
    unhandledRejections: o.unhandledRejections.length,
    leftBehind: o.leftovers.length,
    unfinished: o.unfinished.length,
  };

  const seen = new Set<string>();
  for (const edit of o.edits) {
    const key = `${edit.storeId}\0${edit.path}\0${edit.content}`;
    if (seen.has(key)) continue;
    seen.add(key);
    counts.editsChecked++;
    const store = byStore.get(edit.storeId);
    const memoryPath = `/${edit.path}`;
    if (store?.current[memoryPath] === edit.content) counts.onStore++;
    else if (store?.history.some((w) => w.op !== 'delete' && w.path === memoryPath && w.content === edit.content)) counts.replacedOnStore++;
    else if (o.copies.has(edit.content)) counts.keptAsCopy++;
    else {
      counts.lost++;
      violations.push(
        `edit lost: ${tagOf(edit.content)} at ${memoryPath} of store ${edit.storeId} (session ${edit.sessionId}) is neither in the store nor kept as a copy`,
      );
    }
  }

  for (const store of o.stores) {
    const paths = new Map<string, string[]>();
    for (const [p, content] of Object.entries(store.current)) {
      if (!content.startsWith(AGENT_TAG)) continue;
      paths.set(content, [...(paths.get(content) ?? []), p]);
    }
    for (const [content, at] of paths) {
      if (at.length > 1) {
        counts.duplicated++;
        violations.push(`memory duplicated: ${tagOf(content)} is in store ${store.storeId} ${at.length} times (${at.join(', ')})`);
      }
    }
    const misplaced = new Set<string>();
    for (const w of store.history) {
      if (w.op === 'delete' || w.content === null || !w.content.startsWith(AGENT_TAG)) continue;
      const origin = o.agentWrites.get(w.content);
      if (origin && origin.storeId === store.storeId && `/${origin.path}` === w.path) continue;
      const key = `${w.content}\0${w.path}`;
      if (misplaced.has(key)) continue;
      misplaced.add(key);
      counts.duplicated++;
      const where = origin ? `the agent wrote it to /${origin.path} of store ${origin.storeId}` : 'the agent never wrote it';
      violations.push(`memory misplaced: ${tagOf(w.content)} was written to ${w.path} of store ${store.storeId}, but ${where}`);
    }
  }

  for (const [id, runs] of o.toolRuns) {
    if (runs > 1) {
      counts.toolCallsRunTwice++;
      const where = o.toolRunsAcrossItems?.has(id) ? ' (again after its work item was delivered anew)' : '';
      violations.push(`tool call ${id} ran ${runs} times${where}`);
    }
  }
  for (const item of o.workItems) {
    if (item.acknowledged && item.state !== 'stopped') {
      counts.stranded++;
      violations.push(`work item ${item.id} was acknowledged and is left ${item.state}, not stopped`);
    }
  }
  for (const r of o.unhandledRejections) violations.push(`unhandled: ${r}`);
  for (const p of o.leftovers) violations.push(`left behind: ${p}`);
  for (const s of o.unfinished) violations.push(`session never ended: ${s}`);
  return { counts, violations };
}

/** The tag line of an agent's content (`soak-edit:s3-w7`), short enough for a message. */
function tagOf(content: string): string {
  const first = content.split('\n', 1)[0] ?? '';
  return first.startsWith(AGENT_TAG) ? first : JSON.stringify(content.slice(0, 40));
}
