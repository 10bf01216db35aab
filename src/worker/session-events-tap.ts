import type Anthropic from '@anthropic-ai/sdk';

/**
 * Whether a session event says the agent's turn is over and the session waits for the user:
 * `session.status_idle` for any reason but `requires_action`. A `requires_action` idle waits on
 * the calls it lists; they run next, and the sync after each call covers its edits.
 */
export function endsTurn(event: unknown): boolean {
  if (typeof event !== 'object' || event === null) return false;
  const { type, stop_reason: stopReason } = event as { type?: unknown; stop_reason?: unknown };
  if (type !== 'session.status_idle') return false;
  const reason = typeof stopReason === 'object' && stopReason !== null ? (stopReason as { type?: unknown }).type : undefined;
  return reason !== 'requires_action';
}

/**
 * `client`, whose session event streams (`beta.sessions.events.stream`) also hand each event to
 * `onEvent` as the reader takes it, before the reader acts on it. Everything else is the client's
 * own, called on the client itself. The session tool runner of every SDK version in the peer range
 * reads the session's events through that public method, so a worker sees the session go idle
 * without a second stream; the worker tests that pin the idle push fail on a version that stops
 * doing so. `onEvent` must not throw (a throw is swallowed, so the reader never sees it).
 */
export function tappingSessionEvents(client: Anthropic, onEvent: (event: unknown) => void): Anthropic {
  const events = client.beta.sessions.events;
  const tappedEvents = forwarding(events, {
    stream: (...args: Parameters<typeof events.stream>) => events.stream(...args).then((stream) => tapped(stream, onEvent)),
  });
  const tappedSessions = forwarding(client.beta.sessions, { events: tappedEvents });
  const tappedBeta = forwarding(client.beta, { sessions: tappedSessions });
  return forwarding(client, { beta: tappedBeta });
}

/** `target` with the members in `over` replaced; its other methods stay bound to `target`. */
function forwarding<T extends object>(target: T, over: Record<string, unknown>): T {
  return new Proxy(target, {
    get(t, prop) {
      if (typeof prop === 'string' && Object.hasOwn(over, prop)) return over[prop];
      const value: unknown = Reflect.get(t, prop, t);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(t) : value;
    },
  });
}

/** `stream`, whose async iterator hands each value to `onEvent` first. */
function tapped<S extends AsyncIterable<unknown>>(stream: S, onEvent: (event: unknown) => void): S {
  return new Proxy(stream, {
    get(t, prop) {
      if (prop === Symbol.asyncIterator) {
        return () => {
          const inner = t[Symbol.asyncIterator]();
          const iterator: AsyncIterableIterator<unknown> = {
            next: async (...args: [] | [unknown]) => {
              const step = await inner.next(...args);
              if (!step.done) {
                try {
                  onEvent(step.value);
                } catch {
                  // The reader must never see a failure of an observer.
                }
              }
              return step;
            },
            return: async (value?: unknown) => (inner.return ? inner.return(value) : { done: true, value }),
            throw: async (err?: unknown) => {
              if (inner.throw) return inner.throw(err);
              throw err;
            },
            [Symbol.asyncIterator]() {
              return iterator;
            },
          };
          return iterator;
        };
      }
      const value: unknown = Reflect.get(t, prop, t);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(t) : value;
    },
  });
}
