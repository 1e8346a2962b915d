// Runtime checks of the protocol's shapes (docs/protocol.md §4–§6). Each
// check returns true or false and never throws; they accept unknown extra
// fields (the daemon may add some) but refuse a known field of the wrong
// type or a missing required one. The client uses them on what it receives,
// and tests/wire's golden files are checked with them.

const isObject = (v) => typeof v === 'object' && v !== null && !Array.isArray(v);
const isString = (v) => typeof v === 'string';
const isInt = (v) => Number.isInteger(v);
const isNumber = (v) => typeof v === 'number' && Number.isFinite(v);
const isBool = (v) => typeof v === 'boolean';
const optional = (v, check) => v === undefined || check(v);
const arrayOf = (v, check) => Array.isArray(v) && v.every(check);
const oneOf = (...values) => (v) => values.includes(v);

const isSessionId = (v) => isString(v) && v.length > 0;
const isTurnStep = (d) => isInt(d.turn) && isInt(d.step);

export const isTextBlock = (b) => isObject(b) && b.type === 'text' && isString(b.text);

/** A content block of `assistant/message`. */
export function isContentBlock(b) {
  if (!isObject(b)) return false;
  switch (b.type) {
    case 'text':
    case 'reasoning':
      return isString(b.text);
    case 'tool-call':
      return isString(b.id) && isString(b.name) && isString(b.arguments);
    default:
      return false;
  }
}

export function isUsage(u) {
  return isObject(u)
    && ['inputTokens', 'outputTokens', 'totalTokens', 'reasoningTokens', 'cacheReadTokens']
      .every((k) => optional(u[k], isInt));
}

/** A TurnEndReason: `{kind}` plus the fields its kind carries. */
export function isTurnEndReason(r) {
  if (!isObject(r) || !isString(r.kind)) return false;
  if (r.kind === 'aborted') return isString(r.reason);
  if (r.kind === 'error') return isString(r.message) && optional(r.code, isString) && optional(r.step, isInt);
  return true;
}

const CHUNKS = {
  'block-start': (c) => isInt(c.index) && oneOf('text', 'reasoning', 'tool-call')(c.blockType),
  'text-delta': (c) => isInt(c.index) && isString(c.text),
  'reasoning-delta': (c) => isInt(c.index) && isString(c.text),
  'tool-call-delta': (c) => isInt(c.index) && isString(c.argumentsDelta)
    && optional(c.id, isString) && optional(c.name, isString),
  'block-end': (c) => isInt(c.index),
  usage: (c) => isUsage(c.usage),
  finish: (c) => oneOf('stop', 'tool-calls', 'length', 'error')(c.reason),
};

/** The names of the chunk types (§6). */
export const CHUNK_TYPES = Object.freeze(Object.keys(CHUNKS));

/** The `chunk` of an `assistant/chunk` event. */
export function isChunk(c) {
  return isObject(c) && Object.hasOwn(CHUNKS, c.type) && CHUNKS[c.type](c);
}

const isQuestion = (q) => isObject(q) && isString(q.id) && isString(q.question)
  && optional(q.header, isString) && optional(q.multi_select, isBool)
  && optional(q.options, (o) => arrayOf(o, (x) => isObject(x) && isString(x.label) && optional(x.description, isString)));

const isSource = (s) => isObject(s) && isString(s.kind);

const EVENT_DATA = {
  'turn/start': (d) => isInt(d.turn) && isObject(d.trigger) && isString(d.trigger.kind)
    && optional(d.trigger.source, isSource),
  'user/message': (d) => arrayOf(d.content, isTextBlock) && optional(d.source, isSource),
  'step/start': isTurnStep,
  'step/end': isTurnStep,
  'assistant/chunk': (d) => isTurnStep(d) && isChunk(d.chunk),
  'assistant/message': (d) => isTurnStep(d) && arrayOf(d.content, isContentBlock)
    && isObject(d.provenance) && isString(d.provenance.provider) && isString(d.provenance.model)
    && optional(d.usage, isUsage),
  'tool/call': (d) => isTurnStep(d) && isString(d.callId) && isString(d.name) && isString(d.arguments),
  'tool/result': (d) => isTurnStep(d) && isString(d.callId) && arrayOf(d.content, isTextBlock) && isBool(d.isError)
    && optional(d.error, (e) => isObject(e) && isString(e.code) && isString(e.message)) && optional(d.meta, isObject),
  'approval/requested': (d) => isTurnStep(d)
    && ['callId', 'approvalId', 'toolName', 'arguments', 'reason'].every((k) => isString(d[k])),
  'approval/resolved': (d) => isString(d.approvalId)
    && oneOf('allowed-once', 'allowed-for-session', 'rejected', 'cancelled')(d.outcome)
    && oneOf('client', 'timeout', 'cancel')(d.source),
  'question/requested': (d) => isTurnStep(d) && isString(d.callId) && isString(d.questionId)
    && arrayOf(d.questions, isQuestion),
  'question/resolved': (d) => isString(d.questionId) && oneOf('answered', 'timeout', 'cancelled')(d.outcome),
  'compact/start': (d) => isInt(d.turn),
  'compact/summary': (d) => isString(d.summary) && arrayOf(d.shadowedSeqs, isInt) && d.shadowedSeqs.length === 2
    && isInt(d.tokensBefore) && isInt(d.tokensAfter),
  'compact/end': (d) => isInt(d.turn) && optional(d.error, isString),
  'context/message': (d) => isString(d.source) && isString(d.path) && isString(d.content),
  'request/header': (d) => isString(d.provider) && isString(d.model) && isString(d.systemPrompt)
    && arrayOf(d.tools, isString) && isObject(d.settings),
  'todo/write': (d) => arrayOf(d.todos, (t) => isObject(t) && isString(t.content)
    && oneOf('pending', 'in_progress', 'completed')(t.status)),
  'turn/end': (d) => isInt(d.turn) && isTurnEndReason(d.reason),
};

/** The names of the event types this package knows (§6, §12.2, §13). */
export const EVENT_TYPES = Object.freeze(Object.keys(EVENT_DATA));

/**
 * A session event: the envelope `{type, seq, time, data}`, and for a known
 * type its data. An unknown type passes on its envelope alone, so a newer
 * daemon's events still flow through an older client.
 */
export function isEvent(ev) {
  if (!isEventEnvelope(ev)) return false;
  return Object.hasOwn(EVENT_DATA, ev.type) ? EVENT_DATA[ev.type](ev.data) : true;
}

/** The envelope alone: `{type, seq, time, data}` with their types, whatever the data holds. */
export function isEventEnvelope(ev) {
  return isObject(ev) && isString(ev.type) && isInt(ev.seq) && ev.seq >= 0 && isNumber(ev.time) && isObject(ev.data);
}

/** An event of a type this package knows, with valid data. */
export const isKnownEvent = (ev) => isEvent(ev) && Object.hasOwn(EVENT_DATA, ev.type);

// ---- requests and their results ---------------------------------------------

const isSessionEntry = (s) => isObject(s) && isSessionId(s.sessionId) && isNumber(s.createdAt) && isNumber(s.updatedAt)
  && isInt(s.lastSeq) && isInt(s.turns) && isBool(s.running) && optional(s.waiting, oneOf('approval', 'question'))
  && optional(s.parentSessionId, isString);

const isTool = (t) => isObject(t) && isString(t.name) && isString(t.description) && isObject(t.inputSchema)
  && isBool(t.readOnly) && isString(t.source);

const isAnswer = (a) => isObject(a) && isString(a.id) && optional(a.selected, (s) => arrayOf(s, isString))
  && optional(a.custom, isString);

const isStop = (v) => isString(v) || arrayOf(v, isString);
const isAfterSeq = (v) => isInt(v) && v >= -1;
const isLimit = (v) => isInt(v) && v >= 1 && v <= 1000;

/**
 * Every method: a check of its params (absent params read as {}) and of its
 * result. Keys are the method names of capabilities.methods.
 */
export const METHODS = Object.freeze({
  initialize: {
    params: (p) => isObject(p) && optional(p.cwd, isString) && optional(p.provider, isString)
      && optional(p.model, isString) && optional(p.maxTokens, isInt) && optional(p.protocolVersion, isInt)
      && optional(p.clientInfo, isObject) && optional(p.authToken, isString)
      && optional(p.onDisconnect, oneOf('cancel', 'continue'))
      && optional(p.sandbox, oneOf('read-only', 'workspace-write', 'danger-full-access'))
      && optional(p.contextWindow, isInt) && optional(p.thinking, oneOf('enabled', 'disabled'))
      && optional(p.reasoningEffort, oneOf('high', 'max')) && optional(p.temperature, isNumber)
      && optional(p.stop, isStop) && optional(p.maxSteps, isInt) && optional(p.approvalPolicy, oneOf('never', 'ask')),
    result: (r) => isObject(r) && isObject(r.serverInfo) && isString(r.serverInfo.name) && isString(r.serverInfo.version)
      && optional(r.serverInfo.implementation, isString)
      && isInt(r.protocolVersion) && isObject(r.capabilities)
      && arrayOf(r.capabilities.providers, isString) && arrayOf(r.capabilities.methods, isString),
  },
  'session/prompt': {
    params: (p) => isObject(p) && isSessionId(p.sessionId) && Array.isArray(p.contentBlocks)
      && p.contentBlocks.length > 0 && p.contentBlocks.every(isTextBlock),
    result: (r) => isObject(r) && oneOf('ok', 'aborted', 'error')(r.status) && isTurnEndReason(r.reason),
  },
  'session/cancel': {
    params: (p) => isObject(p) && isSessionId(p.sessionId),
    result: (r) => isObject(r) && isBool(r.cancelled),
  },
  shutdown: {
    params: (p) => p === undefined || isObject(p),
    result: (r) => isObject(r) && Object.keys(r).length === 0,
  },
  'session/list': {
    params: (p) => isObject(p) && optional(p.limit, isLimit) && optional(p.cursor, isString),
    result: (r) => isObject(r) && arrayOf(r.sessions, isSessionEntry) && optional(r.nextCursor, isString),
  },
  'session/events': {
    params: (p) => isObject(p) && isSessionId(p.sessionId) && optional(p.afterSeq, isAfterSeq) && optional(p.limit, isLimit),
    result: (r) => isObject(r) && arrayOf(r.events, isEvent) && isInt(r.lastSeq) && isBool(r.more),
  },
  'session/subscribe': {
    params: (p) => isObject(p) && isSessionId(p.sessionId) && optional(p.afterSeq, isAfterSeq),
    result: (r) => isObject(r) && isInt(r.lastSeq),
  },
  'session/unsubscribe': {
    params: (p) => isObject(p) && isSessionId(p.sessionId),
    result: (r) => isObject(r) && isBool(r.unsubscribed),
  },
  'tools/list': {
    params: (p) => p === undefined || isObject(p),
    result: (r) => isObject(r) && arrayOf(r.tools, isTool),
  },
  'session/approve': {
    params: (p) => isObject(p) && isSessionId(p.sessionId) && isString(p.approvalId)
      && oneOf('allowed-once', 'allowed-for-session', 'rejected')(p.outcome) && optional(p.message, isString),
    result: (r) => isObject(r) && r.accepted === true,
  },
  'session/delete': {
    params: (p) => isObject(p) && isSessionId(p.sessionId),
    result: (r) => isObject(r) && r.deleted === true,
  },
  'session/answer': {
    params: (p) => isObject(p) && isSessionId(p.sessionId) && isString(p.questionId) && arrayOf(p.answers, isAnswer),
    result: (r) => isObject(r) && r.accepted === true,
  },
});

/** Notifications the daemon sends, with a check of their params (§5). */
export const NOTIFICATIONS = Object.freeze({
  'session.event': (p) => isObject(p) && isSessionId(p.sessionId) && isEvent(p.event),
  'subagent.started': (p) => isObject(p) && isSessionId(p.parentSessionId) && isSessionId(p.childSessionId),
  'subagent.finished': (p) => isObject(p) && isString(p.provider) && isString(p.agentId)
    && isSessionId(p.parentSessionId) && isSessionId(p.childSessionId) && oneOf('ok', 'error')(p.status)
    && isString(p.stopReason) && optional(p.lastAssistantMessage, isString),
});

/** The `error` member of an error answer. */
export const isErrorObject = (e) => isObject(e) && isInt(e.code) && isString(e.message);

// ---- frames ---------------------------------------------------------------------

const isId = (id) => isString(id) || isInt(id);
const jsonrpcOk = (m) => m.jsonrpc === undefined || m.jsonrpc === '2.0';

/**
 * Sorts a decoded frame from the daemon: `{kind: "response", id, result}`,
 * `{kind: "error", id, error}`, `{kind: "notification", method, params}`,
 * or `{kind: "invalid", reason}`. A frame with both `id` and `method` is
 * invalid: the daemon never sends requests (§1).
 */
export function classifyFrame(msg) {
  if (!isObject(msg)) return { kind: 'invalid', reason: 'not a JSON object' };
  if (!jsonrpcOk(msg)) return { kind: 'invalid', reason: 'jsonrpc must be "2.0"' };
  const hasId = Object.hasOwn(msg, 'id');
  if (hasId && Object.hasOwn(msg, 'method')) return { kind: 'invalid', reason: 'a request from the daemon' };
  if (Object.hasOwn(msg, 'method')) {
    if (!isString(msg.method)) return { kind: 'invalid', reason: 'method must be a string' };
    return { kind: 'notification', method: msg.method, params: msg.params ?? {} };
  }
  if (!hasId || !(isId(msg.id) || msg.id === null)) return { kind: 'invalid', reason: 'no valid id' };
  if (Object.hasOwn(msg, 'error')) {
    return isErrorObject(msg.error) ? { kind: 'error', id: msg.id, error: msg.error }
      : { kind: 'invalid', reason: 'malformed error object' };
  }
  if (Object.hasOwn(msg, 'result')) return { kind: 'response', id: msg.id, result: msg.result };
  return { kind: 'invalid', reason: 'a response without result or error' };
}

/**
 * A notification frame (an object or its JSON text), checked: returns
 * `{method, params}` or throws a TypeError naming what is wrong. Unknown
 * methods pass with any object params.
 */
export function parseNotification(frame) {
  const msg = typeof frame === 'string' ? JSON.parse(frame) : frame;
  const c = classifyFrame(msg);
  if (c.kind !== 'notification') throw new TypeError(`not a notification: ${c.reason ?? c.kind}`);
  const check = NOTIFICATIONS[c.method];
  if (!isObject(c.params) || (check && !check(c.params))) throw new TypeError(`malformed ${c.method} params`);
  return { method: c.method, params: c.params };
}

/** The status of a prompt whose turn ended with `reason` (§4.2). */
export function statusOfReason(reason) {
  if (reason?.kind === 'completed') return 'ok';
  if (reason?.kind === 'aborted') return 'aborted';
  return 'error';
}
