import * as fs from 'node:fs';
import * as path from 'node:path';

/**
 * `[rel, content]` of every regular file below `root` whose content starts with `tag` (what an
 * agent of the soak or the crash test wrote), read synchronously, now. Unlistable folders and files
 * that vanish while being read are passed over.
 */
export function taggedFiles(root: string, tag: string): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  const walk = (dir: string, prefix: string): void => {
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const ent of entries) {
      const rel = prefix ? `${prefix}/${ent.name}` : ent.name;
      if (ent.isDirectory()) walk(path.join(dir, ent.name), rel);
      else if (ent.isFile()) {
        try {
          const content = fs.readFileSync(path.join(dir, ent.name), 'utf8');
          if (content.startsWith(tag)) out.push([rel, content]);
        } catch {
          /* vanished */
        }
      }
    }
  };
  walk(root, '');
  return out;
}
