import { invalidRequest, notFound } from '../errors.js';
import { isoTime, newId } from '../ids.js';
import { ustar, type TarEntry } from '../tar.js';

/** A skill's files: relative path → content (`'SKILL.md'` is required). */
export type SkillFiles = Record<string, string | Uint8Array>;

/** `BetaSkillVersion` as `GET /v1/skills/:id/versions/:version` returns it. */
export interface SkillVersionObject {
  /** The version's id. */
  id: string;
  /** Always `skill_version`. */
  type: 'skill_version';
  /** The skill it is a version of. */
  skill_id: string;
  /** The skill's name. */
  name: string;
  /** The version's description (`''` when none was given). */
  description: string;
  /** ISO time the version was created. */
  created_at: string;
}

interface SkillVersion {
  object: SkillVersionObject;
  files: Array<{ path: string; content: Buffer }>;
}

/** Kebab-case, as the API's skill slugs: `[a-z0-9]` runs joined by single `-`, at most 64 characters. */
const SKILL_NAME = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;

let versionSeq = 0;

/**
 * One skill and its versions, oldest first. The archive a version downloads as is a ustar file
 * with a single wrapper folder named after the skill (`<name>/SKILL.md`, ...), as real bundles are.
 */
export class Skill {
  readonly id: string;
  readonly type: 'custom' | 'anthropic';
  readonly name: string;
  readonly versions: SkillVersion[] = [];

  constructor(init: { name: string; type?: 'custom' | 'anthropic'; skillId?: string }) {
    if (!SKILL_NAME.test(init.name) || init.name.length > 64) {
      throw invalidRequest(`skill name ${JSON.stringify(init.name)} must be kebab-case ([a-z0-9] and single '-'), at most 64 characters`);
    }
    this.name = init.name;
    this.type = init.type ?? 'custom';
    this.id = init.skillId ?? newId('skill');
  }

  /** Add a version holding `files`; it becomes `latest`. */
  addVersion(files: SkillFiles, description = ''): SkillVersionObject {
    const entries = Object.entries(files).map(([raw, content]) => ({ path: checkedPath(raw, this.id), content: Buffer.from(content) }));
    if (!entries.some((e) => e.path === 'SKILL.md')) {
      throw invalidRequest(`skill ${this.name}: files must include a top-level SKILL.md`);
    }
    // Version ids are opaque; the API uses epoch-microsecond strings.
    const id = String(Date.now() * 1000 + (++versionSeq % 1000));
    const object: SkillVersionObject = {
      id,
      type: 'skill_version',
      skill_id: this.id,
      name: this.name,
      description,
      created_at: isoTime(),
    };
    this.versions.push({ object, files: entries });
    return { ...object };
  }

  /** A version by id, or the newest for `latest`; 404 naming the skill otherwise. */
  version(version: string): SkillVersion {
    const found = version === 'latest' ? this.versions.at(-1) : this.versions.find((v) => v.object.id === version);
    if (!found) throw notFound(`skill ${this.id} has no version ${JSON.stringify(version)}`);
    return found;
  }

  /** The skill reference a session's resolved agent carries (`agent.skills[]`). */
  reference(version: string): { skill_id: string; type: 'custom' | 'anthropic'; version: string } {
    return { skill_id: this.id, type: this.type, version: this.version(version).object.id };
  }

  /** The version's files as a ustar archive wrapped in one `<name>/` folder. */
  archive(version: string): Buffer {
    const v = this.version(version);
    const dirs = new Set<string>([`${this.name}/`]);
    for (const f of v.files) {
      const parts = f.path.split('/').slice(0, -1);
      for (let i = 1; i <= parts.length; i++) dirs.add(`${this.name}/${parts.slice(0, i).join('/')}/`);
    }
    const entries: TarEntry[] = [...dirs].map((name) => ({ name }));
    for (const f of v.files) entries.push({ name: `${this.name}/${f.path}`, content: f.content });
    return ustar(entries);
  }
}

/** A relative POSIX path without empty, `.` or `..` segments. */
function checkedPath(raw: string, skillId: string): string {
  const segments = raw.split('/');
  if (raw.startsWith('/') || segments.some((s) => s === '' || s === '.' || s === '..')) {
    throw invalidRequest(`skill ${skillId}: file path ${JSON.stringify(raw)} must be relative, without empty, '.' or '..' segments`);
  }
  return raw;
}
