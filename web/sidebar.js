// The sidebar: the daemon's sessions (session/list, paged), children nested
// under their parents, running and waiting ones marked, and the session
// picker of the top bar. Titles come from this browser's own record of the
// sessions it prompted (localStorage).

import { h, shortId, statusBadge } from './dom.js';
import { client, RpcError } from './connection.js';
import { LIST_PAGE, els, describeError, showError, timeAgo } from './page.js';
import { state, ui } from './state.js';

export const STORE_SESSIONS = 'harnessd.sessions';
const SIDEBAR_REFRESH_MS = 5000;

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

export function newSessionId() {
  const d = new Date();
  const pad = (n) => String(n).padStart(2, '0');
  const stamp = `${d.getFullYear()}${pad(d.getMonth() + 1)}${pad(d.getDate())}`;
  const rnd = crypto.getRandomValues(new Uint8Array(4));
  return `web-${stamp}-${[...rnd].map((b) => b.toString(16).padStart(2, '0')).join('')}`;
}

export const sessionStore = {
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
};

const WAITING = { approval: 'needs approval', question: 'has a question' };

export const sidebar = {
  entries: new Map(), // sessionId -> session/list entry
  cursor: null,       // nextCursor of the deepest page loaded
  pages: 0,
  loading: false,
  timer: null,
  soonTimer: null,

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
    if (!client.connected) {
      this.render();
      return;
    }
    try {
      const res = await client.list({ limit: LIST_PAGE });
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
      if (this.entries.has(cur) && !state.sub && t && !t.syncing && !state.running.has(cur)) ui.syncCurrent();
    } catch (err) {
      if (err instanceof RpcError) showError(`session/list failed: ${describeError(err)}`);
    }
    this.render();
  },

  async more() {
    if (!client.connected || !this.cursor || this.loading) return;
    this.loading = true;
    els.moreSessions.disabled = true;
    try {
      const res = await client.list({ limit: LIST_PAGE, cursor: this.cursor });
      this.merge(res);
      this.pages += 1;
      this.cursor = typeof res?.nextCursor === 'string' ? res.nextCursor : null;
    } catch (err) {
      if (err instanceof RpcError) showError(`session/list failed: ${describeError(err)}`);
    } finally {
      this.loading = false;
      els.moreSessions.disabled = false;
      this.render();
    }
  },

  /** Sessions to show: the daemon's, plus the open one. */
  items() {
    const items = new Map();
    for (const s of this.entries.values()) items.set(s.sessionId, { ...s, known: true });
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
    els.sessionList.replaceChildren(...roots.map((s) => node(s, 0)));
    els.moreSessions.hidden = !(client.connected && this.cursor);
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
      onclick: () => ui.switchSession(id),
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
  els.sessionSelect.replaceChildren(...list.map((s) => {
    const title = local.get(s.sessionId)?.title || (s.parentSessionId ? 'subagent' : 'Session');
    return h('option', { value: s.sessionId, text: `${title} — ${shortId(s.sessionId)}`, title: s.sessionId });
  }));
  if (state.current) els.sessionSelect.value = state.current;
}

ui.sessionsChanged = () => {
  sidebar.render();
  sidebar.soon();
};

els.moreSessions.addEventListener('click', () => sidebar.more());
document.querySelector('#refresh-sessions').addEventListener('click', () => sidebar.refresh());
document.querySelector('#toggle-sidebar').addEventListener('click', () => document.body.classList.toggle('sidebar-open'));
window.addEventListener('storage', (ev) => {
  if (ev.key === STORE_SESSIONS) sidebar.render();
});
