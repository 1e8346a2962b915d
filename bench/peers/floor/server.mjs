#!/usr/bin/env node
// The bench's floor: the least work a server can do to answer the bench's
// prompts correctly, to show what this machine's loopback and syscalls allow.
// NDJSON over TCP only. A `session/prompt` with `@chunks K S` is answered with
// the same event sequence as harnessd (seq contiguous per session), built by
// concatenating prebuilt frame pieces, then the response.
//   default   one socket.write per frame (like a typical Node service)
//   --batch   one socket.write of all the turn's frames joined
//
//   node server.mjs --tcp HOST:PORT [--batch] [--ready-file PATH]

import fs from 'node:fs';
import net from 'node:net';

const USAGE = 'usage: server.mjs --tcp HOST:PORT [--batch] [--ready-file PATH] [--quiet]';
const opts = { host: '127.0.0.1', port: null, batch: false, readyFile: null, quiet: false };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (a === '--batch') opts.batch = true;
  else if (a === '--quiet') opts.quiet = true;
  else if (a === '--ready-file' && i + 1 < argv.length) opts.readyFile = argv[++i];
  else if (a === '--tcp' && i + 1 < argv.length) {
    const m = /^(.+):(\d+)$/.exec(argv[++i]);
    if (!m) { console.error(USAGE); process.exit(2); }
    opts.host = m[1].replace(/^\[|\]$/g, '');
    opts.port = Number(m[2]);
  } else if (a === '-h' || a === '--help') { console.log(USAGE); process.exit(0); }
  else { console.error(`floor: unknown argument ${a}\n${USAGE}`); process.exit(2); }
}
if (opts.port === null) { console.error(USAGE); process.exit(2); }

const INIT_RESULT = JSON.stringify({
  serverInfo: { name: 'deepseek-harness-sdk-runtime', version: '0.1.0', implementation: 'floor' },
  protocolVersion: 1,
  capabilities: { providers: ['scripted'], methods: ['initialize', 'session/prompt', 'shutdown'] },
});
const OK_RESULT = '{"status":"ok","reason":{"kind":"completed"}}';
const PROVENANCE = '"provenance":{"provider":"scripted","model":"scripted"}';

// text-delta chunk tails, prebuilt per (BYTES, letter): `…"text":"aaaa"}}}}\n`
const deltaTails = new Map();
function deltaTail(bytes, i) {
  let tails = deltaTails.get(bytes);
  if (!tails) {
    tails = Array.from({ length: 26 }, (_, k) =>
      `,"step":0,"chunk":{"type":"text-delta","index":0,"text":"${String.fromCharCode(97 + k).repeat(bytes)}"}}}}}\n`);
    deltaTails.set(bytes, tails);
  }
  return tails[i % 26];
}
// full answer texts, prebuilt per (COUNT, BYTES)
const answers = new Map();
function answerText(count, bytes) {
  const key = `${count}x${bytes}`;
  let s = answers.get(key);
  if (s === undefined) {
    s = '';
    for (let i = 0; i < count; i++) s += String.fromCharCode(97 + (i % 26)).repeat(bytes);
    answers.set(key, s);
  }
  return s;
}

const seqs = new Map(); // sessionId -> next seq
const turns = new Map(); // sessionId -> next turn

/** All frames of one turn plus the response, as an array of strings. */
function turnFrames(id, sessionId, userBlocks, count, bytes, echo) {
  const t0 = Date.now();
  const turn = turns.get(sessionId) ?? 0;
  turns.set(sessionId, turn + 1);
  let seq = seqs.get(sessionId) ?? 0;
  const head = `{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":${JSON.stringify(sessionId)},"event":{"type":"`;
  const ev = (type, data) => `${head}${type}","seq":${seq++},"time":${t0},"data":${data}}}}\n`;
  const chunkHead = `${head}assistant/chunk","seq":`;
  const chunkMid = `,"time":${t0},"data":{"turn":${turn}`;
  const ts = `{"turn":${turn},"step":0`;
  const frames = [
    ev('turn/start', `{"turn":${turn},"trigger":{"kind":"message","source":{"kind":"user"}}}`),
    ev('user/message', `{"content":${JSON.stringify(userBlocks)},"source":{"kind":"user"}}`),
    ev('step/start', `${ts}}`),
    ev('assistant/chunk', `${ts},"chunk":{"type":"block-start","index":0,"blockType":"text"}}`),
  ];
  let text;
  if (echo !== null) {
    text = echo;
    frames.push(ev('assistant/chunk', `${ts},"chunk":{"type":"text-delta","index":0,"text":${JSON.stringify(echo)}}}`));
  } else {
    text = answerText(count, bytes);
    for (let i = 0; i < count; i++) frames.push(chunkHead + (seq++) + chunkMid + deltaTail(bytes, i));
  }
  frames.push(
    ev('assistant/chunk', `${ts},"chunk":{"type":"block-end","index":0}}`),
    ev('assistant/chunk', `${ts},"chunk":{"type":"finish","reason":"stop"}}`),
    ev('assistant/message', `${ts},"content":[{"type":"text","text":${JSON.stringify(text)}}],${PROVENANCE}}`),
    ev('step/end', `${ts}}`),
    ev('turn/end', `{"turn":${turn},"reason":{"kind":"completed"}}`),
    `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":${OK_RESULT}}\n`,
  );
  seqs.set(sessionId, seq);
  return frames;
}

const reply = (id, result) => `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":${result}}\n`;
const replyError = (id, code, message) =>
  `{"jsonrpc":"2.0","id":${JSON.stringify(id ?? null)},"error":{"code":${code},"message":${JSON.stringify(message)}}}\n`;

function handle(socket, line) {
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    socket.write(replyError(null, -32700, 'Parse error'));
    return;
  }
  if (!msg || typeof msg !== 'object' || Array.isArray(msg) || !('id' in msg)) return;
  const { id, method, params } = msg;
  switch (method) {
    case 'initialize':
      socket.write(reply(id, INIT_RESULT));
      return;
    case 'shutdown':
      socket.end(reply(id, '{}'));
      return;
    case 'session/prompt': {
      const sessionId = params?.sessionId;
      const blocks = params?.contentBlocks;
      if (typeof sessionId !== 'string' || !sessionId || !Array.isArray(blocks) || !blocks.length) {
        socket.write(replyError(id, -32602, 'invalid params: sessionId, contentBlocks'));
        return;
      }
      const text = blocks.map((b) => b?.text ?? '').join('\n');
      const m = /^@chunks\s+(\d+)\s+(\d+)\s*$/m.exec(text);
      const frames = m
        ? turnFrames(id, sessionId, blocks, Number(m[1]), Number(m[2]), null)
        : turnFrames(id, sessionId, blocks, 0, 0, `echo: ${text}`);
      if (opts.batch) socket.write(frames.join(''));
      else for (const f of frames) socket.write(f);
      return;
    }
    default:
      socket.write(replyError(id, -32601, `method not found: ${method}`));
  }
}

const server = net.createServer((socket) => {
  socket.setNoDelay(true);
  socket.setEncoding('utf8');
  let buf = '';
  socket.on('data', (data) => {
    buf += data;
    let start = 0;
    let nl;
    while ((nl = buf.indexOf('\n', start)) >= 0) {
      const line = buf.slice(start, nl).trim();
      start = nl + 1;
      if (line) handle(socket, line);
    }
    buf = buf.slice(start);
  });
  socket.on('error', () => {});
});

server.listen(opts.port, opts.host, () => {
  const { address, port } = server.address();
  const url = `tcp://${address.includes(':') ? `[${address}]` : address}:${port}`;
  if (!opts.quiet) console.error(`floor: listening on ${url}${opts.batch ? ' (batch)' : ''}`);
  if (opts.readyFile) {
    const tmp = `${opts.readyFile}.tmp${process.pid}`;
    fs.writeFileSync(tmp, JSON.stringify({ listen: [url] }) + '\n');
    fs.renameSync(tmp, opts.readyFile);
  }
});
process.on('SIGTERM', () => process.exit(0));
process.on('SIGINT', () => process.exit(0));
