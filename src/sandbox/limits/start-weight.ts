/**
 * The CPU weights of a worker's sandboxes while some of them start.
 *
 * A sandbox's start (namespaces, then Node loading the toolset) runs none of the agent's code: the
 * first call is sent once its tool host is ready. Held at the sandboxes' low weight, that start
 * crawls whenever the CPU is contended (on cgroup v1, where the sandboxes' parent sits beside
 * every process of the host, by any load on the host), and every session's first call waits for
 * it. So while at least one sandbox starts, the sandboxes' parent weighs as much as the worker
 * (never more), and each starting session's cgroup outweighs its running siblings a hundred to
 * one, so the start gets nearly all of that and the agents' running code no more than before. Once
 * the last start is over (ready, failed or closed), the parent is back at the configured weight.
 * A worker that crashes mid-start leaves the parent raised until its next start writes it again.
 *
 * Weights are on the cgroup v2 scale (the worker's is 100); the cgroup writes are the caller's.
 */

/** The weight of the worker's own cgroup, on the v2 scale. */
export const WORKER_CPU_WEIGHT = 100;
/** A session's cgroup beside its siblings while its sandbox runs. */
export const RUNNING_SESSION_WEIGHT = 100;
/** A session's cgroup beside its siblings while its sandbox starts (the v2 maximum). */
export const STARTING_SESSION_WEIGHT = 10_000;

/** The weight of the sandboxes' parent with `starting` sandboxes starting. Pure. */
export function sandboxesCpuWeight(cpuWeight: number, starting: number): number {
  return starting > 0 ? Math.max(cpuWeight, WORKER_CPU_WEIGHT) : cpuWeight;
}

/** Counts a worker's starting sandboxes and sets the weights each start and end calls for. */
export class SandboxStarts {
  readonly #cpuWeight: number;
  readonly #setParent: (weight: number) => void;
  readonly #onError: (e: unknown) => void;
  #starting = 0;

  /** `setParent` writes the sandboxes' parent's weight; `onError` is told of a refused write. */
  constructor(cpuWeight: number, setParent: (weight: number) => void, onError: (e: unknown) => void) {
    this.#cpuWeight = cpuWeight;
    this.#setParent = setParent;
    this.#onError = onError;
  }

  /** Sandboxes starting now. */
  get starting(): number {
    return this.#starting;
  }

  /**
   * A sandbox starts: raise the parent (at the first start) and the session's weight (through
   * `setSession`). Returns the start's end, to call once the sandbox is ready, failed or closed;
   * calling it again does nothing.
   */
  begin(setSession: (weight: number) => void): () => void {
    this.#starting++;
    this.#write(() => setSession(STARTING_SESSION_WEIGHT));
    if (this.#starting === 1) this.#write(() => this.#setParent(sandboxesCpuWeight(this.#cpuWeight, 1)));
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.#starting--;
      this.#write(() => setSession(RUNNING_SESSION_WEIGHT));
      if (this.#starting === 0) this.#write(() => this.#setParent(sandboxesCpuWeight(this.#cpuWeight, 0)));
    };
  }

  #write(write: () => void): void {
    try {
      write();
    } catch (e) {
      this.#onError(e);
    }
  }
}
