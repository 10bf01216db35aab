import * as net from 'node:net';
import * as tls from 'node:tls';
import type { Agent, buildConnector, Dispatcher } from 'undici';
import { undiciParts } from './undici-parts.js';

/**
 * The library's own undici agent, for requests whose app chose no transport of its own. Each of its
 * connections reads into one buffer of its own, reused for every read, instead of a new buffer per
 * read: a mount of hundreds of MiB then leaves no trail of dead 64 KiB buffers in the heap for the
 * collector to find.
 *
 * The rule that makes this safe: whatever reads an answer through this agent copies each chunk
 * before its `onData` returns, and never pauses the connection (the page transport's reader does
 * both). A connection stops reading after every read and starts again only once undici has taken
 * the chunk, so a chunk is never overwritten while it waits in the socket's queue.
 */

const READ_BUFFER_BYTES = 64 * 1024;
const CONNECT_TIMEOUT_MS = 10_000;
const KEEP_ALIVE_DELAY_MS = 60_000;
const MAX_TLS_SESSIONS = 100;

let agent: Agent | undefined;

/**
 * The agent, built at its first use from the same undici as `runtimeDefault` (the runtime's own
 * default agent, when that is the global dispatcher), else from the undici package. The runtime's
 * copy already carries the SDK's other calls (polls, the event stream), so its code is loaded,
 * compiled and warm, and a second copy of undici (loaded, compiled and warmed again) is never loaded.
 */
export function ownAgent(runtimeDefault?: Dispatcher): Agent {
  if (agent === undefined) {
    const Runtime = runtimeDefault !== undefined && isDefaultAgent(runtimeDefault) ? runtimeDefault.constructor : undefined;
    const AgentClass = (Runtime as typeof Agent | undefined) ?? undiciParts().Agent;
    agent = new AgentClass({ connect: connectReusingReads });
  }
  return agent;
}

/** @internal True once the agent was built (tests). */
export function ownAgentBuilt(): boolean {
  return agent !== undefined;
}

/**
 * True when `dispatcher` is an undici `Agent` with every option at its default: what the runtime's
 * `fetch` installs as the global dispatcher the first time it runs. Such an agent carries nothing an
 * app chose (no CA, no proxy, no mock, no interceptor, no pool limit), so the library's own agent
 * may stand in for it. The fields read are undici's own (an option-less agent keeps its options and
 * factory under symbols named `options` and `factory`); `test/api/own-agent.int.test.ts` fails if
 * they move, and then the global dispatcher is simply used.
 */
export function isDefaultAgent(dispatcher: Dispatcher): boolean {
  let known = recognised.get(dispatcher);
  if (known === undefined) {
    known = hasDefaultOptions(dispatcher);
    recognised.set(dispatcher, known);
  }
  return known;
}

/** What {@link isDefaultAgent} found for each dispatcher it was asked about (an agent's options never change). */
const recognised = new WeakMap<Dispatcher, boolean>();

function hasDefaultOptions(dispatcher: Dispatcher): boolean {
  if (dispatcher.constructor?.name !== 'Agent') return false;
  const own = dispatcher as unknown as Record<symbol, unknown>;
  let options: unknown;
  let factory: unknown;
  let redirections: unknown = 0;
  for (const key of Object.getOwnPropertySymbols(dispatcher)) {
    if (key.description === 'options') options = own[key];
    else if (key.description === 'factory') factory = own[key];
    else if (key.description === 'maxRedirections') redirections = own[key];
  }
  if (typeof options !== 'object' || options === null) return false;
  if (!Object.values(options).every((v) => v === undefined)) return false;
  return typeof factory === 'function' && factory.name === 'defaultFactory' && (redirections === 0 || redirections === undefined);
}

type ConnectTarget = buildConnector.Options;
type ConnectCallback = buildConnector.Callback;

const tlsSessions = new Map<string, Buffer>();

/** undici's connector contract: a connected socket (TLS for `https:`), or the error that stopped it. */
function connectReusingReads(target: ConnectTarget, callback: ConnectCallback): void {
  const buffer = Buffer.allocUnsafe(READ_BUFFER_BYTES);
  const onread = {
    buffer,
    callback(bytes: number, into: Uint8Array): boolean {
      socket.push(Buffer.from(into.buffer, into.byteOffset, bytes));
      return false;
    },
  };
  const host = target.hostname.replace(/^\[(.*)\]$/, '$1');
  let socket: net.Socket;
  let ready = 'connect';
  if (target.protocol === 'https:') {
    const servername = target.servername || (net.isIP(host) === 0 ? host : undefined);
    const sessionKey = servername ?? host;
    socket = tls.connect({
      host,
      port: Number(target.port) || 443,
      ...(servername !== undefined ? { servername } : {}),
      ...(target.localAddress ? { localAddress: target.localAddress } : {}),
      ...(target.httpSocket !== undefined ? { socket: target.httpSocket as net.Socket } : { onread }),
      session: tlsSessions.get(sessionKey),
      ALPNProtocols: ['http/1.1'],
    });
    socket.on('session', (session: Buffer) => rememberSession(sessionKey, session));
    ready = 'secureConnect';
  } else {
    socket = net.connect({
      host,
      port: Number(target.port) || 80,
      ...(target.localAddress ? { localAddress: target.localAddress } : {}),
      onread,
    });
  }
  socket.setKeepAlive(true, KEEP_ALIVE_DELAY_MS).setNoDelay(true);
  let answer: ConnectCallback | undefined = callback;
  const timer = setTimeout(() => {
    const err = Object.assign(new Error(`connecting to ${host}:${target.port} took over ${CONNECT_TIMEOUT_MS} ms`), {
      code: 'UND_ERR_CONNECT_TIMEOUT',
    });
    socket.destroy(err);
  }, CONNECT_TIMEOUT_MS);
  timer.unref();
  socket.once(ready, () => {
    clearTimeout(timer);
    answer?.(null, socket);
    answer = undefined;
  });
  socket.on('error', (err) => {
    clearTimeout(timer);
    answer?.(err, null);
    answer = undefined;
  });
}

function rememberSession(key: string, session: Buffer): void {
  tlsSessions.delete(key);
  if (tlsSessions.size >= MAX_TLS_SESSIONS) tlsSessions.delete(tlsSessions.keys().next().value!);
  tlsSessions.set(key, session);
}
