/**
 * What a scan of one store folder found, as the rules read it. `disk/local-scan.ts` builds a
 * {@link LocalScan} from the folder; the planner and the rules around it decide from it alone.
 */
import type { FileStat } from './file-stat.js';
import type { LocalEntry } from './plan.js';

/**
 * The local half of a sync's inputs: every regular file of a store folder as a planner
 * `LocalEntry` (`unsyncable` for files over the server's size limit or not UTF-8 text: the server
 * stores text), and what the scan found but could not read.
 */
export interface LocalScan {
  entries: Map<string, LocalEntry>;
  /** The identity each file had when scanned (fingerprints, delete checks). */
  stats: Map<string, FileStat>;
  /**
   * Entries present but not readable as regular files (FIFOs, symlinks, unreadable or over-long
   * paths, files that vanished mid-scan). A skipped path is never taken for a deletion.
   */
  skipped: SkippedEntry[];
  /** Regular files with our reserved temp prefix: never synced, kept aside at the end. */
  reserved: string[];
  markerPresent: boolean;
  /** How many files had to be read (0 on an idle sync). */
  filesRead: number;
  /**
   * The bytes of files this scan read, up to the scan's kept-bytes budget in all, so an upload sends
   * them without reading the file again.
   */
  contents: Map<string, Buffer>;
}

/** What a scan skipped without opening it, and why. */
export interface SkippedEntry {
  /** Store-relative path; `''` for the root itself. A skipped folder stands for everything below it. */
  rel: string;
  kind: 'symlink' | 'fifo' | 'socket' | 'device' | 'unreadable-name' | 'unreadable' | 'too-long' | 'too-deep' | 'vanished';
  /** The errno code behind an `unreadable`, `too-long` or `vanished` entry. */
  code?: string | undefined;
  /** One sentence for the warning: what the entry is and why it is not synced. */
  reason?: string | undefined;
}

/** True when `rel` is a skipped entry or lies below a skipped folder (`''` stands for the root). */
export function isUnderSkipped(rel: string, skipped: ReadonlySet<string>): boolean {
  if (skipped.size === 0) return false;
  if (skipped.has('') || skipped.has(rel)) return true;
  for (let i = rel.indexOf('/'); i !== -1; i = rel.indexOf('/', i + 1)) if (skipped.has(rel.slice(0, i))) return true;
  return false;
}
