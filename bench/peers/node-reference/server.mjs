#!/usr/bin/env node
// Reference server for the harnessd protocol, written as a typical Node
// service would be: NDJSON over TCP (net) and WebSocket (the `ws` package),
// optionally serving a static directory over HTTP on the WebSocket port.
// Used by the bench as a comparison peer and by the browser test.
//
//   node server.mjs [--tcp HOST:PORT]... [--ws HOST:PORT]... [--static DIR]
//                   [--ready-file PATH] [--max-frame-bytes N]

import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { WebSocketServer } from 'ws';
import { Connection } from './rpc.mjs';

const USAGE = `usage: server.mjs [--tcp HOST:PORT]... [--ws HOST:PORT]... [--static DIR]
                 [--ready-file PATH] [--max-frame-bytes N] [--quiet]`;

function parseArgs(argv) {
  const opts = { tcp: [], ws: [], staticDir: null, readyFile: null, maxFrameBytes: 8 * 1024 * 1024, quiet: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) fail(`${a} needs a value`);
      return argv[++i];
    };
    switch (a) {
      case '--tcp': opts.tcp.push(parseHostPort(next())); break;
      case '--ws': opts.ws.push(parseHostPort(next())); break;
      case '--static': opts.staticDir = path.resolve(next()); break;
      case '--ready-file': opts.readyFile = next(); break;
      case '--max-frame-bytes': opts.maxFrameBytes = Number.parseInt(next(), 10); break;
      case '--quiet': opts.quiet = true; break;
      case '-h': case '--help': console.log(USAGE); process.exit(0); break;
      default: fail(`unknown argument: ${a}`);
    }
  }
  if (opts.tcp.length === 0 && opts.ws.length === 0) fail('give at least one --tcp or --ws');
  if (!(opts.maxFrameBytes > 0)) fail('--max-frame-bytes must be positive');
  return opts;
}

function fail(msg) {
  console.error(`node-reference: ${msg}\n${USAGE}`);
  process.exit(2);
}

function parseHostPort(s) {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d+)$/.exec(s);
  if (!m) fail(`expected HOST:PORT, got ${s}`);
  return { host: m[1] ?? m[2], port: Number(m[3]) };
}

const opts = parseArgs(process.argv.slice(2));
const log = (...a) => { if (!opts.quiet) console.error('node-reference:', ...a); };

// ---- TCP: newline-delimited JSON ---------------------------------------

function serveTcp(socket) {
  socket.setNoDelay(true);
  const decoder = new TextDecoder('utf-8', { fatal: true });
  const conn = new Connection({
    kind: 'tcp',
    write: (text) => socket.write(text + '\n'),
    drain: () => new Promise((resolve) => {
      const done = () => { socket.off('drain', done); socket.off('close', done); resolve(); };
      socket.on('drain', done);
      socket.on('close', done);
    }),
    close: () => socket.end(),
  });
  let pending = [];     // buffers of the current, unterminated line
  let pendingBytes = 0;
  let discarding = false; // inside an oversized line: drop until newline

  const onLine = (buf) => {
    if (buf.length && buf[buf.length - 1] === 0x0d) buf = buf.subarray(0, buf.length - 1);
    if (buf.length === 0) return;
    let text;
    try {
      text = decoder.decode(buf);
    } catch {
      conn.parseError();
      return;
    }
    if (text.trim() === '') return;
    conn.handleFrame(text);
  };

  socket.on('data', (data) => {
    let start = 0;
    for (;;) {
      const nl = data.indexOf(0x0a, start);
      if (nl < 0) break;
      const piece = data.subarray(start, nl);
      if (discarding) {
        discarding = false;
      } else if (pendingBytes + piece.length > opts.maxFrameBytes) {
        conn.oversized();
      } else if (pending.length) {
        pending.push(piece);
        onLine(Buffer.concat(pending));
      } else {
        onLine(piece);
      }
      pending = [];
      pendingBytes = 0;
      start = nl + 1;
    }
    if (start < data.length && !discarding) {
      const rest = data.subarray(start);
      if (pendingBytes + rest.length > opts.maxFrameBytes) {
        conn.oversized();
        discarding = true;
        pending = [];
        pendingBytes = 0;
      } else {
        pending.push(Buffer.from(rest));
        pendingBytes += rest.length;
      }
    }
  });
  socket.on('error', () => {});
  socket.on('close', () => conn.onClose());
}

// ---- WebSocket (+ static HTTP on the same port) --------------------------

const CONTENT_TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.txt': 'text/plain; charset=utf-8',
};

function serveStatic(req, res) {
  if (!opts.staticDir) {
    res.writeHead(404, { 'content-type': 'text/plain' }).end('no static directory\n');
    return;
  }
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.writeHead(405, { allow: 'GET, HEAD' }).end();
    return;
  }
  let rel;
  try {
    rel = decodeURIComponent(new URL(req.url, 'http://x').pathname);
  } catch {
    res.writeHead(400).end();
    return;
  }
  if (rel.endsWith('/')) rel += 'index.html';
  const file = path.resolve(opts.staticDir, '.' + rel);
  if (file !== opts.staticDir && !file.startsWith(opts.staticDir + path.sep)) {
    res.writeHead(403).end();
    return;
  }
  fs.readFile(file, (err, body) => {
    if (err) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    res.writeHead(200, {
      'content-type': CONTENT_TYPES[path.extname(file)] ?? 'application/octet-stream',
      'content-length': body.length,
      'cache-control': 'no-cache',
      'x-content-type-options': 'nosniff',
    });
    res.end(req.method === 'HEAD' ? undefined : body);
  });
}

const WS_HIGH_WATER = 1 << 20;

function serveWs(ws) {
  const conn = new Connection({
    kind: 'ws',
    write: (text) => {
      ws.send(text);
      return ws.bufferedAmount < WS_HIGH_WATER;
    },
    drain: () => new Promise((resolve) => {
      const sock = ws._socket;
      if (!sock || ws.readyState !== ws.OPEN) { resolve(); return; }
      const done = () => { sock.off('drain', done); ws.off('close', done); resolve(); };
      sock.on('drain', done);
      ws.on('close', done);
    }),
    close: () => ws.close(1000),
  });
  ws.on('message', (data, isBinary) => {
    if (isBinary) {
      ws.close(1003, 'binary frames are not supported');
      return;
    }
    conn.handleFrame(data.toString('utf8'));
  });
  ws.on('error', () => {});
  ws.on('close', () => conn.onClose());
}

// ---- start ------------------------------------------------------------

function listen(server, { host, port }) {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve(server.address());
    });
  });
}

const fmtHost = (h) => (h.includes(':') ? `[${h}]` : h);
const servers = [];
const listenUrls = [];

for (const hp of opts.tcp) {
  const server = net.createServer(serveTcp);
  const addr = await listen(server, hp);
  servers.push(server);
  listenUrls.push(`tcp://${fmtHost(addr.address)}:${addr.port}`);
}
for (const hp of opts.ws) {
  const server = http.createServer(serveStatic);
  const wss = new WebSocketServer({ server, maxPayload: opts.maxFrameBytes, perMessageDeflate: false });
  wss.on('connection', serveWs);
  const addr = await listen(server, hp);
  servers.push(server);
  listenUrls.push(`ws://${fmtHost(addr.address)}:${addr.port}`);
}

log(`listening on ${listenUrls.join(' ')}`);
if (opts.readyFile) {
  const tmp = `${opts.readyFile}.tmp${process.pid}`;
  fs.writeFileSync(tmp, JSON.stringify({ listen: listenUrls }) + '\n');
  fs.renameSync(tmp, opts.readyFile);
}

function stop(signal) {
  log(`${signal}: stopping`);
  for (const s of servers) s.close();
  process.exit(0);
}
process.on('SIGTERM', () => stop('SIGTERM'));
process.on('SIGINT', () => stop('SIGINT'));
