// The client against a real harnessd (HARNESSD_BIN, default build/harnessd)
// with the scripted provider (docs/protocol.md §9.1).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { WebSocket } from 'ws';
import {
  HarnessClient, RpcError, ConnectionClosedError, ErrorCodes, isKnownEvent, isEvent, isChunk, METHODS,
  parseNotification, classifyFrame,
} from '../src/index.js';
import { startDaemon, startRelay } from './daemon.js';

let daemon;
const clients = [];

before(async () => {
  // --allow-host: the reconnect test reaches the daemon through a relay on another port.
  daemon = await startDaemon(['--allow-host', '127.0.0.1']);
});

after(async () => {
  for (const c of clients) c.close();
  await daemon?.stop();
});

/** A connected client; every event it receives must pass the package's own checks. */
async function connect(options = {}, url = daemon.url) {
  const client = new HarnessClient(url, { WebSocket, backoffMs: [50], ...options });
  clients.push(client);
  client.on('event', ({ event }) => assert.ok(isKnownEvent(event), `malformed event ${JSON.stringify(event)}`));
  await client.connect();
  return client;
}

let counter = 0;
const newSession = (name) => `js-${name}-${process.pid}-${counter++}`;

function chunksText(n, bytes) {
  let s = '';
  for (let i = 0; i < n; i++) s += String.fromCharCode(97 + (i % 26)).repeat(bytes);
  return s;
}

const textOf = (events) => events
  .filter((e) => e.type === 'assistant/chunk' && e.data.chunk.type === 'text-delta')
  .map((e) => e.data.chunk.text).join('');

function assertContiguous(events, from = 0) {
  events.forEach((e, i) => assert.equal(e.seq, from + i, `seq ${e.seq} at position ${i}`));
}

/** Iterates `turn` until `pred(event)`, returning the events so far. */
async function readUntil(iterator, pred) {
  const seen = [];
  for (;;) {
    const { value, done } = await iterator.next();
    assert.ok(!done, 'the turn ended early');
    seen.push(value);
    if (pred(value)) return seen;
  }
}

test('initialize answers with the daemon and its methods', async () => {
  const client = await connect();
  assert.ok(METHODS.initialize.result(client.initializeResult));
  assert.equal(client.serverInfo.implementation, 'harnessd');
  for (const m of ['session/prompt', 'session/events', 'session/subscribe', 'session/approve']) {
    assert.ok(client.methods.includes(m), m);
  }
});

test('a streamed turn: contiguous seq, every event before the result', async () => {
  const client = await connect();
  const sid = newSession('stream');
  const order = [];
  client.on('event', ({ sessionId, event }) => { if (sessionId === sid) order.push(event.seq); });
  const turn = client.prompt(sid, '@chunks 20 8');
  turn.result.then(() => order.push('result'));
  const events = [];
  for await (const ev of turn) events.push(ev);
  const result = await turn.result;
  assert.deepEqual(result, { status: 'ok', reason: { kind: 'completed' } });
  assertContiguous(events);
  assert.equal(events[0].type, 'turn/start');
  assert.equal(events.at(-1).type, 'turn/end');
  assert.equal(textOf(events), chunksText(20, 8));
  // The answer came after the last event, as §4.5 promises.
  assert.deepEqual(order, [...events.map((e) => e.seq), 'result']);

  // A second turn continues the seq.
  const second = client.prompt(sid, 'hello');
  const more = [];
  for await (const ev of second) more.push(ev);
  assertContiguous(more, events.length);
  assert.equal((await second.result).status, 'ok');
});

test('cancel ends the turn aborted', async () => {
  const client = await connect();
  const sid = newSession('cancel');
  const turn = client.prompt(sid, '@delay 30000\nslow');
  const it = turn[Symbol.asyncIterator]();
  await readUntil(it, (e) => e.type === 'step/start');
  assert.deepEqual(await client.cancel(sid), { cancelled: true });
  const result = await turn.result;
  assert.equal(result.status, 'aborted');
  assert.deepEqual(result.reason, { kind: 'aborted', reason: 'cancelled' });
  assert.deepEqual(await client.cancel(sid), { cancelled: false });
});

test('an overlapping prompt fails with a typed -32001', async () => {
  const client = await connect();
  const sid = newSession('busy');
  const first = client.prompt(sid, '@delay 30000\nslow');
  await readUntil(first[Symbol.asyncIterator](), (e) => e.type === 'step/start');
  const second = client.prompt(sid, 'again');
  await assert.rejects(second.result, (err) => {
    assert.ok(err instanceof RpcError);
    assert.equal(err.code, ErrorCodes.SESSION_BUSY);
    assert.equal(err.message, `session already has an active prompt: ${sid}`);
    assert.deepEqual(err.data, { sessionId: sid });
    return true;
  });
  // Iterating the refused turn throws the same error.
  await assert.rejects(async () => { for await (const _ of second); }, RpcError);
  await client.cancel(sid);
  assert.equal((await first.result).status, 'aborted');
});

test('requests: list, events pages, tools, unknown methods', async () => {
  const client = await connect();
  const sid = newSession('pages');
  for await (const _ of client.prompt(sid, 'one'));
  const listed = await client.list({ limit: 1000 });
  assert.ok(METHODS['session/list'].result(listed));
  const entry = listed.sessions.find((s) => s.sessionId === sid);
  assert.equal(entry.turns, 1);
  assert.equal(entry.running, false);

  const page = await client.events(sid, { afterSeq: -1, limit: 3 });
  assert.ok(METHODS['session/events'].result(page));
  assert.equal(page.events.length, 3);
  assert.equal(page.more, true);
  const all = [];
  for await (const ev of client.allEvents(sid, { limit: 2 })) all.push(ev);
  assertContiguous(all);
  assert.equal(all.length, page.lastSeq + 1);

  const tools = await client.call('tools/list');
  assert.ok(METHODS['tools/list'].result(tools));
  await assert.rejects(client.call('no/such'), (err) => err instanceof RpcError && err.code === ErrorCodes.METHOD_NOT_FOUND);
  await assert.rejects(client.events('never-prompted'), (err) => err.code === ErrorCodes.INVALID_PARAMS
    && /unknown session/.test(err.message));
});

test('subscribe replays after a seq, then streams another client\'s turn', async () => {
  const a = await connect();
  const b = await connect();
  const sid = newSession('follow');
  for await (const _ of a.prompt(sid, 'first'));
  const seen = [];
  b.on('event', ({ sessionId, event }) => { if (sessionId === sid) seen.push(event); });
  const { lastSeq } = await b.subscribe(sid, { afterSeq: 2 });
  assert.deepEqual(seen.map((e) => e.seq), Array.from({ length: lastSeq - 2 }, (_, i) => i + 3));
  const turn = a.prompt(sid, '@chunks 10 4');
  for await (const _ of turn);
  await b.call('tools/list'); // a round trip: b's events of the turn are in by now
  assertContiguous(seen, 3);
  assert.equal(seen.at(-1).type, 'turn/end');
  assert.deepEqual(await b.unsubscribe(sid), { unsubscribed: true });
});

test('a connection lost mid-turn resumes from the last seq, without gaps or repeats', async () => {
  const relay = await startRelay(daemon.url);
  try {
    const client = await connect({}, relay.url);
    const states = [];
    client.on('state', (s, detail) => states.push(detail?.resumed ? `${s}:resumed` : s));
    const sid = newSession('resume');
    const turn = client.prompt(sid, '@delay 25\n@chunks 60 8');
    const it = turn[Symbol.asyncIterator]();
    const events = await readUntil(it, (e) => e.type === 'assistant/chunk' && e.data.chunk.type === 'text-delta'
      && e.data.chunk.text.startsWith('e'));
    relay.cut();
    for (;;) {
      const { value, done } = await it.next();
      if (done) break;
      events.push(value);
    }
    const result = await turn.result;
    assert.deepEqual(result, { status: 'ok', reason: { kind: 'completed' } });
    assertContiguous(events);
    assert.equal(events.at(-1).type, 'turn/end');
    assert.equal(textOf(events), chunksText(60, 8));
    assert.ok(states.includes('waiting') && states.includes('open:resumed'), states.join(' '));
    // The connection is usable again. The turn's end came as an event, which
    // may precede the session's release (its turn/end being synced, §4.2).
    for (let attempt = 0; ; attempt++) {
      const again = client.prompt(sid, 'after');
      try {
        for await (const _ of again);
      } catch (err) {
        if (err.code === ErrorCodes.SESSION_BUSY && attempt < 50) {
          await new Promise((r) => setTimeout(r, 20));
          continue;
        }
        throw err;
      }
      assert.equal((await again.result).status, 'ok');
      break;
    }
  } finally {
    await relay.close();
  }
});

test('a subscription is renewed after a reconnect', async () => {
  const relay = await startRelay(daemon.url);
  try {
    const a = await connect();
    const b = await connect({}, relay.url);
    const sid = newSession('resub');
    for await (const _ of a.prompt(sid, 'first'));
    const seen = [];
    b.on('event', ({ sessionId, event }) => { if (sessionId === sid) seen.push(event.seq); });
    await b.subscribe(sid, { afterSeq: -1 });
    const reopened = new Promise((resolve) => b.on('state', (s, d) => { if (d?.resumed) resolve(); }));
    relay.cut();
    await reopened;
    const turn = a.prompt(sid, '@chunks 5 2');
    for await (const _ of turn);
    const last = (await a.events(sid, { afterSeq: -1 })).lastSeq;
    const deadline = Date.now() + 5000;
    while (seen.at(-1) !== last && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    assert.deepEqual(seen, Array.from({ length: last + 1 }, (_, i) => i));
  } finally {
    await relay.close();
  }
});

test('approvals: allow once, reject with a message, a second decision is not pending', async () => {
  const client = await connect({ initialize: { approvalPolicy: 'ask' } });
  const sid = newSession('approve');
  const write = '@tool write {"file_path": "a.txt", "content": "hi\\n"}';
  const turn = client.prompt(sid, write);
  const seen = [];
  let approvalId;
  for await (const ev of turn) {
    seen.push(ev);
    if (ev.type === 'approval/requested') {
      approvalId = ev.data.approvalId;
      assert.equal(ev.data.toolName, 'write');
      assert.deepEqual(await client.approve(sid, approvalId, 'allowed-once'), { accepted: true });
    }
  }
  assert.equal((await turn.result).status, 'ok');
  const resolved = seen.find((e) => e.type === 'approval/resolved');
  assert.deepEqual(resolved.data, { approvalId, outcome: 'allowed-once', source: 'client' });
  assert.equal(seen.find((e) => e.type === 'tool/result').data.isError, false);
  assert.equal(fs.readFileSync(path.join(daemon.dir, 'workspaces', sid, 'a.txt'), 'utf8'), 'hi\n');

  await assert.rejects(client.approve(sid, approvalId, 'allowed-once'), (err) => err instanceof RpcError
    && err.code === ErrorCodes.INVALID_PARAMS && err.data?.reason === 'not-pending');

  const second = client.prompt(sid, '@tool write {"file_path": "b.txt", "content": "no\\n"}');
  const events = [];
  for await (const ev of second) {
    events.push(ev);
    if (ev.type === 'approval/requested') await client.approve(sid, ev.data.approvalId, 'rejected', 'not here');
  }
  const result = events.find((e) => e.type === 'tool/result').data;
  assert.equal(result.isError, true);
  assert.equal(result.error.code, 'REJECTED');
  assert.match(result.content[0].text, /not here/);
  assert.equal(fs.existsSync(path.join(daemon.dir, 'workspaces', sid, 'b.txt')), false);
});

test('questions: session/answer', async () => {
  const client = await connect({ initialize: { approvalPolicy: 'ask' } });
  const sid = newSession('question');
  const questions = [{ id: 'db', question: 'Which database?', options: [{ label: 'Postgres' }, { label: 'SQLite' }] }];
  const turn = client.prompt(sid, `@tool ask_user_question ${JSON.stringify({ questions })}`);
  let toolResult;
  for await (const ev of turn) {
    if (ev.type === 'question/requested') {
      await client.answer(sid, ev.data.questionId, [{ id: 'db', selected: ['Postgres'] }]);
    }
    if (ev.type === 'tool/result') toolResult = ev.data;
  }
  assert.deepEqual(JSON.parse(toolResult.content[0].text), [{ id: 'db', selected: ['Postgres'] }]);
});

test('requests without a connection fail with ConnectionClosedError', async () => {
  const client = new HarnessClient(daemon.url, { WebSocket, reconnect: false });
  await assert.rejects(client.call('tools/list'), ConnectionClosedError);
  await assert.rejects(client.prompt('x', 'hi').result, ConnectionClosedError);
  const dead = new HarnessClient('ws://127.0.0.1:1/', { WebSocket, reconnect: false });
  await assert.rejects(dead.connect(), ConnectionClosedError);
});

test('close() fails what waits; connect() afterwards starts afresh', async () => {
  const client = await connect();
  const sid = newSession('close');
  const turn = client.prompt(sid, '@delay 30000\nslow');
  await readUntil(turn[Symbol.asyncIterator](), (e) => e.type === 'step/start');
  client.close();
  await assert.rejects(turn.result, ConnectionClosedError);
  assert.equal(client.state, 'closed');
  await client.connect();
  // The daemon cancelled nothing (onDisconnect "continue"): the session is still busy.
  await assert.rejects(client.prompt(sid, 'again').result, (err) => err.code === ErrorCodes.SESSION_BUSY);
  await client.cancel(sid);
  const again = client.prompt(`${sid}-2`, 'hi');
  for await (const _ of again);
  assert.equal((await again.result).status, 'ok');
});

test('a daemon restarted with an empty store: the client follows its new numbering', async () => {
  const first = await startDaemon();
  const port = Number(new URL(first.url).port);
  let second = null;
  try {
    const client = await connect({}, first.url);
    const sid = newSession('restart');
    for await (const _ of client.prompt(sid, 'one'));
    await client.subscribe(sid, { afterSeq: -1 });
    const reopened = new Promise((resolve) => client.on('state', (s, d) => { if (d?.resumed) resolve(); }));
    await first.stop();
    second = await startDaemon([], { port }); // a fresh session root: the session is unknown there
    await reopened;
    const turn = client.prompt(sid, 'two');
    const events = [];
    for await (const ev of turn) events.push(ev);
    assert.equal((await turn.result).status, 'ok');
    assertContiguous(events);
    assert.equal(events.at(-1).type, 'turn/end');
  } finally {
    await first.stop();
    await second?.stop();
  }
});

test('validators refuse malformed shapes', () => {
  const ok = { type: 'turn/end', seq: 3, time: 1, data: { turn: 0, reason: { kind: 'completed' } } };
  assert.ok(isKnownEvent(ok));
  assert.equal(isKnownEvent({ ...ok, seq: -1 }), false);
  assert.equal(isKnownEvent({ ...ok, data: { turn: '0', reason: { kind: 'completed' } } }), false);
  assert.equal(isKnownEvent({ ...ok, data: { turn: 0, reason: { kind: 'aborted' } } }), false);
  assert.equal(isKnownEvent({ ...ok, type: 'future/event' }), false);
  assert.equal(isEvent({ ...ok, type: 'future/event', data: {} }), true);
  assert.equal(isChunk({ type: 'text-delta', index: 0 }), false);
  assert.equal(isChunk({ type: 'finish', reason: 'bored' }), false);
  assert.equal(METHODS['session/prompt'].params({ sessionId: 's', contentBlocks: [] }), false);
  assert.equal(METHODS['session/approve'].params({ sessionId: 's', approvalId: 'a', outcome: 'maybe' }), false);
  assert.throws(() => parseNotification({ jsonrpc: '2.0', method: 'session.event', params: { sessionId: 's', event: {} } }), TypeError);
  assert.throws(() => parseNotification({ jsonrpc: '2.0', id: 1, method: 'session.event', params: {} }), TypeError);
  assert.deepEqual(parseNotification(JSON.stringify({ jsonrpc: '2.0', method: 'x.y', params: { a: 1 } })), { method: 'x.y', params: { a: 1 } });
  assert.equal(classifyFrame({ jsonrpc: '2.0', id: 1, error: { code: 'x', message: 'm' } }).kind, 'invalid');
});
