/**
 * Runs the whole LocalDir suite again with the portable scheme (absolute paths and an lstat
 * re-check of the pinned folders) that hosts without `/proc/self/fd` use.
 */
import { forceProcFd } from '../../../src/memory/disk/pinned-dir.js';

forceProcFd(false);
await import('./local-dir.test.js');
