/**
 * The content cache against the emulator (real SDK client over HTTP) and the real filesystem: a
 * second mount of an unchanged store copies every content from the cache and downloads none; a
 * Console edit between sessions reaches the next one; a blob changed on disk, or left half written
 * by a killed process, is never mounted; a cache over its bound evicts and the mount is still
 * exact; a read-only and a read-write store of the same contents share blobs, never files.
 */
import { execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ContentCache, CONTENT_CACHE_FOLDER } from '../../../src/memory/disk/content-cache.js';
import { MemoryMounter, SyncLoop } from '../../../src/memory/index.js';
import { sha256Hex } from '../../../src/memory/disk/local-scan.js';
import { captureLogger, harness, manualClock, openSession, readTree, type Harness } from '../int-helpers.js';

const FIXTURE = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures', 'cache-put-child.ts');

let h: Harness;
beforeEach(async () => {
  h = await harness();
});
afterEach(async () => {
  await h.cleanup();
});

/** `count` memories spread over three folders and the top level, each with distinct content. */
function seed(count: number, tag: string, bytes = 64): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i < count; i++) {
    const p = i % 4 === 3 ? `/top-${i}.md` : `/f${i % 3}/note-${i}.md`;
    out[p] = `${tag} ${i} `.padEnd(bytes, '.');
  }
  return out;
}

function expectedTree(memories: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(memories).map(([p, c]) => [p.slice(1), c]));
}

/** Memory requests since `from`: full-view listings, basic listings, and retrieves. */
function memoryRequests(from: number): { full: number; basic: number; retrieves: number } {
  const reqs = h.emu.requests.slice(from);
  const lists = reqs.filter((r) => r.route === 'GET /v1/memory_stores/:id/memories');
  return {
    full: lists.filter((r) => r.query['view'] === 'full').length,
    basic: lists.filter((r) => r.query['view'] === 'basic').length,
    retrieves: reqs.filter((r) => r.route === 'GET /v1/memory_stores/:id/memories/:memoryId').length,
  };
}

async function mountOnce(
  storeIds: Array<{ memoryStoreId: string; access?: 'read_only' | 'read_write' }>,
  opts: { cacheBytes?: number; logger?: ReturnType<typeof captureLogger> } = {},
) {
  const { client, session } = await openSession(h.emu, storeIds);
  const from = h.emu.requests.length;
  const log = opts.logger ?? captureLogger();
  const mounter = new MemoryMounter({
    client,
    logger: log.logger,
    stateDir: h.stateDir,
    contentCacheBytes: opts.cacheBytes ?? 64 * 1024 * 1024,
  });
  const mounted = await mounter.mount(session);
  const trees = await Promise.all(mounted.roots.map((r) => readTree(r)));
  const requests = memoryRequests(from);
  return { mounted, trees, requests, log };
}

function cacheRoot(): string {
  return path.join(h.stateDir, CONTENT_CACHE_FOLDER);
}

function blobPath(sha: string): string {
  return path.join(cacheRoot(), sha.slice(0, 2), sha);
}

describe('warm mounts', () => {
  it('two sessions, a Console edit, a third session: the second downloads no content, the third has the edit', async () => {
    const memories = seed(60, 'v1');
    const store = await h.emu.createMemoryStore({ name: 'Warm', memories });

    const first = await mountOnce([{ memoryStoreId: store.id }]);
    expect(first.trees[0]).toEqual(expectedTree(memories));
    expect(first.requests.full).toBeGreaterThan(0);
    await first.mounted.unmount();
    // Every content is a blob named by its sha, holding exactly its bytes, 0600 in a 0700 folder.
    for (const content of Object.values(memories)) {
      const sha = sha256Hex(Buffer.from(content));
      expect(fs.readFileSync(blobPath(sha), 'utf8')).toBe(content);
      expect(fs.statSync(blobPath(sha)).mode & 0o777).toBe(0o600);
    }
    expect(fs.statSync(cacheRoot()).mode & 0o777).toBe(0o700);

    const second = await mountOnce([{ memoryStoreId: store.id }]);
    expect(second.trees[0]).toEqual(expectedTree(memories));
    expect(second.requests).toEqual({ full: 0, basic: expect.any(Number), retrieves: 0 });
    expect(second.requests.basic).toBeGreaterThan(0);
    expect(second.log.lines.find((l) => l.msg === 'memory store mounted')).toMatchObject({ memories: 60, from_cache: 60 });
    await second.mounted.unmount();

    h.emu.putMemory(store.id, '/f1/note-1.md', 'edited in the Console');
    h.emu.putMemory(store.id, '/added.md', 'new in the Console');
    const third = await mountOnce([{ memoryStoreId: store.id }]);
    expect(third.trees[0]).toEqual({
      ...expectedTree(memories),
      'f1/note-1.md': 'edited in the Console',
      'added.md': 'new in the Console',
    });
    // Only the two new contents are fetched, one by one.
    expect(third.requests).toMatchObject({ full: 0, retrieves: 2 });
    expect(third.mounted.stores[0]!.state.baseline['f1/note-1.md']!.sha).toBe(sha256Hex(Buffer.from('edited in the Console')));
    await third.mounted.unmount();
  });

  it('a store with nothing cached is listed in the full view as before, even when the cache holds other stores', async () => {
    const a = await h.emu.createMemoryStore({ name: 'A', memories: seed(30, 'a') });
    const b = await h.emu.createMemoryStore({ name: 'B', memories: seed(30, 'b') });
    const first = await mountOnce([{ memoryStoreId: a.id }]);
    await first.mounted.unmount();
    const other = await mountOnce([{ memoryStoreId: b.id }]);
    expect(other.trees[0]).toEqual(expectedTree(seed(30, 'b')));
    expect(other.requests.retrieves).toBe(0);
    expect(other.requests.full).toBeGreaterThan(0);
    // One basic page asked for, found uncached, and dropped.
    expect(other.requests.basic).toBeLessThanOrEqual(2);
    await other.mounted.unmount();
  });

  it('a folder with many contents changed is listed again in the full view, not fetched one by one', async () => {
    const memories: Record<string, string> = {};
    for (let i = 0; i < 60; i++) memories[`/big/n-${i}.md`] = `v1 ${i}`;
    for (let i = 0; i < 20; i++) memories[`/small/n-${i}.md`] = `s ${i}`;
    const store = await h.emu.createMemoryStore({ name: 'Relist', memories });
    await (await mountOnce([{ memoryStoreId: store.id }])).mounted.unmount();
    for (let i = 0; i < 30; i++) h.emu.putMemory(store.id, `/big/n-${i}.md`, `v2 ${i}`);
    h.emu.putMemory(store.id, '/small/n-0.md', 's changed');
    const next = await mountOnce([{ memoryStoreId: store.id }]);
    const want = expectedTree(memories);
    for (let i = 0; i < 30; i++) want[`big/n-${i}.md`] = `v2 ${i}`;
    want['small/n-0.md'] = 's changed';
    expect(next.trees[0]).toEqual(want);
    // 30 misses in a folder of 60 (3 full pages): listed again (3 pages), not 30 retrieves; the
    // one miss in `small` is retrieved.
    expect(next.requests.retrieves).toBe(1);
    expect(next.requests.full).toBe(3);
    await next.mounted.unmount();
  });
});

describe('pulls during a sync', () => {
  it('take a content the cache holds from it, and put what they fetch into it', async () => {
    const store = await h.emu.createMemoryStore({ name: 'Pulls', memories: { '/a.md': 'content A', '/b.md': 'content B' } });
    const { mounted, requests } = await mountOnce([{ memoryStoreId: store.id }]);
    expect(requests.full).toBeGreaterThan(0);
    const { client } = await openSession(h.emu, [{ memoryStoreId: store.id }]);
    const loop = new SyncLoop({
      client,
      mounted,
      logger: captureLogger().logger,
      stateDir: h.stateDir,
      clock: manualClock(),
      contentCacheBytes: 64 * 1024 * 1024,
    });
    await ContentCache.shared({ stateDir: h.stateDir, maxBytes: 64 * 1024 * 1024 })!.flush();
    // Back to a content the cache holds (b's), and a content it never saw.
    h.emu.putMemory(store.id, '/a.md', 'content B');
    h.emu.putMemory(store.id, '/c.md', 'content C');
    const from = h.emu.requests.length;
    const report = await loop.syncNow();
    expect(report.downloads).toBe(2);
    expect(memoryRequests(from).retrieves).toBe(1);
    expect(await readTree(mounted.roots[0]!)).toEqual({ 'a.md': 'content B', 'b.md': 'content B', 'c.md': 'content C' });
    await ContentCache.shared({ stateDir: h.stateDir, maxBytes: 64 * 1024 * 1024 })!.flush();
    expect(fs.readFileSync(blobPath(sha256Hex(Buffer.from('content C'))), 'utf8')).toBe('content C');
    await loop.finish({ clean: true });
  });
});

describe('a blob that is not what it is named', () => {
  it('changed on disk (the same size, or another): never mounted; removed, fetched, and cached again', async () => {
    const memories = seed(12, 'tamper');
    const store = await h.emu.createMemoryStore({ name: 'Tamper', memories });
    await (await mountOnce([{ memoryStoreId: store.id }])).mounted.unmount();
    const victims = ['/f0/note-0.md', '/f1/note-1.md'];
    const shas = victims.map((p) => sha256Hex(Buffer.from(memories[p]!)));
    fs.writeFileSync(blobPath(shas[0]!), 'X'.repeat(memories[victims[0]!]!.length));
    fs.writeFileSync(blobPath(shas[1]!), 'short');

    const log = captureLogger();
    const next = await mountOnce([{ memoryStoreId: store.id }], { logger: log });
    expect(next.trees[0]).toEqual(expectedTree(memories));
    expect(next.requests).toMatchObject({ full: 0, retrieves: 2 });
    expect(log.warnings().filter((w) => w.startsWith('content cache blob removed'))).toHaveLength(2);
    await next.mounted.unmount();
    // Put back with the fetched (right) bytes.
    for (const [i, p] of victims.entries()) expect(fs.readFileSync(blobPath(shas[i]!), 'utf8')).toBe(memories[p]);
  });

  it('a downloaded content that does not hash to its listed sha is mounted as given but never cached under that sha', async () => {
    const memories = { '/a.md': 'content A', '/f/b.md': 'content B' };
    const store = await h.emu.createMemoryStore({ name: 'Liar', memories });
    // Every listing names a's content by b's sha: a server whose sha and content disagree.
    const shaB = sha256Hex(Buffer.from('content B'));
    h.emu.faults.add({
      route: /^GET \/v1\/memory_stores\/[^/]+\/memories$/,
      rewrite: (body) => {
        const page = body as { data: Array<{ path: string; content_sha256?: string }> };
        for (const item of page.data) if (item.path === '/a.md') item.content_sha256 = 'f'.repeat(64);
        return page;
      },
    });
    const first = await mountOnce([{ memoryStoreId: store.id }]);
    expect(first.trees[0]).toEqual(expectedTree(memories));
    // The unmount waits for the cache's writes: b's content is kept, a's is not kept under the lie.
    await first.mounted.unmount();
    expect(fs.readFileSync(blobPath(shaB), 'utf8')).toBe('content B');
    expect(fs.existsSync(blobPath('f'.repeat(64)))).toBe(false);
    expect(first.log.warnings()).toContain('a downloaded content does not hash to its listed content_sha256; it is not cached');
    // The next mount copies b from the cache and downloads a again.
    const next = await mountOnce([{ memoryStoreId: store.id }]);
    expect(next.trees[0]).toEqual(expectedTree(memories));
    expect(next.requests.retrieves + next.requests.full).toBeGreaterThan(0);
    await next.mounted.unmount();
  });

  it('a blob grown past the size it was filed with, or replaced by a FIFO or a folder, is dropped when read, without blocking', async () => {
    const contents = ['grown content', 'fifo content', 'folder content'];
    const shas = contents.map((c) => sha256Hex(Buffer.from(c)));
    for (const [i, sha] of shas.entries()) {
      fs.mkdirSync(path.dirname(blobPath(sha)), { recursive: true });
      fs.writeFileSync(blobPath(sha), contents[i]!);
    }
    const cache = new ContentCache({ stateDir: h.stateDir, maxBytes: 1 << 20, logger: captureLogger().logger });
    expect(await cache.open()).toBe(true);
    // After the scan: the first blob gets a tail (its first bytes still the content), the second
    // becomes a FIFO nobody writes to, the third a folder.
    fs.appendFileSync(blobPath(shas[0]!), ' and more');
    fs.rmSync(blobPath(shas[1]!));
    execFileSync('mkfifo', [blobPath(shas[1]!)]);
    fs.rmSync(blobPath(shas[2]!));
    fs.mkdirSync(blobPath(shas[2]!));
    const scratch = Buffer.alloc(64);
    for (const sha of shas) {
      expect(cache.read(sha, undefined, scratch)).toBeUndefined();
      expect(cache.has(sha)).toBe(false);
    }
  });

  it('a half-written blob under its final name (a crash of a writer that does not rename) is dropped when read', async () => {
    const content = 'the whole content of a memory';
    const sha = sha256Hex(Buffer.from(content));
    fs.mkdirSync(path.dirname(blobPath(sha)), { recursive: true });
    fs.writeFileSync(blobPath(sha), content.slice(0, 10));
    const cache = new ContentCache({ stateDir: h.stateDir, maxBytes: 1 << 20, logger: captureLogger().logger });
    expect(await cache.open()).toBe(true);
    expect(cache.has(sha)).toBe(true);
    expect(cache.read(sha)).toBeUndefined();
    expect(cache.has(sha)).toBe(false);
    await new Promise((r) => setTimeout(r, 20));
    expect(fs.existsSync(blobPath(sha))).toBe(false);
  });

  it('a worker killed (SIGKILL) while writing blobs leaves none half written under a sha; the next process cleans its temp files', async () => {
    let leftTemp = false;
    for (let attempt = 0; attempt < 8 && !leftTemp; attempt++) {
      const child = spawn(process.execPath, ['--import', 'tsx', FIXTURE, h.stateDir, String(attempt)], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      // Once three blobs are whole, killed as soon as a temp file is there: mid-write, before its rename.
      await new Promise<void>((resolve) => {
        let lines = 0;
        const onData = (d: Buffer): void => {
          lines += d.toString('utf8').split('\n').length - 1;
          if (lines < 3) return;
          child.stdout!.off('data', onData);
          const tmp = path.join(cacheRoot(), 'tmp');
          const poll = (): void => {
            if (fs.readdirSync(tmp).length > 0) {
              child.kill('SIGKILL');
              resolve();
            } else setImmediate(poll);
          };
          poll();
        };
        child.stdout!.on('data', onData);
      });
      await exited;
      leftTemp = fs.readdirSync(path.join(cacheRoot(), 'tmp')).length > 0;
      // Every blob under a sha's name is whole.
      for (const shard of fs.readdirSync(cacheRoot()).filter((n) => /^[0-9a-f]{2}$/.test(n))) {
        for (const name of fs.readdirSync(path.join(cacheRoot(), shard))) {
          expect(sha256Hex(fs.readFileSync(path.join(cacheRoot(), shard, name)))).toBe(name);
        }
      }
    }
    expect(leftTemp).toBe(true);
    const cache = new ContentCache({ stateDir: h.stateDir, maxBytes: 1 << 30, logger: captureLogger().logger });
    expect(await cache.open()).toBe(true);
    expect(fs.readdirSync(path.join(cacheRoot(), 'tmp'))).toEqual([]);
    expect(cache.count).toBeGreaterThan(0);
  });
});

describe('bounds and sharing', () => {
  it('a cache smaller than the store evicts the least recently used blobs, stays within its bound, and the next mount is still exact', async () => {
    const memories = seed(40, 'evict', 1024);
    const store = await h.emu.createMemoryStore({ name: 'Evict', memories });
    const bound = 10 * 1024;
    await (await mountOnce([{ memoryStoreId: store.id }], { cacheBytes: bound })).mounted.unmount();
    const blobs = () =>
      fs
        .readdirSync(cacheRoot())
        .filter((n) => /^[0-9a-f]{2}$/.test(n))
        .flatMap((s) => fs.readdirSync(path.join(cacheRoot(), s)).map((n) => path.join(cacheRoot(), s, n)));
    const total = blobs().reduce((sum, b) => sum + fs.statSync(b).size, 0);
    expect(total).toBeLessThanOrEqual(bound);
    expect(blobs().length).toBe(10);

    const next = await mountOnce([{ memoryStoreId: store.id }], { cacheBytes: bound });
    expect(next.trees[0]).toEqual(expectedTree(memories));
    await next.mounted.unmount();
    expect(blobs().reduce((sum, b) => sum + fs.statSync(b).size, 0)).toBeLessThanOrEqual(bound);
  });

  it('a read-only and a read-write store of the same contents share blobs: an edit in one never reaches the other, the cache, or the next mount', async () => {
    const memories = seed(8, 'shared');
    const ro = await h.emu.createMemoryStore({ name: 'Shared RO', memories });
    const rw = await h.emu.createMemoryStore({ name: 'Shared RW', memories });
    await (await mountOnce([{ memoryStoreId: rw.id }])).mounted.unmount();

    const both = await mountOnce([
      { memoryStoreId: ro.id, access: 'read_only' },
      { memoryStoreId: rw.id, access: 'read_write' },
    ]);
    expect(both.requests).toMatchObject({ full: 0, retrieves: 0 });
    const [roRoot, rwRoot] = both.mounted.roots as [string, string];
    const rel = 'f0/note-0.md';
    const sha = sha256Hex(Buffer.from(memories[`/${rel}`]!));
    const blob = fs.statSync(blobPath(sha));
    for (const root of [roRoot, rwRoot]) {
      const st = fs.statSync(path.join(root, rel));
      // A copy: its own inode, one link.
      expect(st.ino).not.toBe(blob.ino);
      expect(st.nlink).toBe(1);
    }
    await fsp.writeFile(path.join(rwRoot, rel), 'the agent rewrote this');
    expect(fs.readFileSync(path.join(roRoot, rel), 'utf8')).toBe(memories[`/${rel}`]);
    expect(fs.readFileSync(blobPath(sha), 'utf8')).toBe(memories[`/${rel}`]);
    await both.mounted.unmount();

    const again = await mountOnce([{ memoryStoreId: ro.id, access: 'read_only' }]);
    expect(again.trees[0]).toEqual(expectedTree(memories));
    expect(again.requests).toMatchObject({ full: 0, retrieves: 0 });
    await again.mounted.unmount();
  });

  it('a cache whose writes fail costs speed only: mounts stay exact, one warning, nothing cached', async () => {
    const a = await h.emu.createMemoryStore({ name: 'First', memories: { '/x.md': 'x' } });
    const b = await h.emu.createMemoryStore({ name: 'Second', memories: seed(10, 'unwritable') });
    // A first mount opens the cache; then its temp folder is replaced by a file: every put fails.
    const log = captureLogger();
    await (await mountOnce([{ memoryStoreId: a.id }], { logger: log })).mounted.unmount();
    await fsp.rm(path.join(cacheRoot(), 'tmp'), { recursive: true });
    await fsp.writeFile(path.join(cacheRoot(), 'tmp'), 'in the way');
    const m = await mountOnce([{ memoryStoreId: b.id }], { logger: log });
    expect(m.trees[0]).toEqual(expectedTree(seed(10, 'unwritable')));
    await m.mounted.unmount();
    expect(log.warnings().filter((w) => w.startsWith('could not write to the content cache'))).toHaveLength(1);
    const again = await mountOnce([{ memoryStoreId: b.id }], { logger: log });
    expect(again.trees[0]).toEqual(expectedTree(seed(10, 'unwritable')));
    expect(again.requests.full).toBeGreaterThan(0);
    await again.mounted.unmount();
  });

  it('a cache that cannot be used (its folder is a file) costs speed only: the mount downloads everything', async () => {
    const memories = seed(10, 'broken');
    const store = await h.emu.createMemoryStore({ name: 'Broken', memories });
    await fsp.mkdir(h.stateDir, { recursive: true });
    await fsp.writeFile(cacheRoot(), 'not a folder');
    const log = captureLogger();
    const m = await mountOnce([{ memoryStoreId: store.id }], { logger: log });
    expect(m.trees[0]).toEqual(expectedTree(memories));
    expect(log.warnings()).toContain('could not open the content cache; mounts download every memory');
    await m.mounted.unmount();
  });
});

describe('the bound option', () => {
  it('is refused when it is not a whole number of bytes from 0, naming the option', async () => {
    const { client } = await openSession(h.emu, []);
    for (const bad of [-1, 1.5, Number.NaN]) {
      expect(() => new MemoryMounter({ client, stateDir: h.stateDir, contentCacheBytes: bad })).toThrow(
        /memoryCacheBytes: expected an integer number of bytes from 0 \(no cache\)/,
      );
    }
    // 0 turns the cache off: nothing is created in the state folder for it.
    const store = await h.emu.createMemoryStore({ name: 'Off', memories: { '/a.md': 'a' } });
    const m = await mountOnce([{ memoryStoreId: store.id }], { cacheBytes: 0 });
    await m.mounted.unmount();
    expect(fs.existsSync(cacheRoot())).toBe(false);
  });
});
