import {
  context,
  isSpanContextValid,
  trace,
  SpanKind,
  SpanStatusCode,
  type Context,
  type Span,
  type Tracer,
  type TracerProvider,
} from '@opentelemetry/api';
import type Anthropic from '@anthropic-ai/sdk';
import type { ItemOutcome } from './events.js';
import type { ClaimedWork } from './poller.js';

/** Instrumentation scope of the spans this library starts itself (the work span is the SDK's). */
export const TRACER_SCOPE = 'managed-agents-worker';

/** Name of the span around one work item: the one the SDK's own worker starts. */
export const WORK_SPAN_NAME = 'anthropic.environment.work';

/**
 * What the worker reads from the caller's client, by shape: the app may hold another copy of the
 * SDK, so nothing here is recognised by class. `_tracer` is `undefined` when the client's spans
 * are turned off (its `openTelemetry` option or `ANTHROPIC_OPEN_TELEMETRY=false`).
 */
interface TracingClient {
  _tracer?: Tracer | undefined;
  _genAIProviderName?: unknown;
  openTelemetry?: { tracerProvider?: TracerProvider | undefined } | undefined;
}

/** The two tracers of one worker: the client's for the work span, ours for the memory spans. */
export interface WorkTracers {
  work: Tracer;
  own: Tracer;
  providerName: string | undefined;
}

/**
 * The tracers for spans of items served with `client`, or `undefined` when the client emits no
 * spans. The work span comes from the client's own tracer, so it carries the SDK's instrumentation
 * scope as the official worker's does; the memory spans come from the same tracer provider under
 * this library's scope. Turning the client's spans off turns ours off too.
 */
export function workTracers(client: Anthropic): WorkTracers | undefined {
  return guardTracing(() => {
    const c = client as unknown as TracingClient;
    const work = c._tracer;
    if (work === undefined || typeof work.startSpan !== 'function') return undefined;
    const provider = c.openTelemetry?.tracerProvider ?? trace.getTracerProvider();
    const providerName = typeof c._genAIProviderName === 'string' ? c._genAIProviderName : undefined;
    return { work, own: provider.getTracer(TRACER_SCOPE), providerName };
  });
}

/**
 * Runs one step of telemetry. Tracing never fails a work item: whatever the application's tracer
 * provider, sampler or span processors throw is dropped and the step counts as not traced.
 */
export function guardTracing<T>(step: () => T): T | undefined {
  try {
    return step();
  } catch {
    return undefined;
  }
}

/** `fn` with `span` as the current span, so spans started inside it (the SDK's) are its children. */
export function withSpan<T>(span: Span | undefined, fn: () => Promise<T>): Promise<T> {
  if (!span) return fn();
  const ctx = guardTracing(() => trace.setSpan(context.active(), span));
  return ctx ? context.with(ctx, fn) : fn();
}

/**
 * Starts the span of one work item under `parent`, with the name and attributes of the official
 * worker's: `anthropic.environment.id`, `anthropic.environment.work.id`, `anthropic.session.id`
 * and the client's `gen_ai.provider.name`. Returns undefined when the tracer records nothing and
 * has no trace to carry on (no tracer provider is registered): the item then runs with no span
 * made current and no memory span started, so tracing costs nothing without a provider.
 */
export function startWorkSpan(tracers: WorkTracers | undefined, work: ClaimedWork, parent: Context): Span | undefined {
  if (!tracers) return undefined;
  const span = guardTracing(() =>
    tracers.work.startSpan(
      WORK_SPAN_NAME,
      {
        kind: SpanKind.INTERNAL,
        attributes: {
          ...(tracers.providerName !== undefined ? { 'gen_ai.provider.name': tracers.providerName } : {}),
          'anthropic.environment.id': work.environmentId,
          'anthropic.environment.work.id': work.id,
          'anthropic.session.id': work.data.id,
        },
      },
      parent,
    ),
  );
  return span && isNoop(span) ? undefined : span;
}

/** A span that records nothing and carries no trace: what the API's no-op tracer hands out. */
function isNoop(span: Span): boolean {
  return guardTracing(() => !span.isRecording() && !isSpanContextValid(span.spanContext())) ?? false;
}

/**
 * Ends the work span with how the item ended: `OK` when it completed, was skipped or the server
 * stopped it; `ERROR` with `error.type` when it failed; no status when the worker was closed or
 * the lease was lost, since the worker then neither finished the item nor failed it.
 */
export function endWorkSpan(span: Span | undefined, outcome: ItemOutcome): void {
  if (!span) return;
  guardTracing(() => {
    if (outcome.status === 'failed') setErrorStatus(span, outcome.error);
    else if (outcome.status !== 'aborted' && outcome.status !== 'lease_lost') span.setStatus({ code: SpanStatusCode.OK });
    span.end();
  });
}

/** Marks `span` failed with `error.type`: the error's `code` when it has one, else its name. */
export function setErrorStatus(span: Span, error: unknown): void {
  const code = (error as { code?: unknown } | undefined)?.code;
  const type = typeof code === 'string' ? code : error instanceof Error ? error.name : 'unknown';
  span.setStatus({ code: SpanStatusCode.ERROR });
  span.setAttribute('error.type', type);
}
