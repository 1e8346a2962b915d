// What the daemon put into the model's context besides the conversation
// itself: the summary that replaced older messages when the context neared
// the window (compact/*), the workspace instructions (context/message, from
// AGENTS.md files) and the request header (request/header: system prompt,
// tools, settings). They are logged before a step's step/start, so a turn
// shows them where they happened, folded: the transcript stays the
// conversation, and the details are one click away. Summaries, instructions
// and system prompts are model or workspace text: textContent only (h()).

import { h } from './dom.js';

function count(n) {
  return Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '?';
}

/** A folded note: a one-line summary and a body shown when it is opened. */
function note(kind, label, ...body) {
  return h('details', { class: `context-note context-${kind}`, 'data-testid': `${kind}-note` },
    h('summary', {}, h('span', { class: 'context-icon', 'aria-hidden': 'true' }),
      h('span', { class: 'context-label', text: label })),
    h('div', { class: 'context-body' }, ...body));
}

/**
 * The divider where the conversation was summarized. It is made at
 * compact/start (or at a later compact/* event when the page holding the
 * start was not loaded) and shows "Compacting context…" until the summary
 * or the end arrives.
 */
export class CompactionDivider {
  constructor() {
    this.labelEl = h('span', { class: 'compaction-label', text: 'Compacting context…' });
    this.summaryEl = h('pre', { class: 'code compaction-summary', 'data-testid': 'compaction-summary' });
    this.metaEl = h('div', { class: 'tool-note compaction-meta' });
    this.el = h('details', { class: 'compaction', 'data-testid': 'compaction', 'data-state': 'running' },
      h('summary', { class: 'compaction-rule' }, this.labelEl),
      h('div', { class: 'compaction-body' }, this.metaEl, this.summaryEl));
    // Nothing to unfold until there is a summary (or an error to read in full).
    this.el.classList.add('empty');
  }

  get running() {
    return this.el.dataset.state === 'running';
  }

  summary(d) {
    const before = count(d?.tokensBefore);
    const after = count(d?.tokensAfter);
    this.labelEl.textContent = `Context compacted: ${before} → ${after} tokens`;
    this.summaryEl.textContent = typeof d?.summary === 'string' ? d.summary : '';
    const seqs = Array.isArray(d?.shadowedSeqs) && d.shadowedSeqs.length === 2 ? d.shadowedSeqs : null;
    this.metaEl.textContent = seqs ? `replaces events ${seqs[0]}–${seqs[1]}` : '';
    this.el.classList.remove('empty');
    this.el.dataset.state = 'summarized';
  }

  end(d) {
    if (typeof d?.error === 'string' && d.error !== '') {
      this.labelEl.textContent = `Compaction failed: ${d.error}`;
      this.el.dataset.state = 'failed';
      return;
    }
    // An end without a summary nor an error: nothing was reported to show.
    if (this.running) this.labelEl.textContent = 'Context compacted';
    this.el.dataset.state = 'done';
  }

  /** The turn ended while this compaction was still running. */
  expire() {
    if (!this.running) return;
    this.labelEl.textContent = 'Compaction did not finish';
    this.el.dataset.state = 'failed';
  }
}

/** context/message: one AGENTS.md file sent to the model. */
export function instructionsNote(d) {
  const file = typeof d?.path === 'string' ? d.path : String(d?.source ?? 'AGENTS.md');
  const el = note('instructions', `Workspace instructions: ${file}`,
    h('pre', { class: 'code', text: typeof d?.content === 'string' ? d.content : '' }));
  el.dataset.path = file;
  return el;
}

/** request/header: the system prompt, tools and settings the following requests carry. */
export function headerNote(d) {
  const tools = Array.isArray(d?.tools) ? d.tools.map((t) => (typeof t === 'string' ? t : String(t?.name ?? ''))) : [];
  const model = typeof d?.model === 'string' && d.model !== '' ? d.model : 'unknown model';
  const label = `Request header: ${model}, ${tools.length} tool${tools.length === 1 ? '' : 's'}`;
  const settings = d?.settings && typeof d.settings === 'object'
    ? Object.entries(d.settings).map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`).join(' · ')
    : '';
  const el = note('header', label,
    h('div', { class: 'tool-note', text: [d?.provider ? `provider ${d.provider}` : '', settings].filter(Boolean).join(' · ') }),
    tools.length ? h('div', { class: 'tool-note', text: `tools: ${tools.join(', ')}` }) : null,
    h('div', { class: 'field-label', text: 'system prompt' }),
    h('pre', { class: 'code context-prompt', text: typeof d?.systemPrompt === 'string' ? d.systemPrompt : '' }));
  el.dataset.model = model;
  return el;
}
