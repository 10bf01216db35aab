// `sandbox.network`: 'unrestricted' is the default; the old 'host' and 'none' still work; each
// object form fills its defaults; a malformed host or range is a ConfigError whose `sandbox` line
// lists the accepted network forms (it does not name the bad entry); the
// proxy's policy takes the agent's MCP server hosts only when `allowMcpServers` asks for them.
import Anthropic from '@anthropic-ai/sdk';
import type { BetaManagedAgentsSession } from '@anthropic-ai/sdk/resources/beta/sessions/sessions';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../../src/errors.js';
import { egressPolicyFor, resolveNetworkOption } from '../../../src/sandbox/network/network-option.js';
import { mcpServerHosts } from '../../../src/worker/mcp-hosts.js';
import { resolveWorkerOptions } from '../../../src/worker/options.js';

const client = new Anthropic({ apiKey: 'sk-test', baseURL: 'http://127.0.0.1:1' });

describe('sandbox.network', () => {
  it("defaults to 'unrestricted' (no private range allowed)", () => {
    const o = resolveWorkerOptions({ client });
    expect(o.sandbox.network).toEqual({ type: 'unrestricted', allowPrivate: [] });
  });

  it("keeps 'host' and 'none'", () => {
    expect(resolveWorkerOptions({ client, sandbox: { network: 'host' } }).sandbox.network).toEqual({ type: 'host' });
    expect(resolveWorkerOptions({ client, sandbox: { network: 'none' } }).sandbox.network).toEqual({ type: 'none' });
  });

  it('fills the defaults of limited', () => {
    expect(resolveNetworkOption({ type: 'limited', allowedHosts: ['*.example.com'] })).toEqual({
      type: 'limited',
      allowedHosts: ['*.example.com'],
      allowPackageManagers: false,
      allowMcpServers: false,
      allowPrivate: [],
    });
  });

  for (const [description, network] of [
    ['a host with a space', { type: 'limited', allowedHosts: ['bad host'] }],
    ['a range with a bad prefix', { type: 'unrestricted', allowPrivate: ['10.0.0.0/33'] }],
    ['an unknown policy', 'open'],
    ['an unknown key', { type: 'limited', allowHosts: ['a.example'] }],
  ] as const) {
    it(`refuses ${description} with a ConfigError listing the network forms`, () => {
      let error: unknown;
      try {
        resolveWorkerOptions({ client, sandbox: { network } });
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).message).toMatch(
        /^ {2}sandbox: expected .*network: 'unrestricted' \| 'none' \| 'host' \| \{ type: 'unrestricted', allowPrivate \} \| \{ type: 'limited', allowedHosts/m,
      );
    });
  }

  it('gives the proxy the MCP server hosts only when allowMcpServers is set', () => {
    const limited = (allowMcpServers: boolean) =>
      egressPolicyFor(resolveNetworkOption({ type: 'limited', allowMcpServers }), ['mcp.example.net']);
    expect(limited(true)).toMatchObject({ type: 'limited', mcpServerHosts: ['mcp.example.net'] });
    expect(limited(false)).toMatchObject({ type: 'limited', mcpServerHosts: [] });
    expect(egressPolicyFor({ type: 'host' }, [])).toBeUndefined();
    expect(egressPolicyFor({ type: 'none' }, [])).toBeUndefined();
  });

  it("reads the MCP server hosts from the session's agent snapshot", () => {
    const session = {
      agent: { mcp_servers: [{ url: 'https://MCP.example.net/sse' }, { url: 'not a url' }, { name: 'no url' }] },
    } as unknown as BetaManagedAgentsSession;
    expect(mcpServerHosts(session)).toEqual(['mcp.example.net']);
    expect(mcpServerHosts({} as BetaManagedAgentsSession)).toEqual([]);
  });
});
