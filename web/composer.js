// The composer: the prompt box, Send and Cancel, and the status line of the
// shown session's last turn. A prompt of this page shows as a placeholder
// turn until the daemon's events of that turn replace it.

import { client, RpcError } from './connection.js';
import { describeError, describeReason, els, hideError, showError } from './page.js';
import { sessionStore, sidebar } from './sidebar.js';
import { state, ui } from './state.js';
import { transcriptOf } from './transcript.js';
import { autoScroll } from './turn.js';

export function setTurnStatus(sessionId, status, text) {
  state.lastStatus.set(sessionId, { status, text });
  if (sessionId === state.current) renderTurnStatus();
}

export function renderTurnStatus() {
  const s = state.lastStatus.get(state.current) ?? { status: 'idle', text: 'idle' };
  els.turnStatus.dataset.status = s.status;
  els.turnStatus.textContent = s.text;
}

export function updateControls() {
  const connected = client.connected;
  const t = state.views.get(state.current);
  const own = state.running.has(state.current);
  const busy = own || Boolean(t?.liveGroup());
  const cancelling = state.cancelling.has(state.current);
  els.send.disabled = !connected || own || Boolean(t?.syncing);
  els.cancel.disabled = !connected || !busy || cancelling;
  els.cancel.textContent = cancelling ? 'Cancelling…' : 'Cancel';
  t?.renderEdges();
}

/** The connection dropped: this page's turns that started run on in the daemon (onDisconnect "continue"). */
export function detachRunning() {
  for (const [sid, p] of state.running) {
    if (!p.group || p.group.ended) continue;
    p.group.view.detach();
    setTurnStatus(sid, 'running', 'running · connection lost, the turn continues on the daemon');
  }
}

async function send() {
  const text = els.prompt.value;
  const sid = state.current;
  const t = transcriptOf(sid);
  if (!text.trim() || !client.connected || state.running.has(sid) || t.syncing) return;
  hideError();
  const entry = sessionStore.get(sid);
  sessionStore.upsert(sid, entry?.title ? {} : { title: text.split('\n')[0].slice(0, 40) });

  const p = t.addPending(text);
  autoScroll.stick = true;
  autoScroll.request();
  state.running.set(sid, p);
  els.prompt.value = '';
  setTurnStatus(sid, 'running', 'running…');
  updateControls();
  sidebar.render();

  // The page draws every session's events from the client's 'event's; the
  // turn is only waited on for its answer. After a lost connection the
  // client follows it on and answers with its turn/end.
  const turn = client.prompt(sid, text);
  turn.discardEvents();
  let view = p.view;
  try {
    const result = await turn.result;
    view = p.group?.view ?? p.view;
    const status = typeof result?.status === 'string' ? result.status : 'error';
    const detail = describeReason(result?.reason);
    view.settle(status, detail);
    if (p.group) p.group.ended = true;
    setTurnStatus(sid, status, detail ? `${status} · ${detail}` : status);
  } catch (err) {
    view = p.group?.view ?? p.view;
    if (err instanceof RpcError) {
      showError(describeError(err));
      view.settle('error', `rejected: ${err.message}`);
      setTurnStatus(sid, 'error', `error · ${err.message}`);
      if (err.code === -32001 && !els.prompt.value) els.prompt.value = text;
    } else {
      // Lost before the turn started (nothing runs), or the client gave up.
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
    if (state.current === sid && client.connected && !state.sub) ui.subscribe(t).catch(() => {});
  }
}

async function cancel() {
  const sid = state.current;
  const t = state.views.get(sid);
  if (!state.running.has(sid) && !t?.liveGroup()) return;
  state.cancelling.add(sid);
  updateControls();
  try {
    const res = await client.cancel(sid);
    if (res?.cancelled === false && !state.running.has(sid)) state.cancelling.delete(sid);
  } catch (err) {
    state.cancelling.delete(sid);
    if (err instanceof RpcError) showError(describeError(err));
  }
  updateControls();
}

ui.setTurnStatus = setTurnStatus;
ui.updateControls = updateControls;

document.querySelector('#prompt-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  send();
});
els.prompt.addEventListener('keydown', (ev) => {
  if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
    ev.preventDefault();
    send();
  }
});
els.cancel.addEventListener('click', cancel);
