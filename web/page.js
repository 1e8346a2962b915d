// The page's fixed parts: URL parameters, the elements of index.html, the
// error banner and small formatting helpers shared by the UI's modules.

export const pageParams = new URLSearchParams(location.search);

function intParam(name, fallback, min, max) {
  const v = Number(pageParams.get(name));
  return Number.isInteger(v) && v >= min && v <= max ? v : fallback;
}

/** Events per session/events page (?pageSize=N overrides, 1..1000). */
export const EVENTS_PAGE = intParam('pageSize', 200, 1, 1000);
/** Sessions per session/list page (?listPageSize=N overrides, 1..1000). */
export const LIST_PAGE = intParam('listPageSize', 50, 1, 1000);

export const $ = (sel) => document.querySelector(sel);

export const els = {
  transcript: $('#transcript'),
  status: $('#status'),
  statusLabel: $('#status .status-label'),
  serverInfo: $('#server-info'),
  sessionSelect: $('#session-select'),
  prompt: $('#prompt'),
  send: $('#send'),
  cancel: $('#cancel'),
  turnStatus: $('#turn-status'),
  banner: $('#error-banner'),
  sessionList: $('#session-list'),
  moreSessions: $('#more-sessions'),
  todoPanel: $('#todo-panel'),
};

export function showError(text) {
  els.banner.querySelector('.error-text').textContent = text;
  els.banner.hidden = false;
}

export function hideError() {
  els.banner.hidden = true;
}

/** "message (code)" of a failed request. */
export const describeError = (err) => (err?.code !== undefined ? `${err.message} (${err.code})` : String(err?.message ?? err));

export function formatDuration(ms) {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  return `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
}

export function timeAgo(ms) {
  if (!Number.isFinite(ms)) return '';
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 45) return 'just now';
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return new Date(ms).toLocaleDateString();
}

/** "completed", "aborted: cancelled", "error: boom (E42)" */
export function describeReason(reason) {
  if (!reason || typeof reason !== 'object') return '';
  let s = String(reason.kind ?? 'unknown');
  const detail = reason.reason ?? reason.message;
  if (detail) s += `: ${detail}`;
  if (reason.code !== undefined) s += ` (${reason.code})`;
  return s;
}
