import type * as net from 'node:net';
import type { EgressPolicy } from './egress-policy.js';
import { EgressProxy, type EgressIo, type EgressRefusal } from './egress-proxy.js';

/**
 * The port on the sandbox's own loopback where its tool host listens and hands that listener to
 * the session's proxy, which then accepts the sandbox's connections itself.
 */
export const EGRESS_LISTENER_PORT = 3128;

/** The proxy variables a sandbox's tools get: every tool that honours them sends its traffic to the proxy. */
export function egressEnvironment(port = EGRESS_LISTENER_PORT): Record<string, string> {
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
 * The egress proxy of one session. It listens nowhere of its own: each of the session's sandboxes
 * (its successive tool hosts) hands it the listener on its loopback, and the proxy judges every
 * connection made there. Lives as long as the session.
 */
export class SessionEgress {
  readonly #proxy: EgressProxy;

  constructor(policy: EgressPolicy, opts: { onRefused: (refusal: EgressRefusal) => void; io?: Partial<EgressIo> }) {
    this.#proxy = new EgressProxy(policy, opts);
  }

  /**
   * Serve a sandbox's loopback listener, handed over by its tool host and checked by the caller
   * (see `egress-listener.ts`); `release` closes it when that sandbox ends.
   */
  adopt(listener: net.Server): { release(): void } {
    return this.#proxy.adopt(listener);
  }

  /** Stop the proxy and cut its connections. Idempotent. */
  async close(): Promise<void> {
    await this.#proxy.close();
  }
}
