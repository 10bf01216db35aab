/**
 * Runs the whole LocalDir suite again with the portable scheme (absolute paths and an lstat
 * re-check of the pinned folders) that hosts without `/proc/self/fd` use. The suite is imported
 * under a query of its own, so it registers its tests here even when another file of the same
 * test process already loaded it; the scheme is restored after, for the files that follow.
 */
import { afterAll, beforeAll } from 'vitest';
import { forceProcFd } from '../../../src/memory/disk/pinned-dir.js';

beforeAll(() => forceProcFd(false));
afterAll(() => forceProcFd(undefined));
const suite: string = './local-dir.test.js?portable';
await import(suite);
