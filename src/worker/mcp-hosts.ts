import type { BetaManagedAgentsSession } from '@anthropic-ai/sdk/resources/beta/sessions/sessions';

/**
 * The host names of the MCP servers in a session's agent snapshot (`agent.mcp_servers[].url`), for a
 * `limited` sandbox network that allows them. An entry without a parsable URL is skipped.
 */
export function mcpServerHosts(session: BetaManagedAgentsSession): string[] {
  const servers = (session as { agent?: { mcp_servers?: unknown } }).agent?.mcp_servers;
  if (!Array.isArray(servers)) return [];
  const hosts = new Set<string>();
  for (const server of servers) {
    const url = (server as { url?: unknown } | null)?.url;
    if (typeof url !== 'string') continue;
    try {
      hosts.add(new URL(url).hostname.toLowerCase());
    } catch {
      // Not a URL: no host to allow.
    }
  }
  return [...hosts];
}
