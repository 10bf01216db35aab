/**
 * Test kit for spans: an in-memory exporter behind a tracer provider handed to the SDK client
 * (never registered globally), an AsyncLocalStorage context manager so spans nest across awaits,
 * and the finished spans as a tree that prints one line per span.
 */
import { context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';

export interface SpanNode {
  span: ReadableSpan;
  name: string;
  attributes: ReadableSpan['attributes'];
  children: SpanNode[];
}

export interface TraceKit {
  provider: BasicTracerProvider;
  exporter: InMemorySpanExporter;
  /** The finished spans as trees, roots in start order, children in start order. */
  roots(): SpanNode[];
  close(): Promise<void>;
}

export function traceKit(): TraceKit {
  const contextManager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contextManager);
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  return {
    provider,
    exporter,
    roots: () => buildTree(exporter.getFinishedSpans()),
    async close() {
      await provider.shutdown();
      context.disable();
    },
  };
}

export function buildTree(spans: readonly ReadableSpan[]): SpanNode[] {
  const byId = new Map<string, SpanNode>();
  for (const span of spans) byId.set(span.spanContext().spanId, { span, name: span.name, attributes: span.attributes, children: [] });
  const roots: SpanNode[] = [];
  for (const node of byId.values()) {
    const parentId = node.span.parentSpanContext?.spanId;
    const parent = parentId !== undefined ? byId.get(parentId) : undefined;
    (parent ? parent.children : roots).push(node);
  }
  const byStart = (a: SpanNode, b: SpanNode): number => hrMs(a.span.startTime) - hrMs(b.span.startTime);
  const sortAll = (nodes: SpanNode[]): void => {
    nodes.sort(byStart);
    for (const n of nodes) sortAll(n.children);
  };
  sortAll(roots);
  return roots;
}

function hrMs(t: [number, number]): number {
  return t[0] * 1e3 + t[1] / 1e6;
}

/** Every node below `root` (itself included), depth first. */
export function allNodes(root: SpanNode): SpanNode[] {
  return [root, ...root.children.flatMap(allNodes)];
}

/** One line per span, indented by depth, with the attributes listed in `show`. */
export function printTree(roots: readonly SpanNode[], show: readonly string[]): string {
  const lines: string[] = [];
  const walk = (n: SpanNode, depth: number): void => {
    const attrs = show.filter((k) => n.attributes[k] !== undefined).map((k) => `${k}=${String(n.attributes[k])}`);
    lines.push(`${'  '.repeat(depth)}${n.name}${attrs.length > 0 ? `  {${attrs.join(', ')}}` : ''}`);
    for (const c of n.children) walk(c, depth + 1);
  };
  for (const r of roots) walk(r, 0);
  return lines.join('\n');
}
