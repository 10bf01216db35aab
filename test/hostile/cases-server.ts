/** Hostile cases where the server's answers are wrong: bad paths, duplicates, endless or malformed listings. */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { expect } from 'vitest';
import type { Ctx, HostileCase } from './hostile-kit.js';

const LISTING = /^GET \/v1\/memory_stores\/[^/]+\/memories$/;

/** Make the emulator list (and serve) the memory at `from` under the path `to`. */
function listAs(ctx: Ctx, renames: Record<string, string>): void {
  const swap = (m: Record<string, unknown>): Record<string, unknown> =>
    typeof m['path'] === 'string' && renames[m['path']] !== undefined ? { ...m, path: renames[m['path']] } : m;
  ctx.emu.faults.add({
    route: /\/memories(\/mem_[^/]+)?$/,
    method: 'GET',
    rewrite: (b) => {
      const body = b as { data?: Array<Record<string, unknown>> } & Record<string, unknown>;
      return Array.isArray(body.data) ? { ...body, data: body.data.map(swap) } : swap(body);
    },
  });
}

/** A cursor the emulator accepts (it decodes `page` before a rewrite runs). */
function cursor(tag: string): string {
  return Buffer.from(JSON.stringify({ after: `/~${tag}` }), 'utf8').toString('base64url');
}

/** Mount a store whose listing shows `hostilePath`, sync twice, finish; the path is never written outside. */
function serverPath(description: string, hostilePath: string, says: RegExp, named = hostilePath): HostileCase {
  return {
    group: 'server paths',
    description,
    async run(ctx) {
      const storeId = await ctx.store({ '/ok.md': 'ok', '/victim.md': 'hostile content' });
      listAs(ctx, { '/victim.md': hostilePath });
      await ctx.armed();
      const m = await ctx.mount({ storeId });
      await m.loop.syncNow();
      await m.loop.syncNow();
      expect(fs.readFileSync(path.join(m.root, 'ok.md'), 'utf8')).toBe('ok');
      await m.loop.finish({ clean: true });
    },
    expects: { path: named, says },
  };
}

const NOT_WRITTEN = /not materialised|never synced/;

export const serverCases: HostileCase[] = [
  serverPath('a ".." segment climbing out of the mount', '/../../outside/secret.md', /\.\.\W+segment/, '../../outside/secret.md'),
  serverPath('a ".." segment in the middle', '/sub/../../escape.md', /\.\.\W+segment/, 'sub/../../escape.md'),
  serverPath('a "." segment', '/a/./b.md', /[^.]\.\W+segment/, 'a/./b.md'),
  serverPath('an empty segment', '/a//b.md', /empty segment/, 'a//b.md'),
  serverPath('a backslash', '/a\\..\\..\\b.md', /backslash/, 'a\\\\..'),
  serverPath('a NUL byte', '/a\u0000b.md', /NUL/, '/a\\u0000b.md'),
  serverPath('a newline', '/a\nb.md', /U\+000A/, 'a\\nb.md'),
  serverPath('a right-to-left override (U+202E)', '/invoice-\u202Egpj.exe', /U\+202E.*rename it/),
  serverPath('a name not in NFC', '/cafe\u0301.md', /NFC.*rename it/),
  serverPath('a 256-byte name', `/${'n'.repeat(256)}`, /256-byte name/, 'nnnnnnnnnn'),
  serverPath('21 segments', `/${Array(21).fill('d').join('/')}`, /21 segments/, 'd/d/d/d'),
  serverPath('the marker path', '/.anthropic-memory-store', /marker/, '.anthropic-memory-store'),
  serverPath('our temp-file prefix', '/.maw-tmp-planted', /temp-file prefix/, '.maw-tmp-planted'),
  {
    group: 'server paths',
    description: 'a path that is a file and, for another memory, a folder',
    async run(ctx) {
      const storeId = await ctx.store({ '/sub': 'a file', '/other/x.md': 'x' });
      listAs(ctx, { '/other/x.md': '/sub/x.md' });
      await ctx.armed();
      const m = await ctx.mount({ storeId });
      await m.loop.syncNow();
      await m.loop.finish({ clean: true });
    },
    // Whichever of the two lands first wins; the other is left out with a warning naming it.
    expects: { path: 'sub', says: /cannot hold/ },
  },
  {
    group: 'stores and duplicate paths',
    description: 'a listing naming one path twice',
    async run(ctx) {
      const storeId = await ctx.store({ '/a.md': 'a', '/b.md': 'b' });
      listAs(ctx, { '/b.md': '/a.md' });
      await ctx.armed();
      await ctx.mount({ storeId });
    },
    expects: { path: '/a.md', says: /twice.*base URL/ },
  },
  {
    group: 'endless or malformed listings',
    description: 'a next_page that never ends, at the mount',
    async run(ctx) {
      const storeId = await ctx.store();
      let n = 0;
      ctx.emu.faults.add({ route: LISTING, rewrite: () => ({ data: [], next_page: cursor(String(n++)) }) });
      await ctx.armed();
      await ctx.mount({ storeId });
    },
    expects: { path: 'memstore_', says: /kept paging.*base URL/ },
  },
  {
    group: 'endless or malformed listings',
    description: 'a cursor repeated forever, during a sync',
    async run(ctx) {
      const m = await ctx.mount();
      await ctx.armed();
      ctx.emu.faults.add({ route: LISTING, rewrite: (b) => ({ ...(b as object), next_page: cursor('same') }) });
      await m.loop.syncNow();
      await m.loop.finish({ clean: true });
    },
    expects: { path: 'memstore_', says: /next_page cursor it had returned before/ },
  },
  {
    group: 'endless or malformed listings',
    description: 'a listing of 3 000 memories (more than a store holds), during a sync',
    async run(ctx) {
      const m = await ctx.mount();
      let page = 0;
      let mostPages = 0;
      ctx.emu.faults.add({
        route: LISTING,
        rewrite: (_b, req) => {
          page = req.query.get('page') === null ? 1 : page + 1;
          mostPages = Math.max(mostPages, page);
          const data = Array.from({ length: 100 }, (_, i) => ({
            type: 'memory',
            id: `mem_fake_${page}_${i}`,
            path: `/p${page}/m${i}.md`,
            content: null,
            content_sha256: 'a'.repeat(64),
            content_size_bytes: 1,
            memory_store_id: m.storeId,
            memory_version_id: 'memver_x',
            created_at: '2026-01-01T00:00:00Z',
            updated_at: '2026-01-01T00:00:00Z',
          }));
          return { data, next_page: page < 30 ? cursor(`p${page}`) : null };
        },
      });
      await ctx.armed();
      await m.loop.syncNow();
      await m.loop.finish({ clean: true });
      expect(mostPages).toBe(23);
    },
    expects: { path: 'memstore_', says: /passed 2200 memories/ },
  },
  {
    group: 'endless or malformed listings',
    description: 'folder listings at the mount that together pass the memory cap',
    async run(ctx) {
      const storeId = await ctx.store();
      const pages = new Map<string, number>();
      ctx.emu.faults.add({
        route: LISTING,
        rewrite: (_b, req) => {
          if (req.query.get('depth') === '1')
            return { data: Array.from({ length: 20 }, (_, i) => ({ type: 'memory_prefix', path: `/d${i}/` })), next_page: null };
          const prefix = req.query.get('path_prefix') ?? '/';
          const page = (pages.get(prefix) ?? 0) + 1;
          pages.set(prefix, page);
          const data = Array.from({ length: 20 }, (_, i) => ({
            type: 'memory',
            id: `mem_fake_${prefix.slice(1, -1)}_${page}_${i}`,
            path: `${prefix}m${page}-${i}.md`,
            content: 'x',
            content_sha256: 'a'.repeat(64),
            content_size_bytes: 1,
            memory_store_id: storeId,
            memory_version_id: 'memver_x',
            created_at: '2026-01-01T00:00:00Z',
            updated_at: '2026-01-01T00:00:00Z',
          }));
          return { data, next_page: page < 10 ? cursor(`${prefix}${page}`) : null };
        },
      });
      await ctx.armed();
      await ctx.mount({ storeId });
    },
    expects: { path: 'memstore_', says: /passed 2200 memories/ },
  },
  {
    group: 'endless or malformed listings',
    description: 'a listing that is not JSON',
    async run(ctx) {
      const storeId = await ctx.store();
      ctx.emu.faults.add({ route: LISTING, rewrite: () => '{"data": [{"type": "memory", "path": "/a' });
      await ctx.armed();
      await ctx.mount({ storeId });
    },
    expects: { path: 'memstore_', says: /not valid JSON/ },
  },
  {
    group: 'endless or malformed listings',
    description: 'a listing whose items lack their sha',
    async run(ctx) {
      const storeId = await ctx.store();
      ctx.emu.faults.add({
        route: LISTING,
        rewrite: () => ({ data: [{ type: 'memory', id: 'mem_1', path: '/a.md', content: 'x' }], next_page: null }),
      });
      await ctx.armed();
      await ctx.mount({ storeId });
    },
    expects: { path: 'memstore_', says: /malformed/ },
  },
  {
    group: 'endless or malformed listings',
    description: 'a listed content with an escape JSON does not have',
    async run(ctx) {
      const storeId = await ctx.store({ '/a.md': 'one', '/b.md': 'two' });
      ctx.emu.faults.add({
        route: LISTING,
        // The page as the server sent it, with one content's text broken: `\q` is no JSON escape.
        rewrite: (b) => JSON.stringify(b).replace('"content":"two"', '"content":"t\\qwo"'),
      });
      await ctx.armed();
      await ctx.mount({ storeId });
    },
    expects: { path: 'memstore_', says: /is not a JSON string.*malformed/ },
  },
  {
    group: 'huge and binary files',
    description: 'a memory whose listed content is over the size limit',
    async run(ctx) {
      const storeId = await ctx.store({ '/ok.md': 'ok', '/big.md': 'small' });
      ctx.emu.faults.add({
        route: LISTING,
        rewrite: (b) => {
          const body = b as { data: Array<Record<string, unknown>> };
          return { ...body, data: body.data.map((m) => (m['path'] === '/big.md' ? { ...m, content: 'z'.repeat(300_000) } : m)) };
        },
      });
      await ctx.armed();
      const m = await ctx.mount({ storeId });
      expect(fs.existsSync(path.join(m.root, 'big.md'))).toBe(false);
      await m.loop.finish({ clean: true });
    },
    expects: { path: '/big.md', says: /over the 102400-byte limit/ },
  },
];

export { NOT_WRITTEN };
