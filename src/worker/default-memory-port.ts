import { MemoryMounter, SyncLoop } from '../memory/index.js';
import { sweepJournal } from '../memory/journal/sweep.js';
import type { MemoryPort } from './memory-port.js';

/** Binds the worker to the memory core in `src/memory/`. */
export const defaultMemoryPort: MemoryPort = {
  sweep: (opts) => sweepJournal(opts),
  mounter: (opts) => new MemoryMounter(opts),
  syncLoop: (opts) => new SyncLoop(opts as unknown as ConstructorParameters<typeof SyncLoop>[0]),
};
