/**
 * Pins where a store may be mounted and how long a mount may take: a mount path whose existing
 * parent chain holds a symlink is refused with a message naming the link and the fix, and nothing
 * is created behind the link; with allowed mount roots, a store outside all of them is refused and
 * one inside mounts; a mount that outlives its deadline fails with a clear error and leaves no
 * folder behind.
 */
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MemoryMounter } from '../../../src/memory/index.js';
import { isInsideAllowedRoots } from '../../../src/memory/mount/mount-path-guard.js';
import { resolveWorkerOptions } from '../../../src/worker/options.js';
import { captureLogger, harness, mountError, openSession, type Harness } from '../int-helpers.js';

let h: Harness;
beforeEach(async () => {
  h = await harness();
});
afterEach(async () => {
  await h.cleanup();
});

describe('a mount path through a symlinked parent', () => {
  it('is refused, naming the link and the fix, and nothing is written behind the link', async () => {
    const real = path.join(h.tmp, 'real-parent');
    const link = path.join(h.tmp, 'linked-parent');
    await fsp.mkdir(real);
    await fsp.symlink(real, link);
    const store = await h.emu.createMemoryStore({ name: 'Linked', memories: { '/a.md': 'a' } });
    const mountPath = path.join(link, 'store');
    const { client, session } = await openSession(h.emu, [{ memoryStoreId: store.id, mountPath }]);
    const err = await mountError(new MemoryMounter({ client, logger: captureLogger().logger }).mount(session));
    expect(err.code).toBe('MAW_MEMORY_MOUNT');
    expect(err.path).toBe(mountPath);
    expect(err.message).toContain(`symlink ${link}`);
    expect(err.message).toContain(store.id);
    expect(err.message).toMatch(/Replace .* with a real folder/);
    expect(await fsp.readdir(real)).toEqual([]);
  });

  it('is refused when the symlink is higher up the chain', async () => {
    const real = path.join(h.tmp, 'real-top');
    await fsp.mkdir(path.join(real, 'mnt'), { recursive: true });
    await fsp.symlink(real, path.join(h.tmp, 'top'));
    const store = await h.emu.createMemoryStore({ name: 'High', memories: {} });
    const mountPath = path.join(h.tmp, 'top', 'mnt', 'store');
    const { client, session } = await openSession(h.emu, [{ memoryStoreId: store.id, mountPath }]);
    const err = await mountError(new MemoryMounter({ client }).mount(session));
    expect(err.message).toContain(`symlink ${path.join(h.tmp, 'top')}`);
    expect(fs.existsSync(path.join(real, 'mnt', 'store'))).toBe(false);
  });
});

describe('allowed mount roots', () => {
  it('refuse a store outside every allowed root, naming the path and the option', async () => {
    const store = await h.emu.createMemoryStore({ name: 'Outside', memories: { '/a.md': 'a' } });
    const { client, session } = await openSession(h.emu, [{ memoryStoreId: store.id }]);
    const allowed = path.join(h.tmp, 'elsewhere');
    const err = await mountError(new MemoryMounter({ client, allowedMountRoots: [allowed] }).mount(session));
    const mountPath = path.join(h.mountRoot, 'outside');
    expect(err.path).toBe(mountPath);
    expect(err.message).toContain(`mount path ${mountPath} is outside the allowed mount roots (${allowed})`);
    expect(err.message).toContain('--allowed-mount-root');
    expect(fs.existsSync(mountPath)).toBe(false);
  });

  it('let a store inside one of them mount', async () => {
    const store = await h.emu.createMemoryStore({ name: 'Inside', memories: { '/a.md': 'a' } });
    const { client, session } = await openSession(h.emu, [{ memoryStoreId: store.id }]);
    const mounted = await new MemoryMounter({ client, allowedMountRoots: ['/nowhere', `${h.mountRoot}/`] }).mount(session);
    expect(await fsp.readFile(path.join(mounted.roots[0]!, 'a.md'), 'utf8')).toBe('a');
    await mounted.unmount();
  });

  it.each([
    { description: 'no roots allow everything', target: '/x/y', roots: [], inside: true },
    { description: 'a path inside a root', target: '/mnt/memory/a', roots: ['/mnt/memory'], inside: true },
    { description: 'the root itself is not inside it', target: '/mnt/memory', roots: ['/mnt/memory'], inside: false },
    { description: 'a sibling sharing a prefix', target: '/mnt/memory-evil/a', roots: ['/mnt/memory'], inside: false },
    { description: 'a dot-dot escape', target: '/mnt/memory/../etc', roots: ['/mnt/memory'], inside: false },
    { description: 'the second root', target: '/srv/mem/a', roots: ['/mnt/memory', '/srv/mem'], inside: true },
  ])('$description', ({ target, roots, inside }) => {
    expect(isInsideAllowedRoots(target, roots)).toBe(inside);
  });

  it('are validated as worker options: absolute paths only', () => {
    const client = h.emu.client();
    expect(resolveWorkerOptions({ client }).allowedMountRoots).toEqual([]);
    expect(resolveWorkerOptions({ client, allowedMountRoots: ['/mnt/memory'] }).allowedMountRoots).toEqual(['/mnt/memory']);
    expect(() => resolveWorkerOptions({ client, allowedMountRoots: ['relative/dir'] })).toThrow(
      /allowedMountRoots: expected an array of absolute folder paths/,
    );
    expect(() => resolveWorkerOptions({ client, mountTimeoutMs: 10 })).toThrow(/mountTimeoutMs/);
  });
});

describe('the mount deadline', () => {
  it('fails a mount that outlives it with a clear error and removes what it created', async () => {
    const store = await h.emu.createMemoryStore({ name: 'Slow', memories: { '/a.md': 'a' } });
    const { client, session } = await openSession(h.emu, [{ memoryStoreId: store.id }]);
    h.emu.faults.add({ route: /^GET .*\/memories$/, hang: true });
    const started = Date.now();
    const err = await mountError(new MemoryMounter({ client, mountTimeoutMs: 1_000 }).mount(session));
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(err.message).toContain('did not finish within 1000 ms');
    expect(err.message).toContain(store.id);
    expect(err.message).toContain('mountTimeoutMs');
    expect(fs.existsSync(path.join(h.mountRoot, 'slow'))).toBe(false);
  });
});
