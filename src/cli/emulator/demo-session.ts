import path from 'node:path';
import type { Emulator } from '../../testing/index.js';

/** A queued demo session: its ids and the store it mounts. */
export interface DemoSession {
  sessionId: string;
  workId: string;
  storeId: string;
  mountPath: string;
}

/**
 * Queue one demo session on `emu`: a fresh memory store (`Demo Notes <n>`, mounted at
 * `<mountRoot>/demo-notes-<n>`) and a scripted agent that reads a memory, writes a new one,
 * lists the folder with bash and ends.
 */
export async function queueDemoSession(emu: Emulator, mountRoot: string, n: number): Promise<DemoSession> {
  const store = await emu.createMemoryStore({
    name: `Demo Notes ${n}`,
    memories: { '/readme.md': 'This memory store is mounted as a folder while the session runs.\n' },
  });
  const mountPath = path.join(mountRoot, `demo-notes-${n}`);
  const { sessionId, workId } = await emu.createSession({
    title: `demo session ${n}`,
    resources: [{ memoryStoreId: store.id, access: 'read_write', mountPath }],
    script: [
      { tool: 'read', input: { file_path: `${mountPath}/readme.md` } },
      { tool: 'write', input: { file_path: `${mountPath}/from-the-agent.md`, content: `Written by demo session ${n}.\n` } },
      { tool: 'bash', input: { command: `ls ${JSON.stringify(mountPath)}` } },
      { message: 'Done: one memory read, one written; the worker uploads it at the end of the session.' },
    ],
  });
  return { sessionId, workId, storeId: store.id, mountPath };
}
