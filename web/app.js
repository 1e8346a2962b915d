// harnessd web UI: a JSON-RPC client over the daemon's WebSocket (same host
// and port that served this page) that drives sessions and renders their
// streamed events. Plain browser JavaScript, no build step, no dependencies.
// Wire contract: PROTOCOL.md (the page only sends requests; the daemon only
// answers and notifies).

const CLIENT_INFO = { name: 'harnessd-web', version: '0.1.0' };
const STORE_SESSIONS = 'harnessd.sessions';
const STORE_CURRENT = 'harnessd.currentSession';
const STORE_HISTORY = 'harnessd.history.';
const HISTORY_TURNS = 30;
const HISTORY_TEXT_CHARS = 8000;
const BACKOFF_MS = [500, 1000, 2000, 4000, 8000, 15000];

const pageParams = new URLSearchParams(location.search);

// ---- small DOM helpers ----------------------------------------------------

const $ = (sel) => document.querySelector(sel);

function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else if (k.startsWith('data-') || k === 'role' || k === 'title' || k.startsWith('aria-')) el.setAttribute(k, v);
    else el[k] = v;
  }
  for (const c of children) if (c !== null && c !== undefined) el.append(c);
  return el;
}

function prettyJson(raw) {
  if (typeof raw !== 'string') return JSON.stringify(raw, null, 2);
  try {
    return JSON.stringify(JSON.parse(raw), null, 2);
  } catch {
    return raw;
  }
}

function blocksText(blocks) {
  if (!Array.isArray(blocks)) return typeof blocks === 'string' ? blocks : '';
  return blocks.map((b) => (typeof b?.text === 'string' ? b.text : b?.type === 'tool-result' ? blocksText(b.content) : '')).join('');
}

function shortId(id) {
  return id.length > 24 ? `${id.slice(0, 12)}…${id.slice(-8)}` : id;
}

function formatDuration(ms) {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  return `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
}

/** "completed", "aborted: cancelled", "error: boom (E42)" */
function describeReason(reason) {
  if (!reason || typeof reason !== 'object') return '';
  let s = String(reason.kind ?? 'unknown');
  const detail = reason.reason ?? reason.message;
  if (detail) s += `: ${detail}`;
  if (reason.code !== undefined) s += ` (${reason.code})`;
  return s;
}

// ---- JSON-RPC client over WebSocket with reconnect -------------------------

class RpcError extends Error {
  constructor(error) {
    super(typeof error?.message === 'string' ? error.message : 'unknown error');
    this.code = error?.code;
    this.data = error?.data;
  }
}

class ConnectionLost extends Error {
  constructor() {
    super('connection lost');
  }
}

function socketUrl() {
  const override = pageParams.get('ws');
  const base = override || `${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}/`;
  const token = pageParams.get('token');
  if (!token) return base;
  const url = new URL(base);
  url.searchParams.set('access_token', token);
  return url.toString();
}

class RpcClient {
  constructor({ onState, onNotification, onStrayError }) {
    this.onState = onState;
    this.onNotification = onNotification;
    this.onStrayError = onStrayError;
    this.ws = null;
    this.nextId = 1;
    this.pending = new Map();
    this.attempt = 0;
    this.retryTimer = null;
    this.ready = false;
    this.serverInfo = null;
  }

  connect() {
    clearTimeout(this.retryTimer);
    this.retryTimer = null;
    if (this.ws && this.ws.readyState <= WebSocket.OPEN) return;
    this.ready = false;
    this.onState('connecting');
    let ws;
    try {
      ws = new WebSocket(socketUrl());
    } catch (err) {
      this.onStrayError(`Cannot open WebSocket: ${err.message}`);
      this.scheduleReconnect();
      return;
    }
    this.ws = ws;
    ws.onopen = () => this.initialize(ws);
    ws.onmessage = (ev) => {
      if (typeof ev.data === 'string') this.onFrame(ev.data);
    };
    ws.onclose = () => {
      if (this.ws !== ws) return;
      this.ws = null;
      this.ready = false;
      const lost = [...this.pending.values()];
      this.pending.clear();
      for (const p of lost) p.reject(new ConnectionLost());
      this.scheduleReconnect();
    };
    ws.onerror = () => {};
  }

  async initialize(ws) {
    try {
      const result = await this.request('initialize', { clientInfo: CLIENT_INFO, protocolVersion: 1 });
      if (this.ws !== ws) return;
      this.serverInfo = result?.serverInfo ?? null;
      this.attempt = 0;
      this.ready = true;
      this.onState('connected');
    } catch (err) {
      if (err instanceof RpcError) {
        this.onStrayError(`initialize failed: ${err.message} (${err.code})`);
        ws.close();
      }
    }
  }

  scheduleReconnect() {
    const base = BACKOFF_MS[Math.min(this.attempt, BACKOFF_MS.length - 1)];
    const delay = Math.round(base * (0.8 + Math.random() * 0.4));
    this.attempt += 1;
    this.onState('disconnected', delay);
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => this.connect(), delay);
  }

  /** Reconnect now (e.g. the user clicked the status, the network came back). */
  retryNow() {
    if (this.ws) return;
    this.attempt = 0;
    this.connect();
  }

  request(method, params) {
    return new Promise((resolve, reject) => {
      const ws = this.ws;
      if (!ws || ws.readyState !== WebSocket.OPEN) {
        reject(new ConnectionLost());
        return;
      }
      const id = this.nextId++;
      this.pending.set(id, { resolve, reject, method });
      const frame = { jsonrpc: '2.0', id, method };
      if (params !== undefined) frame.params = params;
      ws.send(JSON.stringify(frame));
    });
  }

  onFrame(text) {
    let msg;
    try {
      msg = JSON.parse(text);
    } catch {
      return;
    }
    if (!msg || typeof msg !== 'object' || Array.isArray(msg)) return;
    const hasId = Object.hasOwn(msg, 'id');
    const hasMethod = Object.hasOwn(msg, 'method');
    if (hasId && hasMethod) return; // a server request: never resolves anything
    if (hasMethod) {
      if (typeof msg.method === 'string') this.onNotification(msg.method, msg.params ?? {});
      return;
    }
    if (!hasId) return;
    const p = this.pending.get(msg.id);
    if (!p) {
      if (msg.error) this.onStrayError(`${msg.error.message} (${msg.error.code})`);
      return;
    }
    this.pending.delete(msg.id);
    if (msg.error) p.reject(new RpcError(msg.error));
    else p.resolve(msg.result);
  }
}

// ---- sessions used in this browser (localStorage) --------------------------

function loadJson(key, fallback) {
  try {
    const v = JSON.parse(localStorage.getItem(key));
    return v ?? fallback;
  } catch {
    return fallback;
  }
}

function saveJson(key, value) {
  try {
    localStorage.setItem(key, JSON.stringify(value));
  } catch {
    // Storage full or disabled: the UI keeps working without persistence.
  }
}

function newSessionId() {
  const d = new Date();
  const pad = (n) => String(n).padStart(2, '0');
  const stamp = `${d.getFullYear()}${pad(d.getMonth() + 1)}${pad(d.getDate())}`;
  const rnd = crypto.getRandomValues(new Uint8Array(4));
  return `web-${stamp}-${[...rnd].map((b) => b.toString(16).padStart(2, '0')).join('')}`;
}

const sessionStore = {
  list() {
    const v = loadJson(STORE_SESSIONS, []);
    return Array.isArray(v) ? v.filter((s) => s && typeof s.id === 'string') : [];
  },
  upsert(id, patch = {}) {
    const list = this.list();
    let entry = list.find((s) => s.id === id);
    if (!entry) {
      entry = { id, title: '', createdAt: Date.now() };
      list.push(entry);
    }
    Object.assign(entry, patch, { updatedAt: Date.now() });
    saveJson(STORE_SESSIONS, list);
    return entry;
  },
  history(id) {
    const v = loadJson(STORE_HISTORY + id, []);
    return Array.isArray(v) ? v : [];
  },
  addHistory(id, entry) {
    const list = this.history(id);
    list.push(entry);
    saveJson(STORE_HISTORY + id, list.slice(-HISTORY_TURNS));
  },
};

// ---- rendering: turns, steps, blocks, tool calls, subagents ------------------

/**
 * Scrolls the transcript to the bottom once per frame while the user stays
 * there; a scroll by the user (not by us) decides whether to keep following.
 */
const autoScroll = {
  pending: false,
  stick: true,
  ourTop: -1,
  request() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      if (!this.stick) return;
      transcriptEl.scrollTop = transcriptEl.scrollHeight;
      this.ourTop = transcriptEl.scrollTop;
    });
  },
  onScroll() {
    if (Math.abs(transcriptEl.scrollTop - this.ourTop) < 2) return;
    this.ourTop = -1;
    this.stick = transcriptEl.scrollHeight - transcriptEl.scrollTop - transcriptEl.clientHeight < 40;
  },
};

function statusBadge(status, label = status) {
  return h('span', { class: `badge badge-${status}`, 'data-status': status, text: label });
}

class ToolCard {
  constructor(turn, callId, name) {
    this.turn = turn;
    this.callId = callId;
    this.name = name || 'tool';
    this.args = '';
    this.nameEl = h('span', { class: 'tool-name', text: this.name });
    this.idEl = h('span', { class: 'tool-id', text: callId ? shortId(callId) : '' });
    this.badge = statusBadge('running', 'preparing');
    this.argsEl = h('pre', { class: 'code tool-args' });
    this.resultEl = h('div', { class: 'tool-result', hidden: true });
    this.childrenEl = h('div', { class: 'subagents' });
    this.el = h('details', { class: 'tool-card', open: true, 'data-testid': 'tool-call' },
      h('summary', {}, h('span', { class: 'tool-icon', 'aria-hidden': 'true', text: '⚙' }), this.nameEl, this.idEl, this.badge),
      h('div', { class: 'tool-body' },
        h('div', { class: 'field-label', text: 'arguments' }), this.argsEl,
        this.childrenEl, this.resultEl));
    if (callId) turn.toolCards.set(callId, this);
  }

  setId(callId) {
    if (!callId || this.callId === callId) return;
    this.callId = callId;
    this.idEl.textContent = shortId(callId);
    this.turn.toolCards.set(callId, this);
  }

  setName(name) {
    if (!name) return;
    this.name = name;
    this.nameEl.textContent = name;
  }

  appendArgs(delta) {
    this.args += delta;
    this.argsEl.textContent = this.args;
  }

  called({ callId, name, arguments: args }) {
    this.setId(callId);
    this.setName(name);
    if (typeof args === 'string') this.args = args;
    this.argsEl.textContent = prettyJson(this.args);
    this.setBadge('running', 'running');
    this.el.dataset.name = this.name;
  }

  result({ content, isError }) {
    this.resultEl.hidden = false;
    this.resultEl.replaceChildren(
      h('div', { class: 'field-label', text: isError ? 'error' : 'result' }),
      h('pre', { class: `code${isError ? ' is-error' : ''}`, text: blocksText(content) }));
    this.setBadge(isError ? 'error' : 'ok', isError ? 'error' : 'done');
    if (this.name !== 'subagent') this.el.open = false;
  }

  setBadge(status, label) {
    const b = statusBadge(status, label);
    this.badge.replaceWith(b);
    this.badge = b;
  }
}

class StepView {
  constructor(turn, step) {
    this.turn = turn;
    this.step = step;
    this.blocks = new Map(); // index -> { type, el, text, card }
    this.streamed = false;
    this.el = h('div', { class: 'step', 'data-step': String(step) });
  }

  block(index, type) {
    let b = this.blocks.get(index);
    if (b) return b;
    b = { type };
    if (type === 'tool-call') {
      b.card = new ToolCard(this.turn, null, null);
      b.el = b.card.el;
    } else if (type === 'reasoning') {
      b.text = document.createTextNode('');
      b.el = h('div', { class: 'block reasoning', 'data-testid': 'reasoning' },
        h('div', { class: 'field-label', text: 'reasoning' }), h('div', { class: 'reasoning-text' }, b.text));
    } else {
      b.text = document.createTextNode('');
      b.el = h('div', { class: 'block assistant-text', 'data-testid': 'assistant-text' }, b.text);
    }
    this.blocks.set(index, b);
    this.el.append(b.el);
    return b;
  }

  chunk(c) {
    if (!c || typeof c !== 'object') return;
    this.streamed = true;
    switch (c.type) {
      case 'block-start':
        this.block(c.index, c.blockType === 'reasoning' || c.blockType === 'tool-call' ? c.blockType : 'text');
        break;
      case 'text-delta':
        this.block(c.index, 'text').text.appendData(String(c.text ?? ''));
        break;
      case 'reasoning-delta':
        this.block(c.index, 'reasoning').text.appendData(String(c.text ?? ''));
        break;
      case 'tool-call-delta': {
        const card = this.block(c.index, 'tool-call').card;
        card.setId(c.id ?? c.callId);
        card.setName(c.name);
        const delta = c.argumentsDelta ?? c.arguments ?? c.delta;
        if (typeof delta === 'string') card.appendArgs(delta);
        break;
      }
      case 'block-end': {
        const b = this.blocks.get(c.index);
        if (b) b.el.classList.add('done');
        break;
      }
      case 'usage':
        this.turn.usage = c.usage;
        break;
      case 'finish':
        this.finishReason = c.reason;
        break;
      default:
        break;
    }
  }

  /** `assistant/message`: render its content if nothing was streamed. */
  message(data) {
    if (data?.usage) this.turn.usage = data.usage;
    if (this.streamed || !Array.isArray(data?.content)) return;
    data.content.forEach((blk, i) => {
      if (blk.type === 'text') this.block(i, 'text').text.appendData(blk.text ?? '');
      else if (blk.type === 'reasoning') this.block(i, 'reasoning').text.appendData(blk.text ?? '');
      else if (blk.type === 'tool-call') {
        const card = this.block(i, 'tool-call').card;
        card.setId(blk.id);
        card.setName(blk.name);
        card.appendArgs(typeof blk.arguments === 'string' ? blk.arguments : JSON.stringify(blk.arguments));
      }
    });
  }

  toolCall(data) {
    let card = this.turn.toolCards.get(data.callId);
    if (!card) {
      // No streamed block carried this id: reuse an id-less streamed card or make one.
      const loose = [...this.blocks.values()].find((b) => b.card && !b.card.callId);
      card = loose ? loose.card : new ToolCard(this.turn, data.callId, data.name);
      if (!loose && !card.el.isConnected) this.el.append(card.el);
    }
    card.called(data);
  }
}

class TurnView {
  /**
   * @param sessionId  the session this turn runs in
   * @param prompt     the user's text (root turns), or null for a subagent
   * @param nested     true inside a subagent node
   */
  constructor(sessionId, prompt, { nested = false } = {}) {
    this.sessionId = sessionId;
    this.nested = nested;
    this.steps = new Map();
    this.toolCards = new Map();
    this.subagents = new Map();
    this.startedAt = performance.now();
    this.usage = null;
    this.reason = null;
    this.body = h('div', { class: 'assistant-body' });
    this.footer = h('div', { class: 'turn-footer' }, statusBadge('running', 'running'),
      h('span', { class: 'turn-reason', text: 'waiting for the model…' }));
    this.el = h('article', {
      class: `turn${nested ? ' nested' : ''}`,
      'data-testid': nested ? 'subagent-turn' : 'turn',
      'data-session': sessionId,
      'data-phase': 'pending',
    });
    if (prompt !== null) {
      this.el.append(h('div', { class: 'msg user' },
        h('div', { class: 'role', text: 'You' }),
        h('div', { class: 'user-text', text: prompt })));
    } else {
      this.promptEl = h('div', { class: 'subagent-prompt' });
      this.el.append(this.promptEl);
    }
    this.assistantEl = h('div', { class: 'msg assistant' },
      nested ? null : h('div', { class: 'role', text: 'Assistant' }), this.body);
    this.el.append(this.assistantEl, this.footer);
  }

  stepView(step) {
    const n = Number.isInteger(step) ? step : 0;
    let s = this.steps.get(n);
    if (!s) {
      s = new StepView(this, n);
      this.steps.set(n, s);
      this.body.append(s.el);
    }
    return s;
  }

  event(ev) {
    const d = ev?.data ?? {};
    switch (ev?.type) {
      case 'turn/start':
        this.el.dataset.phase = 'running';
        this.footer.querySelector('.turn-reason').textContent = 'running…';
        break;
      case 'user/message':
        if (this.promptEl) this.promptEl.textContent = blocksText(d.content);
        break;
      case 'step/start':
        this.stepView(d.step);
        break;
      case 'assistant/chunk':
        this.stepView(d.step).chunk(d.chunk);
        break;
      case 'assistant/message':
        this.stepView(d.step).message(d);
        break;
      case 'tool/call':
        this.stepView(d.step).toolCall(d);
        break;
      case 'tool/result': {
        const card = this.toolCards.get(d.callId);
        if (card) card.result(d);
        else this.stepView(d.step).el.append(h('pre', { class: 'code', text: blocksText(d.content) }));
        break;
      }
      case 'step/end':
        this.stepView(d.step).el.classList.add('done');
        break;
      case 'turn/end':
        this.reason = d.reason ?? null;
        this.el.dataset.phase = 'ended';
        if (this.nested) this.settle(statusOfReason(this.reason), describeReason(this.reason));
        break;
      default:
        break;
    }
    autoScroll.request();
  }

  /** A subagent was started from this turn: nest it under its tool call. */
  addSubagent(childId) {
    const node = new SubagentView(childId);
    this.subagents.set(childId, node);
    const cards = [...this.toolCards.values()];
    const host = cards.reverse().find((c) => c.name === 'subagent' && c.resultEl.hidden && !c.hasChild);
    if (host) {
      host.hasChild = true;
      host.childrenEl.append(node.el);
    } else {
      const steps = [...this.steps.values()];
      (steps.at(-1)?.el ?? this.body).append(node.el);
    }
    autoScroll.request();
    return node;
  }

  /** Show the final status of the turn (from the response, or turn/end for subagents). */
  settle(status, detail) {
    this.el.dataset.phase = 'ended';
    this.el.dataset.status = status;
    // A prompt the daemon rejected (or lost) before any step has no answer to show.
    this.assistantEl.hidden = !this.nested && this.body.textContent.trim() === '';
    const bits = [];
    if (detail) bits.push(detail);
    if (!this.nested) bits.push(formatDuration(performance.now() - this.startedAt));
    const u = this.usage;
    if (u && typeof u === 'object') {
      const inT = u.inputTokens ?? u.input_tokens ?? u.promptTokens;
      const outT = u.outputTokens ?? u.output_tokens ?? u.completionTokens;
      if (inT !== undefined || outT !== undefined) bits.push(`${inT ?? '?'} in / ${outT ?? '?'} out tokens`);
    }
    this.footer.replaceChildren(statusBadge(status), h('span', { class: 'turn-reason', text: bits.join(' · ') }));
    autoScroll.request();
  }

  finalText() {
    let text = '';
    for (const s of this.steps.values()) {
      for (const b of s.blocks.values()) if (b.type === 'text') text = b.text.data;
    }
    return text;
  }
}

class SubagentView {
  constructor(childId) {
    this.childId = childId;
    this.turn = new TurnView(childId, null, { nested: true });
    this.badge = statusBadge('running', 'running');
    this.stopEl = h('span', { class: 'subagent-stop' });
    this.el = h('div', { class: 'subagent', 'data-testid': 'subagent', 'data-session': childId, 'data-status': 'running' },
      h('div', { class: 'subagent-head' },
        h('span', { class: 'subagent-icon', 'aria-hidden': 'true', text: '↳' }),
        h('span', { class: 'subagent-label', text: 'subagent' }),
        h('span', { class: 'subagent-id', title: childId, text: shortId(childId) }),
        this.badge, this.stopEl),
      this.turn.el);
  }

  finished(p) {
    const status = p.status === 'ok' ? 'ok' : 'error';
    this.el.dataset.status = status;
    const b = statusBadge(status);
    this.badge.replaceWith(b);
    this.badge = b;
    if (p.stopReason) this.stopEl.textContent = String(p.stopReason);
  }
}

function statusOfReason(reason) {
  switch (reason?.kind) {
    case 'completed': return 'ok';
    case 'aborted': return 'aborted';
    default: return 'error';
  }
}

function restoredTurn(entry) {
  const view = new TurnView('', entry.prompt ?? '');
  view.el.classList.add('restored');
  view.el.setAttribute('data-testid', 'restored-turn');
  if (entry.text) view.stepView(0).block(0, 'text').text.appendData(entry.text);
  view.footer.replaceChildren(statusBadge(entry.status ?? 'ok'),
    h('span', { class: 'turn-reason', text: `${entry.detail ?? ''}${entry.at ? ` · ${new Date(entry.at).toLocaleString()}` : ''}` }));
  return view.el;
}

// ---- application state and controls --------------------------------------

const transcriptEl = $('#transcript');
const statusEl = $('#status');
const statusLabel = statusEl.querySelector('.status-label');
const sessionSelect = $('#session-select');
const promptEl = $('#prompt');
const sendBtn = $('#send');
const cancelBtn = $('#cancel');
const turnStatusEl = $('#turn-status');
const bannerEl = $('#error-banner');
const serverInfoEl = $('#server-info');

const state = {
  current: null,
  views: new Map(),      // sessionId -> transcript container
  lastStatus: new Map(), // sessionId -> { status, text }
  running: new Map(),    // root sessionId -> TurnView (turns this tab started)
  routes: new Map(),     // any sessionId (root or child) -> TurnView receiving its events
  cancelling: new Set(),
};

const rpc = new RpcClient({
  onState: setConnState,
  onNotification,
  onStrayError: showError,
});

function setConnState(s, retryMs) {
  statusEl.dataset.state = s;
  if (s === 'connected') {
    const si = rpc.serverInfo;
    statusLabel.textContent = 'Connected';
    serverInfoEl.textContent = si ? `${si.implementation ?? si.name} ${si.version ?? ''}`.trim() : '';
    statusEl.title = si ? `${si.name} ${si.version ?? ''}` : 'Connected';
  } else if (s === 'connecting') {
    statusLabel.textContent = 'Connecting…';
    statusEl.title = 'Connecting to harnessd';
  } else {
    statusLabel.textContent = `Disconnected · retry in ${Math.max(1, Math.round(retryMs / 1000))} s`;
    statusEl.title = 'Click to reconnect now';
  }
  updateControls();
}

function onNotification(method, params) {
  if (method === 'session.event') {
    state.routes.get(params.sessionId)?.event(params.event);
  } else if (method === 'subagent.started') {
    const parent = state.routes.get(params.parentSessionId);
    if (!parent) return;
    const node = parent.addSubagent(params.childSessionId);
    state.routes.set(params.childSessionId, node.turn);
  } else if (method === 'subagent.finished') {
    const parent = state.routes.get(params.parentSessionId);
    parent?.subagents.get(params.childSessionId)?.finished(params);
  }
}

function showError(text) {
  bannerEl.querySelector('.error-text').textContent = text;
  bannerEl.hidden = false;
}

function hideError() {
  bannerEl.hidden = true;
}

function setTurnStatus(sessionId, status, text) {
  state.lastStatus.set(sessionId, { status, text });
  if (sessionId === state.current) renderTurnStatus();
}

function renderTurnStatus() {
  const s = state.lastStatus.get(state.current) ?? { status: 'idle', text: 'idle' };
  turnStatusEl.dataset.status = s.status;
  turnStatusEl.textContent = s.text;
}

function updateControls() {
  const connected = rpc.ready;
  const running = state.running.has(state.current);
  sendBtn.disabled = !connected || running;
  cancelBtn.disabled = !connected || !running || state.cancelling.has(state.current);
  cancelBtn.textContent = state.cancelling.has(state.current) ? 'Cancelling…' : 'Cancel';
}

function renderSessionOptions() {
  const list = sessionStore.list().sort((a, b) => (b.updatedAt ?? 0) - (a.updatedAt ?? 0));
  sessionSelect.replaceChildren(...list.map((s) => {
    const title = s.title ? s.title : 'New session';
    return h('option', { value: s.id, text: `${title} — ${shortId(s.id)}`, title: s.id });
  }));
  if (state.current) sessionSelect.value = state.current;
}

function sessionView(id) {
  let view = state.views.get(id);
  if (!view) {
    view = h('div', { class: 'session-view', 'data-session': id });
    const history = sessionStore.history(id);
    if (history.length) {
      view.append(h('div', { class: 'history-note', text: 'Earlier turns in this browser' }));
      for (const entry of history) view.append(restoredTurn(entry));
      view.append(h('div', { class: 'history-divider' }));
    } else {
      view.append(emptyState(id));
    }
    state.views.set(id, view);
  }
  return view;
}

function emptyState(id) {
  const examples = ['Hello there', '@chunks 20 8', '@delay 200\n@chunks 10 6', '@subagent @chunks 3 4', '@error something broke'];
  return h('div', { class: 'empty-state' },
    h('div', { class: 'empty-title', text: 'No turns yet' }),
    h('div', { class: 'empty-sub' }, 'Session ', h('code', { text: id }), ' starts with your first prompt.'),
    h('div', { class: 'examples' }, ...examples.map((ex) => h('button', {
      type: 'button', class: 'chip', text: ex.replace('\n', ' ⏎ '),
      onclick: () => { promptEl.value = ex; promptEl.focus(); },
    }))));
}

function switchSession(id) {
  state.current = id;
  sessionStore.upsert(id);
  try {
    localStorage.setItem(STORE_CURRENT, id);
  } catch { /* ignore */ }
  const url = new URL(location.href);
  url.searchParams.set('session', id);
  history.replaceState(null, '', url);
  renderSessionOptions();
  transcriptEl.replaceChildren(sessionView(id));
  autoScroll.stick = true;
  autoScroll.request();
  renderTurnStatus();
  updateControls();
}

async function send() {
  const text = promptEl.value;
  const sid = state.current;
  if (!text.trim() || !rpc.ready || state.running.has(sid)) return;
  hideError();
  const view = sessionView(sid);
  view.querySelector('.empty-state')?.remove();
  const entry = sessionStore.list().find((s) => s.id === sid);
  sessionStore.upsert(sid, entry?.title ? {} : { title: text.split('\n')[0].slice(0, 40) });
  renderSessionOptions();

  const turn = new TurnView(sid, text);
  view.append(turn.el);
  autoScroll.stick = true;
  autoScroll.request();
  state.running.set(sid, turn);
  state.routes.set(sid, turn);
  promptEl.value = '';
  setTurnStatus(sid, 'running', 'running…');
  updateControls();

  try {
    const result = await rpc.request('session/prompt', { sessionId: sid, contentBlocks: [{ type: 'text', text }] });
    const status = typeof result?.status === 'string' ? result.status : 'error';
    const detail = describeReason(result?.reason);
    turn.settle(status, detail);
    setTurnStatus(sid, status, detail ? `${status} · ${detail}` : status);
    sessionStore.addHistory(sid, {
      prompt: text, text: turn.finalText().slice(-HISTORY_TEXT_CHARS), status, detail, at: Date.now(),
    });
  } catch (err) {
    if (err instanceof RpcError) {
      showError(`${err.message} (${err.code})`);
      turn.settle('error', `rejected: ${err.message}`);
      setTurnStatus(sid, 'error', `error · ${err.message}`);
      if (err.code === -32001 && !promptEl.value) promptEl.value = text;
    } else {
      turn.settle('error', 'interrupted: connection lost');
      setTurnStatus(sid, 'error', 'error · connection lost');
    }
  } finally {
    state.running.delete(sid);
    state.cancelling.delete(sid);
    if (state.routes.get(sid) === turn) state.routes.delete(sid);
    for (const [child, view] of state.routes) {
      if (view !== turn && turn.el.contains(view.el)) state.routes.delete(child);
    }
    updateControls();
  }
}

async function cancel() {
  const sid = state.current;
  if (!state.running.has(sid)) return;
  state.cancelling.add(sid);
  updateControls();
  try {
    await rpc.request('session/cancel', { sessionId: sid });
  } catch (err) {
    state.cancelling.delete(sid);
    if (err instanceof RpcError) showError(`${err.message} (${err.code})`);
    updateControls();
  }
}

// ---- wiring ---------------------------------------------------------------

$('#prompt-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  send();
});
promptEl.addEventListener('keydown', (ev) => {
  if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
    ev.preventDefault();
    send();
  }
});
cancelBtn.addEventListener('click', cancel);
bannerEl.querySelector('.error-dismiss').addEventListener('click', hideError);
sessionSelect.addEventListener('change', () => switchSession(sessionSelect.value));
$('#new-session').addEventListener('click', () => {
  switchSession(newSessionId());
  promptEl.focus();
});
statusEl.addEventListener('click', () => rpc.retryNow());
window.addEventListener('online', () => rpc.retryNow());
window.addEventListener('storage', (ev) => {
  if (ev.key === STORE_SESSIONS) renderSessionOptions();
});
transcriptEl.addEventListener('scroll', () => autoScroll.onScroll());

(function start() {
  const fromUrl = pageParams.get('session');
  const known = sessionStore.list();
  const last = localStorage.getItem(STORE_CURRENT);
  let id = fromUrl && fromUrl.length <= 256 ? fromUrl : null;
  if (!id && last && known.some((s) => s.id === last)) id = last;
  if (!id && known.length) id = known.sort((a, b) => (b.updatedAt ?? 0) - (a.updatedAt ?? 0))[0].id;
  switchSession(id ?? newSessionId());
  rpc.connect();
  promptEl.focus();
})();
