import * as fs from 'node:fs';

/**
 * Which processes in a sandbox belong to which tool call, so that a call that runs too long can be
 * stopped without ending the session's other work. Runs in the tool host, which sees its sandbox's
 * PID namespace in `/proc`.
 *
 * The toolset starts each bash shell as the leader of a session of its own; everything a command
 * starts stays in that session unless it leaves on purpose (`setsid`). So a call's processes are
 * those of its shell's session that were not there when the call began, the shell itself aside,
 * plus the programs the call started directly (grep's `rg`). Background jobs of earlier calls
 * were there when the call began: they survive, as do other threads' shells and everything in
 * them.
 *
 * Which shell serves a call is known by its key: the thread's key when the toolset keeps a shell
 * per thread, one key for all otherwise (the host is told which, see `HostInit.shellPerThread`).
 * The host reports each process the toolset starts and the call it started it in.
 */
export class CallProcesses {
  readonly #proc: string;
  /** Shell key -> the pids of the session leaders started in that key's calls. */
  readonly #leaders = new Map<string, Set<number>>();
  readonly #calls = new Map<number, { key: string; before: Set<string>; direct: Set<number> }>();

  constructor(procRoot = '/proc') {
    this.#proc = procRoot;
  }

  /** A call starts on the shell of `key`: remember what that shell's sessions hold now. */
  begin(callId: number, key: string): void {
    const sessions = this.#leaders.get(key);
    const before = new Set<string>();
    if (sessions !== undefined && sessions.size > 0) {
      for (const p of readProcesses(this.#proc)) if (sessions.has(p.session)) before.add(identity(p));
    }
    this.#calls.set(callId, { key, before, direct: new Set() });
  }

  /** The toolset started `pid` during call `callId`; `leader`: in a session of its own (a shell). */
  started(callId: number, pid: number, leader: boolean, exited: Promise<unknown>): void {
    const call = this.#calls.get(callId);
    if (call === undefined) return;
    if (leader) {
      let set = this.#leaders.get(call.key);
      if (set === undefined) this.#leaders.set(call.key, (set = new Set()));
      set.add(pid);
      // Its number can be reused once it is gone; what it left behind is no call's any more.
      void exited.then(() => set.delete(pid));
    } else {
      call.direct.add(pid);
      void exited.then(() => call.direct.delete(pid));
    }
  }

  /** The call ended: forget it. */
  end(callId: number): void {
    this.#calls.delete(callId);
  }

  /**
   * SIGKILL every process the call started that still runs: new members of its shell's sessions
   * (never the shell) and the programs it started directly. Scans again while a scan still finds
   * some (a process can fork between the scan and the kill). Returns how many were killed.
   */
  kill(callId: number): number {
    const call = this.#calls.get(callId);
    if (call === undefined) return 0;
    let killed = 0;
    for (const pid of call.direct) killed += signal(pid);
    const sessions = this.#leaders.get(call.key);
    if (sessions === undefined || sessions.size === 0) return killed;
    for (let pass = 0; pass < 5; pass++) {
      let found = 0;
      for (const p of readProcesses(this.#proc)) {
        // A zombie is dead already: signalling it again would only keep this loop going.
        if (p.state === 'Z' || p.state === 'X' || !sessions.has(p.session) || sessions.has(p.pid) || call.before.has(identity(p))) continue;
        found += signal(p.pid);
      }
      killed += found;
      if (found === 0) break;
    }
    return killed;
  }
}

/** A process as `/proc/<pid>/stat` shows it. */
export interface ProcessEntry {
  pid: number;
  /** Its state letter (`R`, `S`, `Z` for a zombie...). */
  state: string;
  /** Its session id (the pid of the session's leader). */
  session: number;
  /** When it started, in clock ticks after boot: with the pid, it names one process for good. */
  start: number;
}

/** Every process visible in `procRoot`; one that ends while it is read is left out. */
export function readProcesses(procRoot = '/proc'): ProcessEntry[] {
  const out: ProcessEntry[] = [];
  let names: string[];
  try {
    names = fs.readdirSync(procRoot);
  } catch {
    return out;
  }
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    let stat: string;
    try {
      stat = fs.readFileSync(`${procRoot}/${name}/stat`, 'utf8');
    } catch {
      continue;
    }
    const parsed = parseStat(stat);
    if (parsed !== undefined) out.push(parsed);
  }
  return out;
}

/**
 * One `/proc/<pid>/stat` line. The command name (field 2) is in parentheses and may hold spaces
 * and parentheses itself, so the fields are counted from the last `)`: state is field 3, session
 * field 6, start time field 22.
 */
export function parseStat(line: string): ProcessEntry | undefined {
  const close = line.lastIndexOf(')');
  const pid = Number.parseInt(line, 10);
  if (close < 0 || !Number.isInteger(pid)) return undefined;
  const fields = line
    .slice(close + 1)
    .trim()
    .split(/\s+/);
  const session = Number(fields[6 - 3]);
  const start = Number(fields[22 - 3]);
  if (!Number.isInteger(session) || !Number.isFinite(start)) return undefined;
  return { pid, state: fields[0] ?? '', session, start };
}

function identity(p: ProcessEntry): string {
  return `${p.pid}:${p.start}`;
}

function signal(pid: number): number {
  try {
    process.kill(pid, 'SIGKILL');
    return 1;
  } catch {
    return 0;
  }
}
