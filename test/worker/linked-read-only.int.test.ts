// Pins read-only stores' copies linked to the content cache: with each session's toolset in a
// bubblewrap sandbox (real bubblewrap, the built tool host), a later session's copy of a read-only
// store whose contents are cached is made of hard links to the cache's blobs (same inode, nothing
// copied), while a read-write store's copy is written. Through the links the agent changes nothing:
// writing, truncating, chmod, touch, rename, delete and a hard link into its read-write store all
// fail; a change of the memory on the server replaces the session's file, never the blob; every blob
// still hashes to its name after the session, with the mode it was written with.
// Needs `npm run build` (the sandbox's tool host runs from dist/).
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ScriptStep } from '../../src/testing/index.js';
import { SESSION_STORES_FOLDER } from '../../src/worker/store-placement.js';
import { harness, waitFor, type Harness } from './helpers.js';

const sh = (command: string): ScriptStep => ({ tool: 'bash', input: { command: `{ ${command}; } 2>&1; echo "exit=$?"` } });

/** Every blob of the content cache: its sha (the name), the sha its bytes hash to, inode and mode. */
function blobs(cache: string): Array<{ name: string; hash: string; ino: number; mode: number }> {
  if (!fs.existsSync(cache)) return [];
  return fs
    .readdirSync(cache, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && /^[0-9a-f]{64}$/.test(e.name))
    .map((e) => {
      const file = path.join(e.parentPath, e.name);
      const st = fs.statSync(file);
      return { name: e.name, hash: createHash('sha256').update(fs.readFileSync(file)).digest('hex'), ino: st.ino, mode: st.mode & 0o777 };
    });
}

describe("a read-only store's copy in a sandboxed session, linked to the content cache", () => {
  let h: Harness;
  beforeEach(async () => {
    h = await harness({ leaseTtlSeconds: 4 });
  });
  afterEach(async () => {
    await h.cleanup();
  });

  it('is hard links to the blobs the agent cannot change; the read-write store beside it is copied', async () => {
    const { emu } = h;
    const pages: Record<string, string> = {};
    for (let i = 0; i < 12; i++) pages[`/t${i % 3}/m${i}.md`] = `handbook page ${i}`;
    const handbook = await emu.createMemoryStore({ name: 'Handbook', memories: pages });
    const notes = await emu.createMemoryStore({ name: 'Notes', memories: { '/n.md': 'note 0' } });
    const ro = path.join(h.mountRoot, 'handbook');
    const rw = path.join(h.mountRoot, 'notes');
    const resources = [{ memoryStoreId: handbook.id, access: 'read_only' as const }, { memoryStoreId: notes.id }];
    const worker = h.worker({ concurrency: 2, sandbox: 'bwrap', memorySyncIntervalMs: 5_000 });
    const running = worker.run();

    // A first session fills the cache with both stores' contents.
    const a = await emu.createSession({ resources, script: [sh(`cat ${ro}/t1/m1.md`)] });
    await emu.waitForSession(a.sessionId, { timeoutMs: 60_000 });
    const cache = path.join(h.stateDir, 'content-cache');
    await waitFor(() => blobs(cache).length >= 13, 30_000, 'the 13 contents in the content cache');
    const before = blobs(cache);

    // The session's host copies, seen while it runs: inode and link count of each file.
    const seen: Record<string, { ino: number; nlink: number }> = {};
    const look = (): void => {
      const folder = path.join(h.stateDir, SESSION_STORES_FOLDER);
      for (const e of fs.readdirSync(folder, { recursive: true, withFileTypes: true })) {
        if (!e.isFile() || !e.name.endsWith('.md')) continue;
        const st = fs.statSync(path.join(e.parentPath, e.name));
        seen[`${e.parentPath.includes(handbook.id) ? 'ro' : 'rw'}:${e.name}`] = { ino: st.ino, nlink: st.nlink };
      }
    };
    const target = `${ro}/t1/m1.md`;
    const b = await emu.createSession({
      resources,
      script: [
        sh(`cat ${target}`),
        // After the first call: the stores are mounted.
        { console: look },
        sh(`echo tampered > ${target}`),
        sh(`: > ${target}`),
        sh(`chmod 666 ${target}`),
        sh(`touch -d 2001-01-01 ${target}`),
        sh(`mv ${target} ${ro}/t1/moved.md`),
        sh(`rm -f ${target}`),
        sh(`ln ${target} ${rw}/linked.md`),
        { console: () => void emu.putMemory(handbook.id, '/t2/m2.md', 'handbook page 2, revised') },
        // Past the sync interval: this call's sync pulls the revised page into the session's copy.
        sh(`sleep 5.5; cat ${ro}/t2/m2.md`),
        sh(`cat ${ro}/t2/m2.md`),
      ],
    });
    const doneB = await emu.waitForSession(b.sessionId, { timeoutMs: 90_000 });
    await worker.close();
    await running;

    const texts = doneB.toolResults.map((r) => r.text);
    expect(texts[0]).toContain('handbook page 1');
    for (const attempt of texts.slice(1, 7)) expect(attempt).toMatch(/Read-only file system[\s\S]*exit=1/);
    // A link from the read-only copy into the read-write store crosses two mounts: refused.
    expect(texts[7]).toMatch(/Invalid cross-device link[\s\S]*exit=1/);
    expect(texts[9]).toContain('handbook page 2, revised');

    // The read-only copy was links to the blobs (the same inodes); the read-write one was written.
    const byHash = new Map(before.map((blob) => [blob.name, blob]));
    const sha = (text: string): string => createHash('sha256').update(text).digest('hex');
    for (let i = 0; i < 12; i++) {
      const file = seen[`ro:m${i}.md`];
      expect(file, `m${i}.md in the read-only copy`).toBeDefined();
      expect(file!.ino).toBe(byHash.get(sha(`handbook page ${i}`))!.ino);
      expect(file!.nlink).toBeGreaterThanOrEqual(2);
    }
    expect(seen['rw:n.md']!.ino).not.toBe(byHash.get(sha('note 0'))!.ino);
    expect(seen['rw:n.md']!.nlink).toBe(1);

    // Every blob holds what its name says, with its mode: nothing reached the cache through a link.
    const after = new Map(blobs(cache).map((blob) => [blob.name, blob]));
    for (const blob of before) {
      expect(after.get(blob.name)?.hash, blob.name).toBe(blob.name);
      expect(after.get(blob.name)?.mode).toBe(blob.mode);
    }
    expect(emu.memories(handbook.id)['/t1/m1.md']).toBe('handbook page 1');
    expect(emu.memories(notes.id)['/linked.md']).toBeUndefined();
    const mountedLines = h.capture.lines.filter((l) => l.msg === 'memory store mounted' && l['linked_from_cache'] === 12);
    expect(mountedLines).toHaveLength(1);
  });
});
