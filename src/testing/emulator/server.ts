import { setMaxListeners } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { unauthenticated, type CredentialKind } from './auth.js';
import { ApiError, errorTypeForStatus, notFound, invalidRequest, type ApiErrorType } from './errors.js';
import type { FaultDecision, Faults } from './faults.js';
import type { Router, RouteContext, RouteResult } from './router.js';
import type { EmulatorState } from './state.js';

/** One received request, as the emulator logs it (never the credential itself). */
export interface RequestRecord {
  /** The HTTP method (`GET`, `POST`, …). */
  method: string;
  /** `METHOD /path/template`, e.g. `GET /v1/memory_stores/:id/memories`; `METHOD (unmatched)` for 404s. */
  route: string;
  /** The concrete path, without the query string. */
  path: string;
  /** Query parameters (repeated keys become arrays). */
  query: Record<string, string | string[]>;
  /** HTTP status answered (200 for an opened stream); 0 when nothing was answered (hang, lost response). */
  status: number;
  /** The kind of credential the request carried (never the credential itself). */
  credential: CredentialKind;
  /** `Date.now()` when the request arrived. */
  startedAt: number;
  /** Time to the answer (to the headers for event streams). */
  ms: number;
  /** The parsed JSON body, when one was sent. */
  body?: unknown;
  /** The `request-id` the answer carried (`req_emu_…`). */
  requestId: string;
  /** `Anthropic-Worker-ID` header (polls). */
  workerId?: string;
  /** Which fault shaped the answer, if any. */
  fault?: 'status' | 'hang' | 'dropResponse' | 'cutBody' | 'rewrite';
}

export interface ServerDeps {
  state: EmulatorState;
  router: Router;
  faults: Faults;
  latencyMs: number;
  log: RequestRecord[];
}

const HEARTBEAT_TEMPLATE = '/v1/environments/:id/work/:workId/heartbeat';

/** The HTTP front: dispatch, auth, faults, error envelope, request log. */
export class EmulatorServer {
  readonly #deps: ServerDeps;
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  readonly #closing = new AbortController();
  #seq = 0;

  constructor(deps: ServerDeps) {
    this.#deps = deps;
    // Every request in flight listens here (and stops listening when it ends); the SDK memory
    // sync alone keeps up to 32 in flight, which is no leak.
    setMaxListeners(0, this.#closing.signal);
    this.#server = createServer((req, res) => {
      void this.#handle(req, res);
    });
    this.#server.keepAliveTimeout = 5_000;
    this.#server.on('connection', (socket) => {
      this.#sockets.add(socket);
      socket.on('close', () => this.#sockets.delete(socket));
    });
  }

  async listen(host: string, port: number): Promise<number> {
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(port, host, () => {
        this.#server.off('error', reject);
        resolve();
      });
    });
    return (this.#server.address() as AddressInfo).port;
  }

  /** Abort long polls and hung requests, destroy every socket, stop listening. */
  async close(): Promise<void> {
    this.#closing.abort();
    this.#deps.state.queue.wakeAll();
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    // Give answers that are being written (long polls returning null) a moment to flush.
    await new Promise((r) => setTimeout(r, 10));
    for (const socket of this.#sockets) socket.destroy();
    this.#server.closeAllConnections();
    await closed;
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const startedAt = Date.now();
    const requestId = `req_emu_${String(++this.#seq).padStart(6, '0')}`;
    const method = (req.method ?? 'GET').toUpperCase();
    const url = new URL(req.url ?? '/', 'http://emulator.local');
    const path = url.pathname;
    // A path whose percent-escapes do not decode names no resource: answered 400 below.
    let malformedPath = false;
    let matched: ReturnType<Router['match']>;
    try {
      matched = this.#deps.router.match(method, path);
    } catch {
      malformedPath = true;
    }
    const principal = this.#deps.state.credentials.classify(req.headers);
    const workerIdHeader = req.headers['anthropic-worker-id'];
    const record: RequestRecord = {
      method,
      route: matched ? `${method} ${matched.route.template}` : `${method} (unmatched)`,
      path,
      query: queryRecord(url.searchParams),
      status: 0,
      credential: principal.kind,
      startedAt,
      ms: 0,
      requestId,
      ...(typeof workerIdHeader === 'string' ? { workerId: workerIdHeader } : {}),
    };
    const headers: Record<string, string> = { 'request-id': requestId };
    const clientGone = new AbortController();
    const onGone = (): void => clientGone.abort();
    res.on('close', onGone);
    this.#closing.signal.addEventListener('abort', onGone, { once: true });
    res.on('close', () => this.#closing.signal.removeEventListener('abort', onGone));
    const finish = (status: number, fault?: RequestRecord['fault']): void => {
      record.status = status;
      record.ms = Date.now() - startedAt;
      if (fault) record.fault = fault;
      this.#deps.log.push(record);
    };

    let body: unknown;
    try {
      body = await readJsonBody(req);
      if (body !== undefined) record.body = body;
    } catch (e) {
      const err = e instanceof ApiError ? e : invalidRequest(String(e));
      this.#send(res, err.status, err.toBody(requestId), headers);
      finish(err.status);
      return;
    }

    const decision = this.#deps.faults._decide(`${method} ${path}`, method, matched?.route.template === HEARTBEAT_TEMPLATE);
    const delayMs = this.#deps.latencyMs + decision.latencyMs;
    if (delayMs > 0) await sleep(delayMs, clientGone.signal);
    if (clientGone.signal.aborted) {
      finish(0);
      return;
    }
    if (decision.hang) {
      // Never answer: wait for the client (or the emulator) to give up, then drop the socket.
      await new Promise<void>((resolve) => {
        if (clientGone.signal.aborted) resolve();
        clientGone.signal.addEventListener('abort', () => resolve(), { once: true });
      });
      res.destroy();
      finish(0, 'hang');
      return;
    }

    let result: RouteResult;
    try {
      if (decision.status) throw faultError(decision.status);
      if (malformedPath) throw invalidRequest(`the request path ${JSON.stringify(path.slice(0, 200))} has a malformed percent-escape`);
      if (!matched) throw notFound(`no route for ${method} ${path} on the Managed Agents emulator`);
      if (principal.kind === 'none' || principal.kind === 'unknown') throw unauthenticated(principal);
      this.#applyWorkFaults(decision, matched.params);
      const ctx: RouteContext = {
        method,
        path,
        params: matched.params,
        query: url.searchParams,
        body,
        principal,
        state: this.#deps.state,
        requestId,
        req,
        res,
        signal: clientGone.signal,
        headers,
      };
      result = await matched.route.handler(ctx);
    } catch (e) {
      const err = e instanceof ApiError ? e : new ApiError(500, 'api_error', `emulator internal error: ${String(e)}`);
      const errHeaders = { ...headers, ...(err.shouldRetry !== undefined ? { 'x-should-retry': String(err.shouldRetry) } : {}) };
      if (decision.dropResponse) {
        res.destroy();
        finish(0, 'dropResponse');
      } else {
        this.#send(res, err.status, err.toBody(requestId), errHeaders);
        finish(err.status, decision.status ? 'status' : undefined);
      }
      this.#maybeDropStream(decision, matched?.params);
      return;
    }

    if ('streamed' in result) {
      finish(200);
      this.#maybeDropStream(decision, matched.params);
      return;
    }
    const status = result.status ?? 200;
    if (decision.dropResponse) {
      res.destroy();
      finish(0, 'dropResponse');
    } else {
      let out = result.body;
      for (const rewrite of decision.rewrites) out = rewrite(out, { path, query: url.searchParams });
      const raw = typeof out === 'string' && decision.rewrites.length > 0;
      const sent = raw ? Buffer.from(out as string, 'utf8') : out;
      const allHeaders = { ...headers, ...(result.headers ?? {}), ...(raw ? { 'content-type': 'application/json' } : {}) };
      if (decision.cutBody && status >= 200 && status < 300) {
        this.#sendCut(res, status, sent, allHeaders);
        finish(status, 'cutBody');
      } else {
        this.#send(res, status, sent, allHeaders);
        finish(status, decision.rewrites.length > 0 ? 'rewrite' : undefined);
      }
    }
    this.#maybeDropStream(decision, matched.params);
  }

  #applyWorkFaults(decision: FaultDecision, params: Record<string, string>): void {
    if (!decision.leaseLost && !decision.stopWork) return;
    const item = params['workId'] ? this.#deps.state.queue.find(params['workId']) : undefined;
    if (!item) return;
    if (decision.stopWork && item.state !== 'stopped') this.#deps.state.queue.stop(item, decision.stopWork.force);
    if (decision.leaseLost) this.#deps.state.queue.loseLease(item);
  }

  #maybeDropStream(decision: FaultDecision, params: Record<string, string> | undefined): void {
    if (!decision.dropStream) return;
    const sessionId = params?.['id'];
    const session = sessionId ? this.#deps.state.sessions.get(sessionId) : undefined;
    // Let the answer reach the client first, so the cut is seen after it.
    if (session) setTimeout(() => session.hub.cutAll(), 5);
  }

  /** A `Buffer` body is sent as is (its `content-type` from `headers`); anything else as JSON. */
  /** The status, the headers and half of the body, then the connection destroyed. */
  #sendCut(res: ServerResponse, status: number, body: unknown, headers: Record<string, string>): void {
    if (res.headersSent || res.destroyed) return;
    const payload = Buffer.isBuffer(body) ? body : Buffer.from(JSON.stringify(body ?? null), 'utf8');
    res.writeHead(status, { 'content-type': 'application/json', ...headers, 'content-length': String(payload.length) });
    res.write(payload.subarray(0, Math.max(1, Math.floor(payload.length / 2))), () => res.destroy());
  }

  #send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string>): void {
    if (res.headersSent || res.destroyed) return;
    const payload = Buffer.isBuffer(body) ? body : Buffer.from(JSON.stringify(body ?? null), 'utf8');
    res.writeHead(status, {
      'content-type': Buffer.isBuffer(body) ? 'application/octet-stream' : 'application/json',
      ...headers,
      'content-length': String(payload.length),
    });
    res.end(payload);
  }
}

function faultError(f: NonNullable<FaultDecision['status']>): ApiError {
  return new ApiError(
    f.status,
    (f.errorType as ApiErrorType | undefined) ?? errorTypeForStatus(f.status),
    f.message ?? `injected fault: ${f.status}`,
    {
      ...(f.shouldRetry !== undefined ? { shouldRetry: f.shouldRetry } : {}),
      ...(f.errorCode !== undefined ? { details: { error_code: f.errorCode } } : {}),
    },
  );
}

async function readJsonBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  if (chunks.length === 0) return undefined;
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw invalidRequest('request body is not valid JSON');
  }
}

function queryRecord(params: URLSearchParams): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const key of new Set(params.keys())) {
    const values = params.getAll(key);
    out[key] = values.length === 1 ? values[0]! : values;
  }
  return out;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
