// Assistant text as Markdown: parsed by marked (raw HTML in the text kept as
// text), then sanitized by DOMPurify into a DOM fragment, so model output can
// never run script, load content or carry event handlers. The HTML string
// from marked is never assigned to innerHTML; only DOMPurify's sanitized
// nodes reach the page.
import { Marked } from './vendor/marked.esm.js';
import './vendor/purify.min.js';

const DOMPurify = globalThis.DOMPurify;

const markdown = new Marked({ gfm: true, breaks: true, async: false });

const ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
const escapeHtml = (text) => text.replace(/[&<>"']/g, (c) => ESCAPES[c]);

// HTML the model writes is shown as the text it is, not as markup: a model
// quoting `<script>` or `<b>` means the characters.
markdown.use({
  renderer: {
    html: (token) => (token.block ? `<p>${escapeHtml(token.text.trim()).replaceAll('\n', '<br>')}</p>` : escapeHtml(token.text)),
  },
});

const SANITIZE = {
  RETURN_DOM_FRAGMENT: true,
  // Text formatting only: no forms, media, frames or styles from the model.
  FORBID_TAGS: ['style', 'form', 'input', 'button', 'textarea', 'select', 'iframe', 'img', 'video', 'audio', 'svg', 'math'],
  FORBID_ATTR: ['style', 'class', 'id'],
};

// Links open elsewhere and tell the target nothing about this page.
DOMPurify.addHook('afterSanitizeAttributes', (node) => {
  if (node.tagName === 'A') {
    node.setAttribute('target', '_blank');
    node.setAttribute('rel', 'noopener noreferrer');
  }
});

/** `text` as sanitized Markdown nodes, without whitespace-only text between blocks. */
export function markdownFragment(text) {
  const fragment = DOMPurify.sanitize(markdown.parse(text), SANITIZE);
  for (const node of [...fragment.childNodes]) {
    if (node.nodeType === Node.TEXT_NODE && !node.data.trim()) node.remove();
  }
  return fragment;
}

/**
 * Renders `getText()` into `el` as Markdown, at most once per frame however
 * many deltas arrive: a streamed answer is parsed again as it grows.
 */
export class MarkdownView {
  constructor(el) {
    this.el = el;
    this.text = '';
    this.scheduled = false;
  }

  set(text) {
    this.text = text;
    this.schedule();
  }

  append(delta) {
    this.text += delta;
    this.schedule();
  }

  schedule() {
    if (this.scheduled) return;
    this.scheduled = true;
    requestAnimationFrame(() => this.render());
  }

  /** Renders now (also called by the frame scheduled before). */
  render() {
    this.scheduled = false;
    this.el.replaceChildren(markdownFragment(this.text));
  }
}
