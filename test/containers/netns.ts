/**
 * A network namespace of the test's own (`ip netns add`), holding only its loopback: processes
 * started in it with `ip netns exec` and containers joined to it (`--network ns:/run/netns/<name>`)
 * reach each other on 127.0.0.1 and nothing else, neither the host's loopback nor any other address.
 *
 * A host process reaches a port of the namespace's loopback through a bridge: a listener on the
 * host's 127.0.0.1 whose connections go to a unix socket (a file, so it crosses network
 * namespaces) that a process inside forwards to the port. With the same port number on both sides,
 * one URL works on the host and in the namespace.
 */
import * as fs from 'node:fs';
import * as net from 'node:net';
import { run } from './rootfs.js';

/** The launcher test's network namespace is this plus its process id. */
export const LAUNCHER_NETNS_PREFIX = 'maw-launch-';

export interface NetworkNamespace {
  name: string;
  /** What podman's `--network` takes to join it. */
  podmanNetwork: string;
  /** The argv prefix that runs a command inside it. */
  exec: string[];
  remove(): Promise<void>;
}

/** Create `name` (an earlier one of that name is removed first) with its loopback up. */
export async function createNetworkNamespace(name: string): Promise<NetworkNamespace> {
  if (fs.existsSync(`/run/netns/${name}`)) await run('ip', ['netns', 'delete', name]);
  await run('ip', ['netns', 'add', name]);
  await run('ip', ['netns', 'exec', name, 'ip', 'link', 'set', 'lo', 'up']);
  return {
    name,
    podmanNetwork: `ns:/run/netns/${name}`,
    exec: ['ip', 'netns', 'exec', name],
    remove: () => run('ip', ['netns', 'delete', name]).catch(() => undefined),
  };
}

/** Namespaces `<prefix><pid>` of earlier runs whose test process is gone (a killed run leaves its namespace). */
export async function removeStaleNamespaces(prefix: string): Promise<void> {
  const names = fs.existsSync('/run/netns') ? fs.readdirSync('/run/netns') : [];
  for (const name of names) {
    if (!name.startsWith(prefix)) continue;
    const pid = Number(name.slice(prefix.length));
    if (!Number.isInteger(pid)) continue;
    try {
      process.kill(pid, 0);
    } catch {
      await run('ip', ['netns', 'delete', name]).catch(() => undefined);
    }
  }
}

/** Pipe every connection of `server` to a new connection made by `connect`. */
function forward(server: net.Server, connect: () => net.Socket): net.Server {
  return server.on('connection', (inbound) => {
    const outbound = connect();
    inbound.pipe(outbound).pipe(inbound);
    inbound.on('error', () => outbound.destroy());
    outbound.on('error', () => inbound.destroy());
  });
}

/**
 * The host side of a bridge: a free port of the host's 127.0.0.1 forwarded to `unixSocket`, which a
 * process in the namespace serves (fixtures/launcher-sessions.mjs forwards it to the same port there).
 */
export async function bridgeFromHost(unixSocket: string): Promise<{ port: number; close(): void }> {
  const server = forward(net.createServer(), () => net.connect(unixSocket));
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as net.AddressInfo).port, close: () => server.close() };
}
