import * as fs from 'node:fs';
import type * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import type { EgressPolicy } from './egress-policy.js';
import { EgressProxy, type EgressIo, type EgressRefusal } from './egress-proxy.js';
import { EGRESS_DIR_PREFIX, pruneStaleEgressDirs } from './stale-egress.js';

/** Whether this process already looked for folders a killed worker left behind. */
let pruned = false;

/** Where the proxy's unix socket appears inside a sandbox. */
export const EGRESS_SOCKET_IN_SANDBOX = '/run/maw-egress.sock';
/** The port on the sandbox's own loopback where the proxy accepts the sandbox's connections (the tool host's listener, handed over). */
export const EGRESS_RELAY_PORT = 3128;

/** The proxy variables a sandbox's tools get: every tool that honours them sends its traffic to the proxy. */
export function egressEnvironment(port = EGRESS_RELAY_PORT): Record<string, string> {
  const url = `http://127.0.0.1:${port}`;
  const noProxy = 'localhost,127.0.0.1,::1';
  const env: Record<string, string> = {};
  for (const name of ['HTTP_PROXY', 'HTTPS_PROXY', 'ALL_PROXY']) {
    env[name] = url;
    env[name.toLowerCase()] = url;
  }
  env['NO_PROXY'] = noProxy;
  env['no_proxy'] = noProxy;
  return env;
}

/**
 * The egress proxy of one session, on a unix socket in a private folder (mode 0700) of the host's
 * temporary folder; the sandbox sees only the socket, bound at {@link EGRESS_SOCKET_IN_SANDBOX}.
 * Lives as long as the session: the tool hosts the session starts one after another share it.
 * The first one a process starts also removes the folders a killed worker left behind.
 */
export class SessionEgress {
  readonly socketPath: string;
  /** Resolves once the proxy listens; rejects when it cannot. */
  readonly ready: Promise<void>;
  readonly #dir: string;
  readonly #proxy: EgressProxy;

  constructor(policy: EgressPolicy, opts: { onRefused: (refusal: EgressRefusal) => void; io?: Partial<EgressIo> }) {
    if (!pruned) {
      pruned = true;
      void pruneStaleEgressDirs();
    }
    this.#dir = fs.mkdtempSync(path.join(os.tmpdir(), EGRESS_DIR_PREFIX));
    this.socketPath = path.join(this.#dir, 'proxy.sock');
    this.#proxy = new EgressProxy(policy, opts);
    this.ready = this.#proxy.listen(this.socketPath);
    this.ready.catch(() => {});
  }

  /**
   * Serve a sandbox's loopback listener, handed over by its tool host and checked by the caller
   * (see `egress-listener.ts`); `release` closes it when that sandbox ends.
   */
  adopt(listener: net.Server): { release(): void } {
    return this.#proxy.adopt(listener);
  }

  /** Stop the proxy, cut its connections and remove its folder. Idempotent. */
  async close(): Promise<void> {
    await this.ready.then(
      () => this.#proxy.close(),
      () => {},
    );
    fs.rmSync(this.#dir, { recursive: true, force: true });
  }
}
