/**
 * Every test file gets its own state folder (XDG_STATE_HOME in a temp folder), so a worker or
 * mounter built without `stateDir` never writes its journal into the user's home.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

process.env['XDG_STATE_HOME'] = fs.mkdtempSync(path.join(os.tmpdir(), 'maw-test-state-'));
