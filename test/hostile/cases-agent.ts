/** Hostile cases where the agent (or whoever shares the host) plants things on disk. */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as net from 'node:net';
import * as path from 'node:path';
import { expect } from 'vitest';
import { SECRET_BAIT, type Ctx, type HostileCase, type Mount } from './hostile-kit.js';

/**
 * Mount a store, run the agent's action, then a Console edit of every memory, two syncs and the
 * clean end. Nothing from outside may be uploaded.
 */
async function agentFlow(ctx: Ctx, agent: (m: Mount) => Promise<void>, memories?: Record<string, string>): Promise<Mount> {
  const m = await ctx.mount(memories ? { memories } : {});
  await ctx.armed();
  await agent(m);
  await m.loop.syncNow();
  for (const p of Object.keys(ctx.emu.memories(m.storeId))) ctx.emu.putMemory(m.storeId, p, `console edit of ${p}`);
  await m.loop.syncNow();
  await m.loop.finish({ clean: true });
  for (const content of Object.values(ctx.emu.memories(m.storeId))) expect(content).not.toContain(SECRET_BAIT);
  return m;
}

function planted(description: string, rel: string, plant: (abs: string, ctx: Ctx) => Promise<void> | void, says: RegExp): HostileCase {
  return {
    group: 'planted entries',
    description,
    async run(ctx) {
      await agentFlow(ctx, async (m) => {
        await fsp.mkdir(path.dirname(path.join(m.root, rel)), { recursive: true });
        await plant(path.join(m.root, rel), ctx);
      });
    },
    expects: { path: rel, says },
  };
}

const SKIPPED = /skipped|never (opened|followed|synced)|not (synced|a regular)/;

async function withSocket(abs: string): Promise<void> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(abs, resolve));
  // The socket file stays after close only if we unref instead: keep the server open until exit.
  server.unref();
}

function deepChain(base: string, depth: number, seg: string): void {
  let fd = fs.openSync(base, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
  for (let i = 0; i < depth; i++) {
    fs.mkdirSync(`/proc/self/fd/${fd}/${seg}`);
    const next = fs.openSync(`/proc/self/fd/${fd}/${seg}`, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
    fs.closeSync(fd);
    fd = next;
  }
  fs.writeFileSync(`/proc/self/fd/${fd}/leaf.md`, 'deep leaf');
  fs.closeSync(fd);
}

export const agentCases: HostileCase[] = [
  planted('a symlink to an outside file', 'leak.md', (abs, ctx) => fsp.symlink(path.join(ctx.outside, 'secret.md'), abs), SKIPPED),
  planted('a symlink to an outside folder', 'notes', (abs, ctx) => fsp.symlink(ctx.outside, abs), SKIPPED),
  planted("a symlink to /proc/self/environ (the worker's credentials)", 'env.md', (abs) => fsp.symlink('/proc/self/environ', abs), SKIPPED),
  planted('a dangling symlink', 'dangling.md', (abs) => fsp.symlink('/nonexistent/target', abs), SKIPPED),
  planted(
    'a symlink loop',
    'loop.md',
    async (abs) => {
      await fsp.symlink(`${abs}.2`, abs);
      await fsp.symlink(abs, `${abs}.2`);
    },
    SKIPPED,
  ),
  planted('a FIFO at a new path', 'pipe.md', (abs) => void execFileSync('mkfifo', [abs]), SKIPPED),
  planted('a socket', 'agent.sock', (abs) => withSocket(abs), SKIPPED),
  planted('a character device', 'null.md', (abs) => void execFileSync('mknod', [abs, 'c', '1', '3']), SKIPPED),
  {
    group: 'planted entries',
    description: 'a memory file replaced by a symlink to an outside file, then edited in the Console',
    async run(ctx) {
      await agentFlow(ctx, async (m) => {
        await fsp.rm(path.join(m.root, 'a.md'));
        await fsp.symlink(path.join(ctx.outside, 'secret.md'), path.join(m.root, 'a.md'));
      });
    },
    expects: { path: 'a.md', says: SKIPPED },
  },
  {
    group: 'planted entries',
    description: 'a memory folder replaced by a symlink to an outside folder, then edited in the Console',
    async run(ctx) {
      await agentFlow(ctx, async (m) => {
        await fsp.rm(path.join(m.root, 'sub'), { recursive: true });
        await fsp.symlink(ctx.outside, path.join(m.root, 'sub'));
      });
    },
    expects: { path: 'sub', says: SKIPPED },
  },
  {
    group: 'planted entries',
    description: 'a memory file replaced by a FIFO',
    async run(ctx) {
      await agentFlow(ctx, async (m) => {
        await fsp.rm(path.join(m.root, 'a.md'));
        execFileSync('mkfifo', [path.join(m.root, 'a.md')]);
      });
    },
    expects: { path: 'a.md', says: SKIPPED },
  },
  {
    group: 'planted entries',
    description: 'the mount root itself swapped for a symlink to an outside folder',
    async run(ctx) {
      const m = await ctx.mount();
      await ctx.armed();
      await fsp.rename(m.root, `${m.root}.moved`);
      await fsp.symlink(ctx.outside, m.root);
      ctx.emu.putMemory(m.storeId, '/a.md', 'console edit');
      await m.loop.syncNow();
      await m.loop.finish({ clean: true });
      expect(fs.lstatSync(m.root).isSymbolicLink()).toBe(true);
    },
    expects: { path: 'store-', says: /no longer a real folder|left as found|not synced/ },
  },
  {
    group: 'huge and binary files',
    description: 'a 300 kB file',
    async run(ctx) {
      await agentFlow(ctx, (m) => fsp.writeFile(path.join(m.root, 'big.md'), 'b'.repeat(300_000)));
    },
    expects: { path: 'big.md', says: /limit/ },
  },
  {
    group: 'huge and binary files',
    description: 'a 2 GB sparse file (never read)',
    async run(ctx) {
      await agentFlow(ctx, async (m) => {
        const fh = await fsp.open(path.join(m.root, 'sparse.md'), 'w');
        await fh.truncate(2 * 1024 ** 3);
        await fh.close();
      });
    },
    expects: { path: 'sparse.md', says: /limit/ },
  },
  {
    group: 'huge and binary files',
    description: 'a binary file',
    async run(ctx) {
      await agentFlow(ctx, (m) => fsp.writeFile(path.join(m.root, 'blob.md'), Buffer.from([0, 0xff, 0xfe, 0x80, 1, 2, 3])));
    },
    expects: { path: 'blob.md', says: /UTF-8/ },
  },
  {
    group: 'huge and binary files',
    description: 'a file named with an invisible format character',
    async run(ctx) {
      await agentFlow(ctx, (m) => fsp.writeFile(path.join(m.root, 'exe\u202Etxt.md'), 'x'));
    },
    expects: { path: 'exe\u202Etxt.md', says: /U\+202E.*rename it/ },
  },
  ...markerCases(),
  {
    group: 'deep trees',
    description: 'a tree 40 folders deep',
    async run(ctx) {
      const m = await agentFlow(ctx, async (mm) => deepChain(mm.root, 40, 'd'));
      expect(fs.existsSync(m.root)).toBe(true);
    },
    expects: { path: 'd/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d', says: /closer to the store root/ },
  },
  {
    group: 'deep trees',
    description: 'a tree deeper than PATH_MAX',
    async run(ctx) {
      const m = await agentFlow(ctx, async (mm) => deepChain(mm.root, 400, 'x'.repeat(12)));
      // What lies below cannot be synced or copied out: the folder is left in place, not lost.
      expect(fs.existsSync(m.root)).toBe(true);
    },
    expects: { path: 'xxxxxxxxxxxx/xxxxxxxxxxxx', says: /closer to the store root|left in place/ },
  },
  {
    group: 'permission changes',
    description: 'a folder made unreadable and unwritable (chmod 000)',
    async run(ctx) {
      await agentFlow(ctx, async (m) => {
        await fsp.writeFile(path.join(m.root, 'sub', 'new.md'), 'new');
        await fsp.chmod(path.join(m.root, 'sub'), 0o000);
        await fsp.writeFile(path.join(m.root, 'flag.md'), 'written after the chmod');
      });
    },
    expects: { path: 'flag.md', says: /uploaded|synced|created/ },
  },
  {
    group: 'permission changes',
    description: 'a memory file made read-only (chmod 444), then edited in the Console',
    async run(ctx) {
      const m = await agentFlow(ctx, async (mm) => {
        await fsp.chmod(path.join(mm.root, 'a.md'), 0o444);
        await fsp.writeFile(path.join(mm.root, 'flag.md'), 'x');
      });
      expect(fs.existsSync(m.root)).toBe(false);
    },
    expects: { path: 'flag.md', says: /uploaded|synced|created/ },
  },
  {
    group: 'permission changes',
    description: 'the mount root made read-only (chmod 555)',
    async run(ctx) {
      await agentFlow(ctx, async (m) => {
        await fsp.writeFile(path.join(m.root, 'flag.md'), 'x');
        await fsp.chmod(m.root, 0o555);
      });
    },
    expects: { path: 'flag.md', says: /uploaded|synced|created/ },
  },
];

function markerCases(): HostileCase[] {
  const tamper = (description: string, act: (marker: string, ctx: Ctx) => Promise<void>): HostileCase => ({
    group: 'marker tampering',
    description,
    async run(ctx) {
      const m = await ctx.mount();
      await ctx.armed();
      await fsp.writeFile(path.join(m.root, 'agent-file.md'), 'agent edit');
      await act(path.join(m.root, '.anthropic-memory-store'), ctx);
      await m.loop.syncNow();
      await m.loop.finish({ clean: true });
      expect(fs.existsSync(path.join(m.root, 'agent-file.md'))).toBe(true);
      expect(ctx.emu.memories(m.storeId)['/agent-file.md']).toBeUndefined();
    },
    expects: { path: 'store-', says: /marker/ },
  });
  return [
    tamper('the marker deleted', (p) => fsp.rm(p)),
    tamper('the marker rewritten for another store', (p) => fsp.writeFile(p, 'version 1\nmemstore_someone_else')),
    tamper('the marker with a trailing newline', async (p) => fsp.appendFile(p, '\n')),
    tamper('the marker replaced by a symlink to an outside file', async (p, ctx) => {
      await fsp.rm(p);
      await fsp.symlink(path.join(ctx.outside, 'secret.md'), p);
    }),
    tamper('the marker replaced by a folder', async (p) => {
      await fsp.rm(p);
      await fsp.mkdir(p);
    }),
    tamper('the marker replaced by a FIFO', async (p) => {
      await fsp.rm(p);
      execFileSync('mkfifo', [p]);
    }),
  ];
}
