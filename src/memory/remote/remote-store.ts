import { setMaxListeners } from 'node:events';
import type Anthropic from '@anthropic-ai/sdk';
import type { BetaManagedAgentsMemory } from '@anthropic-ai/sdk/resources/beta/memory-stores/memories';
import pLimit, { type LimitFunction } from 'p-limit';
import { withPageFetch } from '../../api/page-fetch.js';
import { takeLentBody } from '../../api/page-response.js';
import { errorTypeOf, isApiError, isConnectionError, isUserAbortError, statusOf } from '../../api/classify.js';
import { RemoteLimitError } from '../../errors.js';
import { abortReason, isAbortError, linkAbort } from '../../internal/abort.js';
import { API_LIMITS, MEMORY_DEFAULTS } from '../../internal/defaults.js';
import { readBodyCapped, readBodyToPage } from './bounded-body.js';
import { PageBytes, PageContent } from './page-bytes.js';
import type { PageGate } from './page-budget.js';
import { splitPage } from './page-split.js';
import { MAX_MEMORY_BYTES } from '../disk/local-dir.js';
import { PATH_CONFLICT_REASON_PREFIX } from '../rules/path-conflict.js';

/**
 * The memory endpoints of one store, as the sync needs them, with a per-request retry policy:
 * - reads (list, retrieve) let the client retry transient failures (they are idempotent);
 * - writes (create, update, delete) are sent once (`maxRetries: 0`): a deterministic 409 costs one
 *   request, and a write whose response was lost is settled by the next listing (sent shas), not by
 *   blindly re-sending it.
 * Every call carries the caller's signal, so aborting really cancels the request in flight.
 * Writes go through the same transport as listing pages (undici's `request()` on the app's
 * dispatcher; a client with a `fetch` of its own keeps it), and a write's answer is read within
 * what a memory can weigh, so a runaway answer costs a bounded read (and counts as a lost response,
 * settled by the next listing).
 * Write failures come back as values (never thrown), classified for the planner's `applyOutcome`;
 * only an abort is thrown.
 *
 * Reads are bounded by our side, whatever the server answers: a listing stops with a
 * {@link RemoteLimitError} past the store's memory cap (plus slack), past the pages that many
 * memories can fill, at a cursor seen before, at a duplicate path or a malformed page; each body
 * is read up to what its content can weigh and no further; a memory whose content is over the
 * size limit is refused (reported through `onRefused`), never kept.
 */

/** Most memories a store may hold. */
export const MAX_MEMORIES_PER_STORE = API_LIMITS.memoriesPerStore;
/** Memories a listing may return before it is cut off: the cap plus 10 % slack. */
export const MAX_LISTED_MEMORIES = MAX_MEMORIES_PER_STORE + MAX_MEMORIES_PER_STORE / 10;
/**
 * Most bytes one memory can weigh in a JSON answer: its content with every byte escaped as
 * `\u00XX`, its path escaped the same way, and the other fields.
 */
const MAX_MEMORY_JSON_BYTES = 6 * MAX_MEMORY_BYTES + 6 * 1024 + 2048;
/** Most bytes the answer to a write may weigh: one memory, and room for the error body of a refusal. */
const MAX_WRITE_ANSWER_BYTES = MAX_MEMORY_JSON_BYTES + 64 * 1024;
/** Same for the basic view, where content is null. */
const MAX_BASIC_MEMORY_JSON_BYTES = 6 * 1024 + 2048;
const SHA256_HEX = /^[0-9a-f]{64}$/u;

/** One memory as listed; `path` is the server path (leading `/`). */
export interface RemoteMemory {
  id: string;
  path: string;
  sha: string;
  sizeBytes: number;
  updatedAt: string;
}

export interface RemoteMemoryWithContent extends RemoteMemory {
  content: string;
}

/**
 * A memory of a full listing: its content as the page carried it (read it once, or drop it; see
 * page-bytes.ts), or as a string when the page could not be cut.
 */
export interface ListedMemoryWithContent extends RemoteMemory {
  content: string | PageContent;
}

/** Let a listed content go without reading it (a memory skipped). */
export function dropContent(content: string | PageContent | undefined): void {
  if (content instanceof PageContent) content.drop();
}

export type RemoteFailure = 'precondition' | 'not-found' | 'refused' | 'transient' | 'lost-response';

export type RemoteWriteResult =
  | { ok: true; id: string; sha: string; updatedAt: string }
  | { ok: false; failure: RemoteFailure; reason: string; status: number | undefined };

export type RemoteDeleteResult = { ok: true } | { ok: false; failure: RemoteFailure; reason: string; status: number | undefined };

export interface RemoteStoreOptions {
  /** Retries the client may spend on a listing or retrieve page (transient failures only). Default 2. */
  readRetries?: number;
  /** Per-request timeout in ms (time to response headers). Default 60 000. */
  requestTimeoutMs?: number;
}

/** Page sizes the API caps: 100 in the basic view, 20 in the full view. */
export const BASIC_PAGE_LIMIT = 100;
export const FULL_PAGE_LIMIT = 20;

/**
 * The copies of a client made for its writes and its listing pages, by use. A copy costs a whole
 * client (every resource object of the SDK) to build: it is made once per client and use (a
 * listing view with its timeout, or writes), and shared by every store reached through that
 * client, not made again per store. Held as long as the client is.
 */
const transports = new WeakMap<Anthropic, Map<string, Anthropic>>();

function transportOf(client: Anthropic, use: string, make: () => Anthropic): Anthropic {
  let byUse = transports.get(client);
  if (byUse === undefined) {
    byUse = new Map();
    transports.set(client, byUse);
  }
  let copy = byUse.get(use);
  if (copy === undefined) {
    copy = make();
    byUse.set(use, copy);
  }
  return copy;
}

const lendPage = (n: number): PageBytes => PageBytes.lend(n);

export class RemoteStore {
  readonly storeId: string;
  readonly #client: Anthropic;
  readonly #readRetries: number;
  readonly #timeoutMs: number;

  constructor(client: Anthropic, storeId: string, opts: RemoteStoreOptions = {}) {
    this.#client = client;
    this.storeId = storeId;
    this.#readRetries = opts.readRetries ?? 2;
    this.#timeoutMs = opts.requestTimeoutMs ?? MEMORY_DEFAULTS.requestTimeoutMs;
  }

  /** The client the writes go through: the page transport without a lender (answers read whole, bounded). */
  get #writer(): Anthropic {
    const timeoutMs = this.#timeoutMs;
    return transportOf(this.#client, `write:${timeoutMs}`, () =>
      withPageFetch(this.#client, MAX_WRITE_ANSWER_BYTES, { stallTimeoutMs: timeoutMs }),
    );
  }

  /** The client a listing page of `view` is asked through: its body lands in a pooled page buffer. */
  #lister(view: 'basic' | 'full'): Anthropic {
    const timeoutMs = this.#timeoutMs;
    return transportOf(this.#client, `${view}:${timeoutMs}`, () =>
      withPageFetch(this.#client, pageCapOf(view), { lend: lendPage, stallTimeoutMs: timeoutMs }),
    );
  }

  /** Every memory in the store, basic view: one request per 100 memories. */
  async listBasic(signal?: AbortSignal): Promise<RemoteMemory[]> {
    const out: RemoteMemory[] = [];
    await this.#eachPage('basic', BASIC_PAGE_LIMIT, signal, (m) => out.push(toRemote(m)));
    return out;
  }

  /**
   * Every memory with its content, full view: one request per 20 memories. A memory whose content
   * is over the size limit goes to `onRefused` (with the reason) instead of `onMemory`.
   *
   * With `parallel` above 1 the listing is split by top-level folder: the store is listed at depth 1
   * (its top-level memories, and one `memory_prefix` item per top-level folder), and each folder is
   * paged on its own cursor as soon as it is named, at most `parallel` pages in flight (or as many
   * as `pages`, a limiter the caller may share between stores, lets run). The first page of the
   * whole store is asked for at the same time: when it is the only page (no `next_page`), it is
   * the listing, and the split is not used (a small store costs one round trip); otherwise it is
   * dropped unread and the split goes on. Every bound
   * holds across the parts as for one cursor: one memory count and one set of paths (a path listed
   * by two parts is a duplicate), one page budget (the pages a full store can fill, plus one per
   * folder), cursors never repeated within a part; a folder item that is not one top-level folder
   * is refused as malformed, one named twice as a duplicate. The first part to fail stops the others.
   * With `gate`, every page waits for its guessed weight to fit the gate's bytes before it is asked
   * for, and holds its body's weight until each of its items was handed on.
   */
  async listFull(
    signal: AbortSignal | undefined,
    onMemory: (m: ListedMemoryWithContent) => Promise<void> | void,
    onRefused?: (m: RemoteMemory, reason: string) => void,
    opts: { parallel?: number; pages?: LimitFunction; gate?: PageGate } = {},
  ): Promise<void> {
    const onItem = (m: BetaManagedAgentsMemory, cut: PageContent | undefined): Promise<void> | void =>
      handOnListed(m, cut, onMemory, onRefused);
    const budget = newBudget(FULL_PAGE_LIMIT);
    const parallel = Math.floor(opts.parallel ?? 1);
    const gate = opts.gate;
    if (parallel <= 1) {
      await this.#eachPage('full', FULL_PAGE_LIMIT, signal, onItem, { budget, gate });
      return;
    }
    await this.#listSplit('full', opts.pages ?? pLimit(parallel), budget, signal, onItem, gate);
  }

  /**
   * Every memory in the store, basic view (no content), split by top-level folder as
   * {@link listFull} is, 100 memories a page. `decide`, when given, sees the shas of the first page
   * of the whole store as soon as it arrives: when it answers false the listing stops there, no
   * memory was handed on, and this resolves false (the caller lists another way). A memory whose
   * listed size (or a content the basic view should not carry) is over the size limit goes to
   * `onRefused`, as in {@link listFull}.
   */
  async listBasicSplit(
    signal: AbortSignal | undefined,
    onMemory: (m: RemoteMemory) => Promise<void> | void,
    onRefused: (m: RemoteMemory, reason: string) => void,
    opts: { pages: LimitFunction; decide?: (firstPageShas: string[]) => boolean; gate?: PageGate },
  ): Promise<boolean> {
    const onItem = (m: BetaManagedAgentsMemory): Promise<void> | void => {
      const tooLarge = oversizeReason(m) ?? listedOversizeReason(m);
      if (tooLarge !== undefined) return onRefused(toRemote(m), tooLarge);
      return onMemory(toRemote(m));
    };
    return this.#listSplit('basic', opts.pages, newBudget(BASIC_PAGE_LIMIT), signal, onItem, opts.gate, opts.decide);
  }

  /**
   * The memories of one top-level folder (`/name/`), or the top-level memories only (`/`), full
   * view, on one cursor. Items as {@link listFull} hands them on; with `gate`, its pages are bounded
   * in bytes as {@link listFull}'s are.
   */
  async listPartFull(
    prefix: string,
    signal: AbortSignal | undefined,
    onMemory: (m: ListedMemoryWithContent) => Promise<void> | void,
    onRefused?: (m: RemoteMemory, reason: string) => void,
    gate?: PageGate,
  ): Promise<void> {
    const part = prefix === '/' ? ({ prefix, depth: 1 } as const) : { prefix };
    await this.#eachPage('full', FULL_PAGE_LIMIT, signal, (m, cut) => handOnListed(m, cut, onMemory, onRefused), {
      budget: newBudget(FULL_PAGE_LIMIT),
      ...part,
      gate,
    });
  }

  async #listSplit(
    view: 'basic' | 'full',
    limit: LimitFunction,
    budget: ListingBudget,
    signal: AbortSignal | undefined,
    onItem: (m: BetaManagedAgentsMemory, cut: PageContent | undefined) => Promise<void> | void,
    gate: PageGate | undefined,
    decide?: (firstPageShas: string[]) => boolean,
  ): Promise<boolean> {
    const pageLimit = view === 'full' ? FULL_PAGE_LIMIT : BASIC_PAGE_LIMIT;
    const ctrl = new AbortController();
    // Every request in flight, and its body read, listens on this one signal.
    setMaxListeners(10_000, ctrl.signal);
    const detach = linkAbort(signal, ctrl);
    const parts: Promise<void>[] = [];
    let failure: { reason: unknown } | undefined;
    const fail = (e: unknown): void => {
      failure ??= { reason: e };
      ctrl.abort(e);
    };
    const prefixes = new Set<string>();
    const onPrefix = (prefix: unknown): void => {
      const what = `the folder-split listing of memory store ${this.storeId}`;
      if (typeof prefix !== 'string' || !TOP_LEVEL_PREFIX.test(prefix)) {
        throw malformed(this.storeId, `${what}: a memory_prefix item whose path is not one top-level folder ending in /`);
      }
      if (prefixes.has(prefix)) throw this.#limit('duplicate-path', `${what} names the folder ${JSON.stringify(prefix)} twice`);
      if (prefixes.size >= MAX_LISTED_MEMORIES) {
        throw this.#limit(
          'memory-count',
          `${what} named more than ${MAX_LISTED_MEMORIES} folders (a store holds at most ${MAX_MEMORIES_PER_STORE} memories); stopped reading it`,
        );
      }
      prefixes.add(prefix);
      // A folder's last page may be a partial one: each folder may take one page more.
      budget.maxPages++;
      const part = limit(() =>
        failure === undefined ? this.#eachPage(view, pageLimit, ctrl.signal, onItem, { budget, prefix, gate }) : undefined,
      );
      parts.push(part.catch(fail));
    };
    const depthFirst = { prefix: '/', depth: 1 } as const;
    try {
      // Both first pages at once, and the depth-1 cursor after them, in one slot of the limiter and
      // under one grant of the gate taken before either is asked for. Bytes are never held while
      // waiting for a slot or for the other first page: a first page that held its bytes while the
      // other waited for a slot (taken by folders of another store waiting for those bytes) would
      // wait forever.
      const used = await limit(async (): Promise<boolean> => {
        const grant = gate?.guess(pageLimit) ?? 0;
        if (gate !== undefined) await gate.budget.take(2 * grant, ctrl.signal);
        const whole = this.#page(view, pageLimit, {}, undefined, ctrl.signal, gate, grant);
        const top = this.#page(view, pageLimit, depthFirst, undefined, ctrl.signal, gate, grant);
        top.catch(() => {});
        // The depth-1 page when it is not used: its bytes go back to the gate.
        const dropTop = (): Promise<void> =>
          top.then(
            (p) => releasePage(p, gate),
            () => {},
          );
        const wholePage = await whole.catch((e: unknown) => {
          fail(e);
          return undefined;
        });
        if (wholePage !== undefined && decide !== undefined && !decide(shasOf(wholePage.data))) {
          releasePage(wholePage, gate);
          await dropTop();
          return false;
        }
        if (wholePage !== undefined && wholePage.next === undefined) {
          await this.#eachPage(view, pageLimit, ctrl.signal, onItem, { budget, first: wholePage, gate }).catch(fail);
          await dropTop();
        } else if (wholePage !== undefined) {
          const topPage = await top.catch((e: unknown) => {
            fail(e);
            return undefined;
          });
          if (topPage === undefined) {
            releasePage(wholePage, gate);
          } else if (isOneFolder(topPage)) {
            // One folder and nothing beside it: the split would page that folder on a cursor of its
            // own from its start; the whole store's cursor is that same listing, one page ahead.
            releasePage(topPage, gate);
            await this.#eachPage(view, pageLimit, ctrl.signal, onItem, { budget, first: wholePage, gate }).catch(fail);
          } else {
            // More than one page: its items come again from the parts. It counts against the budget.
            budget.pages++;
            releasePage(wholePage, gate);
            await this.#eachPage(view, pageLimit, ctrl.signal, onItem, { budget, ...depthFirst, onPrefix, first: topPage, gate }).catch(
              fail,
            );
          }
        } else {
          await dropTop();
        }
        return true;
      }).catch((e: unknown) => {
        fail(e);
        return true;
      });
      if (!used) return false;
      // Parts started later are pushed while earlier ones run: wait until none is left.
      for (let i = 0; i < parts.length; i++) await parts[i];
    } finally {
      detach();
    }
    if (failure !== undefined) {
      // The caller's abort, rather than the error it caused in the parts.
      if (signal?.aborted) throw abortReason(signal);
      throw failure.reason;
    }
    return true;
  }

  /** One memory with its content. Throws (classified by the caller) on failure, and for content over the size limit. */
  async retrieve(id: string, signal?: AbortSignal): Promise<RemoteMemoryWithContent> {
    const res = await this.#client.beta.memoryStores.memories
      .retrieve(id, { memory_store_id: this.storeId, view: 'full' }, { signal, maxRetries: this.#readRetries, timeout: this.#timeoutMs })
      .asResponse();
    const body = await this.#readJson(res, MAX_MEMORY_JSON_BYTES, `memory ${id}`, signal);
    const m = checkMemory(body, this.storeId, `memory ${id}`);
    const tooLarge = oversizeReason(m);
    if (tooLarge !== undefined) {
      throw new RemoteLimitError('body-size', `memory store ${this.storeId}: ${m.path} refused: ${tooLarge}`, { storeId: this.storeId });
    }
    return { ...toRemote(m), content: m.content ?? '' };
  }

  async create(serverPath: string, content: string, signal?: AbortSignal): Promise<RemoteWriteResult> {
    return this.#write(serverPath, signal, () =>
      this.#writer.beta.memoryStores.memories.create(
        this.storeId,
        { path: serverPath, content },
        { signal, maxRetries: 0, timeout: this.#timeoutMs },
      ),
    );
  }

  /** Update the content of `id`, only if the store still holds `expectedSha` (content_sha256 precondition). */
  async update(id: string, serverPath: string, content: string, expectedSha: string, signal?: AbortSignal): Promise<RemoteWriteResult> {
    return this.#write(serverPath, signal, () =>
      this.#writer.beta.memoryStores.memories.update(
        id,
        {
          memory_store_id: this.storeId,
          content,
          precondition: { type: 'content_sha256', content_sha256: expectedSha },
        },
        { signal, maxRetries: 0, timeout: this.#timeoutMs },
      ),
    );
  }

  /** Delete `id`, only if the store still holds `expectedSha`. A 404 counts as done. */
  async delete(id: string, expectedSha: string, signal?: AbortSignal): Promise<RemoteDeleteResult> {
    try {
      await this.#writer.beta.memoryStores.memories.delete(
        id,
        { memory_store_id: this.storeId, expected_content_sha256: expectedSha },
        { signal, maxRetries: 0, timeout: this.#timeoutMs },
      );
      return { ok: true };
    } catch (e) {
      rethrowAbort(e, signal);
      if (statusOf(e) === 404) return { ok: true };
      return { ok: false, ...classifyWriteFailure(e, undefined) };
    }
  }

  async #write(
    serverPath: string,
    signal: AbortSignal | undefined,
    call: () => { asResponse(): Promise<Response> },
  ): Promise<RemoteWriteResult> {
    try {
      const res = await call().asResponse();
      const m = (await this.#readJson(
        res,
        MAX_WRITE_ANSWER_BYTES,
        `the answer to a write of ${serverPath}`,
        signal,
      )) as BetaManagedAgentsMemory;
      return { ok: true, id: m.id, sha: m.content_sha256, updatedAt: m.updated_at };
    } catch (e) {
      rethrowAbort(e, signal);
      return { ok: false, ...classifyWriteFailure(e, serverPath) };
    }
  }

  /**
   * One listing page (`part` names the folder and depth), read within its size bound and checked.
   * With `gate`, asked for once its guessed weight is granted (or at once with `granted`, bytes
   * the caller already took for it); the page then holds its body's length (`held`), which the
   * caller gives back once the page is used up.
   */
  async #page(
    view: 'basic' | 'full',
    limit: number,
    part: { prefix?: string; depth?: 1 },
    cursor: string | undefined,
    signal: AbortSignal | undefined,
    gate?: PageGate,
    granted?: number,
  ): Promise<ListingPage> {
    const pageCap = pageCapOf(view, limit);
    const what = this.#what(view, part.prefix);
    const query = {
      ...(part.prefix !== undefined ? { path_prefix: part.prefix } : {}),
      ...(part.depth !== undefined ? { depth: part.depth } : {}),
    };
    let held = 0;
    if (gate !== undefined && granted !== undefined) {
      held = granted;
    } else if (gate !== undefined) {
      const guess = gate.guess(limit);
      await gate.budget.take(guess, signal);
      held = guess;
    }
    try {
      const res = await this.#lister(view)
        .beta.memoryStores.memories.list(
          this.storeId,
          { view, limit, ...query, ...(cursor !== undefined ? { page: cursor } : {}) },
          { signal, maxRetries: this.#readRetries, timeout: this.#timeoutMs },
        )
        .asResponse();
      const bytes = await this.#pageBytes(res, pageCap, what, signal);
      // A page of contents is parsed item by item (see splitPage), all before any is handed on: a
      // malformed page still fails whole. Its contents are cut out and stay in the page's bytes
      // until they are written (see page-bytes.ts).
      const page = view === 'full' ? this.#fullPage(bytes, what) : this.#basicPage(bytes, what);
      const length = bytes.length;
      if (gate !== undefined) {
        gate.observe(length, page.data.length);
        gate.budget.resize(held, length);
        held = length;
      }
      page.held = held;
      return page;
    } catch (e) {
      if (held > 0) gate?.budget.give(held);
      throw e;
    }
  }

  /**
   * The body of a listing page in a pooled buffer: as the page fetch read it, or read now (a client
   * with a transport of its own), within `cap` bytes either way.
   */
  async #pageBytes(res: Response, cap: number, what: string, signal: AbortSignal | undefined): Promise<PageBytes> {
    const lent = takeLentBody(res);
    if (lent?.kind === 'over-cap') {
      const says = lent.declared ? `declares ${lent.bytes} bytes` : `passed ${lent.bytes} bytes`;
      throw this.#limit('body-size', `${what}: the answer ${says}, over the ${cap} bytes it can weigh; not read further`);
    }
    if (lent !== undefined) {
      if (lent.body.bytes.length <= cap) return lent.body as PageBytes;
      lent.body.done();
      throw this.#limit('body-size', `${what}: the answer passed ${cap} bytes, more than it can weigh; stopped reading it`);
    }
    return readBodyToPage(res, { capBytes: cap, timeoutMs: this.#timeoutMs, ...(signal ? { signal } : {}) }).catch((e: unknown) => {
      if (e instanceof RemoteLimitError) throw this.#limit(e.limit, `${what}: ${e.message}`);
      throw e;
    });
  }

  /** A basic listing page, parsed whole; its buffer goes back at once. */
  #basicPage(bytes: PageBytes, what: string): ListingPage {
    try {
      return checkPage(this.#parse(bytes.bytes.toString('utf8'), what), this.storeId, what);
    } finally {
      bytes.done();
    }
  }

  /** A full listing page, its items parsed one by one with their contents cut out (they hold its buffer). */
  #fullPage(bytes: PageBytes, what: string): ListingPage {
    let page: ListingPage;
    let cuts: Array<readonly [number, number] | undefined> | undefined;
    try {
      const text = bytes.bytes;
      const split = splitPage(text, { cutContents: true });
      const rest = split !== undefined ? this.#parse(split.rest, what) : undefined;
      const emptied = (rest as { data?: unknown } | undefined)?.data;
      if (split !== undefined && Array.isArray(emptied) && emptied.length === 0) {
        page = checkPage(rest, this.storeId, what);
        page.data = split.items.map((t) => this.#parse(t.text, what));
        cuts = split.items.map((t, i) =>
          t.content !== undefined && (page.data[i] as { content?: unknown }).content === '' ? t.content : undefined,
        );
      } else {
        page = checkPage(this.#parse(text.toString('utf8'), what), this.storeId, what);
      }
    } catch (e) {
      bytes.done();
      throw e;
    }
    if (cuts?.some((c) => c !== undefined) === true) {
      page.contents = cuts.map((c) => (c !== undefined ? bytes.content(c[0], c[1]) : undefined));
      page.bytes = bytes;
    } else {
      bytes.done();
    }
    return page;
  }

  #what(view: 'basic' | 'full', prefix: string | undefined): string {
    const inFolder = prefix !== undefined && prefix !== '/' ? ` (folder ${prefix})` : '';
    return `the ${view} listing of memory store ${this.storeId}${inFolder}`;
  }

  /**
   * Every page of one cursor, each item checked against the shared `budget` and handed to
   * `onItem`. `first`, when given, is its first page, already asked for. The next page is asked
   * for as soon as its cursor passed the checks, before this page's items are handed on, so the
   * round trip overlaps the caller's work on them: a cursor holds at most two pages, one in
   * flight. A failure aborts the page in flight.
   */
  async #eachPage(
    view: 'basic' | 'full',
    limit: number,
    signal: AbortSignal | undefined,
    onItem: (m: BetaManagedAgentsMemory, cut: PageContent | undefined) => unknown,
    part: {
      budget?: ListingBudget;
      prefix?: string;
      depth?: 1;
      onPrefix?: (path: unknown) => void;
      first?: ListingPage | Promise<ListingPage>;
      gate?: PageGate | undefined;
    } = {},
  ): Promise<void> {
    const gate = part.gate;
    const budget = part.budget ?? newBudget(limit);
    const cursors = new Set<string>();
    const what = this.#what(view, part.prefix);
    const ctrl = new AbortController();
    // Each page's request leaves an abort listener on this signal until its body is collected (the
    // client's clean-up for a body read by hand), so a long cursor holds many at once: a bounded
    // number, never a leak worth Node's warning.
    setMaxListeners(10_000, ctrl.signal);
    const detach = linkAbort(signal, ctrl);
    let ahead: ListingPage | Promise<ListingPage> | undefined = part.first;
    /** The page being handed on: its bytes in the gate, and its contents not handed on yet. */
    let current: ListingPage | undefined;
    try {
      for (let pages = 1; ; pages++) {
        budget.pages++;
        current = await (ahead ?? this.#page(view, limit, part, undefined, ctrl.signal, gate));
        const { data, next, contents } = current;
        ahead = undefined;
        if (next !== undefined) {
          if (cursors.has(next))
            throw this.#limit(
              'repeated-cursor',
              `${what} returned a next_page cursor it had returned before (page ${pages}); stopped reading it`,
            );
          if (budget.pages >= budget.maxPages) {
            throw this.#limit(
              'page-count',
              `${what} kept paging past ${budget.maxPages} pages (${budget.memories} memories so far); stopped reading it`,
            );
          }
          cursors.add(next);
          const asked = this.#page(view, limit, part, next, ctrl.signal, gate);
          // Awaited at the next turn; a rejection meanwhile is not an unhandled one.
          asked.catch(() => {});
          ahead = asked;
        }
        for (let i = 0; i < data.length; i++) {
          const raw = data[i];
          const cut = contents?.[i];
          // Each item is dropped from the page once handed on: a page waiting for the writes to catch
          // up holds only the contents not written yet.
          data[i] = undefined;
          if (contents !== undefined) contents[i] = undefined;
          const type = typeof raw === 'object' && raw !== null ? (raw as { type?: unknown }).type : undefined;
          if (type === 'memory_prefix' && part.onPrefix !== undefined) {
            cut?.drop();
            part.onPrefix((raw as { path?: unknown }).path);
            continue;
          }
          if (typeof raw === 'object' && raw !== null && type !== 'memory') {
            cut?.drop();
            continue;
          }
          let item: BetaManagedAgentsMemory;
          try {
            item = checkMemory(raw, this.storeId, what);
          } catch (e) {
            cut?.drop();
            throw e;
          }
          if (++budget.memories > MAX_LISTED_MEMORIES) {
            throw this.#limit(
              'memory-count',
              `${what} passed ${MAX_LISTED_MEMORIES} memories (a store holds at most ${MAX_MEMORIES_PER_STORE}); stopped reading it`,
            );
          }
          if (budget.paths.has(item.path)) {
            throw this.#limit(
              'duplicate-path',
              `${what} lists ${JSON.stringify(item.path)} twice; a path names one memory, so the listing cannot be trusted`,
            );
          }
          budget.paths.add(item.path);
          await onItem(item, cut);
        }
        const used = current;
        current = undefined;
        releasePage(used, gate);
        if (ahead === undefined) return;
      }
    } catch (e) {
      ctrl.abort(e);
      if (current !== undefined) releasePage(current, gate);
      // The page asked ahead gives its bytes back whether it arrives or fails.
      if (ahead !== undefined)
        void Promise.resolve(ahead).then(
          (p) => releasePage(p, gate),
          () => {},
        );
      throw e;
    } finally {
      detach();
    }
  }

  async #readJson(res: Response, cap: number, what: string, signal: AbortSignal | undefined): Promise<unknown> {
    return this.#parse(await this.#readText(res, cap, what, signal), what);
  }

  async #readText(res: Response, cap: number, what: string, signal: AbortSignal | undefined): Promise<string> {
    return readBodyCapped(res, { capBytes: cap, timeoutMs: this.#timeoutMs, ...(signal ? { signal } : {}) }).catch((e: unknown) => {
      if (e instanceof RemoteLimitError) throw this.#limit(e.limit, `${what}: ${e.message}`);
      throw e;
    });
  }

  #parse(text: string, what: string): unknown {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw this.#limit('malformed', `${what} is not valid JSON (${text.length} bytes)`);
    }
  }

  #limit(limit: ConstructorParameters<typeof RemoteLimitError>[0], detail: string): RemoteLimitError {
    return new RemoteLimitError(
      limit,
      `${detail}. The server's answer broke a documented bound; check that the client's base URL points at the Anthropic API ` +
        '(or a faithful proxy) and retry later. Nothing was written from it.',
      { storeId: this.storeId },
    );
  }
}

/** What one listing may still spend, shared by the parts of a folder-split listing. */
interface ListingBudget {
  memories: number;
  pages: number;
  maxPages: number;
  /** Every path listed so far: a path listed twice, by one part or two, is refused. */
  paths: Set<string>;
}

/** The most bytes a listing page of `limit` items (the view's page size by default) may weigh. */
function pageCapOf(view: 'basic' | 'full', limit = view === 'full' ? FULL_PAGE_LIMIT : BASIC_PAGE_LIMIT): number {
  return limit * (view === 'full' ? MAX_MEMORY_JSON_BYTES : MAX_BASIC_MEMORY_JSON_BYTES) + 64 * 1024;
}

/** The budget of a listing of `limit` items per page: the pages a full store can fill, twice, plus 10. */
function newBudget(limit: number): ListingBudget {
  return { memories: 0, pages: 0, maxPages: Math.ceil(MAX_LISTED_MEMORIES / limit) * 2 + 10, paths: new Set() };
}

/**
 * One listing page as checked: its items (not checked yet), its next cursor, and the bytes it holds
 * in the gate; for a page whose contents were cut, the content of each item (by index) and the
 * page's buffer.
 */
interface ListingPage {
  data: unknown[];
  next: string | undefined;
  held: number;
  contents?: Array<PageContent | undefined>;
  bytes?: PageBytes;
}

/**
 * A page is done with: its bytes go back to the gate, and its buffer to the pool once the contents
 * handed on are read (those not handed on are dropped). Called once per page.
 */
function releasePage(page: ListingPage, gate: PageGate | undefined): void {
  if (page.held > 0) gate?.budget.give(page.held);
  page.held = 0;
  if (page.contents !== undefined) for (const c of page.contents) c?.drop();
  page.contents = undefined;
  page.bytes?.done();
  page.bytes = undefined;
}

/**
 * Hand one item of a full listing on: a content over the size limit goes to `onRefused` (and its
 * page bytes are let go), any other to `onMemory` with its content as cut from the page, or as the
 * item parsed it.
 */
function handOnListed(
  m: BetaManagedAgentsMemory,
  cut: PageContent | undefined,
  onMemory: (m: ListedMemoryWithContent) => Promise<void> | void,
  onRefused: ((m: RemoteMemory, reason: string) => void) | undefined,
): Promise<void> | void {
  const tooLarge = cut !== undefined ? oversizeBytesReason(cutContentBytes(cut)) : oversizeReason(m);
  if (tooLarge !== undefined) {
    cut?.drop();
    return onRefused?.(toRemote(m), tooLarge);
  }
  return onMemory({ ...toRemote(m), content: cut ?? m.content ?? '' });
}

/** A cut content's size: its token's length bounds it, so only a token over the limit is decoded to measure. */
function cutContentBytes(cut: PageContent): number {
  return cut.rawBytes <= MAX_MEMORY_BYTES ? cut.rawBytes : cut.byteLength();
}

/** True for a depth-1 page that is the whole of its listing and names one folder and nothing else. */
function isOneFolder(page: ListingPage): boolean {
  if (page.next !== undefined || page.data.length !== 1) return false;
  const only = page.data[0];
  if (typeof only !== 'object' || only === null) return false;
  const item = only as { type?: unknown; path?: unknown };
  // A folder item that is not one top-level folder goes the split's way, which refuses it.
  return item.type === 'memory_prefix' && typeof item.path === 'string' && TOP_LEVEL_PREFIX.test(item.path);
}

/** The `content_sha256` of each memory-like item of a raw page (unchecked: a hint only). */
function shasOf(data: unknown[]): string[] {
  const out: string[] = [];
  for (const raw of data) {
    const sha = typeof raw === 'object' && raw !== null ? (raw as { content_sha256?: unknown }).content_sha256 : undefined;
    if (typeof sha === 'string') out.push(sha);
  }
  return out;
}

/** A `memory_prefix` path naming one top-level folder: `/name/`. */
const TOP_LEVEL_PREFIX = /^\/[^/]+\/$/u;

/** The `data` and `next_page` of a listing page, or a `malformed` error. */
function checkPage(body: unknown, storeId: string, what: string): ListingPage {
  const b = body as { data?: unknown; next_page?: unknown } | null;
  if (typeof b !== 'object' || b === null || !Array.isArray(b.data)) {
    throw malformed(storeId, `${what}: a page without a \`data\` array`);
  }
  const next = b.next_page;
  if (next !== undefined && next !== null && typeof next !== 'string')
    throw malformed(storeId, `${what}: next_page is neither a string nor null`);
  return { data: b.data, next: typeof next === 'string' && next !== '' ? next : undefined, held: 0 };
}

/** A memory object with the fields the sync relies on, or a `malformed` error. */
function checkMemory(raw: unknown, storeId: string, what: string): BetaManagedAgentsMemory {
  const m = raw as Partial<Record<keyof BetaManagedAgentsMemory, unknown>> | null;
  const ok =
    typeof m === 'object' &&
    m !== null &&
    m.type === 'memory' &&
    typeof m.id === 'string' &&
    m.id !== '' &&
    typeof m.path === 'string' &&
    typeof m.content_sha256 === 'string' &&
    SHA256_HEX.test(m.content_sha256) &&
    (m.content === null || m.content === undefined || typeof m.content === 'string');
  if (!ok) throw malformed(storeId, `${what}: an item is not a memory object with id, path and content_sha256`);
  return m as BetaManagedAgentsMemory;
}

/** A `malformed` refusal of an answer of memory store `storeId`, saying what to check. */
export function malformed(storeId: string, detail: string): RemoteLimitError {
  return new RemoteLimitError(
    'malformed',
    `${detail}. The server's answer is malformed; check that the client's base URL points at the Anthropic API and retry later. ` +
      'Nothing was written from it.',
    { storeId },
  );
}

/** Why a memory's content is over the size limit, or undefined. */
function oversizeReason(m: BetaManagedAgentsMemory): string | undefined {
  return oversizeBytesReason(typeof m.content === 'string' ? Buffer.byteLength(m.content, 'utf8') : 0);
}

/** Why a content of `bytes` bytes is over the size limit, or undefined. */
function oversizeBytesReason(bytes: number): string | undefined {
  if (bytes > MAX_MEMORY_BYTES) {
    return `its content is ${bytes} bytes, over the ${MAX_MEMORY_BYTES}-byte limit a memory can have; not written (shorten it in the Console)`;
  }
  return undefined;
}

/** Why a memory's listed size is over the size limit, or undefined. */
function listedOversizeReason(m: BetaManagedAgentsMemory): string | undefined {
  const bytes = m.content_size_bytes;
  if (typeof bytes === 'number' && bytes > MAX_MEMORY_BYTES) {
    return `its content is ${bytes} bytes, over the ${MAX_MEMORY_BYTES}-byte limit a memory can have; not written (shorten it in the Console)`;
  }
  return undefined;
}

function toRemote(m: BetaManagedAgentsMemory): RemoteMemory {
  return { id: m.id, path: m.path, sha: m.content_sha256, sizeBytes: m.content_size_bytes, updatedAt: m.updated_at };
}

/** Rethrow aborts (ours or the signal's) so a cancelled sync stops instead of recording failures. */
export function rethrowAbort(e: unknown, signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw abortReason(signal);
  if (isUserAbortError(e) || (isAbortError(e) && !isConnectionError(e))) throw e;
}

/** Map a failed write to what the planner needs to know about it. */
export function classifyWriteFailure(
  e: unknown,
  serverPath: string | undefined,
): { failure: RemoteFailure; reason: string; status: number | undefined } {
  const status = statusOf(e);
  const type = errorTypeOf(e);
  const reason = describe(e, status, type);
  if (isConnectionError(e) || (status === undefined && !isApiError(e))) {
    // The request may or may not have been applied: the next listing settles it.
    return { failure: 'lost-response', reason, status };
  }
  if (status === 409 && type === 'memory_precondition_failed_error') return { failure: 'precondition', reason, status };
  if (status === 409 && type === 'memory_path_conflict_error') {
    // An ancestor or descendant path is taken (a local file where the store has a folder, or the
    // reverse): it will fail again until something changes, so report it once.
    // The refusal lasts only while the conflicting memory is listed: the sync loop retries the
    // path once it is gone (see {@link isPathConflictReason}).
    const conflicting = conflictingPathOf(e);
    if (conflicting !== undefined && conflicting !== serverPath) {
      return { failure: 'refused', reason: `${PATH_CONFLICT_REASON_PREFIX}${conflicting}; ${reason}`, status };
    }
    return { failure: 'transient', reason, status };
  }
  if (status === 404) return { failure: 'not-found', reason, status };
  if (status === 400 || status === 413 || status === 422) return { failure: 'refused', reason, status };
  return { failure: 'transient', reason, status };
}

function conflictingPathOf(e: unknown): string | undefined {
  if (!isApiError(e)) return undefined;
  const body = e.error as { error?: { conflicting_path?: unknown; details?: { conflicting_path?: unknown } } } | undefined;
  const p = body?.error?.conflicting_path ?? body?.error?.details?.conflicting_path;
  return typeof p === 'string' && p !== '' ? p : undefined;
}

function describe(e: unknown, status: number | undefined, type: string | undefined): string {
  if (isApiError(e)) {
    const body = e.error as { error?: { message?: unknown } } | undefined;
    const msg = typeof body?.error?.message === 'string' ? body.error.message : e.message;
    return `${status !== undefined ? `HTTP ${status}` : 'no response'}${type ? ` ${type}` : ''}: ${msg}`;
  }
  return e instanceof Error ? e.message : String(e);
}
