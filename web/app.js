// harnessd web UI: drives sessions over the daemon's WebSocket (the page's
// own origin) through the JavaScript client package, and renders their
// events. Plain ES modules, no build step; Markdown through the embedded
// marked and DOMPurify. Wire contract: docs/protocol.md.
//
// The page lists the daemon's sessions in a sidebar (sidebar.js), rebuilds
// the shown session's transcript from its log, the newest page first and
// older pages on demand (transcript.js), and follows it with
// session/subscribe, so turns started elsewhere (another tab, a page before
// a reload) stream here too. This module ties them together: connection
// state, notifications, switching sessions and keeping the shown one in sync.

import { TodoPanel } from './tools.js';
import { client, isUnknownSession, RpcError } from './connection.js';
import { $, els, describeError, hideError, pageParams, showError } from './page.js';
import { newSessionId, sessionStore, sidebar } from './sidebar.js';
import { state, ui } from './state.js';
import { detachRunning, renderTurnStatus, updateControls } from './composer.js';
import { transcriptOf } from './transcript.js';
import { autoScroll } from './turn.js';

const STORE_CURRENT = 'harnessd.currentSession';
const todoPanel = new TodoPanel(els.todoPanel);

// ---- the connection ---------------------------------------------------------------

function setConnState(s, detail) {
  if (s === 'open') {
    const si = client.serverInfo;
    els.status.dataset.state = 'connected';
    els.statusLabel.textContent = 'Connected';
    els.serverInfo.textContent = si ? `${si.implementation ?? si.name} ${si.version ?? ''}`.trim() : '';
    els.status.title = si ? `${si.name} ${si.version ?? ''}` : 'Connected';
    document.body.dataset.methods = client.methods.join(' ');
    onConnected(detail?.resumed === true);
  } else if (s === 'connecting') {
    els.status.dataset.state = 'connecting';
    els.statusLabel.textContent = 'Connecting…';
    els.status.title = 'Connecting to harnessd';
  } else if (s === 'waiting' || s === 'closed') {
    const retry = detail?.delayMs;
    els.status.dataset.state = 'disconnected';
    els.statusLabel.textContent = retry ? `Disconnected · retry in ${Math.max(1, Math.round(retry / 1000))} s` : 'Disconnected';
    els.status.title = 'Click to reconnect now';
    detachRunning();
  }
  updateControls();
}

function onConnected(resumed) {
  state.epoch += 1;
  // The client renews its subscriptions on a new connection by itself.
  if (resumed && state.sub) state.sub.epoch = state.epoch;
  else state.sub = null;
  syncCurrent();
  sidebar.connected();
}

/** The TurnView that receives events of `sessionId` as a turn's parent or child. */
function liveViewOf(sessionId) {
  return state.routes.get(sessionId) ?? state.views.get(sessionId)?.liveGroup()?.view ?? null;
}

client.on('state', setConnState);
client.on('error', (err) => showError(describeError(err)));
client.on('event', ({ sessionId, event }) => {
  state.routes.get(sessionId)?.event(event);
  state.views.get(sessionId)?.append(event, true);
});
client.on('notification', ({ method, params }) => {
  if (method === 'subagent.started') {
    const parent = liveViewOf(params.parentSessionId);
    if (!parent) return;
    const node = parent.addSubagent(params.childSessionId);
    state.routes.set(params.childSessionId, node.turn);
  } else if (method === 'subagent.finished') {
    liveViewOf(params.parentSessionId)?.subagents.get(params.childSessionId)?.finished(params);
    sidebar.soon();
  }
});

// ---- following the shown session -------------------------------------------------

/**
 * Brings the shown session up to date with the daemon: its newest page on
 * first sight, a fresh start when the daemon holds another history of it,
 * then a subscription from the last seq shown.
 */
async function syncCurrent() {
  if (!client.connected || !state.current) return;
  const t = transcriptOf(state.current);
  const token = ++t.syncToken;
  const epoch = state.epoch;
  const stale = () => token !== t.syncToken || epoch !== state.epoch || !client.connected;
  t.syncing = true;
  updateControls();
  try {
    let lastSeq;
    try {
      lastSeq = (await client.events(t.id, { afterSeq: -1, limit: 1 })).lastSeq;
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
    }
    if (stale()) return;
    t.summarize();
    await subscribe(t);
  } catch (err) {
    if (err instanceof RpcError) showError(`loading ${t.id} failed: ${describeError(err)}`);
  } finally {
    if (token === t.syncToken) {
      t.syncing = false;
      updateControls();
    }
  }
}

/** Subscribes this connection to `t`'s session (dropping the previous one). */
async function subscribe(t) {
  if (!client.connected || state.current !== t.id) return;
  const epoch = state.epoch;
  if (state.sub?.epoch === epoch && state.sub.id === t.id) return;
  unsubscribe();
  state.sub = { id: t.id, epoch };
  try {
    // Events after the last one shown come first, then the answer, then live ones.
    await client.subscribe(t.id, { afterSeq: t.hi ?? -1 });
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
  // Also while disconnected: the client then does not renew it.
  if (sub) client.unsubscribe(sub.id).catch(() => {});
}

// ---- switching sessions -------------------------------------------------------------

function switchSession(id) {
  if (!id || id === state.current) return;
  state.current = id;
  if (!id.includes('.sub-')) sessionStore.upsert(id);
  try {
    localStorage.setItem(STORE_CURRENT, id);
  } catch { /* storage disabled: nothing to remember */ }
  const url = new URL(location.href);
  url.searchParams.set('session', id);
  history.replaceState(null, '', url);
  document.body.classList.remove('sidebar-open');
  const t = transcriptOf(id);
  els.transcript.replaceChildren(t.el);
  todoPanel.show(t.todos);
  autoScroll.stick = true;
  autoScroll.request();
  if (state.sub && state.sub.id !== id) unsubscribe();
  renderTurnStatus();
  updateControls();
  sidebar.render();
  syncCurrent();
}

ui.switchSession = switchSession;
ui.syncCurrent = syncCurrent;
ui.subscribe = subscribe;
ui.showTodos = (todos) => todoPanel.show(todos);

// ---- wiring ---------------------------------------------------------------------------

els.banner.querySelector('.error-dismiss').addEventListener('click', hideError);
els.sessionSelect.addEventListener('change', () => switchSession(els.sessionSelect.value));
$('#new-session').addEventListener('click', () => {
  switchSession(newSessionId());
  els.prompt.focus();
});
els.status.addEventListener('click', () => client.reconnectNow());
window.addEventListener('online', () => client.reconnectNow());
els.transcript.addEventListener('scroll', () => {
  const ours = Math.abs(els.transcript.scrollTop - autoScroll.ourTop) < 2;
  autoScroll.onScroll();
  // Scrolled up to the top by the user: the older page is wanted.
  if (!ours && els.transcript.scrollTop < 80) state.views.get(state.current)?.loadEarlier();
});

(function start() {
  const fromUrl = pageParams.get('session');
  const known = sessionStore.list();
  const last = localStorage.getItem(STORE_CURRENT);
  let id = fromUrl && fromUrl.length <= 256 ? fromUrl : null;
  if (!id && last && known.some((s) => s.id === last)) id = last;
  if (!id && known.length) id = known.sort((a, b) => (b.updatedAt ?? 0) - (a.updatedAt ?? 0))[0].id;
  switchSession(id ?? newSessionId());
  client.connect({ retry: true }).catch((err) => showError(`cannot connect: ${describeError(err)}`));
  els.prompt.focus();
})();
