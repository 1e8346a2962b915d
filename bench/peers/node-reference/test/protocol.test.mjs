// Black-box checks of the reference server against docs/protocol.md: starts
// server.mjs on ephemeral ports and speaks NDJSON/TCP and WebSocket to it.
// Run: node --test test/   (from bench/peers/node-reference)

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';

const here = path.dirname(fileURLToPath(import.meta.url));
const serverJs = path.join(here, '..', 'server.mjs');
let proc;
let tcpPort;
let wsPort;

before(async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'noderef-'));
  const ready = path.join(dir, 'ready.json');
  proc = spawn(process.execPath, [serverJs, '--tcp', '127.0.0.1:0', '--ws', '127.0.0.1:0',
    '--ready-file', ready, '--max-frame-bytes', '4096', '--quiet'], { stdio: 'inherit' });
  const deadline = Date.now() + 10000;
  while (!fs.existsSync(ready)) {
    if (Date.now() > deadline) throw new Error('server did not become ready');
    await new Promise((r) => setTimeout(r, 50));
  }
  const { listen } = JSON.parse(fs.readFileSync(ready, 'utf8'));
  tcpPort = Number(listen.find((u) => u.startsWith('tcp://')).split(':').pop());
  wsPort = Number(listen.find((u) => u.startsWith('ws://')).split(':').pop());
});

after(() => proc?.kill('SIGTERM'));

/** Minimal NDJSON client collecting every frame it receives. */
class TcpClient {
  constructor(port) {
    this.frames = [];
    this.waiters = [];
    this.buf = '';
    this.sock = net.connect(port, '127.0.0.1');
    this.sock.setEncoding('utf8');
    this.sock.on('data', (d) => {
      this.buf += d;
      let nl;
      while ((nl = this.buf.indexOf('\n')) >= 0) {
        const line = this.buf.slice(0, nl);
        this.buf = this.buf.slice(nl + 1);
        this.frames.push(JSON.parse(line));
        this.poke();
      }
    });
    this.closed = new Promise((r) => this.sock.on('close', r));
  }
  poke() { for (const w of this.waiters.splice(0)) w(); }
  sendRaw(s) { this.sock.write(s); }
  send(obj) { this.sock.write(JSON.stringify(obj) + '\n'); }
  async waitFor(pred, ms = 5000) {
    const deadline = Date.now() + ms;
    for (;;) {
      const f = this.frames.find(pred);
      if (f) return f;
      if (Date.now() > deadline) throw new Error('timed out waiting for a frame');
      await new Promise((r) => { this.waiters.push(r); setTimeout(r, 50); });
    }
  }
  response(id) { return this.waitFor((f) => f.id === id && !('method' in f)); }
  close() { this.sock.end(); }
}

const prompt = (id, sessionId, text) => ({
  jsonrpc: '2.0', id, method: 'session/prompt',
  params: { sessionId, contentBlocks: [{ type: 'text', text }] },
});

test('initialize result shape and bad input answers', async () => {
  const c = new TcpClient(tcpPort);
  c.send({ jsonrpc: '2.0', id: 'a', method: 'session/prompt', params: {} });
  assert.equal((await c.response('a')).error.code, -32002);
  c.send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { clientInfo: { name: 't', version: '1' } } });
  const init = await c.response(1);
  assert.equal(init.result.serverInfo.name, 'deepseek-harness-sdk-runtime');
  assert.equal(init.result.protocolVersion, 1);
  assert.ok(init.result.capabilities.methods.includes('session/cancel'));
  c.send({ jsonrpc: '2.0', id: 2, method: 'initialize' });
  assert.equal((await c.response(2)).error.code, -32600);
  c.sendRaw('nope\n[1]\n42\n\n{"id":3,"method":"foo"}\n{"id":4,"method":"session/prompt","params":{"sessionId":""}}\n');
  c.sendRaw(Buffer.from([0xff, 0xfe, 0x0a]));
  c.sendRaw('x'.repeat(5000) + '\n');
  c.send({ id: 5, method: 'session/cancel', params: { sessionId: 'nobody' } });
  assert.equal((await c.response(3)).error.code, -32601);
  assert.equal((await c.response(4)).error.code, -32602);
  assert.deepEqual((await c.response(5)).result, { cancelled: false });
  const nullIds = c.frames.filter((f) => f.id === null).map((f) => f.error.code);
  assert.deepEqual(nullIds, [-32700, -32600, -32600, -32700, -32600]);
  c.close();
});

test('@chunks streams contiguous events before the response', async () => {
  const c = new TcpClient(tcpPort);
  c.send({ id: 1, method: 'initialize' });
  await c.response(1);
  c.send(prompt(2, 'chunks-1', '@chunks 3 4'));
  const res = await c.response(2);
  assert.deepEqual(res.result, { status: 'ok', reason: { kind: 'completed' } });
  const events = c.frames.filter((f) => f.method === 'session.event').map((f) => f.params.event);
  assert.deepEqual(events.map((e) => e.seq), events.map((_, i) => i));
  assert.deepEqual(events.map((e) => e.type), ['turn/start', 'user/message', 'step/start',
    'assistant/chunk', 'assistant/chunk', 'assistant/chunk', 'assistant/chunk', 'assistant/chunk',
    'assistant/chunk', 'assistant/message', 'step/end', 'turn/end']);
  const deltas = events.filter((e) => e.data.chunk?.type === 'text-delta').map((e) => e.data.chunk.text);
  assert.deepEqual(deltas, ['aaaa', 'bbbb', 'cccc']);
  // A second turn continues the seq.
  c.send(prompt(3, 'chunks-1', 'hello'));
  await c.response(3);
  const all = c.frames.filter((f) => f.method === 'session.event').map((f) => f.params.event);
  assert.deepEqual(all.map((e) => e.seq), all.map((_, i) => i));
  assert.equal(all.at(-3).data.content[0].text, 'echo: hello');
  c.close();
});

test('overlap is -32001, cancel aborts, shutdown answers {}', async () => {
  const a = new TcpClient(tcpPort);
  const b = new TcpClient(tcpPort);
  a.send({ id: 1, method: 'initialize' });
  b.send({ id: 1, method: 'initialize' });
  await a.response(1);
  await b.response(1);
  a.send(prompt(2, 'busy-1', '@delay 200\n@chunks 5 4'));
  await a.waitFor((f) => f.method === 'session.event');
  b.send(prompt(2, 'busy-1', 'hi'));
  const busy = await b.response(2);
  assert.equal(busy.error.code, -32001);
  assert.equal(busy.error.message, 'session already has an active prompt: busy-1');
  assert.deepEqual(busy.error.data, { sessionId: 'busy-1' });
  b.send({ id: 3, method: 'session/cancel', params: { sessionId: 'busy-1' } });
  assert.deepEqual((await b.response(3)).result, { cancelled: true });
  const res = await a.response(2);
  assert.deepEqual(res.result, { status: 'aborted', reason: { kind: 'aborted', reason: 'cancelled' } });
  a.send(prompt(4, 'busy-1', '@delay 100\n@reply done'));
  a.send({ id: 5, method: 'shutdown' });
  a.send({ id: 6, method: 'session/cancel', params: { sessionId: 'x' } });
  assert.equal((await a.response(4)).result.status, 'ok');
  assert.deepEqual((await a.response(5)).result, {});
  assert.equal((await a.response(6)).error.code, -32003);
  const order = a.frames.filter((f) => 'id' in f).map((f) => f.id);
  assert.ok(order.indexOf(4) < order.indexOf(5));
  await a.closed;
  b.close();
});

test('subagent over WebSocket', async () => {
  const ws = new WebSocket(`ws://127.0.0.1:${wsPort}/`);
  const frames = [];
  await new Promise((r) => ws.on('open', r));
  const done = new Promise((resolve) => ws.on('message', (d) => {
    const f = JSON.parse(d.toString());
    frames.push(f);
    if (f.id === 2) resolve(f);
  }));
  ws.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize' }));
  ws.send(JSON.stringify(prompt(2, 'parent-1', '@subagent @chunks 2 3')));
  const res = await done;
  assert.equal(res.result.status, 'ok');
  const started = frames.find((f) => f.method === 'subagent.started');
  const finished = frames.find((f) => f.method === 'subagent.finished');
  assert.equal(started.params.parentSessionId, 'parent-1');
  assert.equal(finished.params.status, 'ok');
  assert.equal(finished.params.lastAssistantMessage, 'aaabbb');
  const child = frames.filter((f) => f.params?.sessionId === started.params.childSessionId);
  assert.equal(child.at(-1).params.event.type, 'turn/end');
  const parentMsgs = frames.filter((f) => f.params?.sessionId === 'parent-1' && f.params.event.type === 'assistant/message');
  assert.equal(parentMsgs.at(-1).params.event.data.content[0].text, 'subagent said: aaabbb');
  // A binary frame closes the socket with 1003.
  const code = new Promise((r) => ws.on('close', (c) => r(c)));
  ws.send(Buffer.from([1, 2, 3]), { binary: true });
  assert.equal(await code, 1003);
});
