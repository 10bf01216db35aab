/**
 * Records keyed by store-relative path, read and written so that any path is an ordinary key: a
 * path named like an object property (`constructor`, `__proto__`) is looked up and set as any
 * other. Every record keyed by path in the sync state goes through these.
 */

/**
 * A shallow copy of a record keyed by path, built key by key. A record of many paths copied with
 * object spread gets a hidden class of its own with one transition per key (a few hundred bytes
 * per path, for every copy); set one key at a time, it becomes a hash table instead.
 */
export function copyRecord<T>(record: Readonly<Record<string, T>>): Record<string, T> {
  const out: Record<string, T> = {};
  for (const key of Object.keys(record)) setPathKey(out, key, record[key]!);
  return out;
}

/**
 * The entry of `key` in a record keyed by path, or undefined: only the record's own keys count, so
 * a path named like an object property (`constructor`, `toString`, `__proto__`) is looked up as
 * any other. Every record keyed by path is read through it.
 */
export function pathEntry<T>(record: Readonly<Record<string, T>>, key: string): T | undefined {
  return Object.hasOwn(record, key) ? record[key] : undefined;
}

/**
 * `record[key] = value`, as an own property even for a path named `__proto__` (a plain assignment
 * would set the record's prototype instead, and the path would be lost). Every record keyed by
 * path is written through it.
 */
export function setPathKey<T>(record: Record<string, T>, key: string, value: T): void {
  if (key === '__proto__') Object.defineProperty(record, key, { value, writable: true, enumerable: true, configurable: true });
  else record[key] = value;
}
