import { createHash } from 'node:crypto';
import { serializeSyncState } from '../rules/sync-state.js';
import type { StoreSyncState } from '../rules/types.js';

/**
 * When a store's journal entry needs rewriting. The generation alone moves on every sync and is
 * not worth a write (a pending delete read back from an older generation only waits one sync
 * longer). A sync that changed nothing hands back the same baseline, pending deletes, sent shas,
 * refusals and shadows (the state is copied on write, never changed in place), so comparing those
 * by reference answers most syncs without serialising the state; otherwise the serialised state
 * is compared by its digest, so only 64 characters per store are kept between writes.
 */
export class JournalChangeCheck {
  #state: StoreSyncState | undefined;
  #digest: string | undefined;

  /** `undefined` when `state` is what was last written (generation aside); else its digest, to pass to {@link written}. */
  changed(state: StoreSyncState): { digest: string } | undefined {
    if (this.#state !== undefined && sameJournalState(this.#state, state)) return undefined;
    const digest = journalDigest(state);
    if (digest === this.#digest) {
      this.#state = state;
      return undefined;
    }
    return { digest };
  }

  /** Record that `state` (with `digest` from {@link changed}) was written. */
  written(state: StoreSyncState, digest: string): void {
    this.#state = state;
    this.#digest = digest;
  }

  /** Forget the last write: the next check reports a change. */
  reset(): void {
    this.#state = undefined;
    this.#digest = undefined;
  }
}

/** True when every field of `a` and `b` but the generation is the same value or the same object. */
export function sameJournalState(a: StoreSyncState, b: StoreSyncState): boolean {
  if (a === b) return true;
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  for (const key of keys) {
    if (key === 'generation') continue;
    if ((a as unknown as Record<string, unknown>)[key] !== (b as unknown as Record<string, unknown>)[key]) return false;
  }
  return true;
}

/** The sha-256 of the serialised state with its generation set aside. */
export function journalDigest(state: StoreSyncState): string {
  return createHash('sha256')
    .update(serializeSyncState({ ...state, generation: 0 }))
    .digest('hex');
}
