// Small DOM and formatting helpers shared by the web UI's modules (app.js,
// tools.js). Everything builds nodes with textContent: no HTML strings, so
// text from the daemon (model output, tool results) can never become markup.

/** An element: attrs (class, text, data-*, aria-*, role, title, or properties), then children. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else if (k.startsWith('data-') || k === 'role' || k === 'title' || k.startsWith('aria-')) el.setAttribute(k, v);
    else el[k] = v;
  }
  for (const c of children) if (c !== null && c !== undefined) el.append(c);
  return el;
}

/** JSON text (or a value) indented; text that is not JSON as it is. */
export function prettyJson(raw) {
  if (typeof raw !== 'string') return JSON.stringify(raw, null, 2);
  try {
    return JSON.stringify(JSON.parse(raw), null, 2);
  } catch {
    return raw;
  }
}

/** The text of content blocks ([{type:"text", text}], nested tool results too). */
export function blocksText(blocks) {
  if (!Array.isArray(blocks)) return typeof blocks === 'string' ? blocks : '';
  return blocks.map((b) => (typeof b?.text === 'string' ? b.text : b?.type === 'tool-result' ? blocksText(b.content) : '')).join('');
}

export function shortId(id) {
  return id.length > 24 ? `${id.slice(0, 12)}…${id.slice(-8)}` : id;
}

export function statusBadge(status, label = status) {
  return h('span', { class: `badge badge-${status}`, 'data-status': status, text: label });
}
