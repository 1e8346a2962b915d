// harnessd web UI: a JSON-RPC client over the daemon's WebSocket (same host
// and port that served this page) that drives sessions and renders their
// events. Plain browser JavaScript, no build step, no dependencies.
// Wire contract: docs/protocol.md (the page only sends requests; the daemon
// only answers and notifies).
//
// With a daemon that offers session/list, session/events and
// session/subscribe (capabilities.methods), the page lists the daemon's
// sessions in a sidebar, rebuilds a session's transcript from its log (the
// newest page first, older pages on demand) and follows the session it shows,
// so turns started elsewhere (another tab, a page before a reload) stream
// here too. Without them it works as a plain client of its own prompts and
// keeps a short history of them in localStorage.

import { h, blocksText, shortId, statusBadge } from './dom.js';
import { ToolCard, TodoPanel } from './tools.js';
import { ApprovalCard, QuestionCard } from './decisions.js';
import { CompactionDivider, headerNote, instructionsNote } from './context.js';

const CLIENT_INFO = { name: 'harnessd-web', version: '0.2.0' };
const STORE_SESSIONS = 'harnessd.sessions';
const STORE_CURRENT = 'harnessd.currentSession';
const STORE_HISTORY = 'harnessd.history.';
const HISTORY_TURNS = 30;
const HISTORY_TEXT_CHARS = 8000;
const BACKOFF_MS = [500, 1000, 2000, 4000, 8000, 15000];
const SIDEBAR_REFRESH_MS = 5000;

const pageParams = new URLSearchParams(location.search);

function intParam(name, fallback, min, max) {
  const v = Number(pageParams.get(name));
  return Number.isInteger(v) && v >= min && v <= max ? v : fallback;
}

/** Events per session/events page (?pageSize=N overrides, 1..1000). */
const EVENTS_PAGE = intParam('pageSize', 200, 1, 1000);
/** Sessions per session/list page (?listPageSize=N overrides, 1..1000). */
const LIST_PAGE = intParam('listPageSize', 50, 1, 1000);

// ---- small DOM helpers ----------------------------------------------------

const $ = (sel) => document.querySelector(sel);

function formatDuration(ms) {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  return `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
}

function timeAgo(ms) {
  if (!Number.isFinite(ms)) return '';
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 45) return 'just now';
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return new Date(ms).toLocaleDateString();
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

function statusOfReason(reason) {
  switch (reason?.kind) {
    case 'completed': return 'ok';
    case 'aborted': return 'aborted';
    default: return 'error';
  }
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

/** session/approve and session/answer from a decision card. */
const sendDecision = (method, params) => rpc.request(method, params);

const isUnknownSession = (err) => err instanceof RpcError && err.code === -32602 && /unknown session/.test(err.message);

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
    this.methods = new Set();
    /** Counts successful initializes: subscriptions belong to one connection. */
    this.epoch = 0;
  }

  /** True when the daemon announced `method` in capabilities.methods. */
  has(method) {
    return this.methods.has(method);
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
    // Turns this page starts keep running when the page goes away (reload,
    // network loss); the page picks them up again through session/subscribe.
    const params = { clientInfo: CLIENT_INFO, protocolVersion: 1, onDisconnect: 'continue' };
    try {
      let result;
      try {
        result = await this.request('initialize', params);
      } catch (err) {
        // A daemon that predates onDisconnect and checks its params strictly.
        if (!(err instanceof RpcError && err.code === -32602 && /onDisconnect/.test(err.message))) throw err;
        delete params.onDisconnect;
        result = await this.request('initialize', params);
      }
      if (this.ws !== ws) return;
      this.serverInfo = result?.serverInfo ?? null;
      const methods = result?.capabilities?.methods;
      this.methods = new Set(Array.isArray(methods) ? methods.filter((m) => typeof m === 'string') : []);
      this.attempt = 0;
      this.epoch += 1;
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

  /** A request of an optional method: a -32601 answer withdraws the method. */
  async optional(method, params) {
    try {
      return await this.request(method, params);
    } catch (err) {
      if (err instanceof RpcError && err.code === -32601) {
        this.methods.delete(method);
        document.body.dataset.methods = [...this.methods].join(' ');
      }
      throw err;
    }
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
  get(id) {
    return this.list().find((s) => s.id === id);
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
  ourTop: NaN,
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
    this.ourTop = NaN;
    this.stick = transcriptEl.scrollHeight - transcriptEl.scrollTop - transcriptEl.clientHeight < 40;
  },
};

class StepView {
  /** @param partial  the step's first events were not seen (an older page not loaded) */
  constructor(turn, step, partial) {
    this.turn = turn;
    this.step = step;
    this.partial = partial;
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
        card.setId(c.id);
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

  /**
   * `assistant/message`: render its content if nothing was streamed, or if
   * the step's first chunks were never seen (then the message is the whole).
   */
  message(data) {
    if (data?.usage) this.turn.usage = data.usage;
    if ((this.streamed && !this.partial) || !Array.isArray(data?.content)) return;
    data.content.forEach((blk, i) => {
      if (blk.type === 'text' || blk.type === 'reasoning') {
        this.block(i, blk.type).text.data = String(blk.text ?? '');
      } else if (blk.type === 'tool-call') {
        const card = this.block(i, 'tool-call').card;
        card.setId(blk.id);
        card.setName(blk.name);
        card.args = '';
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
   * @param prompt     the user's text when known up front (a prompt of this page)
   * @param nested     true inside a subagent node
   * @param partial    the turn's first events are on an older page, not loaded
   */
  constructor(sessionId, { prompt = null, nested = false, partial = false } = {}) {
    this.sessionId = sessionId;
    this.nested = nested;
    this.partial = partial;
    this.local = prompt !== null;
    this.steps = new Map();
    this.toolCards = new Map();
    this.decisions = new Map(); // approvalId / questionId → its card
    this.subagents = new Map();
    this.compaction = null; // the divider of the compaction running now
    this.startedAt = performance.now();
    this.t0 = null; // turn/start time (epoch ms)
    this.t1 = null; // turn/end time
    this.usage = null;
    this.reason = null;
    this.body = h('div', { class: 'assistant-body' });
    this.footer = h('div', { class: 'turn-footer' }, statusBadge('running', 'running'),
      h('span', { class: 'turn-reason', text: partial ? 'running…' : 'waiting for the model…' }));
    this.el = h('article', {
      class: `turn${nested ? ' nested' : ''}${partial ? ' partial' : ''}`,
      'data-testid': nested ? 'subagent-turn' : 'turn',
      'data-session': sessionId,
      'data-phase': partial ? 'running' : 'pending',
    });
    if (nested) {
      this.promptEl = h('div', { class: 'subagent-prompt' });
      this.el.append(this.promptEl);
    } else {
      if (partial) {
        this.el.append(h('div', { class: 'partial-note', 'data-testid': 'partial-note',
          text: 'The start of this turn is on an earlier page.' }));
      }
      this.userTextEl = h('div', { class: 'user-text', 'data-testid': 'user-text', text: prompt ?? '' });
      this.userEl = h('div', { class: 'msg user', hidden: prompt === null },
        h('div', { class: 'role', text: 'You' }), this.userTextEl);
      this.el.append(this.userEl);
    }
    // What reaches the model's context before the first step (instructions,
    // request header, a compaction) sits between the prompt and the answer.
    this.preludeEl = h('div', { class: 'turn-prelude' });
    this.assistantEl = h('div', { class: 'msg assistant' },
      nested ? null : h('div', { class: 'role', text: 'Assistant' }), this.body);
    this.el.append(this.preludeEl, this.assistantEl, this.footer);
  }

  stepView(step, fromStart = false) {
    const n = Number.isInteger(step) ? step : 0;
    let s = this.steps.get(n);
    if (!s) {
      s = new StepView(this, n, this.partial && !fromStart);
      this.steps.set(n, s);
      this.body.append(s.el);
    }
    return s;
  }

  /** A context note goes before the first step, or between the steps it came between. */
  placeContext(el) {
    (this.steps.size === 0 ? this.preludeEl : this.body).append(el);
  }

  /** The running compaction's divider; a new one when its start is not shown. */
  compactionDivider() {
    if (!this.compaction) {
      this.compaction = new CompactionDivider();
      this.placeContext(this.compaction.el);
    }
    return this.compaction;
  }

  event(ev) {
    const d = ev?.data ?? {};
    switch (ev?.type) {
      case 'turn/start':
        if (Number.isFinite(ev.time)) this.t0 = ev.time;
        this.el.dataset.phase = 'running';
        if (Number.isInteger(d.turn)) this.el.dataset.turn = String(d.turn);
        this.footer.querySelector('.turn-reason').textContent = 'running…';
        break;
      case 'user/message':
        if (this.nested) {
          this.promptEl.textContent = blocksText(d.content);
        } else {
          this.userTextEl.textContent = blocksText(d.content);
          this.userEl.hidden = false;
        }
        break;
      case 'step/start':
        this.stepView(d.step, true);
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
        if (card) {
          card.result(d);
        } else {
          // Its call is on an earlier page: a card of the result alone.
          const orphan = new ToolCard(this, d.callId, null);
          this.stepView(d.step).el.append(orphan.el);
          orphan.result(d);
        }
        break;
      }
      case 'approval/requested':
        this.addDecision(d, d.approvalId, new ApprovalCard(this.sessionId, d, sendDecision));
        break;
      case 'question/requested':
        this.addDecision(d, d.questionId, new QuestionCard(this.sessionId, d, sendDecision));
        break;
      case 'approval/resolved':
        this.decisions.get(`approval:${d.approvalId}`)?.resolved(d);
        break;
      case 'question/resolved':
        this.decisions.get(`question:${d.questionId}`)?.resolved(d);
        break;
      case 'step/end':
        this.stepView(d.step).el.classList.add('done');
        break;
      case 'compact/start':
        this.compaction = null;
        this.compactionDivider();
        break;
      case 'compact/summary':
        this.compactionDivider().summary(d);
        break;
      case 'compact/end':
        this.compactionDivider().end(d);
        this.compaction = null;
        break;
      case 'context/message':
        this.placeContext(instructionsNote(d));
        break;
      case 'request/header':
        this.placeContext(headerNote(d));
        break;
      case 'turn/end':
        for (const card of this.decisions.values()) card.expire();
        this.compaction?.expire();
        this.compaction = null;
        if (Number.isFinite(ev.time)) this.t1 = ev.time;
        this.reason = d.reason ?? null;
        this.el.dataset.phase = 'ended';
        this.settle(statusOfReason(this.reason), describeReason(this.reason));
        break;
      default:
        break;
    }
    autoScroll.request();
  }

  /** A decision card goes into its tool call's card, above the result to come. */
  addDecision(d, id, card) {
    const kind = card instanceof ApprovalCard ? 'approval' : 'question';
    this.decisions.get(`${kind}:${id}`)?.el.remove();
    this.decisions.set(`${kind}:${id}`, card);
    const tool = this.toolCards.get(d.callId);
    if (tool) {
      tool.el.open = true;
      tool.resultEl.before(card.el);
    } else {
      this.stepView(d.step).el.append(card.el);
    }
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

  durationMs() {
    if (this.t0 !== null && this.t1 !== null) return this.t1 - this.t0;
    if (this.local) return performance.now() - this.startedAt;
    return null;
  }

  /** Show the final status of the turn (from turn/end, or a prompt's answer). */
  settle(status, detail) {
    this.el.dataset.phase = 'ended';
    this.el.dataset.status = status;
    // A prompt the daemon rejected (or lost) before any step has no answer to show.
    this.assistantEl.hidden = !this.nested && this.body.textContent.trim() === '';
    const bits = [];
    if (detail) bits.push(detail);
    const ms = this.nested ? null : this.durationMs();
    if (ms !== null) bits.push(formatDuration(ms));
    const u = this.usage;
    if (u && typeof u === 'object') {
      const inT = u.inputTokens ?? u.input_tokens ?? u.promptTokens;
      const outT = u.outputTokens ?? u.output_tokens ?? u.completionTokens;
      if (inT !== undefined || outT !== undefined) bits.push(`${inT ?? '?'} in / ${outT ?? '?'} out tokens`);
    }
    this.footer.replaceChildren(statusBadge(status), h('span', { class: 'turn-reason', text: bits.join(' · ') }));
    autoScroll.request();
  }

  /** The turn runs on but this page lost its connection; it follows again once back. */
  detach() {
    this.footer.replaceChildren(statusBadge('running', 'detached'),
      h('span', { class: 'turn-reason', text: 'connection lost: the turn continues on the daemon…' }));
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
    this.turn = new TurnView(childId, { nested: true });
    this.badge = statusBadge('running', 'running');
    this.stopEl = h('span', { class: 'subagent-stop' });
    this.el = h('div', { class: 'subagent', 'data-testid': 'subagent', 'data-session': childId, 'data-status': 'running' },
      h('div', { class: 'subagent-head' },
        h('span', { class: 'subagent-icon', 'aria-hidden': 'true', text: '↳' }),
        h('span', { class: 'subagent-label', text: 'subagent' }),
        h('button', { type: 'button', class: 'subagent-id link', title: `Open ${childId}`, text: shortId(childId),
          onclick: () => switchSession(childId) }),
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

function restoredTurn(entry) {
  const view = new TurnView('', { prompt: entry.prompt ?? '' });
  view.el.classList.add('restored');
  view.el.setAttribute('data-testid', 'restored-turn');
  if (entry.text) view.stepView(0).block(0, 'text').text.appendData(entry.text);
  view.footer.replaceChildren(statusBadge(entry.status ?? 'ok'),
    h('span', { class: 'turn-reason', text: `${entry.detail ?? ''}${entry.at ? ` · ${new Date(entry.at).toLocaleString()}` : ''}` }));
  return view.el;
}

// ---- one session's transcript, built from its events ------------------------

/**
 * The transcript of one session: its events, deduplicated by `seq`, grouped
 * into turns. The events shown are the contiguous range lo..hi: the newest
 * page first, older pages prepended on demand, live events appended.
 */
class Transcript {
  constructor(id) {
    this.id = id;
    this.lo = null;
    this.hi = null;
    this.groups = [];        // { view, ended, partial, events (first group only, while partial) }
    this.pending = [];       // prompts of this page waiting for their turn's user/message
    this.noEarlier = false;  // the daemon keeps nothing before lo
    this.gen = 0;            // bumped when the history is replaced: stale loads are dropped
    this.syncing = false;
    this.syncToken = 0;
    this.loadingEarlier = false;
    this.localHistoryShown = false;
    this.earlierBtn = h('button', { type: 'button', class: 'btn btn-small load-earlier', 'data-testid': 'load-earlier',
      text: 'Load earlier events', hidden: true, onclick: () => this.loadEarlier() });
    this.topNote = h('div', { class: 'history-note', hidden: true });
    this.topEl = h('div', { class: 'transcript-top' }, this.earlierBtn, this.topNote);
    this.emptyEl = emptyState(id);
    this.listEl = h('div', { class: 'turns' });
    this.el = h('div', { class: 'session-view', 'data-session': id }, this.topEl, this.emptyEl, this.listEl);
    this.renderEdges();
  }

  /** The group of the turn running now, if any. */
  liveGroup() {
    const g = this.groups.at(-1);
    return g && !g.ended ? g : null;
  }

  canLoadEarlier() {
    return rpc.ready && rpc.has('session/events') && this.lo !== null && this.lo > 0 && !this.noEarlier;
  }

  renderEdges() {
    this.earlierBtn.hidden = !this.canLoadEarlier();
    this.earlierBtn.disabled = this.loadingEarlier;
    this.earlierBtn.textContent = this.loadingEarlier ? 'Loading…' : 'Load earlier events';
    const empty = this.groups.length === 0 && this.pending.length === 0 && this.listEl.childElementCount === 0;
    this.emptyEl.hidden = !empty || this.syncing;
    this.el.dataset.firstSeq = this.lo ?? '';
    this.el.dataset.lastSeq = this.hi ?? '';
  }

  setNote(text) {
    this.topNote.textContent = text ?? '';
    this.topNote.hidden = !text;
  }

  /**
   * A live or replayed event. Returns false for one already shown (same seq).
   * @param live  true for notifications (they update status line and sidebar)
   */
  append(ev, live) {
    if (!ev || typeof ev !== 'object') return false;
    if (Number.isInteger(ev.seq)) {
      if (this.hi !== null && ev.seq <= this.hi) return false;
      if (this.lo === null) this.lo = ev.seq;
      this.hi = ev.seq;
    }
    this.apply(ev, this.groups, this.listEl, live);
    this.renderEdges();
    return true;
  }

  /** The session's todo list: its newest todo/write (older pages loaded later do not override it). */
  setTodos(ev) {
    const seq = Number.isInteger(ev.seq) ? ev.seq : Infinity;
    if (this.todoSeq !== undefined && seq < this.todoSeq) return;
    this.todoSeq = seq;
    this.todos = Array.isArray(ev.data?.todos) ? ev.data.todos : [];
    if (state.current === this.id) todoPanel.show(this.todos);
  }

  /** Feeds one event into `groups` (whose elements live in `container`). */
  apply(ev, groups, container, live) {
    if (ev.type === 'todo/write') this.setTodos(ev);
    let g = groups.at(-1);
    if (ev.type === 'turn/start' || !g || g.ended) {
      if (g && !g.ended) {
        // The previous turn's end was never notified (log recovery after a
        // crash writes an `interrupted` turn/end only to the log).
        g.ended = true;
        g.view.settle('error', 'interrupted');
      }
      const partial = ev.type !== 'turn/start';
      g = { view: new TurnView(this.id, { partial }), ended: false, partial, events: partial ? [] : null };
      groups.push(g);
      container.append(g.view.el);
    }
    if (g.events) g.events.push(ev);
    g.view.event(ev);
    if (ev.type === 'user/message' && live && !g.partial) this.adopt(g, blocksText(ev.data?.content));
    if (ev.type === 'turn/start' && live) {
      setTurnStatus(this.id, 'running', 'running…');
      sidebar.render();
      sidebar.soon();
    }
    if (ev.type === 'turn/end') {
      g.ended = true;
      if (live) {
        const status = statusOfReason(g.view.reason);
        const detail = describeReason(g.view.reason);
        setTurnStatus(this.id, status, detail ? `${status} · ${detail}` : status);
        state.cancelling.delete(this.id);
        sidebar.render();
        sidebar.soon();
      }
    }
    if (live && (ev.type === 'turn/start' || ev.type === 'turn/end')) updateControls();
  }

  /** A prompt of this page shows as a placeholder until its turn's events arrive. */
  addPending(text) {
    const p = { text, view: new TurnView(this.id, { prompt: text }), group: null };
    this.pending.push(p);
    this.listEl.append(p.view.el);
    this.renderEdges();
    return p;
  }

  /** The turn whose user/message matches a waiting prompt replaces its placeholder. */
  adopt(g, text) {
    const i = this.pending.findIndex((p) => !p.group && p.text === text);
    if (i < 0) return;
    const p = this.pending[i];
    p.group = g;
    g.view.local = true;
    g.view.startedAt = p.view.startedAt;
    p.view.el.remove();
  }

  dropPending(p) {
    const i = this.pending.indexOf(p);
    if (i >= 0) this.pending.splice(i, 1);
    this.renderEdges();
  }

  /** Forget the shown range (the DOM stays): the daemon lost or replaced this history. */
  detachHistory(note) {
    const live = this.liveGroup();
    if (live) {
      live.ended = true;
      live.view.settle('error', 'interrupted');
    }
    if (this.listEl.childElementCount) this.listEl.append(h('div', { class: 'history-divider', title: note }));
    this.groups = [];
    this.lo = null;
    this.hi = null;
    this.noEarlier = false;
    this.gen += 1;
    this.renderEdges();
  }

  /** Drop everything shown (the daemon has too much we missed: reload the newest page). */
  clear() {
    this.groups = [];
    this.pending = [];
    this.lo = null;
    this.hi = null;
    this.noEarlier = false;
    this.gen += 1;
    this.listEl.replaceChildren();
    this.setNote('');
    this.renderEdges();
  }

  /** Events with seq > after up to at least `upto` (several pages if the 4 MiB cap cut one short). */
  async fetchRange(after, upto) {
    const out = [];
    let cursor = after;
    for (;;) {
      const res = await rpc.optional('session/events', { sessionId: this.id, afterSeq: cursor, limit: EVENTS_PAGE });
      const events = Array.isArray(res?.events) ? res.events : [];
      out.push(...events);
      const last = events.at(-1)?.seq;
      if (!res?.more || !Number.isInteger(last) || last >= upto) return { events: out, lastSeq: res?.lastSeq };
      cursor = last;
    }
  }

  /** Shows the newest page of a session whose last seq is `lastSeq`. */
  async loadNewest(lastSeq) {
    const gen = this.gen;
    if (!Number.isInteger(lastSeq) || lastSeq < 0) return;
    const { events } = await this.fetchRange(Math.max(-1, lastSeq - EVENTS_PAGE), lastSeq);
    if (gen !== this.gen) return;
    if (!events.length) {
      // The daemon keeps no events (--store memory): follow from here on.
      this.noEarlier = true;
      if (this.hi === null || this.hi < lastSeq) this.hi = lastSeq;
      if (this.lo === null) this.lo = lastSeq + 1;
      this.setNote('This daemon keeps no event history; new turns appear as they run.');
      this.renderEdges();
      return;
    }
    for (const ev of events) this.append(ev, false);
    autoScroll.stick = true;
    autoScroll.request();
  }

  /** Prepends the page before `lo`, keeping the scroll position. */
  async loadEarlier() {
    if (!this.canLoadEarlier() || this.loadingEarlier) return;
    const gen = this.gen;
    const lo = this.lo;
    this.loadingEarlier = true;
    this.renderEdges();
    try {
      const { events } = await this.fetchRange(Math.max(-1, lo - 1 - EVENTS_PAGE), lo - 1);
      if (gen !== this.gen || this.lo !== lo) return;
      const older = events.filter((ev) => Number.isInteger(ev.seq) && ev.seq < lo);
      if (!older.length || older.at(-1).seq !== lo - 1) {
        this.noEarlier = true;
        return;
      }
      this.prepend(older);
    } catch (err) {
      if (err instanceof RpcError) showError(`loading earlier events failed: ${err.message} (${err.code})`);
    } finally {
      this.loadingEarlier = false;
      this.renderEdges();
    }
  }

  prepend(older) {
    const shown = state.current === this.id && transcriptEl.contains(this.el);
    const fromBottom = transcriptEl.scrollHeight - transcriptEl.scrollTop;
    // The first shown turn began on the page now loaded: build it again whole.
    let merged = older;
    let rest = this.groups;
    const first = this.groups[0];
    if (first?.partial && first.events) {
      merged = older.concat(first.events);
      rest = this.groups.slice(1);
    }
    const frag = document.createDocumentFragment();
    const built = [];
    for (const ev of merged) this.apply(ev, built, frag, false);
    if (merged !== older) first.view.el.replaceWith(frag);
    else if (first) first.view.el.before(frag);
    else this.listEl.prepend(frag);
    for (const g of rest) g.events = null;
    if (merged !== older) {
      // A prompt of this page waiting on that turn follows the rebuilt view.
      for (const p of this.pending) if (p.group === first) p.group = built.at(-1);
    }
    this.groups = built.concat(rest);
    this.lo = older[0].seq;
    if (shown) {
      autoScroll.stick = false;
      transcriptEl.scrollTop = transcriptEl.scrollHeight - fromBottom;
      autoScroll.ourTop = transcriptEl.scrollTop;
    }
  }

  /** Status line text for this session: the turn running, else the last one shown. */
  summarize() {
    const g = this.groups.at(-1);
    if (!g) return;
    if (!g.ended) {
      setTurnStatus(this.id, 'running', 'running…');
      return;
    }
    const status = g.view.el.dataset.status ?? statusOfReason(g.view.reason);
    const detail = describeReason(g.view.reason);
    setTurnStatus(this.id, status, detail ? `${status} · ${detail}` : status);
  }

  /** Browser-side history, for daemons that keep none for clients to read. */
  showLocalHistory() {
    if (this.localHistoryShown) return;
    this.localHistoryShown = true;
    const history = sessionStore.history(this.id);
    if (!history.length) return;
    this.listEl.prepend(
      h('div', { class: 'history-note', text: 'Earlier turns in this browser' }),
      ...history.map(restoredTurn),
      h('div', { class: 'history-divider' }));
    this.renderEdges();
  }
}

function emptyState(id) {
  const examples = ['Hello there', '@chunks 20 8', '@delay 200\n@chunks 10 6', '@subagent @chunks 3 4', '@error something broke'];
  return h('div', { class: 'empty-state', 'data-testid': 'empty-state' },
    h('div', { class: 'empty-title', text: 'No turns yet' }),
    h('div', { class: 'empty-sub' }, 'Session ', h('code', { text: id }), ' starts with your first prompt.'),
    h('div', { class: 'examples' }, ...examples.map((ex) => h('button', {
      type: 'button', class: 'chip', text: ex.replace('\n', ' ⏎ '),
      onclick: () => { promptEl.value = ex; promptEl.focus(); },
    }))));
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
const sessionListEl = $('#session-list');
const moreSessionsBtn = $('#more-sessions');
const sidebarNoteEl = $('#sidebar-note');
const todoPanel = new TodoPanel($('#todo-panel'));

const state = {
  current: null,
  views: new Map(),      // sessionId -> Transcript
  lastStatus: new Map(), // sessionId -> { status, text }
  running: new Map(),    // sessionId -> pending prompt of this page
  routes: new Map(),     // child sessionId -> TurnView of a subagent started by this page
  cancelling: new Set(),
  sub: null,             // { id, epoch }: the session this connection subscribes to
};

const rpc = new RpcClient({
  onState: setConnState,
  onNotification,
  onStrayError: showError,
});

function transcript(id) {
  let t = state.views.get(id);
  if (!t) {
    t = new Transcript(id);
    state.views.set(id, t);
  }
  return t;
}

function setConnState(s, retryMs) {
  statusEl.dataset.state = s;
  if (s === 'connected') {
    const si = rpc.serverInfo;
    statusLabel.textContent = 'Connected';
    serverInfoEl.textContent = si ? `${si.implementation ?? si.name} ${si.version ?? ''}`.trim() : '';
    statusEl.title = si ? `${si.name} ${si.version ?? ''}` : 'Connected';
    document.body.dataset.methods = [...rpc.methods].join(' ');
    onConnected();
  } else if (s === 'connecting') {
    statusLabel.textContent = 'Connecting…';
    statusEl.title = 'Connecting to harnessd';
  } else {
    statusLabel.textContent = `Disconnected · retry in ${Math.max(1, Math.round(retryMs / 1000))} s`;
    statusEl.title = 'Click to reconnect now';
    state.sub = null;
  }
  updateControls();
}

function onConnected() {
  state.sub = null;
  if (!rpc.has('session/events')) {
    // Nothing to read back: seq may start over on this server, and this
    // browser's own record of earlier turns is all there is to show.
    for (const t of state.views.values()) {
      t.lo = null;
      t.hi = null;
      t.noEarlier = true;
      t.showLocalHistory();
    }
  }
  syncCurrent();
  sidebar.connected();
}

/** The TurnView that receives events of `sessionId` as a turn's parent or child. */
function liveViewOf(sessionId) {
  return state.routes.get(sessionId) ?? state.views.get(sessionId)?.liveGroup()?.view ?? null;
}

function onNotification(method, params) {
  if (method === 'session.event') {
    const id = params.sessionId;
    state.routes.get(id)?.event(params.event);
    state.views.get(id)?.append(params.event, true);
  } else if (method === 'subagent.started') {
    const parent = liveViewOf(params.parentSessionId);
    if (!parent) return;
    const node = parent.addSubagent(params.childSessionId);
    state.routes.set(params.childSessionId, node.turn);
  } else if (method === 'subagent.finished') {
    const parent = liveViewOf(params.parentSessionId);
    parent?.subagents.get(params.childSessionId)?.finished(params);
    sidebar.soon();
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
  const t = state.views.get(state.current);
  const own = state.running.has(state.current);
  const busy = own || Boolean(t?.liveGroup());
  const cancelling = state.cancelling.has(state.current);
  sendBtn.disabled = !connected || own || Boolean(t?.syncing);
  cancelBtn.disabled = !connected || !busy || cancelling;
  cancelBtn.textContent = cancelling ? 'Cancelling…' : 'Cancel';
  t?.renderEdges();
}

// ---- following the shown session ---------------------------------------------

/**
 * Brings the shown session up to date with the daemon: its newest page on
 * first sight, what was missed after a reconnect, then a subscription from
 * the last seq shown.
 */
async function syncCurrent() {
  if (!rpc.ready || !state.current) return;
  const t = transcript(state.current);
  const token = ++t.syncToken;
  const epoch = rpc.epoch;
  const stale = () => token !== t.syncToken || epoch !== rpc.epoch || !rpc.ready;
  if (!rpc.has('session/events')) {
    t.renderEdges();
    return;
  }
  t.syncing = true;
  updateControls();
  try {
    let lastSeq;
    try {
      const probe = await rpc.optional('session/events', { sessionId: t.id, afterSeq: -1, limit: 1 });
      lastSeq = Number.isInteger(probe?.lastSeq) ? probe.lastSeq : -1;
    } catch (err) {
      if (!isUnknownSession(err)) throw err;
      // No log yet (a new session), or this daemon does not know it any more.
      if (stale()) return;
      if (t.hi !== null) t.detachHistory('the daemon has no log of this session');
      return;
    }
    if (stale()) return;
    if (t.hi === null) {
      await t.loadNewest(lastSeq);
    } else if (lastSeq < t.hi) {
      t.detachHistory('the daemon holds another history of this session');
      await t.loadNewest(lastSeq);
    } else if (lastSeq - t.hi > EVENTS_PAGE && !state.running.has(t.id)) {
      // Too much was missed to replay: start again from the newest page.
      t.clear();
      await t.loadNewest(lastSeq);
    }
    if (stale()) return;
    t.summarize();
    await subscribe(t);
  } catch (err) {
    if (err instanceof RpcError) showError(`loading ${t.id} failed: ${err.message} (${err.code})`);
  } finally {
    if (token === t.syncToken) {
      t.syncing = false;
      updateControls();
    }
  }
}

/** Subscribes this connection to `t`'s session (dropping the previous one). */
async function subscribe(t) {
  if (!rpc.ready || !rpc.has('session/subscribe') || state.current !== t.id) return;
  const epoch = rpc.epoch;
  if (state.sub?.epoch === epoch && state.sub.id === t.id) return;
  unsubscribe();
  state.sub = { id: t.id, epoch };
  try {
    // Events after the last one shown come first, then the answer, then live ones.
    await rpc.optional('session/subscribe', { sessionId: t.id, afterSeq: t.hi ?? -1 });
  } catch (err) {
    if (state.sub?.id === t.id && state.sub.epoch === epoch) state.sub = null;
    if (err instanceof RpcError && /already subscribed/.test(err.message)) {
      state.sub = { id: t.id, epoch };
    } else if (!isUnknownSession(err)) {
      throw err;
    }
  }
}

function unsubscribe() {
  const sub = state.sub;
  state.sub = null;
  if (!sub || sub.epoch !== rpc.epoch || !rpc.ready || !rpc.has('session/unsubscribe')) return;
  rpc.request('session/unsubscribe', { sessionId: sub.id }).catch(() => {});
}

// ---- sidebar: the daemon's sessions --------------------------------------------

const WAITING = { approval: 'needs approval', question: 'has a question' };

const sidebar = {
  entries: new Map(), // sessionId -> session/list entry
  cursor: null,       // nextCursor of the deepest page loaded
  pages: 0,
  loading: false,
  timer: null,
  soonTimer: null,

  supported() {
    return rpc.ready && rpc.has('session/list');
  },

  connected() {
    this.pages = 0;
    this.refresh();
    clearInterval(this.timer);
    this.timer = setInterval(() => {
      if (document.visibilityState === 'visible') this.refresh();
    }, SIDEBAR_REFRESH_MS);
  },

  /** Refresh shortly (turns start and end in bursts). */
  soon(ms = 250) {
    clearTimeout(this.soonTimer);
    this.soonTimer = setTimeout(() => this.refresh(), ms);
  },

  merge(res) {
    for (const s of Array.isArray(res?.sessions) ? res.sessions : []) {
      if (s && typeof s.sessionId === 'string') this.entries.set(s.sessionId, s);
    }
  },

  async refresh() {
    if (!this.supported()) {
      this.render();
      return;
    }
    try {
      const res = await rpc.optional('session/list', { limit: LIST_PAGE });
      this.merge(res);
      if (this.pages <= 1) {
        this.pages = 1;
        this.cursor = typeof res?.nextCursor === 'string' ? res.nextCursor : null;
      }
      // While turns run, look again soon rather than at the next poll.
      if ((res?.sessions ?? []).some((e) => e?.running === true)) this.soon(1500);
      // The open session got its log elsewhere (another tab's first prompt): follow it.
      const cur = state.current;
      const t = state.views.get(cur);
      if (this.entries.has(cur) && !state.sub && t && !t.syncing && !state.running.has(cur)
          && rpc.has('session/subscribe')) syncCurrent();
    } catch (err) {
      if (err instanceof RpcError && err.code !== -32601) showError(`session/list failed: ${err.message} (${err.code})`);
    }
    this.render();
  },

  async more() {
    if (!this.supported() || !this.cursor || this.loading) return;
    this.loading = true;
    moreSessionsBtn.disabled = true;
    try {
      const res = await rpc.optional('session/list', { limit: LIST_PAGE, cursor: this.cursor });
      this.merge(res);
      this.pages += 1;
      this.cursor = typeof res?.nextCursor === 'string' ? res.nextCursor : null;
    } catch (err) {
      if (err instanceof RpcError) showError(`session/list failed: ${err.message} (${err.code})`);
    } finally {
      this.loading = false;
      moreSessionsBtn.disabled = false;
      this.render();
    }
  },

  /** Sessions to show: the daemon's (when listed) or this browser's, plus the open one. */
  items() {
    const local = sessionStore.list();
    const items = new Map();
    if (this.supported() || this.entries.size) {
      for (const s of this.entries.values()) items.set(s.sessionId, { ...s, known: true });
    } else {
      for (const s of local) {
        items.set(s.id, { sessionId: s.id, createdAt: s.createdAt, updatedAt: s.updatedAt, known: false });
      }
    }
    if (state.current && !items.has(state.current)) {
      items.set(state.current, { sessionId: state.current, updatedAt: Date.now(), createdAt: Date.now(), known: false, fresh: true });
    }
    return items;
  },

  render() {
    const items = this.items();
    const local = new Map(sessionStore.list().map((e) => [e.id, e]));
    const children = new Map();
    const roots = [];
    for (const s of items.values()) {
      const parent = typeof s.parentSessionId === 'string' ? s.parentSessionId : null;
      if (parent && items.has(parent)) {
        if (!children.has(parent)) children.set(parent, []);
        children.get(parent).push(s);
      } else {
        roots.push(s);
      }
    }
    const byUpdated = (a, b) => (b.updatedAt ?? 0) - (a.updatedAt ?? 0) || (a.sessionId < b.sessionId ? -1 : 1);
    const byCreated = (a, b) => (a.createdAt ?? 0) - (b.createdAt ?? 0) || (a.sessionId < b.sessionId ? -1 : 1);
    roots.sort(byUpdated);
    const node = (s, depth) => {
      const kids = (children.get(s.sessionId) ?? []).sort(byCreated);
      const wrap = h('div', { class: 'session-node', role: 'listitem' }, this.item(s, depth, items, local));
      if (kids.length) wrap.append(h('div', { class: 'session-children', role: 'list' }, ...kids.map((k) => node(k, depth + 1))));
      return wrap;
    };
    sessionListEl.replaceChildren(...roots.map((s) => node(s, 0)));
    moreSessionsBtn.hidden = !(this.supported() && this.cursor);
    sidebarNoteEl.textContent = this.supported() ? ''
      : rpc.ready ? 'This server cannot list sessions: showing the ones opened in this browser.' : '';
    renderSessionOptions(items, local);
  },

  /**
   * The list says whether a turn runs (or waits); a transcript that has seen
   * every event listed, its last turn ended, knows better (the list still
   * says running while a turn's end is being synced).
   */
  isRunning(s) {
    const t = state.views.get(s.sessionId);
    if (t?.liveGroup() && (s.sessionId === state.current || state.running.has(s.sessionId))) return true;
    if (s.running === true && t && t.hi !== null && t.groups.length && Number.isInteger(s.lastSeq) && s.lastSeq <= t.hi) {
      return false;
    }
    return s.running === true;
  },

  item(s, depth, items, local) {
    const id = s.sessionId;
    const stored = local.get(id);
    const parent = typeof s.parentSessionId === 'string' ? s.parentSessionId : null;
    const subMatch = parent ? /\.(sub-\d+)-[0-9a-f]+$/.exec(id) : null;
    const title = stored?.title || (parent ? `subagent ${subMatch ? subMatch[1] : ''}`.trim() : id);
    const running = this.isRunning(s);
    const meta = [];
    if (parent && !items.has(parent)) meta.push(`↳ ${shortId(parent)}`);
    else if (stored?.title || parent) meta.push(shortId(id));
    if (Number.isInteger(s.turns)) meta.push(`${s.turns} turn${s.turns === 1 ? '' : 's'}`);
    if (s.fresh) meta.push('new');
    else if (s.updatedAt) meta.push(timeAgo(s.updatedAt));
    const el = h('button', {
      type: 'button',
      class: `session-item${id === state.current ? ' current' : ''}${parent ? ' child' : ''}`,
      'data-testid': 'session-item',
      'data-session': id,
      'data-parent': parent ?? undefined,
      'data-running': running ? 'true' : 'false',
      'aria-current': id === state.current ? 'true' : undefined,
      title: id,
      onclick: () => switchSession(id),
    },
    h('span', { class: 'session-dot', 'aria-hidden': 'true' }),
    h('span', { class: 'session-main' },
      h('span', { class: 'session-title', text: title }),
      h('span', { class: 'session-meta', text: meta.join(' · ') })),
    // A turn waiting for a person (session/list's `waiting`) says so: it may be another session's.
    running ? (WAITING[s.waiting] ? statusBadge('waiting', WAITING[s.waiting]) : statusBadge('running', 'running')) : null);
    el.style.setProperty('--depth', String(depth));
    return el;
  },
};

function renderSessionOptions(items, local) {
  const list = [...items.values()].sort((a, b) => (b.updatedAt ?? 0) - (a.updatedAt ?? 0));
  sessionSelect.replaceChildren(...list.map((s) => {
    const title = local.get(s.sessionId)?.title || (s.parentSessionId ? 'subagent' : 'Session');
    return h('option', { value: s.sessionId, text: `${title} — ${shortId(s.sessionId)}`, title: s.sessionId });
  }));
  if (state.current) sessionSelect.value = state.current;
}

// ---- switching, sending, cancelling ----------------------------------------------

function switchSession(id) {
  if (!id || id === state.current) return;
  state.current = id;
  if (!id.includes('.sub-')) sessionStore.upsert(id);
  try {
    localStorage.setItem(STORE_CURRENT, id);
  } catch { /* ignore */ }
  const url = new URL(location.href);
  url.searchParams.set('session', id);
  history.replaceState(null, '', url);
  document.body.classList.remove('sidebar-open');
  const t = transcript(id);
  if (rpc.ready && !rpc.has('session/events')) t.showLocalHistory();
  transcriptEl.replaceChildren(t.el);
  todoPanel.show(t.todos);
  autoScroll.stick = true;
  autoScroll.request();
  if (state.sub && state.sub.id !== id) unsubscribe();
  renderTurnStatus();
  updateControls();
  sidebar.render();
  syncCurrent();
}

async function send() {
  const text = promptEl.value;
  const sid = state.current;
  const t = transcript(sid);
  if (!text.trim() || !rpc.ready || state.running.has(sid) || t.syncing) return;
  hideError();
  const entry = sessionStore.get(sid);
  sessionStore.upsert(sid, entry?.title ? {} : { title: text.split('\n')[0].slice(0, 40) });

  const p = t.addPending(text);
  autoScroll.stick = true;
  autoScroll.request();
  state.running.set(sid, p);
  promptEl.value = '';
  setTurnStatus(sid, 'running', 'running…');
  updateControls();
  sidebar.render();

  let view = p.view;
  try {
    const result = await rpc.request('session/prompt', { sessionId: sid, contentBlocks: [{ type: 'text', text }] });
    view = p.group?.view ?? p.view;
    const status = typeof result?.status === 'string' ? result.status : 'error';
    const detail = describeReason(result?.reason);
    view.settle(status, detail);
    if (p.group) p.group.ended = true;
    setTurnStatus(sid, status, detail ? `${status} · ${detail}` : status);
    if (!rpc.has('session/events')) {
      sessionStore.addHistory(sid, {
        prompt: text, text: view.finalText().slice(-HISTORY_TEXT_CHARS), status, detail, at: Date.now(),
      });
    }
  } catch (err) {
    view = p.group?.view ?? p.view;
    if (err instanceof RpcError) {
      showError(`${err.message} (${err.code})`);
      view.settle('error', `rejected: ${err.message}`);
      setTurnStatus(sid, 'error', `error · ${err.message}`);
      if (err.code === -32001 && !promptEl.value) promptEl.value = text;
    } else if (p.group && !p.group.ended && rpc.has('session/subscribe')) {
      // The daemon runs it on (onDisconnect: "continue"); the next sync follows it again.
      view.detach();
      setTurnStatus(sid, 'running', 'running · connection lost, the turn continues on the daemon');
    } else {
      view.settle('error', 'interrupted: connection lost');
      if (p.group) p.group.ended = true;
      setTurnStatus(sid, 'error', 'error · connection lost');
    }
  } finally {
    state.running.delete(sid);
    state.cancelling.delete(sid);
    t.dropPending(p);
    for (const [child, v] of state.routes) {
      if (view.el.contains(v.el)) state.routes.delete(child);
    }
    updateControls();
    sidebar.soon();
    // The session has a log now: follow it, so turns started elsewhere show here too.
    if (state.current === sid && rpc.ready && !state.sub) subscribe(t).catch(() => {});
  }
}

async function cancel() {
  const sid = state.current;
  const t = state.views.get(sid);
  if (!state.running.has(sid) && !t?.liveGroup()) return;
  state.cancelling.add(sid);
  updateControls();
  try {
    const res = await rpc.request('session/cancel', { sessionId: sid });
    if (res?.cancelled === false && !state.running.has(sid)) state.cancelling.delete(sid);
  } catch (err) {
    state.cancelling.delete(sid);
    if (err instanceof RpcError) showError(`${err.message} (${err.code})`);
  }
  updateControls();
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
$('#refresh-sessions').addEventListener('click', () => sidebar.refresh());
$('#toggle-sidebar').addEventListener('click', () => document.body.classList.toggle('sidebar-open'));
moreSessionsBtn.addEventListener('click', () => sidebar.more());
statusEl.addEventListener('click', () => rpc.retryNow());
window.addEventListener('online', () => rpc.retryNow());
window.addEventListener('storage', (ev) => {
  if (ev.key === STORE_SESSIONS) sidebar.render();
});
transcriptEl.addEventListener('scroll', () => {
  const ours = Math.abs(transcriptEl.scrollTop - autoScroll.ourTop) < 2;
  autoScroll.onScroll();
  // Scrolled up to the top by the user: the older page is wanted.
  if (!ours && transcriptEl.scrollTop < 80) state.views.get(state.current)?.loadEarlier();
});

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
