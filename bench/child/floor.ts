/**
 * Benchmark child: the floor, a bare SDK client that makes only the requests any worker must make
 * for a scenario (no files, no tool runner, no library code). It pages a mount's listings, or
 * serves queued sessions, then stays alive until the parent has read its usage.
 */
import { pageListings } from './floor-listings.js';
import { serveSessions } from './floor-sessions.js';
import { markDone } from './protocol.js';
import { readConfig, serve } from './serve.js';

const config = readConfig();
const floor = config.floor;
if (floor === undefined) throw new Error('bench floor child: config.floor is missing');

serve(async (signal) => {
  if (floor.kind === 'listings') await pageListings(config, floor);
  else await serveSessions(config, floor, signal);
  markDone();
  await new Promise<void>((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });
});
