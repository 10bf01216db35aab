/**
 * The soak's sessions, drawn from a seed: which stores each session attaches (with the memories
 * they start with) and what its agent and the Console do, step by step. Pure: the same seed gives
 * the same plan, so a failing run can be replayed with `--seed`.
 */
import { createPrng } from '../../src/testing/emulator/prng.js';

/** Every byte an agent writes carries this tag, so a check can tell the agent's edits from everything else. */
export const AGENT_TAG = 'soak-edit:';

export interface StorePlan {
  /** Index of the store within its session (0 or 1). */
  index: number;
  name: string;
  /** `{ '/path': content }` the store starts with. */
  memories: Record<string, string>;
}

/** One step of a session. `store` is a StorePlan index; `path` is store-relative without the leading slash. */
export type StepPlan =
  | { kind: 'write'; store: number; path: string; content: string }
  | { kind: 'delete'; store: number; path: string }
  | { kind: 'read'; store: number; path: string }
  | { kind: 'consoleWrite'; store: number; path: string; content: string }
  | { kind: 'consoleDelete'; store: number; path: string }
  | { kind: 'dropStreams' }
  | { kind: 'sleep'; ms: number };

export interface SessionPlan {
  index: number;
  stores: StorePlan[];
  steps: StepPlan[];
}

export interface ScenarioOptions {
  sessions: number;
  seed: number;
  /** Longest pause an agent takes between two steps, in ms (lets syncs land between edits). */
  maxSleepMs: number;
}

/** The plan of every session of a soak run. */
export function planSessions(opts: ScenarioOptions): SessionPlan[] {
  const random = createPrng(opts.seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  const plans: SessionPlan[] = [];
  for (let s = 0; s < opts.sessions; s++) {
    const storeCount = random() < 0.3 ? 2 : 1;
    const stores: StorePlan[] = [];
    for (let i = 0; i < storeCount; i++) {
      const memories: Record<string, string> = {};
      const seeded = 2 + Math.floor(random() * 4);
      for (let m = 0; m < seeded; m++) memories[`/${m % 2 === 0 ? 'notes' : 'prefs'}/m${m}.md`] = `seeded memory ${m} of session ${s}\n`;
      stores.push({ index: i, name: `Soak ${s} Store ${i}`, memories });
    }
    // The agent's view of each store's paths, so deletes and edits mostly hit files that exist.
    const known = stores.map((st) => new Set(Object.keys(st.memories).map((p) => p.slice(1))));
    const steps: StepPlan[] = [];
    let writes = 0;
    let consoleWrites = 0;
    const stepCount = 6 + Math.floor(random() * 7);
    for (let k = 0; k < stepCount; k++) {
      const store = Math.floor(random() * stores.length);
      const paths = [...known[store]!].sort();
      const roll = random();
      if (roll < 0.3 || paths.length === 0) {
        const path = `new/s${s}-f${writes}.md`;
        steps.push({ kind: 'write', store, path, content: agentContent(s, writes++, random) });
        known[store]!.add(path);
      } else if (roll < 0.5) {
        steps.push({ kind: 'write', store, path: pick(paths), content: agentContent(s, writes++, random) });
      } else if (roll < 0.6) {
        const path = pick(paths);
        steps.push({ kind: 'delete', store, path });
        known[store]!.delete(path);
      } else if (roll < 0.68) {
        steps.push({ kind: 'read', store, path: pick(paths) });
      } else if (roll < 0.8) {
        steps.push({ kind: 'consoleWrite', store, path: pick(paths), content: `console edit ${consoleWrites++} of session ${s}\n` });
      } else if (roll < 0.85) {
        steps.push({ kind: 'consoleDelete', store, path: pick(paths) });
      } else if (roll < 0.9) {
        steps.push({ kind: 'dropStreams' });
      } else {
        steps.push({ kind: 'sleep', ms: Math.floor(random() * opts.maxSleepMs) });
      }
    }
    // End on a few edits made just before the session ends: the final sync must carry them.
    const last = Math.floor(random() * stores.length);
    steps.push({ kind: 'sleep', ms: Math.floor(random() * opts.maxSleepMs) });
    steps.push({ kind: 'write', store: last, path: `new/s${s}-last.md`, content: agentContent(s, writes++, random) });
    const lastPaths = [...known[last]!].sort();
    if (lastPaths.length > 0) steps.push({ kind: 'delete', store: last, path: pick(lastPaths) });
    plans.push({ index: s, stores, steps });
  }
  return plans;
}

function agentContent(session: number, write: number, random: () => number): string {
  const words = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf', 'hotel'];
  const body = Array.from({ length: 3 + Math.floor(random() * 6) }, () => words[Math.floor(random() * words.length)]).join(' ');
  return `${AGENT_TAG}s${session}-w${write}\n${body}\n`;
}
