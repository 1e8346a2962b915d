// How the web UI shows what the agent does: a card per tool call (its
// arguments, a diff for write/edit, a command's output and exit code, error
// codes, long output folded) and the session's todo list as a checklist.
// Split from app.js, which feeds these views the session's events.

import { h, prettyJson, blocksText, shortId, statusBadge } from './dom.js';

/** Output longer than this many lines is folded (details, closed). */
export const FOLD_LINES = 20;

/** Tools whose cards close once their result is in (the output is rarely the point). */
const QUIET_TOOLS = new Set(['read', 'glob', 'grep', 'task_list', 'task_output']);

function parseArgs(text) {
  try {
    const v = JSON.parse(text);
    return v && typeof v === 'object' && !Array.isArray(v) ? v : null;
  } catch {
    return null;
  }
}

function lineCount(text) {
  if (!text) return 0;
  const n = text.split('\n').length;
  return text.endsWith('\n') ? n - 1 : n;
}

/** One line saying what a call works on: the command, the file, the pattern. */
export function headline(name, args) {
  if (!args) return '';
  const str = (v) => (typeof v === 'string' ? v : '');
  switch (name) {
    case 'bash': return str(args.command).split('\n')[0];
    case 'read': case 'write': case 'edit': return str(args.file_path);
    case 'glob': case 'grep': return str(args.pattern) + (args.path ? `  in ${str(args.path)}` : '');
    case 'task_output': case 'task_kill': return str(args.task_id);
    case 'subagent': return str(args.description ?? args.prompt ?? args.task).split('\n')[0];
    case 'todo_write': return Array.isArray(args.todos) ? `${args.todos.length} item${args.todos.length === 1 ? '' : 's'}` : '';
    default: return '';
  }
}

/**
 * `body` as it is when short; inside a closed <details> when longer than
 * FOLD_LINES lines, its summary saying what and how much.
 */
export function foldable(body, lines, label) {
  if (lines <= FOLD_LINES) return body;
  return h('details', { class: 'fold', 'data-testid': 'fold' },
    h('summary', { class: 'fold-summary' },
      h('span', { class: 'fold-label', text: label }),
      h('span', { class: 'fold-count', text: `${lines} lines` })),
    body);
}

function textBlock(text, cls, label) {
  return foldable(h('pre', { class: `code ${cls}`, text }), lineCount(text), label);
}

/** A unified diff as lines coloured by kind; returns { el, added, removed }. */
export function diffView(diff) {
  const lines = diff.split('\n');
  if (lines.at(-1) === '') lines.pop();
  let added = 0;
  let removed = 0;
  const rows = lines.map((line) => {
    let kind = 'ctx';
    if (line.startsWith('+++') || line.startsWith('---')) kind = 'file';
    else if (line.startsWith('@@')) kind = 'hunk';
    else if (line.startsWith('+')) { kind = 'add'; added += 1; }
    else if (line.startsWith('-')) { kind = 'del'; removed += 1; }
    else if (line.startsWith('\\')) kind = 'note';
    return h('div', { class: `diff-line diff-${kind}`, 'data-kind': kind, text: line === '' ? ' ' : line });
  });
  const body = h('div', { class: 'diff', 'data-testid': 'diff', role: 'figure', 'aria-label': 'diff' }, ...rows);
  return { el: foldable(body, lines.length, 'diff'), added, removed };
}

/** A checklist of todos [{content, status}]. */
export function todoList(todos) {
  return h('ul', { class: 'todo-list', 'data-testid': 'todo-list' }, ...todos.map((t) => {
    const status = ['pending', 'in_progress', 'completed'].includes(t?.status) ? t.status : 'pending';
    const mark = status === 'completed' ? '✓' : status === 'in_progress' ? '◐' : '';
    return h('li', { class: `todo todo-${status}`, 'data-testid': 'todo', 'data-status': status },
      h('span', { class: 'todo-box', 'aria-hidden': 'true', text: mark }),
      h('span', { class: 'todo-text', text: String(t?.content ?? '') }),
      status === 'in_progress' ? h('span', { class: 'todo-now', text: 'in progress' }) : null);
  }));
}

/** The card of one tool call, built from streamed chunks, tool/call and tool/result. */
export class ToolCard {
  constructor(turn, callId, name) {
    this.turn = turn;
    this.callId = callId;
    this.name = name || 'tool';
    this.args = '';
    this.nameEl = h('span', { class: 'tool-name', text: this.name });
    this.headEl = h('span', { class: 'tool-head' });
    this.statsEl = h('span', { class: 'tool-stats' });
    this.idEl = h('span', { class: 'tool-id', text: callId ? shortId(callId) : '' });
    this.badge = statusBadge('running', 'preparing');
    this.argsLabel = h('div', { class: 'field-label', text: 'arguments' });
    this.argsEl = h('div', { class: 'tool-args' }, h('pre', { class: 'code' }));
    this.resultEl = h('div', { class: 'tool-result', hidden: true });
    this.childrenEl = h('div', { class: 'subagents' });
    this.el = h('details', { class: 'tool-card', open: true, 'data-testid': 'tool-call' },
      h('summary', {}, h('span', { class: 'tool-icon', 'aria-hidden': 'true', text: '⚙' }),
        this.nameEl, this.headEl, this.statsEl, this.idEl, this.badge),
      h('div', { class: 'tool-body' }, this.argsLabel, this.argsEl, this.childrenEl, this.resultEl));
    if (callId) turn.toolCards.set(callId, this);
  }

  setId(callId) {
    if (!callId || this.callId === callId) return;
    this.callId = callId;
    this.idEl.textContent = shortId(callId);
    this.el.dataset.callId = callId;
    this.turn.toolCards.set(callId, this);
  }

  setName(name) {
    if (!name) return;
    this.name = name;
    this.nameEl.textContent = name;
    this.el.dataset.name = name;
  }

  /** Streamed argument text: shown raw until the call is complete. */
  appendArgs(delta) {
    this.args += delta;
    this.argsEl.replaceChildren(h('pre', { class: 'code', text: this.args }));
  }

  /** The complete arguments (JSON text): bash shows its command, the rest pretty JSON. */
  showArgs() {
    const args = parseArgs(this.args);
    this.headEl.textContent = headline(this.name, args);
    this.headEl.title = this.headEl.textContent;
    if (this.name === 'bash' && args && typeof args.command === 'string') {
      const why = typeof args.description === 'string' && args.description
        ? h('span', { class: 'field-note', text: ` · ${args.description}` }) : '';
      this.argsLabel.replaceChildren('command', why);
      const cmd = h('pre', { class: 'code tool-command', 'data-testid': 'tool-command', text: args.command });
      const extra = { ...args };
      delete extra.command;
      delete extra.description;
      const rest = Object.keys(extra).length ? h('div', { class: 'tool-options', text: JSON.stringify(extra) }) : null;
      this.argsEl.replaceChildren(foldable(cmd, lineCount(args.command), 'command'), rest ?? '');
      return;
    }
    if (this.name === 'todo_write' && args && Array.isArray(args.todos)) {
      // The list itself says more than its JSON.
      this.argsLabel.textContent = 'todos';
      this.argsEl.replaceChildren(todoList(args.todos));
      return;
    }
    this.argsLabel.textContent = 'arguments';
    const text = prettyJson(this.args);
    this.argsEl.replaceChildren(textBlock(text, 'tool-json', 'arguments'));
  }

  called({ callId, name, arguments: args }) {
    this.setId(callId);
    this.setName(name);
    if (typeof args === 'string') this.args = args;
    else if (args && typeof args === 'object') this.args = JSON.stringify(args);
    this.showArgs();
    this.setBadge('running', 'running');
  }

  result({ content, isError, error, meta }) {
    const text = blocksText(content);
    const m = meta && typeof meta === 'object' ? meta : {};
    const parts = [];
    this.el.dataset.state = isError ? 'error' : 'ok';
    if (isError) {
      const code = typeof error?.code === 'string' || typeof error?.code === 'number' ? String(error.code) : 'error';
      this.el.classList.add('is-error');
      this.el.dataset.errorCode = code;
      const message = typeof error?.message === 'string' ? error.message : '';
      parts.push(h('div', { class: 'tool-error', 'data-testid': 'tool-error' },
        h('span', { class: 'error-code', text: code }),
        h('span', { class: 'error-message', text: message || text.split('\n')[0] })));
      if (text && text.trim() !== message.trim()) parts.push(textBlock(text, 'is-error', 'output'));
      this.setBadge('error', code);
    } else {
      this.setBadge('ok', 'done');
    }
    if (typeof m.diff === 'string' && m.diff) {
      const d = diffView(m.diff);
      this.statsEl.replaceChildren(h('span', { class: 'stat-add', text: `+${d.added}` }),
        h('span', { class: 'stat-del', text: `−${d.removed}` }));
      parts.push(h('div', { class: 'field-label', text: 'diff' }), d.el);
      if (!isError) parts.push(h('div', { class: 'tool-note', text }));
    } else if (this.name === 'bash' && Number.isInteger(m.exitCode)) {
      // The text ends with "[exit code: N]": the badge says it.
      const out = text.replace(/\n?\[exit code: -?\d+\]\s*$/, '');
      const exit = m.timedOut ? 'timed out' : `exit ${m.exitCode}`;
      const ok = m.exitCode === 0 && !m.timedOut;
      this.el.dataset.exitCode = String(m.exitCode);
      this.statsEl.replaceChildren(h('span', { class: `exit-code ${ok ? 'exit-ok' : 'exit-fail'}`, 'data-testid': 'exit-code', text: exit }));
      if (!isError) this.setBadge(ok ? 'ok' : 'error', ok ? 'done' : 'failed');
      const bytes = [];
      if (Number.isInteger(m.stdoutBytes)) bytes.push(`stdout ${m.stdoutBytes} B`);
      if (Number.isInteger(m.stderrBytes)) bytes.push(`stderr ${m.stderrBytes} B`);
      parts.push(h('div', { class: 'field-label', text: `output${bytes.length ? ` · ${bytes.join(' · ')}` : ''}` }),
        out.trim() ? textBlock(out, `tool-output${ok ? '' : ' is-failed'}`, 'output')
          : h('div', { class: 'tool-note', text: '(no output)' }));
    } else if (this.name === 'todo_write' && !isError) {
      // What was stored (meta.todos) when the arguments did not parse as a list.
      if (Array.isArray(m.todos) && !this.argsEl.querySelector('.todo-list')) parts.push(todoList(m.todos));
      parts.push(h('div', { class: 'tool-note', text }));
    } else if (!isError) {
      parts.push(h('div', { class: 'field-label', text: 'result' }), textBlock(text, 'tool-output', 'result'));
    }
    this.resultEl.replaceChildren(...parts);
    this.resultEl.hidden = false;
    if (!isError && (QUIET_TOOLS.has(this.name))) this.el.open = false;
  }

  setBadge(status, label) {
    const b = statusBadge(status, label);
    this.badge.replaceWith(b);
    this.badge = b;
  }
}

/** The session's todo list (its latest todo/write), above the composer. */
export class TodoPanel {
  constructor(el) {
    this.el = el;
    this.todos = null;
  }

  show(todos) {
    this.todos = Array.isArray(todos) ? todos : null;
    if (!this.todos || this.todos.length === 0) {
      this.el.hidden = true;
      this.el.replaceChildren();
      return;
    }
    const done = this.todos.filter((t) => t?.status === 'completed').length;
    const open = this.el.querySelector('details')?.open ?? true;
    const bar = h('span', { class: 'todo-progress', 'aria-hidden': 'true' }, h('span', { class: 'todo-progress-fill' }));
    bar.firstChild.style.width = `${Math.round((done / this.todos.length) * 100)}%`;
    this.el.replaceChildren(h('details', { class: 'todo-panel-inner', open },
      h('summary', { class: 'todo-head' },
        h('span', { class: 'todo-title', text: 'Tasks' }),
        h('span', { class: 'todo-count', 'data-testid': 'todo-count', text: `${done}/${this.todos.length} done` }),
        bar),
      todoList(this.todos)));
    this.el.hidden = false;
  }
}
