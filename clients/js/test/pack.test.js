// The published package: `npm pack`, then a scratch project installs the
// tarball offline (with `ws`, packed from this package's node_modules),
// imports it by name, type-checks against its declarations and runs a turn
// against a real harnessd.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startDaemon } from './daemon.js';

const pkgDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
let daemon;
let scratch;

before(async () => {
  daemon = await startDaemon();
  scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'harnessd-js-pack-'));
});

after(async () => {
  await daemon?.stop();
  if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
});

const run = (cmd, args, cwd) => execFileSync(cmd, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

test('the packed tarball installs offline and works from a scratch project', () => {
  const packed = JSON.parse(run(npm, ['pack', '--json', '--pack-destination', scratch], pkgDir));
  const files = packed[0].files.map((f) => f.path);
  assert.ok(files.includes('src/index.js') && files.includes('src/index.d.ts'), files.join(' '));
  assert.ok(!files.some((f) => f.startsWith('test/')), 'tests are not published');
  const tarball = path.join(scratch, packed[0].filename);
  const ws = JSON.parse(run(npm, ['pack', '--json', '--pack-destination', scratch, path.join(pkgDir, 'node_modules', 'ws')], pkgDir));

  const app = path.join(scratch, 'app');
  fs.mkdirSync(app);
  fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'scratch', private: true, type: 'module' }));
  run(npm, ['install', '--offline', '--no-audit', '--no-fund', tarball, path.join(scratch, ws[0].filename)], app);

  fs.writeFileSync(path.join(app, 'main.js'), `
import { HarnessClient, isKnownEvent } from 'harnessd-client';
const client = new HarnessClient(process.argv[2], { reconnect: false });
await client.connect();
const seqs = [];
const turn = client.prompt('scratch', '@chunks 4 3');
for await (const ev of turn) { if (!isKnownEvent(ev)) throw new Error('bad event'); seqs.push(ev.seq); }
console.log(JSON.stringify({ seqs, result: await turn.result, server: client.serverInfo.implementation }));
client.close();
`);
  const out = JSON.parse(run(process.execPath, ['main.js', daemon.url], app));
  assert.equal(out.server, 'harnessd');
  assert.deepEqual(out.result, { status: 'ok', reason: { kind: 'completed' } });
  assert.deepEqual(out.seqs, Array.from({ length: out.seqs.length }, (_, i) => i));

  // The declarations resolve through the package's "exports".
  fs.writeFileSync(path.join(app, 'check.ts'), `
import { HarnessClient, type PromptResult } from 'harnessd-client';
export async function f(): Promise<PromptResult> { return new HarnessClient('ws://x').prompt('s', 'hi').result; }
`);
  fs.writeFileSync(path.join(app, 'tsconfig.json'), JSON.stringify({
    compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', target: 'ES2022', lib: ['ES2022', 'DOM'], strict: true, noEmit: true, types: [] },
    files: ['check.ts'],
  }));
  run(process.execPath, [path.join(pkgDir, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', '.'], app);
});
