/**
 * The tool host: the program the worker starts inside a session's sandbox. It builds the SDK's
 * own agent toolset for the paths `init` names and runs each `call` it is sent, answering on
 * stdout (see `protocol.ts`). It holds no credential and loads nothing but Node and the SDK, so
 * the sandbox needs no other package. It ends when its stdin closes (the worker went away).
 *
 * Built as CommonJS so it can start lean: one host starts per session, and the SDK's toolset
 * reaches the SDK's root barrel (the whole API client, about 300 modules) through one import that
 * uses only `AnthropicError`. That import is answered with the SDK's own error module, which
 * defines that same class; any other name read from it loads the real barrel, so the toolset runs
 * exactly as written, on a tenth of the modules.
 */
import { createRequire } from 'node:module';
import * as net from 'node:net';
import * as path from 'node:path';
import * as readline from 'node:readline';
import type { BetaRunnableTool, BetaToolRunContext } from '@anthropic-ai/sdk/lib/tools/BetaRunnableTool';
import type { HostCall, HostInit, HostMessage, ToolContent, WorkerMessage } from './protocol.js';

type Loader = (request: string, parent: { filename?: string | null } | undefined, isMain: boolean) => unknown;
const ModuleClass = createRequire(__filename)('node:module') as { _load: Loader };
const load = ModuleClass._load;
const barrelImporter = `${path.sep}helpers${path.sep}beta${path.sep}json-schema.js`;
ModuleClass._load = function leanLoad(request, parent, isMain) {
  if ((request === '../../index.js' || request === '../../index') && parent?.filename?.endsWith(barrelImporter)) {
    const errors = load('../../core/error.js', parent, false) as Record<PropertyKey, unknown>;
    if (typeof errors['AnthropicError'] === 'function') {
      return new Proxy(errors, { get: (t, k) => (k in t ? t[k] : (load(request, parent, isMain) as Record<PropertyKey, unknown>)[k]) });
    }
  }
  return load(request, parent, isMain);
};

const sdk = createRequire(__filename);
const { betaAgentToolset20260401 } = sdk(
  '@anthropic-ai/sdk/tools/agent-toolset/node',
) as typeof import('@anthropic-ai/sdk/tools/agent-toolset/node');
const { runRunnableTool } = sdk(
  '@anthropic-ai/sdk/lib/tools/BetaRunnableTool',
) as typeof import('@anthropic-ai/sdk/lib/tools/BetaRunnableTool');

let tools: Map<string, BetaRunnableTool> | undefined;
const running = new Map<number, AbortController>();

function send(message: HostMessage): void {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

/**
 * The sandbox's only way out: `127.0.0.1:port` of its own loopback, each connection piped to the
 * worker's egress proxy through the unix socket bound in. Listening before `ready`, so no tool runs
 * before the proxy variables point somewhere.
 */
function relayEgress(egress: NonNullable<HostInit['egress']>): Promise<void> {
  // Large stream buffers: a download through the relay moves in big writes, not 16 KiB stop-and-go.
  const server = net.createServer({ highWaterMark: RELAY_BUFFER_BYTES }, (client) => {
    const upstream = net.connect({ path: egress.socket, highWaterMark: RELAY_BUFFER_BYTES } as net.NetConnectOpts);
    client.pipe(upstream);
    upstream.pipe(client);
    const end = (): void => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end);
    upstream.on('error', end);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(egress.port, '127.0.0.1', () => resolve());
  });
}

const RELAY_BUFFER_BYTES = 1 << 20;

async function init(message: HostInit): Promise<void> {
  if (message.egress) await relayEgress(message.egress);
  const list = betaAgentToolset20260401({
    workdir: message.workdir,
    allowedRoots: message.allowedRoots,
    readOnlyRoots: message.readOnlyRoots,
    ...(message.maxFileBytes !== undefined ? { maxFileBytes: message.maxFileBytes } : {}),
  });
  tools = new Map(list.map((t) => [t.name, t]));
  send({ t: 'ready', tools: [...tools.keys()] });
}

async function call(message: HostCall): Promise<void> {
  const tool = tools?.get(message.tool);
  if (!tool) {
    send({ t: 'result', id: message.id, isError: true, content: `Error: no tool named ${message.tool} in the sandbox` });
    return;
  }
  const ctrl = new AbortController();
  running.set(message.id, ctrl);
  // The toolset reads only the signal; the call's own event stays with the worker.
  const toolUse = { type: 'tool_use', id: `sandbox-${message.id}`, name: message.tool, input: message.input };
  const context = { toolUse, toolUseBlock: toolUse, signal: ctrl.signal } as unknown as BetaToolRunContext;
  try {
    const outcome = await runRunnableTool(tool, message.input, context);
    send({ t: 'result', id: message.id, isError: outcome.isError, content: outcome.content as ToolContent });
  } finally {
    running.delete(message.id);
  }
}

function shutDown(): void {
  for (const ctrl of running.values()) ctrl.abort();
  for (const tool of tools?.values() ?? []) {
    try {
      void tool.close?.();
    } catch {
      // Ending anyway: the sandbox takes every process with it.
    }
  }
  process.exit(0);
}

const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on('line', (line) => {
  let message: WorkerMessage;
  try {
    message = JSON.parse(line) as WorkerMessage;
  } catch {
    return;
  }
  if (message.t === 'init' && tools === undefined) {
    init(message).catch((e: unknown) => {
      process.stderr.write(`the tool host could not start: ${(e as Error).message}\n`);
      process.exit(1);
    });
  } else if (message.t === 'call') void call(message);
  else if (message.t === 'cancel') running.get(message.id)?.abort();
});
lines.on('close', shutDown);
