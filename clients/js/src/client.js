// A client of harnessd over WebSocket (docs/protocol.md). The daemon only
// answers requests and sends notifications; this class sends requests,
// matches answers by id, hands `session.event`s to listeners and to the
// turns of its prompts, and after a lost connection connects again and
// follows its sessions from the last seq it saw, so no event is lost or
// repeated.

import { ConnectionClosedError, ErrorCodes, ProtocolError, RpcError } from './errors.js';
import { resolveWebSocket, socketArgs } from './socket.js';
import { Turn } from './turn.js';
import { classifyFrame, isEvent, isEventEnvelope, statusOfReason } from './validate.js';

const DEFAULT_BACKOFF_MS = [250, 500, 1000, 2000, 4000, 8000, 15000];
const OPEN = 1;

export class HarnessClient {
  /**
   * @param {string} url  ws:// or wss:// URL of the daemon
   * @param {object} [options]  see index.d.ts (ClientOptions)
   */
  constructor(url, options = {}) {
    this.url = url;
    this.options = { reconnect: true, backoffMs: DEFAULT_BACKOFF_MS, ...options };
    /** 'idle', 'connecting', 'open', 'waiting' (to reconnect) or 'closed'. */
    this.state = 'idle';
    /** The answer of the last successful initialize. */
    this.initializeResult = null;
    this.ws = null;
    this.nextId = 1;
    this.pending = new Map();   // id -> { method, resolve, reject, onLost }
    this.listeners = new Map(); // name -> Set of functions
    this.sessions = new Map();  // sessionId -> { lastSeq, subscribed, turn, resumed, renewing }
    this.attempt = 0;
    this.retryTimer = null;
    this.closed = false;
    this.connecting = null; // the pending connect(): { promise, resolve, reject }
    this.opened = false;    // a connection was initialized since the last close()
  }

  get serverInfo() {
    return this.initializeResult?.serverInfo ?? null;
  }

  /** The methods the daemon announced in capabilities.methods. */
  get methods() {
    return this.initializeResult?.capabilities?.methods ?? [];
  }

  get connected() {
    return this.state === 'open';
  }

  // ---- listeners ---------------------------------------------------------------

  /**
   * Listens to 'event' ({sessionId, event}), 'notification' ({method, params}),
   * 'state' (state, detail) or 'error' (an error nobody waits for). Returns a
   * function that removes the listener.
   */
  on(name, fn) {
    if (!this.listeners.has(name)) this.listeners.set(name, new Set());
    this.listeners.get(name).add(fn);
    return () => this.off(name, fn);
  }

  off(name, fn) {
    this.listeners.get(name)?.delete(fn);
  }

  emit(name, ...args) {
    for (const fn of [...(this.listeners.get(name) ?? [])]) {
      try {
        fn(...args);
      } catch (err) {
        // A listener's bug must not break the connection's frame loop.
        if (name !== 'error') this.emit('error', err);
      }
    }
  }

  setState(state, detail) {
    this.state = state;
    this.emit('state', state, detail);
  }

  // ---- connecting ----------------------------------------------------------------

  /**
   * Opens the WebSocket and runs `initialize`; resolves with its answer.
   * With `{retry: true}` a failed attempt is tried again (backing off) until
   * one succeeds or close() is called; otherwise it rejects.
   */
  connect({ retry = false } = {}) {
    if (this.state === 'open') return Promise.resolve(this.initializeResult);
    if (this.connecting) return this.connecting.promise;
    this.closed = false;
    this.retryFirst = retry;
    const pending = {};
    pending.promise = new Promise((resolve, reject) => Object.assign(pending, { resolve, reject }));
    pending.promise.catch(() => {});
    this.connecting = pending;
    this.open();
    return pending.promise;
  }

  async open() {
    clearTimeout(this.retryTimer);
    this.retryTimer = null;
    // `opening`: a second call (a timer and a click) while the class loads makes no second socket.
    if (this.closed || this.ws || this.opening) return;
    this.opening = true;
    this.setState('connecting');
    let ws;
    try {
      const WS = await resolveWebSocket(this.options.WebSocket);
      if (this.closed) return;
      ws = new WS(...socketArgs(WS, this.url, this.options.token, this.options.tokenIn));
    } catch (err) {
      this.lost(null, err);
      return;
    } finally {
      this.opening = false;
    }
    this.ws = ws;
    let failure = null;
    ws.onopen = () => this.initialize(ws);
    ws.onmessage = (ev) => {
      if (this.ws === ws && typeof ev.data === 'string') this.onFrame(ev.data);
    };
    ws.onerror = (ev) => {
      failure = ev?.error ?? ev?.message ?? null;
    };
    ws.onclose = (ev) => {
      if (this.ws !== ws) return;
      this.ws = null;
      const why = failure ?? (ev?.code ? `closed with code ${ev.code}${ev.reason ? `: ${ev.reason}` : ''}` : 'closed');
      this.lost(ws, why);
    };
  }

  async initialize(ws) {
    const params = {
      clientInfo: { name: 'harnessd-client-js', version: '0.1.0' },
      protocolVersion: 1,
      // A turn outlives a dropped connection, so a reconnect can follow it on.
      ...(this.options.reconnect ? { onDisconnect: 'continue' } : {}),
      ...this.options.initialize,
    };
    let result;
    try {
      result = await this.request('initialize', params, ws);
    } catch (err) {
      if (err instanceof RpcError) {
        // Bad params or a refused token: trying again would fail the same way.
        this.closed = true;
        this.connecting?.reject(err);
        this.connecting = null;
        this.fail(err);
        ws.close();
      }
      return;
    }
    if (this.ws !== ws) return;
    this.initializeResult = result;
    this.attempt = 0;
    // A connection after a lost one: the sessions followed before are followed again.
    const resumed = this.opened === true;
    this.opened = true;
    this.setState('open', { resumed });
    this.connecting?.resolve(result);
    this.connecting = null;
    if (resumed) this.resume();
  }

  /** The socket is gone (or never opened): settle what waited on it, maybe try again. */
  lost(ws, why) {
    const err = why instanceof Error ? why : new ConnectionClosedError(`connection lost${why ? `: ${why}` : ''}`);
    const closedErr = err instanceof ConnectionClosedError ? err : new ConnectionClosedError(String(err.message), { cause: err });
    for (const [id, p] of [...this.pending]) {
      if (p.ws !== ws && ws !== null) continue;
      this.pending.delete(id);
      if (!p.onLost?.()) p.reject(closedErr);
    }
    const first = !this.opened;
    const again = !this.closed && (first ? this.retryFirst : this.options.reconnect);
    if (!again) {
      this.connecting?.reject(closedErr);
      this.connecting = null;
      this.fail(closedErr);
      if (this.state !== 'closed') this.setState('closed', { error: closedErr });
      return;
    }
    const steps = this.options.backoffMs;
    const base = steps[Math.min(this.attempt, steps.length - 1)];
    const delay = Math.round(base * (0.8 + Math.random() * 0.4));
    this.attempt += 1;
    this.setState('waiting', { delayMs: delay, error: closedErr });
    this.retryTimer = setTimeout(() => this.open(), delay);
  }

  /** Connect now instead of after the back-off (the network came back, a click). */
  reconnectNow() {
    if (this.closed || this.ws) return;
    this.attempt = 0;
    this.open();
  }

  /**
   * Closes the connection for good: nothing reconnects, waiting requests and
   * turns fail. A later connect() starts afresh, following nothing.
   */
  close() {
    this.closed = true;
    clearTimeout(this.retryTimer);
    const ws = this.ws;
    this.ws = null;
    // Settled here: a socket that never opened may send no close event.
    ws?.close();
    this.lost(ws, 'closed by the client');
    this.sessions.clear();
    this.opened = false;
  }

  /** Fails every turn still waiting for its end. */
  fail(err) {
    for (const rec of this.sessions.values()) {
      if (rec.turn) {
        rec.turn.fail(err);
        rec.turn = null;
      }
    }
  }

  // ---- requests ----------------------------------------------------------------------

  request(method, params, ws = this.ws, onLost = null) {
    return new Promise((resolve, reject) => {
      if (!ws || ws.readyState !== OPEN) {
        reject(new ConnectionClosedError(`${method}: not connected`));
        return;
      }
      const id = this.nextId++;
      this.pending.set(id, { method, resolve, reject, ws, onLost });
      const frame = { jsonrpc: '2.0', id, method };
      if (params !== undefined) frame.params = params;
      ws.send(JSON.stringify(frame));
    });
  }

  /** Any method, by name: new daemon methods need no new code. */
  call(method, params) {
    if (this.state !== 'open') return Promise.reject(new ConnectionClosedError(`${method}: not connected`));
    return this.request(method, params);
  }

  onFrame(text) {
    let msg;
    try {
      msg = JSON.parse(text);
    } catch {
      return;
    }
    const frame = classifyFrame(msg);
    if (frame.kind === 'notification') {
      this.onNotification(frame.method, frame.params);
      return;
    }
    if (frame.kind === 'invalid') return;
    const p = this.pending.get(frame.id);
    if (!p) {
      if (frame.kind === 'error') this.emit('error', new RpcError(frame.error));
      return;
    }
    this.pending.delete(frame.id);
    if (frame.kind === 'error') p.reject(new RpcError(frame.error, p.method));
    else p.resolve(frame.result);
  }

  session(sessionId) {
    let rec = this.sessions.get(sessionId);
    if (!rec) {
      rec = { lastSeq: null, subscribed: false, turn: null, resumed: false, renewing: false };
      this.sessions.set(sessionId, rec);
    }
    return rec;
  }

  onNotification(method, params) {
    this.emit('notification', { method, params });
    if (method !== 'session.event' || typeof params?.sessionId !== 'string' || !isEventEnvelope(params.event)) return;
    const { sessionId, event } = params;
    // Delivered all the same: its seq holds the session's order together.
    if (!isEvent(event)) this.emit('error', new ProtocolError(`malformed ${event.type} event (seq ${event.seq})`));
    const rec = this.session(sessionId);
    // The daemon sends each event once per connection (§4.9), and a renewed
    // subscription starts after the last seq seen, so nothing is dropped
    // here: an older event may still come after a newer one while a
    // subscription replays beside a prompt of this connection.
    if (rec.lastSeq === null || event.seq > rec.lastSeq) rec.lastSeq = event.seq;
    const turn = rec.turn;
    if (turn && (turn.afterSeq === null || event.seq > turn.afterSeq)) {
      turn.push(event);
      // A turn followed again after a reconnect has no answer coming: its end is its answer.
      if (event.type === 'turn/end' && rec.resumed) this.endResumed(sessionId, rec);
    }
    this.emit('event', { sessionId, event });
  }

  endResumed(sessionId, rec) {
    const turn = rec.turn;
    rec.turn = null;
    rec.resumed = false;
    turn.finish({ status: statusOfReason(turn.endReason), reason: turn.endReason });
    if (!rec.subscribed) this.request('session/unsubscribe', { sessionId }).catch(() => {});
  }

  /** After a reconnect: subscribe again from the last seq seen, for every followed session and running turn. */
  resume() {
    for (const [sessionId, rec] of this.sessions) {
      if (!rec.subscribed && !rec.turn) {
        // Not followed: a restarted daemon may number this session anew.
        rec.lastSeq = null;
        continue;
      }
      if (rec.turn) {
        rec.resumed = true;
        // The turn's end arrived before the connection dropped; only the answer was lost.
        if (rec.turn.endReason) {
          this.endResumed(sessionId, rec);
          if (!rec.subscribed) continue;
        }
      }
      const params = { sessionId };
      if (rec.lastSeq !== null) params.afterSeq = rec.lastSeq;
      const resumedTurn = rec.turn;
      // Until the answer, the daemon may hold another history than the seq we saw.
      rec.renewing = true;
      this.request('session/subscribe', params).then((res) => {
        rec.renewing = false;
        // The daemon holds less than we saw: another history; take its numbering.
        if (Number.isInteger(res?.lastSeq) && rec.lastSeq !== null && res.lastSeq < rec.lastSeq) rec.lastSeq = res.lastSeq;
      }, (err) => {
        rec.renewing = false;
        rec.subscribed = false;
        if (resumedTurn && rec.turn === resumedTurn) {
          resumedTurn.fail(err);
          rec.turn = null;
        }
        // A daemon that lost the session (a restart with --store memory)
        // numbers it anew; anything else is worth telling.
        if (err instanceof RpcError && err.code === ErrorCodes.INVALID_PARAMS && /unknown session/.test(err.message)) {
          rec.lastSeq = null;
        } else {
          this.emit('error', err);
        }
      });
    }
  }

  // ---- the protocol's methods ------------------------------------------------------

  /**
   * Runs a turn: `session/prompt` with `input` (text, or content blocks).
   * Returns a Turn: `for await (const event of turn)` yields the turn's
   * events; `await turn.result` is the answer `{status, reason}`. A request
   * refused by the daemon (e.g. -32001, the session is busy) makes both
   * throw the RpcError.
   */
  prompt(sessionId, input) {
    const contentBlocks = typeof input === 'string' ? [{ type: 'text', text: input }] : input;
    const rec = this.session(sessionId);
    // Without a subscription every event of the session on this connection
    // is the prompt's; with one, the older ones a replay brings are not.
    const turn = new Turn(sessionId, rec.subscribed && !rec.renewing ? rec.lastSeq : null);
    const mine = !rec.turn;
    if (mine) rec.turn = turn;
    // The connection dropped mid-turn: a started turn runs on in the daemon
    // (onDisconnect "continue") and is followed again after the reconnect.
    const onLost = () => mine && turn.started && this.options.reconnect && !this.closed && rec.turn === turn;
    this.request('session/prompt', { sessionId, contentBlocks }, this.state === 'open' ? this.ws : null, onLost)
      .then((result) => {
        if (rec.turn === turn) rec.turn = null;
        turn.finish(result);
      }, (err) => {
        if (rec.turn === turn) rec.turn = null;
        turn.fail(err);
      });
    return turn;
  }

  cancel(sessionId) {
    return this.call('session/cancel', { sessionId });
  }

  /** `session/list`: one page, `{sessions, nextCursor?}`. */
  list({ limit, cursor } = {}) {
    return this.call('session/list', { limit, cursor });
  }

  /** `session/events`: one page of the log, `{events, lastSeq, more}`. */
  events(sessionId, { afterSeq, limit } = {}) {
    return this.call('session/events', { sessionId, afterSeq, limit });
  }

  /** Every logged event after `afterSeq`, page by page. */
  async *allEvents(sessionId, { afterSeq = -1, limit } = {}) {
    let cursor = afterSeq;
    for (;;) {
      const page = await this.events(sessionId, { afterSeq: cursor, limit });
      yield* page.events;
      if (!page.more || page.events.length === 0) return;
      cursor = page.events.at(-1).seq;
    }
  }

  /**
   * `session/subscribe`: the session's events after `afterSeq` (none when
   * absent), then its live ones, arrive as 'event's. The subscription is
   * renewed after a reconnect from the last seq seen.
   */
  async subscribe(sessionId, { afterSeq } = {}) {
    const rec = this.session(sessionId);
    // Asking for events again (a rebuilt view) makes them new to us.
    if (afterSeq !== undefined) rec.lastSeq = afterSeq;
    rec.subscribed = true;
    try {
      return await this.call('session/subscribe', { sessionId, afterSeq });
    } catch (err) {
      if (!(err instanceof RpcError && /already subscribed/.test(err.message))) rec.subscribed = false;
      throw err;
    }
  }

  unsubscribe(sessionId) {
    const rec = this.sessions.get(sessionId);
    if (rec) rec.subscribed = false;
    return this.call('session/unsubscribe', { sessionId });
  }

  /** `session/approve`: outcome "allowed-once", "allowed-for-session" or "rejected". */
  approve(sessionId, approvalId, outcome, message) {
    return this.call('session/approve', { sessionId, approvalId, outcome, message });
  }

  /** `session/answer`: answers `[{id, selected?, custom?}]`; [] declines. */
  answer(sessionId, questionId, answers) {
    return this.call('session/answer', { sessionId, questionId, answers });
  }

  tools() {
    return this.call('tools/list');
  }

  shutdown() {
    return this.call('shutdown');
  }
}
