// The page's one connection to the daemon that served it, through the same
// client package Node programs use (clients/js, served as /client/). The
// token of `?token=` travels as `access_token` (browsers cannot set headers
// on a WebSocket); `?ws=URL` points the page at another daemon.
import { HarnessClient, RpcError } from './client/index.js';
import { pageParams } from './page.js';

function socketUrl() {
  const override = pageParams.get('ws');
  return override || `${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}/`;
}

export const client = new HarnessClient(socketUrl(), {
  token: pageParams.get('token') || undefined,
  tokenIn: 'query',
  backoffMs: [500, 1000, 2000, 4000, 8000, 15000],
  // Turns this page starts keep running when the page goes away (reload,
  // network loss); the page picks them up again through session/subscribe.
  initialize: { clientInfo: { name: 'harnessd-web', version: '0.3.0' }, onDisconnect: 'continue' },
});

export const isUnknownSession = (err) => err instanceof RpcError && err.code === -32602 && /unknown session/.test(err.message);

export { RpcError };
