import type { MemoryPort } from './memory-port.js';

/** Binds the worker to the memory core in `src/memory/`. */
export const defaultMemoryPort: MemoryPort = {
  mounter() {
    throw new Error('memory core not available yet');
  },
  syncLoop() {
    throw new Error('memory core not available yet');
  },
};
