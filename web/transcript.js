// One session's transcript, built from its events: deduplicated by seq,
// grouped into turns. The events shown are the contiguous range lo..hi:
// the newest page first, older pages prepended on demand, live events
// appended.

import { h, blocksText } from './dom.js';
import { TurnView, autoScroll } from './turn.js';
import { client, RpcError } from './connection.js';
import { statusOfReason } from './client/index.js';
import { EVENTS_PAGE, els, describeReason, describeError, showError } from './page.js';
import { state, ui } from './state.js';

const transcriptEl = els.transcript;

/** The transcript of session `id`, made on first use. */
export function transcriptOf(id) {
  let t = state.views.get(id);
  if (!t) {
    t = new Transcript(id);
    state.views.set(id, t);
  }
  return t;
}

/**
 * The transcript of one session: its events, deduplicated by `seq`, grouped
 * into turns. The events shown are the contiguous range lo..hi: the newest
 * page first, older pages prepended on demand, live events appended.
 */
export class Transcript {
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
    return client.connected && this.lo !== null && this.lo > 0 && !this.noEarlier;
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
    if (state.current === this.id) ui.showTodos(this.todos);
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
      ui.setTurnStatus(this.id, 'running', 'running…');
      ui.sessionsChanged();
    }
    if (ev.type === 'turn/end') {
      g.ended = true;
      if (live) {
        const status = statusOfReason(g.view.reason);
        const detail = describeReason(g.view.reason);
        ui.setTurnStatus(this.id, status, detail ? `${status} · ${detail}` : status);
        state.cancelling.delete(this.id);
        ui.sessionsChanged();
      }
    }
    if (live && (ev.type === 'turn/start' || ev.type === 'turn/end')) ui.updateControls();
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
      const res = await client.events(this.id, { afterSeq: cursor, limit: EVENTS_PAGE });
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
      if (err instanceof RpcError) showError(`loading earlier events failed: ${describeError(err)}`);
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
      ui.setTurnStatus(this.id, 'running', 'running…');
      return;
    }
    const status = g.view.el.dataset.status ?? statusOfReason(g.view.reason);
    const detail = describeReason(g.view.reason);
    ui.setTurnStatus(this.id, status, detail ? `${status} · ${detail}` : status);
  }
}

function emptyState(id) {
  const examples = ['Hello there', '@chunks 20 8', '@delay 200\n@chunks 10 6', '@subagent @chunks 3 4', '@error something broke'];
  return h('div', { class: 'empty-state', 'data-testid': 'empty-state' },
    h('div', { class: 'empty-title', text: 'No turns yet' }),
    h('div', { class: 'empty-sub' }, 'Session ', h('code', { text: id }), ' starts with your first prompt.'),
    h('div', { class: 'examples' }, ...examples.map((ex) => h('button', {
      type: 'button', class: 'chip', text: ex.replace('\n', ' ⏎ '),
      onclick: () => { els.prompt.value = ex; els.prompt.focus(); },
    }))));
}
