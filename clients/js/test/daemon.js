// Starts a real harnessd for the tests: `--listen ws://127.0.0.1:0` with the
// scripted provider, and reads the bound URL from its --ready-file.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const repo = path.resolve(here, '..', '..', '..');
export const harnessdBin = process.env.HARNESSD_BIN || path.join(repo, 'build', 'harnessd');

/** A daemon in a fresh temp dir; `url` is its ws:// URL. Call stop() when done. */
export async function startDaemon(extraArgs = [], { port = 0 } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'harnessd-js-'));
  const ready = path.join(dir, 'ready.json');
  const args = ['--listen', `ws://127.0.0.1:${port}`, '--ready-file', ready, '--provider', 'scripted',
    '--session-root', path.join(dir, 'sessions'), '--workspace-root', path.join(dir, 'workspaces'),
    '--threads', '2', ...extraArgs];
  const proc = spawn(harnessdBin, args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  proc.stderr.on('data', (d) => { log += d; });
  let exited = null;
  proc.on('exit', (code, sig) => { exited = code ?? sig; });
  const deadline = Date.now() + 20000;
  for (;;) {
    if (exited !== null) throw new Error(`harnessd exited (${exited}) before it was ready:\n${log}`);
    try {
      const { listen } = JSON.parse(fs.readFileSync(ready, 'utf8'));
      const url = listen.find((u) => u.startsWith('ws://'));
      if (url) {
        return {
          url: url.endsWith('/') ? url : `${url}/`,
          dir,
          log: () => log,
          async stop() {
            if (exited === null) {
              const gone = new Promise((r) => proc.once('exit', r));
              proc.kill('SIGTERM');
              const timer = setTimeout(() => proc.kill('SIGKILL'), 5000);
              await gone;
              clearTimeout(timer);
            }
            fs.rmSync(dir, { recursive: true, force: true });
          },
        };
      }
    } catch {
      // Not written yet, or half written: read again.
    }
    if (Date.now() > deadline) throw new Error(`harnessd not ready after 20 s:\n${log}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * A TCP relay in front of the daemon whose connections the test can cut,
 * as a network failure would: the client sees its socket drop, the daemon
 * sees its peer go away.
 */
export async function startRelay(targetUrl) {
  const target = new URL(targetUrl);
  const sockets = new Set();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    sockets.add(client);
    sockets.add(upstream);
    client.pipe(upstream);
    upstream.pipe(client);
    const drop = () => { client.destroy(); upstream.destroy(); sockets.delete(client); sockets.delete(upstream); };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    // The daemon's Host check accepts 127.0.0.1 only with its own port: name the daemon's.
    url: `ws://127.0.0.1:${server.address().port}/`,
    cut() {
      for (const s of sockets) s.destroy();
      sockets.clear();
    },
    close() {
      this.cut();
      return new Promise((r) => server.close(r));
    },
  };
}
