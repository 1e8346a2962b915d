// The scripted provider (docs/protocol.md §9): a deterministic, keyless model.
// parseScript() turns the newest user text into a plan; the turn runner in
// rpc.mjs plays the plan back as session events.

/** Text of chunk i for `@chunks N BYTES`: 'a' + (i % 26), repeated BYTES times. */
export function chunkText(i, bytes) {
  return String.fromCharCode(97 + (i % 26)).repeat(bytes);
}

/**
 * Parse the prompt text into a plan:
 *   { delayMs, kind: 'chunks'|'reply'|'subagent'|'error'|'max-tokens', ... }
 * Lines starting with '@' are directives; without any, the answer is
 * `echo: TEXT`. When several answer-directives are given the last one wins.
 */
export function parseScript(text) {
  const plan = { delayMs: 0, kind: 'reply', text: `echo: ${text}` };
  const plain = [];
  let answered = false;
  let directives = false;
  for (const rawLine of text.split(/\r?\n/)) {
    const line = rawLine.trimStart();
    if (!line.startsWith('@')) {
      plain.push(rawLine);
      continue;
    }
    directives = true;
    const m = /^@([A-Za-z-]+)(?:\s+(.*))?$/.exec(line.trimEnd());
    if (!m) continue;
    const name = m[1];
    const arg = m[2] ?? '';
    switch (name) {
      case 'chunks': {
        const [n, bytes] = arg.split(/\s+/).map((s) => Number.parseInt(s, 10));
        plan.kind = 'chunks';
        plan.count = Number.isFinite(n) && n > 0 ? n : 0;
        plan.bytes = Number.isFinite(bytes) && bytes > 0 ? bytes : 0;
        answered = true;
        break;
      }
      case 'delay': {
        const ms = Number.parseInt(arg, 10);
        plan.delayMs = Number.isFinite(ms) && ms > 0 ? ms : 0;
        break;
      }
      case 'reply':
        plan.kind = 'reply';
        plan.text = arg;
        answered = true;
        break;
      case 'subagent':
        plan.kind = 'subagent';
        plan.prompt = arg;
        answered = true;
        break;
      case 'error':
        plan.kind = 'error';
        plan.message = arg || 'scripted error';
        answered = true;
        break;
      case 'max-tokens':
        plan.kind = 'max-tokens';
        answered = true;
        break;
      default:
        // Unknown directives are ignored.
        break;
    }
  }
  if (directives && !answered) {
    plan.kind = 'reply';
    plan.text = `echo: ${plain.join('\n')}`;
  }
  return plan;
}
