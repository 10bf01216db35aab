/**
 * The hand-over of a sandbox's egress listener. The tool host listens on `127.0.0.1:<port>` of the
 * sandbox's own loopback (the address the proxy variables name) and sends that listening socket to
 * the worker over a Node IPC channel, once, before it answers `ready`; the worker's egress proxy
 * then accepts the sandbox's connections itself, with no process relaying bytes in between.
 *
 * What arrives is the sandbox's, so it is checked before anything is done with it: one message of
 * exactly `{ t: 'egress-listener' }`, with a handle that is a listening TCP socket on that loopback
 * address and port. Anything else (no handle, a connected socket, a unix or UDP socket, another
 * address, a second message) is refused and closed at once, so a handle the worker does not keep
 * never holds a descriptor. A listening socket can only have been made inside the sandbox's own
 * network namespace (the sandbox holds no other descriptor), so whatever connects to it comes from
 * the sandbox, and each connection is judged by the proxy like any other.
 *
 * The channel is open only from the host's start until that first message: the worker closes its
 * end on receipt and the host closes its own right after sending, before it builds the toolset, so
 * nothing the agent runs ever holds it.
 */
import * as net from 'node:net';

/** The message the tool host sends with its listener. */
export const EGRESS_LISTENER_MESSAGE = 'egress-listener';

export type HandedListener = { listener: net.Server } | { problem: string };

/** Check one message from a tool host's channel; a refused handle is closed before this returns. */
export function checkHandedListener(message: unknown, handle: unknown, port: number): HandedListener {
  const problem = whyRefused(message, handle, port);
  if (problem === undefined) return { listener: handle as net.Server };
  closeHandle(handle);
  return { problem };
}

function whyRefused(message: unknown, handle: unknown, port: number): string | undefined {
  const keys = typeof message === 'object' && message !== null ? Object.keys(message) : [];
  if (keys.length !== 1 || (message as { t?: unknown }).t !== EGRESS_LISTENER_MESSAGE) {
    return `a message other than its network listener (${describe(message)})`;
  }
  if (!(handle instanceof net.Server)) return `a handle that is not a listening TCP socket (${handleKind(handle)})`;
  const address = handle.address();
  if (typeof address !== 'object' || address === null) return 'a listening socket that is not TCP (a unix socket)';
  if (address.family !== 'IPv4' || address.address !== '127.0.0.1' || address.port !== port) {
    return `a listening socket on ${address.address}:${address.port}, not on 127.0.0.1:${port}`;
  }
  return undefined;
}

/** Close whatever handle Node made of a received descriptor (server, socket, datagram socket or raw handle). */
export function closeHandle(handle: unknown): void {
  if (typeof handle !== 'object' || handle === null) return;
  try {
    if (handle instanceof net.Socket) handle.destroy();
    else if (typeof (handle as { close?: unknown }).close === 'function') (handle as { close(): void }).close();
  } catch {
    // Closed already.
  }
}

function handleKind(handle: unknown): string {
  if (handle === undefined || handle === null) return 'none';
  if (handle instanceof net.Socket) return 'a connected socket';
  const name = (handle as { constructor?: { name?: unknown } }).constructor?.name;
  return typeof name === 'string' ? name : typeof handle;
}

function describe(message: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(message) ?? String(message);
  } catch {
    text = typeof message;
  }
  return text.length > 60 ? `${text.slice(0, 60)}…` : text;
}
