// JSON-RPC 2.0 server side of docs/protocol.md, transport independent.
// A Connection gets text frames through handleFrame() and writes frames via
// the transport callbacks it was given; sessions are shared process-wide.
// Written the way a typical Node service is: JSON.stringify and one write
// per frame, async/await for the turn loop, no persistence.

import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { chunkText, parseScript } from './scripted.mjs';

export const ErrorCode = Object.freeze({
  PARSE: -32700,
  INVALID_REQUEST: -32600,
  METHOD_NOT_FOUND: -32601,
  INVALID_PARAMS: -32602,
  INTERNAL: -32603,
  SESSION_BUSY: -32001,
  NOT_INITIALIZED: -32002,
  SHUTTING_DOWN: -32003,
  UNAUTHORIZED: -32004,
});

const SERVER_INFO = {
  name: 'deepseek-harness-sdk-runtime',
  version: '0.1.0',
  implementation: 'node-reference',
};
const METHODS = ['initialize', 'session/prompt', 'session/cancel', 'shutdown'];
const PROVIDERS = ['scripted'];
const MAX_SESSION_ID_BYTES = 256;
const MAX_DELEGATION_DEPTH = 3;

class RpcError extends Error {
  constructor(code, message, data) {
    super(message);
    this.code = code;
    this.data = data;
  }
}

const invalidParams = (msg) => new RpcError(ErrorCode.INVALID_PARAMS, msg);

class AbortedError extends Error {
  constructor(reason) {
    super(reason);
    this.reason = reason;
  }
}

/** Process-wide session table: id -> Session. */
const sessions = new Map();

class Session {
  constructor(id, parent = null) {
    this.id = id;
    this.seq = 0;
    this.turns = 0;
    this.parent = parent;
    this.depth = parent ? parent.depth + 1 : 0;
    this.active = null; // { controller } while a turn runs
  }
}

function getSession(id) {
  let s = sessions.get(id);
  if (!s) {
    s = new Session(id);
    sessions.set(id, s);
  }
  return s;
}

function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(new AbortedError(signal.reason ?? 'cancelled'));
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(new AbortedError(signal.reason ?? 'cancelled'));
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

function checkAbort(signal) {
  if (signal.aborted) throw new AbortedError(signal.reason ?? 'cancelled');
}

/**
 * One client connection. `transport` provides:
 *   write(text) -> boolean   write one frame; false when the buffer is full
 *   drain() -> Promise       resolves once the buffer has room again
 *   close()                  close after pending writes are flushed
 *   kind                     'tcp' | 'ws' (for logs only)
 */
export class Connection {
  constructor(transport, options = {}) {
    this.transport = transport;
    this.options = options;
    this.initialized = false;
    this.closed = false;
    this.shutdownPromise = null;
    this.inflight = new Set();
    this.controllers = new Set(); // AbortControllers of turns this connection started
    this.config = { provider: 'scripted', model: 'scripted', cwd: process.cwd() };
  }

  // ---- output ---------------------------------------------------------

  async send(obj) {
    if (this.closed) return;
    const ok = this.transport.write(JSON.stringify(obj));
    if (!ok) await this.transport.drain();
  }

  respond(id, result) {
    return this.send({ jsonrpc: '2.0', id, result });
  }

  respondError(id, code, message, data) {
    const error = { code, message };
    if (data !== undefined) error.data = data;
    return this.send({ jsonrpc: '2.0', id, error });
  }

  notify(method, params) {
    return this.send({ jsonrpc: '2.0', method, params });
  }

  // ---- input ----------------------------------------------------------

  /** The transport saw a frame larger than the limit (NDJSON only). */
  oversized() {
    this.respondError(null, ErrorCode.INVALID_REQUEST, 'frame exceeds the size limit');
  }

  /** The transport could not decode the bytes (invalid UTF-8). */
  parseError() {
    this.respondError(null, ErrorCode.PARSE, 'Parse error: invalid UTF-8');
  }

  handleFrame(text) {
    let msg;
    try {
      msg = JSON.parse(text);
    } catch (err) {
      this.respondError(null, ErrorCode.PARSE, `Parse error: ${err.message}`);
      return;
    }
    if (Array.isArray(msg)) {
      this.respondError(null, ErrorCode.INVALID_REQUEST, 'batch requests are not supported');
      return;
    }
    if (msg === null || typeof msg !== 'object') {
      this.respondError(null, ErrorCode.INVALID_REQUEST, 'Invalid Request: expected a JSON object');
      return;
    }
    const hasId = Object.hasOwn(msg, 'id');
    const idOk = hasId && (typeof msg.id === 'string' || Number.isInteger(msg.id));
    const id = idOk ? msg.id : null;
    if (hasId && !idOk) {
      this.respondError(null, ErrorCode.INVALID_REQUEST, 'Invalid Request: id must be a string or an integer');
      return;
    }
    if (Object.hasOwn(msg, 'jsonrpc') && msg.jsonrpc !== '2.0') {
      this.respondError(id, ErrorCode.INVALID_REQUEST, 'Invalid Request: jsonrpc must be "2.0"');
      return;
    }
    if (!hasId) {
      // A notification from the client, or garbage without an id: the
      // daemon consumes only requests.
      if (Object.hasOwn(msg, 'method') && typeof msg.method !== 'string') {
        this.respondError(null, ErrorCode.INVALID_REQUEST, 'Invalid Request: method must be a string');
      }
      return;
    }
    if (!Object.hasOwn(msg, 'method')) {
      // A response sent to the daemon: ignored.
      if (Object.hasOwn(msg, 'result') || Object.hasOwn(msg, 'error')) return;
      this.respondError(id, ErrorCode.INVALID_REQUEST, 'Invalid Request: missing method');
      return;
    }
    if (typeof msg.method !== 'string') {
      this.respondError(id, ErrorCode.INVALID_REQUEST, 'Invalid Request: method must be a string');
      return;
    }
    const job = this.dispatch(id, msg.method, msg.params).catch((err) => {
      const code = err instanceof RpcError ? err.code : ErrorCode.INTERNAL;
      const data = err instanceof RpcError ? err.data : undefined;
      return this.respondError(id, code, err.message || String(err), data);
    });
    this.inflight.add(job);
    job.finally(() => this.inflight.delete(job));
  }

  async dispatch(id, method, params) {
    if (method === 'shutdown') {
      await this.shutdown();
      await this.respond(id, {});
      this.transport.close();
      return;
    }
    if (this.shutdownPromise) throw new RpcError(ErrorCode.SHUTTING_DOWN, 'shutting down');
    switch (method) {
      case 'initialize':
        return this.respond(id, this.initialize(params));
      case 'session/prompt':
        this.requireInit();
        return this.prompt(id, params);
      case 'session/cancel':
        this.requireInit();
        return this.respond(id, this.cancel(params));
      default:
        if (method.startsWith('session/')) this.requireInit();
        throw new RpcError(ErrorCode.METHOD_NOT_FOUND, `method not found: ${method}`);
    }
  }

  requireInit() {
    if (!this.initialized) throw new RpcError(ErrorCode.NOT_INITIALIZED, 'not initialized');
  }

  // ---- methods --------------------------------------------------------

  initialize(params) {
    if (this.initialized) throw new RpcError(ErrorCode.INVALID_REQUEST, 'already initialized');
    const p = params ?? {};
    if (typeof p !== 'object' || Array.isArray(p)) throw invalidParams('params must be an object');
    const str = (k) => {
      if (p[k] !== undefined && typeof p[k] !== 'string') throw invalidParams(`${k} must be a string`);
    };
    ['cwd', 'provider', 'model', 'authToken'].forEach(str);
    if (p.maxTokens !== undefined && !(Number.isInteger(p.maxTokens) && p.maxTokens > 0)) {
      throw invalidParams('maxTokens must be a positive integer');
    }
    if (p.protocolVersion !== undefined && !Number.isInteger(p.protocolVersion)) {
      throw invalidParams('protocolVersion must be an integer');
    }
    if (p.clientInfo !== undefined && (p.clientInfo === null || typeof p.clientInfo !== 'object' || Array.isArray(p.clientInfo))) {
      throw invalidParams('clientInfo must be an object');
    }
    if (p.provider !== undefined && !PROVIDERS.includes(p.provider)) {
      throw invalidParams(`no adapter registered for provider "${p.provider}"`);
    }
    if (p.provider) this.config.provider = p.provider;
    if (p.model) this.config.model = p.model;
    if (p.cwd) this.config.cwd = path.resolve(p.cwd);
    this.initialized = true;
    return {
      serverInfo: SERVER_INFO,
      protocolVersion: 1,
      capabilities: { providers: PROVIDERS, methods: METHODS },
    };
  }

  cancel(params) {
    if (!params || typeof params !== 'object' || Array.isArray(params)) throw invalidParams('params must be an object');
    if (typeof params.sessionId !== 'string' || params.sessionId === '') {
      throw invalidParams('sessionId must be a non-empty string');
    }
    const s = sessions.get(params.sessionId);
    if (!s || !s.active) return { cancelled: false };
    s.active.controller.abort('cancelled');
    return { cancelled: true };
  }

  async prompt(id, params) {
    if (!params || typeof params !== 'object' || Array.isArray(params)) throw invalidParams('params must be an object');
    const { sessionId, contentBlocks } = params;
    if (typeof sessionId !== 'string' || sessionId === '') throw invalidParams('sessionId must be a non-empty string');
    if (Buffer.byteLength(sessionId) > MAX_SESSION_ID_BYTES) throw invalidParams('sessionId is longer than 256 bytes');
    if (!Array.isArray(contentBlocks) || contentBlocks.length === 0) {
      throw invalidParams('contentBlocks must be a non-empty array');
    }
    contentBlocks.forEach((b, i) => {
      if (!b || typeof b !== 'object' || b.type !== 'text' || typeof b.text !== 'string') {
        throw invalidParams(`contentBlocks[${i}] must be {"type":"text","text":STRING}`);
      }
    });

    const session = getSession(sessionId);
    if (session.active) {
      throw new RpcError(ErrorCode.SESSION_BUSY, `session already has an active prompt: ${sessionId}`, { sessionId });
    }
    const controller = new AbortController();
    session.active = { controller };
    this.controllers.add(controller);
    let reason;
    try {
      const blocks = contentBlocks.map((b) => ({ type: 'text', text: b.text }));
      reason = await this.runTurn(session, blocks, controller.signal);
    } finally {
      session.active = null;
      this.controllers.delete(controller);
    }
    return this.respond(id, { status: statusOf(reason), reason });
  }

  async shutdown() {
    if (!this.shutdownPromise) {
      const others = [...this.inflight];
      this.shutdownPromise = Promise.allSettled(others);
    }
    await this.shutdownPromise;
  }

  /** The transport closed: cancel the turns this connection started. */
  onClose() {
    if (this.closed) return;
    this.closed = true;
    for (const c of this.controllers) c.abort('cancelled');
  }

  // ---- the turn loop --------------------------------------------------

  /**
   * Run one turn of the scripted provider on `session`, streaming every
   * event as a `session.event` notification. Returns the TurnEndReason.
   */
  async runTurn(session, userBlocks, signal) {
    const turn = session.turns++;
    const emit = (type, data) => {
      const event = { type, seq: session.seq++, time: Date.now(), data };
      if (type === 'assistant/message') {
        const t = data.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
        if (t) session.lastText = t;
      }
      return this.notify('session.event', { sessionId: session.id, event });
    };
    const provenance = { provider: this.config.provider, model: this.config.model };
    const text = userBlocks.map((b) => b.text).join('\n');
    const plan = parseScript(text);

    await emit('turn/start', { turn, trigger: { kind: 'message', source: { kind: 'user' } } });
    await emit('user/message', { content: userBlocks, source: { kind: 'user' } });

    let step = 0;
    let reason;
    try {
      if (plan.kind === 'subagent') {
        // Step 0: the model calls the subagent tool.
        await emit('step/start', { turn, step });
        const callId = `call_${randomBytes(6).toString('hex')}`;
        const args = JSON.stringify({ description: 'scripted subagent', prompt: plan.prompt });
        const chunk = (c) => emit('assistant/chunk', { turn, step, chunk: c });
        if (plan.delayMs) await sleep(plan.delayMs, signal);
        await chunk({ type: 'block-start', index: 0, blockType: 'tool-call' });
        await chunk({ type: 'tool-call-delta', index: 0, id: callId, name: 'subagent', argumentsDelta: args });
        await chunk({ type: 'block-end', index: 0 });
        await chunk({ type: 'finish', reason: 'tool-calls' });
        await emit('assistant/message', {
          turn, step,
          content: [{ type: 'tool-call', id: callId, name: 'subagent', arguments: args }],
          provenance,
        });
        await emit('tool/call', { turn, step, callId, name: 'subagent', arguments: args });
        const child = await this.runSubagent(session, plan.prompt, signal);
        await emit('tool/result', {
          turn, step, callId,
          content: [{ type: 'text', text: child.text }],
          isError: child.isError,
        });
        await emit('step/end', { turn, step });
        checkAbort(signal);
        // Step 1: the model answers with the child's text.
        step += 1;
        await emit('step/start', { turn, step });
        await this.streamText(emit, turn, step, [`subagent said: ${child.text}`], 0, signal, 'stop');
        await emit('assistant/message', {
          turn, step, content: [{ type: 'text', text: `subagent said: ${child.text}` }], provenance,
        });
        await emit('step/end', { turn, step });
        reason = { kind: 'completed' };
      } else if (plan.kind === 'error') {
        await emit('step/start', { turn, step });
        if (plan.delayMs) await sleep(plan.delayMs, signal);
        await emit('step/end', { turn, step });
        reason = { kind: 'error', message: plan.message };
      } else {
        await emit('step/start', { turn, step });
        let pieces;
        let finish = 'stop';
        if (plan.kind === 'chunks') {
          pieces = Array.from({ length: plan.count }, (_, i) => chunkText(i, plan.bytes));
        } else if (plan.kind === 'max-tokens') {
          pieces = ['partial'];
          finish = 'length';
        } else {
          pieces = [plan.text];
        }
        await this.streamText(emit, turn, step, pieces, plan.delayMs, signal, finish);
        await emit('assistant/message', { turn, step, content: [{ type: 'text', text: pieces.join('') }], provenance });
        await emit('step/end', { turn, step });
        reason = plan.kind === 'max-tokens' ? { kind: 'max-tokens' } : { kind: 'completed' };
      }
    } catch (err) {
      if (!(err instanceof AbortedError)) throw err;
      await emit('step/end', { turn, step });
      reason = { kind: 'aborted', reason: err.reason };
    }
    await emit('turn/end', { turn, reason });
    return reason;
  }

  async streamText(emit, turn, step, pieces, delayMs, signal, finish) {
    const chunk = (c) => emit('assistant/chunk', { turn, step, chunk: c });
    let started = false;
    for (let i = 0; i < pieces.length; i++) {
      if (delayMs) await sleep(delayMs, signal);
      else checkAbort(signal);
      if (!started) {
        await chunk({ type: 'block-start', index: 0, blockType: 'text' });
        started = true;
      }
      await chunk({ type: 'text-delta', index: 0, text: pieces[i] });
    }
    if (!started) await chunk({ type: 'block-start', index: 0, blockType: 'text' });
    await chunk({ type: 'block-end', index: 0 });
    await chunk({ type: 'finish', reason: finish });
  }

  async runSubagent(parent, prompt, signal) {
    if (parent.depth + 1 > MAX_DELEGATION_DEPTH) {
      return { text: `subagent depth limit (${MAX_DELEGATION_DEPTH}) reached`, isError: true };
    }
    const childId = `sub-${randomBytes(8).toString('hex')}`;
    const child = new Session(childId, parent);
    sessions.set(childId, child);
    // The child can be cancelled on its own; cancelling the parent cancels it too.
    const controller = new AbortController();
    const onParentAbort = () => controller.abort(signal.reason);
    signal.addEventListener('abort', onParentAbort, { once: true });
    child.active = { controller };
    await this.notify('subagent.started', { parentSessionId: parent.id, childSessionId: childId });
    let reason;
    try {
      reason = await this.runTurn(child, [{ type: 'text', text: prompt }], controller.signal);
    } finally {
      child.active = null;
      signal.removeEventListener('abort', onParentAbort);
    }
    const status = reason.kind === 'completed' ? 'ok' : 'error';
    const text = child.lastText ?? '';
    const finished = {
      provider: this.config.provider,
      agentId: childId,
      parentSessionId: parent.id,
      childSessionId: childId,
      status,
      stopReason: reason.kind,
    };
    if (child.lastText !== undefined) finished.lastAssistantMessage = text;
    await this.notify('subagent.finished', finished);
    checkAbort(signal);
    return { text: status === 'ok' ? text : reason.message ?? reason.kind, isError: status !== 'ok' };
  }
}

function statusOf(reason) {
  switch (reason.kind) {
    case 'completed':
      return 'ok';
    case 'aborted':
      return 'aborted';
    default:
      return 'error';
  }
}
