import { EXIT } from './exit-codes.js';

export type ShutdownSignal = 'SIGINT' | 'SIGTERM';

/** The part of `process` the handler uses; tests pass an EventEmitter. */
export interface SignalTarget {
  on(event: ShutdownSignal, listener: () => void): unknown;
  off(event: ShutdownSignal, listener: () => void): unknown;
}

/**
 * The CLI's signal policy (the library installs no handler): the first SIGINT/SIGTERM calls
 * `onFirst` (which drains and exits 0); a second one exits at once with 130 (SIGINT) or 143
 * (SIGTERM). Returns the function that removes the handlers.
 */
export function handleShutdownSignals(
  onFirst: (signal: ShutdownSignal) => void,
  exitNow: (code: number) => void,
  target: SignalTarget = process,
): () => void {
  let received = false;
  const make = (signal: ShutdownSignal) => () => {
    if (received) {
      exitNow(signal === 'SIGINT' ? EXIT.SECOND_SIGINT : EXIT.SECOND_SIGTERM);
      return;
    }
    received = true;
    onFirst(signal);
  };
  const onInt = make('SIGINT');
  const onTerm = make('SIGTERM');
  target.on('SIGINT', onInt);
  target.on('SIGTERM', onTerm);
  return () => {
    target.off('SIGINT', onInt);
    target.off('SIGTERM', onTerm);
  };
}
