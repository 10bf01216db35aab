/**
 * The egress proxy of one session's sandbox, run by the worker outside it. The sandbox has a
 * network namespace of its own with loopback only; its tool host listens on `127.0.0.1:<port>`
 * there and hands that listener to this proxy (see `egress-listener.ts`), which accepts the
 * sandbox's connections itself: the only way out. The proxy speaks HTTP: `CONNECT host:port` opens a
 * tunnel (HTTPS, git, anything over TCP), and an absolute-URI request (`GET http://host/...`) is
 * forwarded. Each request is judged by the pure policy of `egress-policy.ts`:
 *
 * 1. the name is checked before any lookup (`limited` refuses unlisted names without resolving
 *    them, so nothing leaks through the resolver either);
 * 2. the name is resolved once (every address, as the system resolver answers);
 * 3. the addresses are judged, and only an allowed one is dialled: the proxy connects to that
 *    address itself, never to the name, so an answer that changes after the check changes nothing.
 *
 * A refusal answers `403` with the rule in an `X-Sandbox-Egress-Rule` header and in the body, and
 * closes the connection: bytes the client sent after a refused `CONNECT` are never read as a
 * request. After an allowed `CONNECT`, whatever follows is tunnel data for the checked address.
 */
import * as dns from 'node:dns';
import * as http from 'node:http';
import * as net from 'node:net';
import * as os from 'node:os';
import type { Duplex } from 'node:stream';
import { checkHostName, decideEgress, normalizeHost, type EgressPolicy, type EgressRule } from './egress-policy.js';

/** One refused connection, as the proxy reports it. */
export interface EgressRefusal {
  host: string;
  port: number;
  rule: EgressRule;
  /** The refused address, when the refusal came after the lookup. */
  address?: string;
  reason: string;
}

/** The proxy's I/O, each replaceable in tests. */
export interface EgressIo {
  /** Every address of a name. Default: the system resolver (`dns.lookup`, all answers, in its order). */
  resolve(host: string): Promise<string[]>;
  /** Connect to an address (never a name). Default: `net.connect`. */
  dial(address: string, port: number): Duplex;
  /** The addresses of the worker's host. Default: every interface's, read for each connection. */
  hostAddresses(): string[];
}

/** Bytes each stream of a connection buffers: large, so bulk transfers move in big writes. */
const STREAM_BUFFER_BYTES = 1 << 20;

/** Connections one session's proxy holds at once; past it new ones are closed, so an agent cannot exhaust the worker's descriptors. */
export const EGRESS_MAX_CONNECTIONS = 256;

/** Milliseconds a dial may take before the next address (or a 504). */
const DIAL_TIMEOUT_MS = 15_000;

export const defaultEgressIo: EgressIo = {
  resolve: async (host) => (await dns.promises.lookup(host, { all: true, verbatim: true })).map((a) => a.address),
  dial: (address, port) => net.connect({ host: address, port, highWaterMark: STREAM_BUFFER_BYTES } as net.NetConnectOpts),
  hostAddresses: () =>
    Object.values(os.networkInterfaces())
      .flat()
      .filter((a) => a !== undefined)
      .map((a) => a.address),
};

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authorization',
  'proxy-authenticate',
  'te',
  'trailer',
  'upgrade',
]);

export class EgressProxy {
  readonly #policy: EgressPolicy;
  readonly #io: EgressIo;
  readonly #onRefused: (refusal: EgressRefusal) => void;
  readonly #server: http.Server;
  readonly #open = new Set<Duplex>();
  /** The listener `listen` made, and those adopted from sandboxes. */
  #own: net.Server | undefined;
  readonly #adopted = new Set<net.Server>();
  readonly #maxClients: number;
  #clients = 0;

  constructor(
    policy: EgressPolicy,
    opts: { onRefused: (refusal: EgressRefusal) => void; io?: Partial<EgressIo>; maxConnections?: number },
  ) {
    this.#policy = policy;
    this.#io = { ...defaultEgressIo, ...opts.io };
    this.#onRefused = opts.onRefused;
    // No request timeout: an upload through the proxy may take as long as the tool call does.
    this.#server = http.createServer({ requestTimeout: 0, highWaterMark: STREAM_BUFFER_BYTES });
    // A failure past the checks (a malformed header the upstream request refuses) ends that connection only.
    this.#server.on('request', (req, res) => this.#forward(req, res).catch(() => res.destroy()));
    this.#server.on('connect', (req: http.IncomingMessage, socket: Duplex, head: Buffer) =>
      this.#tunnel(req, socket, head).catch(() => socket.destroy()),
    );
    this.#maxClients = opts.maxConnections ?? EGRESS_MAX_CONNECTIONS;
    this.#server.on('clientError', (_e, socket: Duplex) => socket.destroy());
  }

  /**
   * Listen on a path or address of its own (tests and benchmarks; a session's proxy only adopts its
   * sandboxes' listeners); resolves once listening. The HTTP
   * server never listens itself: every listener hands its connections to {@link #accept}.
   */
  listen(where: string | net.ListenOptions): Promise<void> {
    const listener = this.#listener();
    return new Promise((resolve, reject) => {
      listener.once('error', reject);
      listener.listen(where, () => {
        listener.off('error', reject);
        this.#own = listener;
        resolve();
      });
    });
  }

  /**
   * Serve the connections of a listening socket made elsewhere (a sandbox's loopback listener,
   * handed over by its tool host): each one is judged like any other, under the same bound. The
   * caller checked what it is (see `egress-listener.ts`). Closed with the proxy, or by `release`.
   */
  adopt(handed: net.Server): { release(): void } {
    const listener = this.#listener();
    listener.on('error', () => listener.close());
    listener.listen(handed);
    this.#adopted.add(listener);
    return {
      release: () => {
        this.#adopted.delete(listener);
        listener.close();
      },
    };
  }

  /** @internal The TCP address, when listening on one (tests). */
  address(): net.AddressInfo | string | null {
    return this.#own?.address() ?? null;
  }

  /** Stop listening and cut every connection, tunnels included. */
  async close(): Promise<void> {
    const closing = [this.#own, ...this.#adopted].filter((l) => l !== undefined);
    this.#adopted.clear();
    const closed = Promise.all(closing.map((l) => new Promise<void>((resolve) => l.close(() => resolve()))));
    for (const s of this.#open) s.destroy();
    await closed;
  }

  /** A listener whose connections go to {@link #accept}, with the large buffers bulk transfers want. */
  #listener(): net.Server {
    return net.createServer({ highWaterMark: STREAM_BUFFER_BYTES } as net.ServerOpts, (s) => this.#accept(s));
  }

  /** One client connection, from any listener: closed past the bound, else served by the HTTP server. */
  #accept(s: net.Socket): void {
    if (this.#clients >= this.#maxClients) return void s.destroy();
    this.#clients++;
    s.once('close', () => this.#clients--);
    this.#track(s);
    this.#server.emit('connection', s);
  }

  #track(s: Duplex): void {
    this.#open.add(s);
    s.once('close', () => this.#open.delete(s));
  }

  async #tunnel(req: http.IncomingMessage, client: Duplex, head: Buffer): Promise<void> {
    client.on('error', () => {});
    const target = parseAuthority(req.url ?? '');
    if (!target) return refuseRaw(client, 400, 'bad-target', `CONNECT needs host:port, got "${req.url ?? ''}"`);
    const outcome = await this.#judge(target.host, target.port);
    if ('refused' in outcome) return refuseRaw(client, outcome.status, outcome.rule, outcome.message);
    const upstream = await this.#dialFirst(outcome.addresses, target.port);
    if (!upstream) return refuseRaw(client, 502, undefined, `could not connect to ${target.host}:${target.port}`);
    if (client.destroyed) return void upstream.destroy();
    this.#track(upstream);
    client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    if (head.length > 0) upstream.write(head);
    splice(client, upstream);
  }

  async #forward(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    let url: URL | undefined;
    try {
      url = new URL(req.url ?? '');
    } catch {
      url = undefined;
    }
    if (!url || url.protocol !== 'http:') {
      return refuseHttp(res, 400, 'bad-target', `this proxy forwards http:// URLs and tunnels with CONNECT; got "${req.url ?? ''}"`);
    }
    const port = url.port === '' ? 80 : Number(url.port);
    const outcome = await this.#judge(url.hostname, port);
    if ('refused' in outcome) return refuseHttp(res, outcome.status, outcome.rule, outcome.message);
    const socket = await this.#dialFirst(outcome.addresses, port);
    if (!socket) return refuseHttp(res, 502, undefined, `could not connect to ${url.host}`);
    this.#track(socket);
    const upstream = http.request({
      method: req.method,
      path: `${url.pathname}${url.search}`,
      headers: forwardedHeaders(req.rawHeaders),
      setHost: false,
      // No agent: the request goes over the socket dialled to the checked address, never a pooled one.
      createConnection: () => socket as net.Socket,
    });
    upstream.on('response', (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.statusMessage, forwardedHeaders(answer.rawHeaders));
      answer.pipe(res);
      answer.on('error', () => res.destroy());
    });
    upstream.on('error', () => {
      if (!res.headersSent) refuseHttp(res, 502, undefined, `${url.host} failed to answer`);
      else res.destroy();
    });
    res.on('close', () => upstream.destroy());
    req.pipe(upstream);
  }

  /** Check, resolve once, decide; report a refusal. */
  async #judge(
    host: string,
    port: number,
  ): Promise<{ addresses: string[] } | { refused: true; status: number; rule: EgressRule | undefined; message: string }> {
    const early = checkHostName(this.#policy, host);
    if (early) return this.#refused(host, port, early);
    const name = normalizeHost(host);
    let resolved: string[];
    if (net.isIP(name) !== 0) {
      resolved = [name];
    } else {
      try {
        resolved = await this.#io.resolve(name);
      } catch (e) {
        return { refused: true, status: 502, rule: undefined, message: `${name} could not be resolved (${(e as Error).message})` };
      }
    }
    const decision = decideEgress(this.#policy, name, resolved, this.#io.hostAddresses());
    if (!decision.allow) return this.#refused(host, port, decision);
    return { addresses: decision.addresses };
  }

  #refused(
    host: string,
    port: number,
    d: { rule: EgressRule; address?: string; reason: string },
  ): { refused: true; status: number; rule: EgressRule; message: string } {
    this.#onRefused({
      host: normalizeHost(host),
      port,
      rule: d.rule,
      ...(d.address !== undefined ? { address: d.address } : {}),
      reason: d.reason,
    });
    return { refused: true, status: 403, rule: d.rule, message: d.reason };
  }

  /** Connect to the first address that answers, each within {@link DIAL_TIMEOUT_MS}. */
  async #dialFirst(addresses: readonly string[], port: number): Promise<Duplex | undefined> {
    for (const address of addresses) {
      const socket = this.#io.dial(address, port);
      const ok = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => done(false), DIAL_TIMEOUT_MS);
        const done = (v: boolean): void => {
          clearTimeout(timer);
          socket.off('connect', onConnect);
          socket.off('error', onError);
          resolve(v);
        };
        const onConnect = (): void => done(true);
        const onError = (): void => done(false);
        socket.once('connect', onConnect);
        socket.once('error', onError);
      });
      if (ok) {
        socket.on('error', () => {});
        return socket;
      }
      socket.destroy();
    }
    return undefined;
  }
}

/** `host:port` of a CONNECT (`[v6]:port` for IPv6); `undefined` when malformed. */
export function parseAuthority(authority: string): { host: string; port: number } | undefined {
  const m = /^(\[[^\]]+\]|[^:[\]]+):([0-9]{1,5})$/.exec(authority);
  if (!m) return undefined;
  const port = Number(m[2]);
  if (port < 1 || port > 65_535) return undefined;
  return { host: m[1]!, port };
}

/** The headers to pass on: all but the hop-by-hop ones and those `Connection` names. */
function forwardedHeaders(raw: readonly string[]): Record<string, string | string[]> {
  const named = new Set<string>();
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() === 'connection') for (const n of raw[i + 1]!.split(',')) named.add(n.trim().toLowerCase());
  }
  const out: Record<string, string | string[]> = {};
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (HOP_BY_HOP.has(name) || named.has(name)) continue;
    const value = raw[i + 1]!;
    const had = out[name];
    out[name] = had === undefined ? value : Array.isArray(had) ? [...had, value] : [had, value];
  }
  return out;
}

function refusalBody(status: number, rule: EgressRule | undefined, message: string): string {
  return `sandbox network: ${status === 403 ? 'refused' : 'failed'}${rule ? ` (rule: ${rule})` : ''}: ${message}\n`;
}

function refuseRaw(socket: Duplex, status: number, rule: EgressRule | undefined, message: string): void {
  const body = refusalBody(status, rule, message);
  const reason = http.STATUS_CODES[status] ?? 'Error';
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
      `${rule ? `X-Sandbox-Egress-Rule: ${rule}\r\n` : ''}Connection: close\r\n\r\n${body}`,
  );
  // Nothing the client sent after this request is read: the connection ends here.
  socket.once('finish', () => socket.destroy());
}

function refuseHttp(res: http.ServerResponse, status: number, rule: EgressRule | undefined, message: string): void {
  const body = refusalBody(status, rule, message);
  res.shouldKeepAlive = false;
  res.writeHead(status, {
    'Content-Type': 'text/plain; charset=utf-8',
    'Content-Length': Buffer.byteLength(body),
    Connection: 'close',
    ...(rule ? { 'X-Sandbox-Egress-Rule': rule } : {}),
  });
  res.end(body);
}

/** Pipe two streams into each other; either failing ends both. */
export function splice(a: Duplex, b: Duplex): void {
  a.pipe(b);
  b.pipe(a);
  const end = (): void => {
    a.destroy();
    b.destroy();
  };
  a.once('error', end);
  b.once('error', end);
  a.once('close', () => (b.writableFinished || b.destroyed ? b.destroy() : b.end()));
  b.once('close', () => (a.writableFinished || a.destroyed ? a.destroy() : a.end()));
}
