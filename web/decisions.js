// What a turn waits for from a person: an approval of a tool call (policy
// `ask`) and the answers to ask_user_question. Each is a card inline at its
// tool call, live until its resolved event arrives from the daemon, which
// may be the answer of this page or of any other client of the session (a
// second tab, a reloaded page). The card only sends requests; its state
// changes with the session's events, so every page shows the same outcome.
// All text from the model goes in through textContent (dom.js's h()).

import { h, prettyJson, statusBadge } from './dom.js';
import { diffView, headline } from './tools.js';

function parseArgs(text) {
  try {
    const v = JSON.parse(text);
    return v && typeof v === 'object' && !Array.isArray(v) ? v : null;
  } catch {
    return null;
  }
}

/** Lines of `text`, each prefixed by `mark`, for a diff preview. */
function marked(mark, text) {
  if (typeof text !== 'string' || text === '') return [];
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  return lines.map((line) => `${mark}${line}`);
}

/**
 * What write or edit would change, as diff text: edit's old_string as -
 * lines and new_string as + lines; write's content as + lines. Null for
 * other tools (their arguments show as JSON).
 */
export function previewDiff(toolName, args) {
  if (!args) return null;
  const file = typeof args.file_path === 'string' ? args.file_path : '';
  if (toolName === 'write' && typeof args.content === 'string') {
    return [`+++ ${file}`, ...marked('+', args.content)].join('\n');
  }
  if (toolName === 'edit' && typeof args.old_string === 'string' && typeof args.new_string === 'string') {
    const all = args.replace_all === true ? ' (every occurrence)' : '';
    return [`--- ${file}${all}`, `+++ ${file}`, ...marked('-', args.old_string), ...marked('+', args.new_string)].join('\n');
  }
  return null;
}

/** The error of a failed decision request, as one line. */
function describeError(err) {
  if (err?.data?.reason === 'not-pending') return 'No longer pending: it was already settled or the turn ended.';
  const code = err?.code !== undefined ? ` (${err.code})` : '';
  return `${err?.message ?? String(err)}${code}`;
}

const APPROVAL_LABELS = {
  'allowed-once': 'allowed once',
  'allowed-for-session': 'allowed for this session',
  rejected: 'rejected',
  cancelled: 'cancelled',
};

const SOURCE_LABELS = { client: '', timeout: 'timed out', cancel: 'turn cancelled' };

/** Base of both cards: the live/resolved state, the error line, the buttons. */
class DecisionCard {
  constructor(kind, send) {
    this.send = send;
    this.live = true;
    this.busy = false;
    this.controls = [];
    this.badge = statusBadge('running', 'waiting for you');
    this.errorEl = h('div', { class: 'decision-error', 'data-testid': 'decision-error', role: 'alert', hidden: true });
    this.outcomeEl = h('div', { class: 'decision-outcome', 'data-testid': 'decision-outcome', hidden: true });
    this.el = h('section', { class: `decision-card decision-${kind}`, 'data-testid': `${kind}-card`, 'data-state': 'pending' });
  }

  setBadge(status, label) {
    const b = statusBadge(status, label);
    this.badge.replaceWith(b);
    this.badge = b;
  }

  renderControls() {
    for (const c of this.controls) c.disabled = !this.live || this.busy;
  }

  /**
   * Sends one decision; the card stays live until the resolved event. A
   * settled card's buttons are disabled, and the daemon is the judge of
   * what is still pending: its not-pending error shows on the card.
   */
  async submit(method, params) {
    if (this.busy) return;
    this.busy = true;
    this.errorEl.hidden = true;
    this.renderControls();
    try {
      await this.send(method, params);
    } catch (err) {
      this.errorEl.textContent = describeError(err);
      this.errorEl.hidden = false;
    } finally {
      this.busy = false;
      this.renderControls();
    }
  }

  /** The resolved event: no more answers from any page. */
  settle(state, status, label, detail) {
    this.live = false;
    this.el.dataset.state = state;
    this.setBadge(status, label);
    this.outcomeEl.textContent = detail;
    this.outcomeEl.hidden = false;
    this.errorEl.hidden = true;
    this.renderControls();
  }

  /** The turn ended without a resolved event (a log cut short): nothing waits any more. */
  expire() {
    if (this.live) this.settle('expired', 'aborted', 'not answered', 'The turn ended before a decision.');
  }
}

/** An approval/requested event as a card with Allow once / Allow for this session / Reject. */
export class ApprovalCard extends DecisionCard {
  /**
   * @param sessionId  the session whose turn waits
   * @param data       the event's data {callId, approvalId, toolName, arguments, reason}
   * @param send       (method, params) → Promise of the request's result
   */
  constructor(sessionId, data, send) {
    super('approval', send);
    this.sessionId = sessionId;
    this.approvalId = String(data.approvalId ?? '');
    this.toolName = String(data.toolName ?? 'tool');
    const rawArgs = typeof data.arguments === 'string' ? data.arguments : JSON.stringify(data.arguments ?? {});
    const args = parseArgs(rawArgs);
    this.el.dataset.approvalId = this.approvalId;
    this.el.dataset.tool = this.toolName;

    const what = headline(this.toolName, args);
    const title = h('div', { class: 'decision-title' },
      h('span', { class: 'decision-icon', 'aria-hidden': 'true', text: '⚠' }),
      h('span', { text: 'Allow ' }),
      h('span', { class: 'tool-name', 'data-testid': 'approval-tool', text: this.toolName }),
      what ? h('span', { class: 'decision-target', title: what, text: ` ${what}` }) : null,
      h('span', { text: '?' }),
      this.badge);
    const reason = typeof data.reason === 'string' && data.reason
      ? h('div', { class: 'decision-reason', 'data-testid': 'approval-reason', text: data.reason }) : null;

    const diff = previewDiff(this.toolName, args);
    let preview;
    if (diff !== null) {
      preview = h('div', { class: 'decision-preview' }, h('div', { class: 'field-label', text: 'change' }), diffView(diff).el);
    } else if (this.toolName === 'bash' && args && typeof args.command === 'string') {
      preview = h('div', { class: 'decision-preview' }, h('div', { class: 'field-label', text: 'command' }),
        h('pre', { class: 'code tool-command', text: args.command }));
    } else {
      preview = h('div', { class: 'decision-preview' }, h('div', { class: 'field-label', text: 'arguments' }),
        h('pre', { class: 'code tool-json', text: prettyJson(rawArgs) }));
    }

    this.messageEl = h('input', { type: 'text', class: 'decision-message', 'data-testid': 'approval-message',
      placeholder: 'Message to the model (optional, with Reject)', maxLength: 4000 });
    const button = (label, outcome, cls) => h('button', { type: 'button', class: `btn btn-small ${cls}`,
      'data-outcome': outcome, text: label, onclick: () => this.decide(outcome) });
    this.controls = [
      button('Allow once', 'allowed-once', 'btn-primary'),
      button('Allow for this session', 'allowed-for-session', ''),
      button('Reject', 'rejected', 'btn-danger'),
      this.messageEl,
    ];
    const actions = h('div', { class: 'decision-actions' }, ...this.controls.slice(0, 3));
    this.previewEl = preview;
    this.el.append(title, reason, preview, h('div', { class: 'decision-form' }, this.messageEl, actions),
      this.errorEl, this.outcomeEl);
  }

  decide(outcome) {
    const params = { sessionId: this.sessionId, approvalId: this.approvalId, outcome };
    const message = this.messageEl.value.trim();
    if (message) params.message = message;
    return this.submit('session/approve', params);
  }

  /** approval/resolved {outcome, source}. */
  resolved({ outcome, source }) {
    const label = APPROVAL_LABELS[outcome] ?? String(outcome ?? 'settled');
    const status = outcome === 'allowed-once' || outcome === 'allowed-for-session' ? 'ok'
      : outcome === 'cancelled' ? 'aborted' : 'error';
    const why = SOURCE_LABELS[source] ?? '';
    this.el.dataset.outcome = String(outcome ?? '');
    // An allowed call's result shows what it did (its own diff): the preview
    // of what it would do goes. A refused one keeps it, to show what was refused.
    if (status === 'ok') this.previewEl.remove();
    this.settle('resolved', status, label, `${this.toolName}: ${label}${why ? ` (${why})` : ''}`);
  }
}

const QUESTION_LABELS = { answered: 'answered', cancelled: 'cancelled', timeout: 'timed out' };

/** A question/requested event as a form: options as radios (checkboxes when multi_select), free text, Submit, Skip. */
export class QuestionCard extends DecisionCard {
  constructor(sessionId, data, send) {
    super('question', send);
    this.sessionId = sessionId;
    this.questionId = String(data.questionId ?? '');
    this.el.dataset.questionId = this.questionId;
    const questions = Array.isArray(data.questions) ? data.questions.filter((q) => q && typeof q === 'object') : [];
    this.fields = [];
    const name = (i) => `q-${this.questionId}-${i}`;
    const blocks = questions.map((q, i) => {
      const multi = q.multi_select === true;
      const options = Array.isArray(q.options) ? q.options.filter((o) => o && typeof o.label === 'string') : [];
      const inputs = [];
      const rows = options.map((o) => {
        const input = h('input', { type: multi ? 'checkbox' : 'radio', name: name(i), value: o.label });
        inputs.push(input);
        return h('label', { class: 'question-option', 'data-testid': 'question-option' }, input,
          h('span', { class: 'option-label', text: o.label }),
          typeof o.description === 'string' && o.description
            ? h('span', { class: 'option-description', text: o.description }) : null);
      });
      const custom = h('input', { type: 'text', class: 'question-custom', 'data-testid': 'question-custom',
        placeholder: options.length ? 'Other (optional)' : 'Your answer', maxLength: 4000 });
      this.fields.push({ id: String(q.id ?? ''), inputs, custom });
      this.controls.push(...inputs, custom);
      return h('fieldset', { class: 'question', 'data-testid': 'question', 'data-question': String(q.id ?? '') },
        typeof q.header === 'string' && q.header ? h('legend', { class: 'question-header', text: q.header }) : null,
        h('div', { class: 'question-text', text: String(q.question ?? '') }),
        rows.length ? h('div', { class: 'question-options' }, ...rows) : null,
        custom);
    });
    const submit = h('button', { type: 'submit', class: 'btn btn-small btn-primary', text: 'Submit' });
    const skip = h('button', { type: 'button', class: 'btn btn-small', 'data-testid': 'question-skip', text: 'Skip',
      title: 'Decline to answer', onclick: () => this.answer([]) });
    this.controls.push(submit, skip);
    const form = h('form', { class: 'question-form', onsubmit: (ev) => { ev.preventDefault(); this.answer(this.collect()); } },
      ...blocks, h('div', { class: 'decision-actions' }, submit, skip));
    this.el.append(h('div', { class: 'decision-title' },
      h('span', { class: 'decision-icon', 'aria-hidden': 'true', text: '?' }),
      h('span', { text: questions.length === 1 ? 'A question for you' : `${questions.length} questions for you` }),
      this.badge), form, this.errorEl, this.outcomeEl);
  }

  /** The form's answers: checked labels, and the free text when given. */
  collect() {
    return this.fields.map((f) => {
      const a = { id: f.id, selected: f.inputs.filter((i) => i.checked).map((i) => i.value) };
      const custom = f.custom.value.trim();
      if (custom) a.custom = custom;
      return a;
    });
  }

  answer(answers) {
    return this.submit('session/answer', { sessionId: this.sessionId, questionId: this.questionId, answers });
  }

  /** question/resolved {outcome}. */
  resolved({ outcome }) {
    const label = QUESTION_LABELS[outcome] ?? String(outcome ?? 'settled');
    this.el.dataset.outcome = String(outcome ?? '');
    this.settle('resolved', outcome === 'answered' ? 'ok' : 'aborted', label, `Question ${label}.`);
  }
}
