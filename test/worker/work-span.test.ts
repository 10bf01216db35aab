// Pins when an item gets a work span: a tracer that records nothing and carries no trace (the
// OpenTelemetry API's no-op, when no tracer provider is registered) gives none, so an item then runs
// with no span made current and no memory span; a span that is only sampled out still carries its
// trace to the item's requests, and a recording span is kept.
import { ProxyTracerProvider, trace, TraceFlags, ROOT_CONTEXT, type Span, type Tracer } from '@opentelemetry/api';
import { describe, expect, it } from 'vitest';
import type { ClaimedWork } from '../../src/worker/poller.js';
import { startWorkSpan } from '../../src/worker/tracing.js';

const work: ClaimedWork = { id: 'work_1', environmentId: 'env_1', data: { type: 'session', id: 'sesn_1' }, secret: null };
const VALID = { traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331' };

/** A tracer whose every span is `span`. */
const tracerOf = (span: Span): Tracer => ({ startSpan: () => span, startActiveSpan: () => undefined as never });

/** A span that records: the sampled-out span with `isRecording` true. */
function recording(): Span {
  const span = trace.wrapSpanContext({ ...VALID, traceFlags: TraceFlags.SAMPLED });
  span.isRecording = () => true;
  return span;
}

const rows: Array<{ description: string; tracer: Tracer; traced: boolean }> = [
  { description: 'the API’s no-op tracer (no provider registered)', tracer: new ProxyTracerProvider().getTracer('t'), traced: false },
  {
    description: 'a span sampled out: records nothing but carries its trace',
    tracer: tracerOf(trace.wrapSpanContext({ ...VALID, traceFlags: TraceFlags.NONE })),
    traced: true,
  },
  {
    description: 'a recording span',
    tracer: tracerOf(recording()),
    traced: true,
  },
];

describe('startWorkSpan', () => {
  for (const row of rows) {
    it(`${row.traced ? 'starts' : 'does not start'} a work span with ${row.description}`, () => {
      const span = startWorkSpan({ work: row.tracer, own: row.tracer, providerName: undefined }, work, ROOT_CONTEXT);
      expect(span !== undefined).toBe(row.traced);
    });
  }
});
