// How one turn looks: its prompt, steps, streamed blocks (assistant text as
// Markdown), tool calls with their approvals and questions, context notes,
// nested subagents and the footer with its outcome. A TurnView is fed the
// session's events in seq order and knows nothing of where they come from.

import { h, blocksText, shortId, statusBadge } from './dom.js';
import { ToolCard } from './tools.js';
import { ApprovalCard, QuestionCard } from './decisions.js';
import { CompactionDivider, headerNote, instructionsNote } from './context.js';
import { MarkdownView } from './markdown.js';
import { client } from './connection.js';
import { statusOfReason } from './client/index.js';
import { els, describeReason, formatDuration } from './page.js';
import { ui } from './state.js';

const transcriptEl = els.transcript;

/** session/approve and session/answer from a decision card. */
const sendDecision = (method, params) => client.call(method, params);

/**
 * Scrolls the transcript to the bottom once per frame while the user stays
 * there; a scroll by the user (not by us) decides whether to keep following.
 */
export const autoScroll = {
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
      b.el = h('div', { class: 'block assistant-text markdown', 'data-testid': 'assistant-text' });
      b.markdown = new MarkdownView(b.el);
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
        this.block(c.index, 'text').markdown.append(String(c.text ?? ''));
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
        b?.markdown?.render();
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
      if (blk.type === 'text') {
        this.block(i, 'text').markdown.set(String(blk.text ?? ''));
      } else if (blk.type === 'reasoning') {
        this.block(i, 'reasoning').text.data = String(blk.text ?? '');
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

export class TurnView {
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
          onclick: () => ui.switchSession(childId) }),
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
