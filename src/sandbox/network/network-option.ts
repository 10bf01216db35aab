import { z } from 'zod/v3';
import type { EgressPolicy } from './egress-policy.js';
import { parseRange } from './ip-ranges.js';

/**
 * What a session's sandbox may reach on the network (`sandbox.network`).
 * - `'unrestricted'` (default): a network namespace of its own; its traffic leaves through an egress
 *   proxy the worker runs for the session, which reaches any public address and refuses loopback,
 *   link-local (the cloud metadata address), private, shared, multicast and other non-public
 *   ranges and the worker host's own addresses, after resolving the name.
 *   `{ type: 'unrestricted', allowPrivate }` lifts the refusal for internal services.
 * - `{ type: 'limited', allowedHosts, allowPackageManagers, allowMcpServers, allowPrivate }`: the same
 *   proxy, reaching only the listed hosts, the public package registries, and the hosts of the
 *   agent's MCP servers.
 * - `'none'`: a network namespace of its own with loopback only.
 * - `'host'`: the worker host's own network, unfiltered (its loopback services, the metadata
 *   address, every private network and abstract unix socket the host reaches); warned about at start.
 */
export type SandboxNetworkOption =
  | 'unrestricted'
  | 'none'
  | 'host'
  | {
      /** Public addresses through the session's proxy, as `'unrestricted'`, with private ranges allowed. */
      type: 'unrestricted';
      /**
       * Ranges (`10.0.0.0/8`, `fd00::/8`) any address inside of which may be reached, and host names
       * (`git.internal`, `*.corp.example`) that may resolve to private addresses. Loopback and the
       * worker host's own addresses stay refused. Default: none.
       */
      allowPrivate?: string[];
    }
  | {
      /** Only the hosts listed here, through the session's proxy. */
      type: 'limited';
      /** Host names (`api.example.com`), `*.example.com` for any name under it, or IP addresses. Default: none. */
      allowedHosts?: string[];
      /** Also the public package registries (npm, PyPI, crates.io and the like, as `egress-policy.ts` lists them). Default false. */
      allowPackageManagers?: boolean;
      /** Also the hosts of the MCP servers of the session's agent. Default false. */
      allowMcpServers?: boolean;
      /** As for `unrestricted`: private ranges or names the listed hosts may resolve to. Default: none. */
      allowPrivate?: string[];
    };

/** `sandbox.network` after validation and defaults. */
export type ResolvedNetwork =
  | { type: 'host' }
  | { type: 'none' }
  | { type: 'unrestricted'; allowPrivate: string[] }
  | { type: 'limited'; allowedHosts: string[]; allowPackageManagers: boolean; allowMcpServers: boolean; allowPrivate: string[] };

const HOST_PATTERN = /^(\*\.)?[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*\.?$/i;

const hostEntry = z.string().refine((s) => HOST_PATTERN.test(s) || parseRange(s)?.prefix === (s.includes(':') ? 128 : 32), {
  message: 'a host name, *.domain or an IP address',
});
const privateEntry = z
  .string()
  .refine((s) => HOST_PATTERN.test(s) || parseRange(s) !== undefined, { message: 'a CIDR range (10.0.0.0/8), an address, or a host name' });

/** The zod schema of `sandbox.network`. */
export const networkOptionSchema = z.union([
  z.enum(['unrestricted', 'none', 'host']),
  z.object({ type: z.literal('unrestricted'), allowPrivate: z.array(privateEntry).optional() }).strict(),
  z
    .object({
      type: z.literal('limited'),
      allowedHosts: z.array(hostEntry).optional(),
      allowPackageManagers: z.boolean().optional(),
      allowMcpServers: z.boolean().optional(),
      allowPrivate: z.array(privateEntry).optional(),
    })
    .strict(),
]);

/** What `network` accepts, as a validation message says it. */
export const NETWORK_OPTION_EXPECTED =
  "'unrestricted' | 'none' | 'host' | { type: 'unrestricted', allowPrivate } | { type: 'limited', allowedHosts, allowPackageManagers, allowMcpServers, allowPrivate }";

/** Fill in the defaults of an already validated `network` value (`'unrestricted'` when absent). */
export function resolveNetworkOption(value: z.output<typeof networkOptionSchema> | undefined): ResolvedNetwork {
  if (value === undefined || value === 'unrestricted') return { type: 'unrestricted', allowPrivate: [] };
  if (value === 'none' || value === 'host') return { type: value };
  if (value.type === 'unrestricted') return { type: 'unrestricted', allowPrivate: value.allowPrivate ?? [] };
  return {
    type: 'limited',
    allowedHosts: value.allowedHosts ?? [],
    allowPackageManagers: value.allowPackageManagers ?? false,
    allowMcpServers: value.allowMcpServers ?? false,
    allowPrivate: value.allowPrivate ?? [],
  };
}

/** The proxy's policy for one session, or `undefined` when the network needs no proxy (`host`, `none`). */
export function egressPolicyFor(network: ResolvedNetwork, mcpServerHosts: readonly string[]): EgressPolicy | undefined {
  if (network.type === 'unrestricted') return { type: 'unrestricted', allowPrivate: network.allowPrivate };
  if (network.type === 'limited') {
    return {
      type: 'limited',
      allowedHosts: network.allowedHosts,
      allowPackageManagers: network.allowPackageManagers,
      mcpServerHosts: network.allowMcpServers ? mcpServerHosts : [],
      allowPrivate: network.allowPrivate,
    };
  }
  return undefined;
}

/** What `network: 'host'` exposes, for the warning at start. */
export const HOST_NETWORK_WARNING =
  "sandbox network 'host': each session's tools share the worker host's network: services on its loopback, the cloud " +
  "metadata address (169.254.169.254), every private network the host reaches and its abstract unix sockets; use 'unrestricted' " +
  "(the default) or 'limited' to send the sandbox's traffic through the filtering proxy";
