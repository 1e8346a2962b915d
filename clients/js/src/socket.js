// Which WebSocket to use and how to present the token (docs/protocol.md
// §2.4). A browser's WebSocket cannot set headers, so the token goes in the
// `access_token` query parameter; the `ws` package of Node can, so it sends
// `Authorization: Bearer TOKEN` and keeps the token out of URLs and logs.

/**
 * The WebSocket constructor: the one given, else the global one (browsers,
 * Node 22+), else the `ws` package, imported only then so that browsers
 * never see the import.
 */
export async function resolveWebSocket(given) {
  if (given) return given;
  if (typeof globalThis.WebSocket === 'function') return globalThis.WebSocket;
  try {
    const mod = await import('ws');
    return mod.WebSocket ?? mod.default;
  } catch (err) {
    throw new Error('no WebSocket: pass options.WebSocket or install the "ws" package', { cause: err });
  }
}

/** The `ws` package's class has terminate(); a browser's does not (nor Node's global one). */
const canSendHeaders = (WS) => typeof WS?.prototype?.terminate === 'function';

/**
 * The arguments for `new WS(...)`: the URL (with the token when it travels
 * in the query) and, for `ws`, its options with the Authorization header.
 * @param {'header'|'query'|undefined} tokenIn  where the token goes; default: header when WS can send one
 */
export function socketArgs(WS, url, token, tokenIn) {
  const where = tokenIn ?? (canSendHeaders(WS) ? 'header' : 'query');
  if (!token) return [url];
  if (where === 'header') return [url, [], { headers: { Authorization: `Bearer ${token}` } }];
  const u = new URL(url);
  u.searchParams.set('access_token', token);
  return [u.toString()];
}
