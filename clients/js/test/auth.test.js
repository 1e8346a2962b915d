// The bearer token over WebSocket (docs/protocol.md §2.4): the `ws` package
// sends it as a header, browsers in the query; a wrong token is a refused
// upgrade (HTTP 401), which the client reports without retrying.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { WebSocket } from 'ws';
import { HarnessClient, ConnectionClosedError } from '../src/index.js';
import { startDaemon } from './daemon.js';

const TOKEN = 'js-client-test-token';
let daemon;
let tokenDir;

before(async () => {
  tokenDir = fs.mkdtempSync(path.join(os.tmpdir(), 'harnessd-js-token-'));
  const file = path.join(tokenDir, 'token');
  fs.writeFileSync(file, `${TOKEN}\n`, { mode: 0o600 });
  daemon = await startDaemon(['--auth-token-file', file]);
});

after(async () => {
  await daemon?.stop();
  fs.rmSync(tokenDir, { recursive: true, force: true });
});

for (const tokenIn of ['header', 'query']) {
  test(`the token in the ${tokenIn} opens the connection`, async () => {
    const client = new HarnessClient(daemon.url, { WebSocket, token: TOKEN, tokenIn, reconnect: false });
    await client.connect();
    const turn = client.prompt(`auth-${tokenIn}`, 'hi');
    for await (const _ of turn);
    assert.equal((await turn.result).status, 'ok');
    client.close();
  });
}

test('a wrong or missing token is refused', async () => {
  for (const token of ['wrong', undefined]) {
    const client = new HarnessClient(daemon.url, { WebSocket, token, reconnect: false });
    await assert.rejects(client.connect(), (err) => err instanceof ConnectionClosedError && /401/.test(err.message));
    assert.equal(client.state, 'closed');
  }
});
