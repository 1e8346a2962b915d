// Browser test of the web UI (web/) as served by harnessd: Debian's headless
// Chromium driven by playwright-core, run with node's built-in test runner.
//
//   HARNESSD_BIN=build/harnessd node --test tests/browser/ui.test.mjs
//
// Env: HARNESSD_BIN (daemon to test), HARNESSD_ARGS (extra daemon args,
// space separated), BROWSER_TEST_STORE (jsonl, the default, or memory),
// BROWSER_TEST_WEB (auto, the default: serve web/ from disk when the daemon's
// embedded copy differs; disk; daemon), CHROMIUM (default
// /usr/bin/chromium), SCREENSHOT_DIR (default tests/browser/out/),
// HARNESSD_PYTHON (Python 3 with pytest, default /usr/bin/python3).
//
// One test starts a second harnessd with a wss:// listener and a certificate
// it makes with the openssl CLI, and opens the UI over https in a browser
// that trusts exactly that certificate's key. Another puts a harnessd behind
// Debian's nginx with deploy/nginx/harnessd.conf (tests/deploy/nginx_stack.py).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '..', '..');
const screenshotDir = path.resolve(process.env.SCREENSHOT_DIR || path.join(here, 'out'));
const chromiumBin = process.env.CHROMIUM || '/usr/bin/chromium';
const harnessdBin = process.env.HARNESSD_BIN;
const storeKind = process.env.BROWSER_TEST_STORE || 'jsonl';
const webMode = process.env.BROWSER_TEST_WEB || 'auto';

/**
 * What the daemon serves, URL path -> file of the source tree, as
 * src/CMakeLists.txt embeds it: web/ at /, web/vendor/ at /vendor/ and the
 * JavaScript client's modules (clients/js/src/) at /client/.
 */
function webFiles() {
  const files = { '/': 'web/index.html' };
  const mounts = [['web', '/'], ['web/vendor', '/vendor/'], ['clients/js/src', '/client/']];
  for (const [dir, prefix] of mounts) {
    for (const name of fs.readdirSync(path.join(repo, dir))) {
      if (/\.(html|js|css)$/.test(name)) files[prefix + name] = `${dir}/${name}`;
    }
  }
  return files;
}
const WEB_FILES = webFiles();
const CONTENT_TYPES = { html: 'text/html; charset=utf-8', js: 'text/javascript; charset=utf-8', css: 'text/css; charset=utf-8' };

const skipReason = !harnessdBin
  ? 'set HARNESSD_BIN=path/to/harnessd'
  : !fs.existsSync(chromiumBin) ? `no Chromium at ${chromiumBin} (apt-get install -y chromium)` : false;

const CHROMIUM_ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
  // A page fulfilled by request routing (web/ from disk) has no address of its
  // own; without this Chromium refuses its WebSocket to the loopback daemon.
  '--disable-features=LocalNetworkAccessChecks',
];

/** The scripted provider's `@chunks N BYTES` text: chunk i is 'a'+(i%26) repeated BYTES times. */
function chunksText(n, bytes) {
  let s = '';
  for (let i = 0; i < n; i++) s += String.fromCharCode(97 + (i % 26)).repeat(bytes);
  return s;
}

// ---- server under test ------------------------------------------------------

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'harnessd-browser-'));
const workspaceRoot = path.join(tmp, 'workspaces');
let server = null;
let serverLog = '';
let wsPort = null;
let baseUrl = null;

async function startServer(port = 0) {
  const ready = path.join(tmp, `ready-${Date.now()}.json`);
  const cmd = path.resolve(harnessdBin);
  const args = ['--listen', `ws://127.0.0.1:${port}`, '--ready-file', ready, '--store', storeKind];
  if (storeKind === 'jsonl') args.push('--session-root', path.join(tmp, 'sessions'));
  // Each session's tools work in WORKSPACE_ROOT/SESSION_ID.
  args.push('--workspace-root', workspaceRoot);
  if (process.env.HARNESSD_ARGS) args.push(...process.env.HARNESSD_ARGS.split(/\s+/).filter(Boolean));
  const proc = spawn(cmd, args, { cwd: repo, stdio: ['ignore', 'pipe', 'pipe'] });
  proc.stdout.on('data', (d) => { serverLog += d; });
  proc.stderr.on('data', (d) => { serverLog += d; });
  let exited = null;
  proc.on('exit', (code, sig) => { exited = `exited with ${code ?? sig}`; });
  const deadline = Date.now() + 20000;
  for (;;) {
    if (fs.existsSync(ready)) {
      try {
        const { listen } = JSON.parse(fs.readFileSync(ready, 'utf8'));
        const ws = listen.find((u) => u.startsWith('ws://'));
        assert.ok(ws, `no ws:// entry in ready file: ${JSON.stringify(listen)}`);
        server = proc;
        wsPort = Number(new URL(ws).port);
        baseUrl = `http://127.0.0.1:${wsPort}/`;
        return;
      } catch (err) {
        if (err instanceof assert.AssertionError) throw err;
        // Partially written file: read again.
      }
    }
    if (exited) throw new Error(`${cmd} ${exited} before it was ready:\n${serverLog}`);
    if (Date.now() > deadline) throw new Error(`${cmd} not ready after 20 s:\n${serverLog}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function stopServer() {
  if (!server) return;
  const proc = server;
  server = null;
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  const gone = new Promise((r) => proc.once('exit', r));
  proc.kill('SIGTERM');
  const timer = setTimeout(() => proc.kill('SIGKILL'), 5000);
  await gone;
  clearTimeout(timer);
}

// ---- web assets -----------------------------------------------------------------

/**
 * harnessd embeds web/ at build time, so a daemon built before the last edit
 * of web/ serves an older UI. By default (BROWSER_TEST_WEB=auto) the pages
 * then get the files of web/ from disk through request routing; the
 * WebSocket still goes to the daemon.
 */
async function chooseWebSource() {
  if (webMode === 'daemon') return false;
  if (webMode === 'disk') return true;
  for (const [urlPath, file] of Object.entries(WEB_FILES)) {
    if (urlPath === '/') continue;
    const res = await fetch(new URL(urlPath, baseUrl));
    const served = Buffer.from(await res.arrayBuffer());
    if (res.status !== 200 || !served.equals(fs.readFileSync(path.join(repo, file)))) {
      console.log(`# the daemon's embedded ${urlPath} differs from ${file}: the pages get web/ from disk`);
      return true;
    }
  }
  return false;
}

async function routeWebFromDisk(ctx, origin = new URL(baseUrl).origin) {
  const ours = (url) => url.origin === origin && Object.hasOwn(WEB_FILES, url.pathname);
  await ctx.route(ours, (route) => {
    const file = WEB_FILES[new URL(route.request().url()).pathname];
    route.fulfill({
      status: 200,
      headers: { 'content-type': CONTENT_TYPES[path.extname(file).slice(1)], 'cache-control': 'no-store' },
      body: fs.readFileSync(path.join(repo, file)),
    });
  });
}

// ---- page helpers -------------------------------------------------------------

let browser = null;
let context = null;
let fromDisk = false;
let page1 = null;
let page2 = null;
let sessionId = null;
const pageErrors = [];

async function openPage(query = '') {
  const page = await context.newPage();
  page.setDefaultTimeout(15000);
  page.on('pageerror', (err) => pageErrors.push(String(err)));
  page.on('console', (msg) => { if (msg.type() === 'error') pageErrors.push(`console: ${msg.text()}`); });
  const res = await page.goto(baseUrl + query);
  assert.equal(res.status(), 200, `GET ${baseUrl + query}`);
  await page.waitForSelector('#status[data-state="connected"]');
  return page;
}

async function sendPrompt(page, text) {
  await page.waitForSelector('#send:not([disabled])');
  await page.fill('#prompt', text);
  await page.click('#send');
}

/** Waits until the newest top-level turn has settled; returns its status. */
async function lastTurnSettled(page) {
  const handle = await page.waitForFunction(() => {
    const turns = document.querySelectorAll('[data-testid="turn"]');
    return turns.length ? turns[turns.length - 1].dataset.status : undefined;
  });
  return handle.jsonValue();
}

/** Assistant text of the newest top-level turn (not its subagents'). */
function lastTurnText(page) {
  return page.evaluate(() => {
    const turns = document.querySelectorAll('[data-testid="turn"]');
    const last = turns[turns.length - 1];
    return [...last.querySelectorAll('[data-testid="assistant-text"]')]
      .filter((el) => el.closest('[data-testid="turn"], [data-testid="subagent-turn"]') === last)
      .map((el) => el.textContent).join('');
  });
}

const turnStatusText = (page) => page.textContent('#turn-status');

const turnCount = (page) => page.$$eval('[data-testid="turn"]', (els) => els.length);

/** The methods the daemon announced in initialize (capabilities.methods). */
const methodsOf = (page) => page.evaluate(() => (document.body.dataset.methods ?? '').split(' ').filter(Boolean));
let serverMethods = [];

/** Skips a test that reads logged events back, which --store memory does not keep. */
function needsHistory(t) {
  if (storeKind === 'memory') {
    t.skip('--store memory keeps no events to read back');
    return true;
  }
  return false;
}

/** A new session in `page`; returns its id. */
async function newSession(page) {
  const before = await page.$eval('#session-select', (el) => el.value);
  await page.click('#new-session');
  const id = await page.$eval('#session-select', (el) => el.value);
  assert.notEqual(id, before);
  await page.waitForSelector('#send:not([disabled])');
  return id;
}

/** The shown range of seqs of the open session's transcript. */
const shownSeqs = (page) => page.$eval('.session-view', (el) => ({
  first: el.dataset.firstSeq === '' ? null : Number(el.dataset.firstSeq),
  last: el.dataset.lastSeq === '' ? null : Number(el.dataset.lastSeq),
}));

// ---- tests ------------------------------------------------------------------

before(async () => {
  if (skipReason) return;
  fs.mkdirSync(screenshotDir, { recursive: true });
  await startServer();
  fromDisk = await chooseWebSource();
  browser = await chromium.launch({ executablePath: chromiumBin, headless: true, args: CHROMIUM_ARGS });
  context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  if (fromDisk) await routeWebFromDisk(context);
});

after(async () => {
  await browser?.close().catch(() => {});
  await stopServer();
  await stopTlsServer();
  fs.rmSync(tmp, { recursive: true, force: true });
});

test('page loads, connects and streams @chunks 20 8', { skip: skipReason, timeout: 60000 }, async () => {
  page1 = await openPage();
  assert.equal(await page1.title(), 'harnessd');
  serverMethods = await methodsOf(page1);
  assert.ok(serverMethods.includes('session/prompt'), `capabilities.methods: ${serverMethods}`);
  await page1.click('#new-session');
  sessionId = await page1.$eval('#session-select', (el) => el.value);
  assert.match(sessionId, /^web-/);

  await sendPrompt(page1, '@chunks 20 8');
  assert.equal(await lastTurnSettled(page1), 'ok');
  const text = await lastTurnText(page1);
  assert.equal(text, chunksText(20, 8));
  assert.equal(text.slice(0, 16), 'aaaaaaaabbbbbbbb');
  assert.match(await turnStatusText(page1), /\bok\b/);
  assert.equal(await page1.$eval('#turn-status', (el) => el.dataset.status), 'ok');
  assert.equal(await page1.isHidden('#error-banner'), true);
});

test('a second tab on the same session gets the busy error', { skip: skipReason, timeout: 60000 }, async () => {
  page2 = await openPage(`?session=${encodeURIComponent(sessionId)}`);
  assert.equal(await page2.$eval('#session-select', (el) => el.value), sessionId);

  await sendPrompt(page1, '@delay 300\n@chunks 5 4');
  // The first tab's turn has started on the daemon once its first event arrived.
  await page1.waitForSelector('[data-testid="turn"][data-phase="running"]');
  await sendPrompt(page2, 'are you free?');
  await page2.waitForSelector('#error-banner:not([hidden])');
  const banner = await page2.textContent('#error-banner');
  assert.match(banner, /active prompt/);
  assert.match(banner, /-32001/);
  assert.match(await turnStatusText(page2), /\berror\b/);

  assert.equal(await lastTurnSettled(page1), 'ok');
  assert.equal(await lastTurnText(page1), chunksText(5, 4));
  assert.match(await turnStatusText(page1), /\bok\b/);
  await page2.screenshot({ path: path.join(screenshotDir, 'ui-busy.png') });
});

test('Cancel aborts a running turn', { skip: skipReason, timeout: 60000 }, async () => {
  await sendPrompt(page1, '@delay 500\n@chunks 10 4');
  await page1.waitForSelector('#cancel:not([disabled])');
  // Wait for the first streamed chunk, so the turn is really mid-stream.
  await page1.waitForFunction(() => {
    const turns = document.querySelectorAll('[data-testid="turn"]');
    return turns[turns.length - 1].textContent.includes('aaaa');
  });
  await page1.click('#cancel');
  assert.equal(await lastTurnSettled(page1), 'aborted');
  assert.match(await turnStatusText(page1), /\baborted\b/);
  const partial = await lastTurnText(page1);
  assert.ok(partial.startsWith('aaaa') && partial.length < 40, `partial text: ${partial}`);
  await page1.waitForSelector('#send:not([disabled])');
  assert.equal(await page1.isDisabled('#cancel'), true);
});

test('a subagent shows as a nested node with its status', { skip: skipReason, timeout: 60000 }, async () => {
  await sendPrompt(page1, '@subagent @chunks 3 4');
  assert.equal(await lastTurnSettled(page1), 'ok');
  assert.equal(await lastTurnText(page1), 'subagent said: aaaabbbbcccc');
  const node = await page1.waitForSelector('[data-testid="turn"]:last-child [data-testid="subagent"][data-status="ok"]');
  assert.match(await node.textContent(), /aaaabbbbcccc/);
  assert.ok(await page1.$('[data-testid="turn"]:last-child [data-testid="tool-call"][data-name="subagent"]'));
});

test('reconnects after the server restarts and re-initializes', { skip: skipReason, timeout: 90000 }, async () => {
  const port = wsPort;
  await stopServer();
  await page1.waitForSelector('#status[data-state="disconnected"]');
  assert.equal(await page1.isDisabled('#send'), true);
  await startServer(port);
  await page1.waitForSelector('#status[data-state="connected"]', { timeout: 30000 });
  await sendPrompt(page1, 'hello again');
  assert.equal(await lastTurnSettled(page1), 'ok');
  assert.equal(await lastTurnText(page1), 'echo: hello again');
  await page1.screenshot({ path: path.join(screenshotDir, 'ui.png') });
});

// ---- session/list, session/events, session/subscribe (harnessd extensions) ----

let reloadSession = null;
let reloadPrompt = null;
let twoTabSession = null;

test('a reload mid-turn restores the transcript and follows the turn to its end', { skip: skipReason, timeout: 90000 }, async (t) => {
  if (needsHistory(t)) return;
  const page = await openPage();
  reloadSession = await newSession(page);
  await sendPrompt(page, 'hello before the reload');
  assert.equal(await lastTurnSettled(page), 'ok');

  // About 3 s of streaming; the page goes away after the first few chunks.
  reloadPrompt = '@delay 8\n@chunks 400 8';
  await sendPrompt(page, reloadPrompt);
  await page.waitForFunction(() => {
    const turns = document.querySelectorAll('[data-testid="turn"]');
    return turns.length === 2 && turns[1].textContent.includes('dddd');
  });
  await page.reload();
  await page.waitForSelector('#status[data-state="connected"]');
  assert.equal(await page.$eval('#session-select', (el) => el.value), reloadSession);

  // The reloaded page shows both turns from the log and re-attaches to the running one.
  await page.waitForSelector('[data-testid="turn"][data-phase="running"]');
  const running = await lastTurnText(page);
  assert.ok(running.length > 0 && running.length < 400 * 8, `text while running: ${running.length} bytes`);
  assert.ok(chunksText(400, 8).startsWith(running), 'the text so far is the start of the answer');
  assert.equal(await page.isDisabled('#cancel'), false, 'the running turn can be cancelled from the reloaded page');

  assert.equal(await lastTurnSettled(page), 'ok');
  assert.equal(await lastTurnText(page), chunksText(400, 8), 'every chunk once, in order');
  assert.equal(await turnCount(page), 2);
  const prompts = await page.$$eval('[data-testid="turn"] [data-testid="user-text"]', (els) => els.map((e) => e.textContent));
  assert.deepEqual(prompts, ['hello before the reload', reloadPrompt]);
  assert.match(await turnStatusText(page), /\bok\b/);
  assert.equal(await page.isHidden('#error-banner'), true);
  await page.screenshot({ path: path.join(screenshotDir, 'ui-reload.png') });
  await page.close();
});

test('older events load a page at a time, on demand', { skip: skipReason, timeout: 60000 }, async (t) => {
  if (needsHistory(t)) return;
  assert.ok(reloadSession, 'needs the session of the reload test');
  const page = await context.newPage();
  page.setDefaultTimeout(15000);
  page.on('pageerror', (err) => pageErrors.push(String(err)));
  await page.setViewportSize({ width: 1280, height: 520 });
  await page.goto(`${baseUrl}?session=${encodeURIComponent(reloadSession)}&pageSize=40`);
  await page.waitForSelector('#status[data-state="connected"]');
  await page.waitForSelector('[data-testid="load-earlier"]:not([hidden])');

  // Only the newest page: the last 40 events, the second turn cut at its start.
  const newest = await shownSeqs(page);
  assert.equal(newest.last - newest.first + 1, 40, `shown ${JSON.stringify(newest)}`);
  assert.equal(await turnCount(page), 1);
  assert.ok(await page.$('[data-testid="turn"] [data-testid="partial-note"]'));
  // Its assistant/message is on the page, so the answer shows whole.
  assert.equal(await lastTurnText(page), chunksText(400, 8));
  assert.equal(await lastTurnSettled(page), 'ok');

  await page.click('[data-testid="load-earlier"]');
  // A page is 40 events. The transcript may also have asked for one itself
  // (a scroll near the top loads the next older page), so one or two pages.
  await page.waitForFunction((first) => Number(document.querySelector('.session-view').dataset.firstSeq) < first, newest.first);
  const loaded = newest.first - (await shownSeqs(page)).first;
  assert.ok(loaded === 40 || loaded === 80, `loaded ${loaded} events, expected whole pages of 40`);

  // Scrolling up to the top asks for the next older page.
  const before = (await shownSeqs(page)).first;
  await page.$eval('#transcript', (el) => { el.scrollTop = el.scrollHeight; });
  await page.waitForFunction(() => {
    const el = document.querySelector('#transcript');
    return el.scrollTop > 100 && el.scrollHeight - el.scrollTop - el.clientHeight < 2;
  });
  assert.equal((await shownSeqs(page)).first, before);
  await page.$eval('#transcript', (el) => { el.scrollTop = 0; });
  await page.waitForFunction((first) => Number(document.querySelector('.session-view').dataset.firstSeq) < first, before);

  // Page by page back to seq 0: both turns whole, nothing twice.
  while (await page.isVisible('[data-testid="load-earlier"]')) {
    const { first } = await shownSeqs(page);
    await page.click('[data-testid="load-earlier"]');
    await page.waitForFunction((f) => Number(document.querySelector('.session-view').dataset.firstSeq) < f
      || document.querySelector('[data-testid="load-earlier"]').hidden, first);
  }
  assert.equal((await shownSeqs(page)).first, 0);
  assert.equal(await turnCount(page), 2);
  assert.equal(await page.$('[data-testid="partial-note"]'), null);
  const prompts = await page.$$eval('[data-testid="turn"] [data-testid="user-text"]', (els) => els.map((e) => e.textContent));
  assert.deepEqual(prompts, ['hello before the reload', reloadPrompt]);
  assert.equal(await lastTurnText(page), chunksText(400, 8));
  await page.close();
});

test('a second tab streams the turns the first one starts, and the other way round', { skip: skipReason, timeout: 90000 }, async (t) => {
  if (needsHistory(t)) return;
  const tabA = await openPage();
  twoTabSession = await newSession(tabA);
  await sendPrompt(tabA, 'first words');
  assert.equal(await lastTurnSettled(tabA), 'ok');

  const tabB = await openPage(`?session=${encodeURIComponent(twoTabSession)}`);
  await tabB.waitForFunction(() => document.querySelectorAll('[data-testid="turn"]').length === 1);
  assert.equal(await lastTurnText(tabB), 'echo: first words');

  // A prompts; B, which only follows the session, streams the same turn.
  await sendPrompt(tabA, '@delay 10\n@chunks 150 8');
  await tabB.waitForSelector('[data-testid="turn"][data-phase="running"]');
  await tabB.waitForFunction(() => {
    const turns = document.querySelectorAll('[data-testid="turn"]');
    return turns.length === 2 && turns[1].dataset.phase === 'running' && turns[1].textContent.includes('cccc');
  });
  await tabB.screenshot({ path: path.join(screenshotDir, 'ui-second-tab.png') });
  const midway = (await lastTurnText(tabB)).length;
  assert.ok(midway < 150 * 8, `B saw the turn while it ran (${midway} bytes)`);
  assert.equal(await tabB.isDisabled('#cancel'), false);
  assert.equal(await lastTurnSettled(tabB), 'ok');
  assert.equal(await lastTurnText(tabB), chunksText(150, 8));
  assert.equal(await lastTurnSettled(tabA), 'ok');
  assert.equal(await lastTurnText(tabA), chunksText(150, 8));
  assert.match(await turnStatusText(tabB), /\bok\b/);

  // B prompts; A streams it.
  await sendPrompt(tabB, '@delay 5\n@chunks 40 4');
  await tabA.waitForFunction(() => document.querySelectorAll('[data-testid="turn"]').length === 3);
  assert.equal(await lastTurnSettled(tabA), 'ok');
  assert.equal(await lastTurnText(tabA), chunksText(40, 4));
  assert.equal(await lastTurnSettled(tabB), 'ok');
  assert.equal(await turnCount(tabA), 3);
  assert.equal(await turnCount(tabB), 3);

  // The tab that did not prompt can cancel the turn; both see it aborted.
  await sendPrompt(tabA, '@delay 300\n@chunks 20 4');
  await tabB.waitForFunction(() => {
    const turns = document.querySelectorAll('[data-testid="turn"]');
    return turns.length === 4 && turns[3].textContent.includes('aaaa');
  });
  await tabB.click('#cancel');
  assert.equal(await lastTurnSettled(tabB), 'aborted');
  assert.equal(await lastTurnSettled(tabA), 'aborted');
  assert.match(await turnStatusText(tabA), /\baborted\b/);
  await tabA.waitForSelector('#send:not([disabled])');
  await tabB.close();
  await tabA.close();
});

test('a connection lost mid-turn: the turn runs on and the page follows it again', { skip: skipReason, timeout: 60000 }, async (t) => {
  if (needsHistory(t)) return;
  const page = await context.newPage();
  page.setDefaultTimeout(15000);
  page.on('pageerror', (err) => pageErrors.push(String(err)));
  // The page's WebSockets pass through a route, so the test can cut one.
  const sockets = [];
  await page.routeWebSocket(() => true, (ws) => {
    sockets.push(ws);
    ws.connectToServer();
  });
  await page.goto(baseUrl);
  await page.waitForSelector('#status[data-state="connected"]');
  await newSession(page);

  await sendPrompt(page, '@delay 8\n@chunks 300 8');
  await page.waitForFunction(() => {
    const turns = document.querySelectorAll('[data-testid="turn"]');
    return turns.length === 1 && turns[0].textContent.includes('cccc');
  });
  assert.equal(sockets.length, 1);
  await sockets[0].close();
  // The daemon keeps the turn (onDisconnect: "continue"); the page says so, reconnects and follows it.
  await page.waitForSelector('[data-testid="turn"] .badge[data-status="running"]:text("detached")');
  assert.equal(await page.isHidden('#error-banner'), true);
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="turn"][data-status]').length === 1, null, { timeout: 30000 });
  assert.ok(sockets.length >= 2, 'the page reconnected');
  assert.equal(await lastTurnSettled(page), 'ok');
  assert.equal(await lastTurnText(page), chunksText(300, 8), 'every chunk once, in order');
  assert.match(await turnStatusText(page), /\bok\b/);
  await page.close();
});

test('the sidebar lists the sessions with running state and subagent lineage', { skip: skipReason, timeout: 90000 }, async (t) => {
  if (needsHistory(t)) return;
  assert.ok(sessionId && reloadSession && twoTabSession, 'needs the sessions of the earlier tests');
  const page = await openPage(`?session=${encodeURIComponent(sessionId)}&listPageSize=2`);
  const items = () => page.$$eval('[data-testid="session-item"]', (els) => els.map((e) => e.dataset.session));
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="session-item"]').length >= 2);

  // Two per page: the rest come with "More sessions".
  assert.equal(await page.isVisible('[data-testid="more-sessions"]'), true);
  while (await page.isVisible('[data-testid="more-sessions"]')) {
    const n = (await items()).length;
    await page.click('[data-testid="more-sessions"]');
    await page.waitForFunction((k) => document.querySelectorAll('[data-testid="session-item"]').length > k
      || document.querySelector('[data-testid="more-sessions"]').hidden, n);
  }
  const listed = await items();
  for (const id of [sessionId, reloadSession, twoTabSession]) assert.ok(listed.includes(id), `${id} listed: ${listed}`);

  // The subagent's session sits under its parent.
  const child = listed.find((id) => id.startsWith(`${sessionId}.sub-`));
  assert.ok(child, `a child of ${sessionId} in ${listed}`);
  const lineage = await page.$eval(`[data-testid="session-item"][data-session="${child}"]`, (el) => ({
    parent: el.dataset.parent,
    under: el.closest('.session-children')?.parentElement.querySelector(':scope > [data-testid="session-item"]')?.dataset.session,
  }));
  assert.deepEqual(lineage, { parent: sessionId, under: sessionId });
  assert.equal(await page.getAttribute(`[data-session="${sessionId}"][data-testid="session-item"]`, 'aria-current'), 'true');

  // A turn running in another tab shows as running.
  const other = await openPage(`?session=${encodeURIComponent(twoTabSession)}`);
  await sendPrompt(other, '@delay 20\n@chunks 250 4');
  await other.waitForSelector('[data-testid="turn"][data-phase="running"]');
  await page.click('[data-testid="refresh-sessions"]');
  const runningItem = `[data-testid="session-item"][data-session="${twoTabSession}"][data-running="true"]`;
  await page.waitForSelector(runningItem);
  await page.screenshot({ path: path.join(screenshotDir, 'ui-sidebar.png') });
  assert.equal(await lastTurnSettled(other), 'ok');
  await page.click('[data-testid="refresh-sessions"]');
  await page.waitForSelector(`[data-testid="session-item"][data-session="${twoTabSession}"][data-running="false"]`);
  await other.close();

  // A click opens a session: here the subagent's, its transcript read from its log.
  await page.click(`[data-testid="session-item"][data-session="${child}"]`);
  await page.waitForFunction((id) => document.querySelector('#session-select').value === id
    && document.querySelectorAll('[data-testid="turn"]').length === 1, child);
  assert.equal(await lastTurnSettled(page), 'ok');
  assert.equal(await lastTurnText(page), 'aaaabbbbcccc');
  assert.equal(await page.textContent('[data-testid="turn"] [data-testid="user-text"]'), '@chunks 3 4');
  assert.ok(new URL(page.url()).searchParams.get('session') === child);
  await page.close();
});

// ---- the UI over https and wss (a second daemon with a TLS listener) ---------

const hasOpenssl = (() => {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();
const tlsSkipReason = skipReason
  || (!hasOpenssl ? 'needs the openssl CLI to make a certificate' : false);

let tlsServer = null;
let tlsServerLog = '';

const openssl = (args, input) => execFileSync('openssl', args, { input, stdio: ['pipe', 'pipe', 'pipe'] });

/**
 * A self-signed certificate for IP 127.0.0.1 in `dir`; returns its files and
 * the base64 SHA-256 of its SubjectPublicKeyInfo (what
 * --ignore-certificate-errors-spki-list takes).
 */
function makeCertificate(dir) {
  const cert = path.join(dir, 'wss-cert.pem');
  const key = path.join(dir, 'wss-key.pem');
  openssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2',
    '-subj', '/CN=harnessd browser test', '-addext', 'subjectAltName=IP:127.0.0.1',
    '-keyout', key, '-out', cert]);
  // openssl x509 -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64
  const pubkey = openssl(['x509', '-in', cert, '-pubkey', '-noout']);
  const der = openssl(['pkey', '-pubin', '-outform', 'der'], pubkey);
  const digest = openssl(['dgst', '-sha256', '-binary'], der);
  const spki = openssl(['base64', '-A'], digest).toString('ascii').trim();
  assert.match(spki, /^[A-Za-z0-9+/]{43}=$/, `SPKI hash: ${spki}`);
  return { cert, key, spki };
}

/** harnessd with only a wss:// listener; resolves to its https:// base URL. */
async function startTlsServer(cert, key) {
  const ready = path.join(tmp, `ready-wss-${Date.now()}.json`);
  const args = ['--listen', 'wss://127.0.0.1:0', '--tls-cert', cert, '--tls-key', key,
    '--ready-file', ready, '--store', 'memory'];
  if (process.env.HARNESSD_ARGS) args.push(...process.env.HARNESSD_ARGS.split(/\s+/).filter(Boolean));
  const proc = spawn(path.resolve(harnessdBin), args, { cwd: repo, stdio: ['ignore', 'pipe', 'pipe'] });
  tlsServer = proc;
  proc.stdout.on('data', (d) => { tlsServerLog += d; });
  proc.stderr.on('data', (d) => { tlsServerLog += d; });
  let exited = null;
  proc.on('exit', (code, sig) => { exited = `exited with ${code ?? sig}`; });
  const deadline = Date.now() + 20000;
  for (;;) {
    if (fs.existsSync(ready)) {
      try {
        const { listen } = JSON.parse(fs.readFileSync(ready, 'utf8'));
        const wss = listen.find((u) => u.startsWith('wss://'));
        assert.ok(wss, `no wss:// entry in ready file: ${JSON.stringify(listen)}`);
        return `https://127.0.0.1:${new URL(wss).port}/`;
      } catch (err) {
        if (err instanceof assert.AssertionError) throw err;
      }
    }
    if (exited) throw new Error(`harnessd (wss) ${exited} before it was ready:\n${tlsServerLog}`);
    if (Date.now() > deadline) throw new Error(`harnessd (wss) not ready after 20 s:\n${tlsServerLog}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function stopTlsServer() {
  const proc = tlsServer;
  tlsServer = null;
  if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
  const gone = new Promise((r) => proc.once('exit', r));
  proc.kill('SIGTERM');
  const timer = setTimeout(() => proc.kill('SIGKILL'), 5000);
  await gone;
  clearTimeout(timer);
}

test('over https the page connects with wss and streams @chunks 20 8', { skip: tlsSkipReason, timeout: 90000 }, async () => {
  const dir = fs.mkdtempSync(path.join(tmp, 'tls-'));
  const { cert, key, spki } = makeCertificate(dir);
  const httpsUrl = await startTlsServer(cert, key);
  const origin = new URL(httpsUrl).origin;

  // A browser without the certificate's key on its list refuses the page.
  const untrusting = await browser.newContext();
  const refused = await untrusting.newPage();
  await assert.rejects(refused.goto(httpsUrl), /ERR_CERT_AUTHORITY_INVALID/);
  await untrusting.close();

  // A dedicated browser trusts exactly this certificate's public key; every
  // other certificate error still stops it (no ignoreHTTPSErrors).
  const tlsBrowser = await chromium.launch({
    executablePath: chromiumBin,
    headless: true,
    args: [...CHROMIUM_ARGS, `--ignore-certificate-errors-spki-list=${spki}`],
  });
  try {
    const ctx = await tlsBrowser.newContext({ viewport: { width: 1280, height: 860 } });
    if (fromDisk) await routeWebFromDisk(ctx, origin);
    const page = await ctx.newPage();
    page.setDefaultTimeout(15000);
    const errors = [];
    page.on('pageerror', (err) => errors.push(String(err)));
    page.on('console', (msg) => { if (msg.type() === 'error') errors.push(`console: ${msg.text()}`); });
    const sockets = [];
    page.on('websocket', (ws) => sockets.push(ws.url()));

    const res = await page.goto(httpsUrl);
    assert.equal(res.status(), 200, `GET ${httpsUrl}`);
    assert.equal(await page.title(), 'harnessd');
    // A page routed from disk has no TLS details of its own: then ask the daemon's /healthz.
    let tlsRes = res;
    if (fromDisk) {
      const probe = await ctx.newPage();
      tlsRes = await probe.goto(`${origin}/healthz`);
      assert.equal(tlsRes.status(), 200, 'GET /healthz');
    }
    const security = await tlsRes.securityDetails();
    assert.ok(security, 'the page came over TLS');
    assert.match(security.protocol, /^TLS 1\.[23]$/);
    assert.equal(security.subjectName, 'harnessd browser test');
    await page.waitForSelector('#status[data-state="connected"]');
    assert.deepEqual(sockets, [`wss://127.0.0.1:${new URL(httpsUrl).port}/`]);
    assert.equal(await page.evaluate(() => location.protocol), 'https:');

    await page.click('#new-session');
    const id = await page.$eval('#session-select', (el) => el.value);
    assert.match(id, /^web-/);
    await sendPrompt(page, '@chunks 20 8');
    assert.equal(await lastTurnSettled(page), 'ok');
    assert.equal(await lastTurnText(page), chunksText(20, 8));
    assert.match(await turnStatusText(page), /\bok\b/);
    assert.equal(await page.isHidden('#error-banner'), true);
    assert.equal(sockets.length, 1, `one WebSocket: ${sockets}`);
    await page.screenshot({ path: path.join(screenshotDir, 'ui-wss.png') });
    assert.deepEqual(errors, []);
  } finally {
    await tlsBrowser.close().catch(() => {});
    await stopTlsServer();
  }
});

// ---- the UI behind nginx (deploy/nginx/harnessd.conf) --------------------------

const hasNginx = ['/usr/sbin/nginx', '/usr/bin/nginx'].some((p) => fs.existsSync(p));
const nginxSkipReason = tlsSkipReason
  || (!hasNginx ? 'needs nginx (scripts/install-deps.sh installs it)' : false);

/**
 * tests/deploy/nginx_stack.py: harnessd (default store) behind nginx, which
 * terminates TLS. Resolves to { url, origin, spki, stop }.
 */
async function startNginxStack() {
  const python = process.env.HARNESSD_PYTHON || '/usr/bin/python3';  // the one with pytest
  const proc = spawn(python, [path.join(repo, 'tests', 'deploy', 'nginx_stack.py')], {
    cwd: repo,
    env: { ...process.env, HARNESSD_BIN: path.resolve(harnessdBin) },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  let log = '';
  proc.stderr.on('data', (d) => { log += d; });
  const info = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`nginx stack not up after 30 s:\n${log}`)), 30000);
    proc.stdout.on('data', (d) => {
      out += d;
      if (out.includes('\n')) {
        clearTimeout(timer);
        resolve(JSON.parse(out.slice(0, out.indexOf('\n'))));
      }
    });
    proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`nginx stack exited ${code}:\n${log}`)); });
  });
  const stop = async () => {
    if (proc.exitCode !== null || proc.signalCode !== null) return log;
    const gone = new Promise((r) => proc.once('exit', r));
    proc.stdin.end();
    const timer = setTimeout(() => proc.kill('SIGKILL'), 15000);
    await gone;
    clearTimeout(timer);
    return log;
  };
  return { ...info, stop };
}

test('behind nginx the page streams over wss and a reload mid-turn follows the turn', { skip: nginxSkipReason, timeout: 90000 }, async (t) => {
  if (needsHistory(t)) return;
  const stack = await startNginxStack();
  const proxyBrowser = await chromium.launch({
    executablePath: chromiumBin,
    headless: true,
    args: [...CHROMIUM_ARGS, `--ignore-certificate-errors-spki-list=${stack.spki}`],
  });
  try {
    const ctx = await proxyBrowser.newContext({ viewport: { width: 1280, height: 860 } });
    if (fromDisk) await routeWebFromDisk(ctx, stack.origin);
    const page = await ctx.newPage();
    page.setDefaultTimeout(15000);
    const errors = [];
    page.on('pageerror', (err) => errors.push(String(err)));
    page.on('console', (msg) => { if (msg.type() === 'error') errors.push(`console: ${msg.text()}`); });
    const sockets = [];
    page.on('websocket', (ws) => sockets.push(ws.url()));

    const res = await page.goto(stack.url);
    assert.equal(res.status(), 200, `GET ${stack.url}`);
    await page.waitForSelector('#status[data-state="connected"]');
    assert.deepEqual(sockets, [`wss://${new URL(stack.url).host}/`], 'the page\'s WebSocket goes through the proxy');

    await newSession(page);
    await sendPrompt(page, '@chunks 20 8');
    assert.equal(await lastTurnSettled(page), 'ok');
    assert.equal(await lastTurnText(page), chunksText(20, 8));

    // A reload mid-turn: the new page reads the log and re-attaches through the proxy.
    await sendPrompt(page, '@delay 8\n@chunks 300 8');
    await page.waitForFunction(() => {
      const turns = document.querySelectorAll('[data-testid="turn"]');
      return turns.length === 2 && turns[1].textContent.includes('dddd');
    });
    await page.reload();
    await page.waitForSelector('#status[data-state="connected"]');
    await page.waitForSelector('[data-testid="turn"][data-phase="running"]');
    assert.equal(await lastTurnSettled(page), 'ok');
    assert.equal(await lastTurnText(page), chunksText(300, 8), 'every chunk once, in order');
    assert.equal(await turnCount(page), 2);
    assert.equal(await page.isHidden('#error-banner'), true);
    await page.screenshot({ path: path.join(screenshotDir, 'ui-nginx.png') });
    assert.deepEqual(errors, []);
  } catch (err) {
    await proxyBrowser.close().catch(() => {});
    err.message += `\n--- harnessd and nginx ---\n${await stack.stop()}`;
    throw err;
  } finally {
    await proxyBrowser.close().catch(() => {});
    await stack.stop();
  }
});

// ---- a hostile page against the NDJSON port ------------------------------------

/** One JSON-RPC exchange over a fresh TCP connection: the answers to `requests`. */
async function tcpRequests(port, requests) {
  const net = await import('node:net');
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    let buf = '';
    const answers = [];
    const timer = setTimeout(() => { sock.destroy(); reject(new Error(`no answer from tcp ${port}: ${buf}`)); }, 10000);
    sock.on('data', (d) => {
      buf += d;
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        answers.push(JSON.parse(buf.slice(0, nl)));
        buf = buf.slice(nl + 1);
      }
      if (answers.length === requests.length) {
        clearTimeout(timer);
        sock.end();
        resolve(answers);
      }
    });
    sock.on('error', reject);
    for (const r of requests) sock.write(JSON.stringify({ jsonrpc: '2.0', ...r }) + '\n');
  });
}

test('a page of another origin that posts to the TCP port creates no session', { skip: skipReason, timeout: 60000 }, async () => {
  const http = await import('node:http');
  const ready = path.join(tmp, `ready-tcp-${Date.now()}.json`);
  const daemon = spawn(path.resolve(harnessdBin), ['--listen', 'tcp://127.0.0.1:0', '--ready-file', ready,
    '--session-root', path.join(tmp, 'sessions-hostile')], { cwd: repo, stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  daemon.stderr.on('data', (d) => { log += d; });
  const evil = http.createServer();
  let hostile = null;
  try {
    const deadline = Date.now() + 20000;
    while (!fs.existsSync(ready)) {
      assert.ok(Date.now() < deadline, `harnessd not ready: ${log}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const tcpPort = Number(JSON.parse(fs.readFileSync(ready, 'utf8')).listen[0].split(':').pop());
    // The attacker's page, on an origin of its own, posts JSON-RPC lines as a
    // no-cors text/plain body: a "simple" request that needs no preflight.
    const body = [
      { jsonrpc: '2.0', id: 1, method: 'initialize', params: { onDisconnect: 'continue' } },
      { jsonrpc: '2.0', id: 2, method: 'session/prompt', params: { sessionId: 'victim', contentBlocks: [{ type: 'text', text: 'pwned' }] } },
    ].map((m) => JSON.stringify(m) + '\n').join('');
    evil.on('request', (req, res) => {
      res.setHeader('Content-Type', 'text/html');
      res.end(`<!doctype html><script>
        window.attack = fetch('http://127.0.0.1:${tcpPort}/', { method: 'POST', mode: 'no-cors',
          headers: { 'Content-Type': 'text/plain' }, body: ${JSON.stringify(body)} })
          .then(() => 'answered', (e) => 'failed: ' + e);
      </script>`);
    });
    await new Promise((r) => evil.listen(0, '127.0.0.1', r));
    hostile = await browser.newContext();
    const page = await hostile.newPage();
    await page.goto(`http://localhost:${evil.address().port}/`);
    const outcome = await page.evaluate(() => window.attack);
    // The daemon closed the connection without a byte: the fetch fails.
    assert.match(outcome, /^failed/, `the page read an answer from the TCP port: ${outcome}`);
    await new Promise((r) => setTimeout(r, 300));
    const [init, list] = await tcpRequests(tcpPort, [
      { id: 1, method: 'initialize', params: {} }, { id: 2, method: 'session/list', params: {} }]);
    assert.ok(init.result, JSON.stringify(init));
    assert.deepEqual(list.result.sessions.map((s) => s.sessionId), [], 'the hostile page created a session');
    assert.match(log, /HTTP request on a JSON-RPC listener/);
  } finally {
    await hostile?.close().catch(() => {});
    evil.close();
    daemon.kill('SIGTERM');
  }
});

// ---- tool calls (the scripted provider's @tool lines run real tools) ----------

/** The cards of the newest top-level turn, by tool name. */
const lastTurnCards = (page, name) => page.$$(`[data-testid="turn"]:last-child [data-testid="tool-call"][data-name="${name}"]`);

/**
 * Over WebSocket the daemon's default approval policy is `ask`: a call of
 * `tool` that may change something waits on its approval card. Clicks
 * `outcome`'s button on the newest turn's live card of that tool.
 */
async function decideNext(page, tool, outcome = 'allowed-once') {
  const card = `[data-testid="turn"]:last-child [data-testid="approval-card"][data-state="pending"][data-tool="${tool}"]`;
  await page.click(`${card} button[data-outcome="${outcome}"]`);
}

test('tool calls show as cards: arguments, diffs, bash output, errors, folding and the todo checklist', {
  skip: skipReason, timeout: 90000,
}, async (t) => {
  const page = await openPage();
  await page.setViewportSize({ width: 1280, height: 1500 });
  const id = await newSession(page);

  // write: a fresh file needs no read; the card shows the file and a diff of added lines.
  await sendPrompt(page, '@tool write {"file_path":"notes/a.txt","content":"one\\ntwo\\nthree\\n"}');
  await decideNext(page, 'write');
  assert.equal(await lastTurnSettled(page), 'ok');
  const [write] = await lastTurnCards(page, 'write');
  assert.ok(write, 'a write card');
  assert.equal(await write.getAttribute('data-state'), 'ok');
  assert.match(await write.$eval('summary', (el) => el.textContent), /write\s*notes\/a\.txt/);
  assert.match(await write.$eval('.tool-args', (el) => el.textContent), /"file_path": "notes\/a\.txt"/);
  const added = await write.$$eval('[data-testid="diff"] .diff-add', (els) => els.map((e) => e.textContent));
  assert.deepEqual(added, ['+one', '+two', '+three']);
  assert.match(await lastTurnText(page), /^write said: /);
  assert.equal(fs.readFileSync(path.join(workspaceRoot, id, 'notes', 'a.txt'), 'utf8'), 'one\ntwo\nthree\n');

  // read, then edit in the same step: the diff removes one line and adds one.
  await sendPrompt(page, '@tool read {"file_path":"notes/a.txt"}\n'
    + '@tool edit {"file_path":"notes/a.txt","old_string":"two","new_string":"TWO"}');
  await decideNext(page, 'edit');
  assert.equal(await lastTurnSettled(page), 'ok');
  const [read] = await lastTurnCards(page, 'read');
  assert.equal(await read.getAttribute('data-state'), 'ok');
  assert.equal(await read.evaluate((el) => el.open), false, 'a read card closes once it has its result');
  const [edit] = await lastTurnCards(page, 'edit');
  assert.equal(await edit.getAttribute('data-state'), 'ok');
  const kinds = await edit.$$eval('[data-testid="diff"] .diff-line', (els) => els.map((e) => [e.dataset.kind, e.textContent]));
  assert.deepEqual(kinds.filter(([k]) => k === 'del' || k === 'add'), [['del', '-two'], ['add', '+TWO']]);
  assert.ok(kinds.some(([k]) => k === 'hunk'), 'a hunk header');
  assert.deepEqual(await edit.$$eval('.tool-stats span', (els) => els.map((e) => e.textContent)), ['+1', '−1']);
  // Diff lines are coloured by class, not by markup from the daemon.
  const [addBg, ctxBg] = await edit.$$eval('.diff-add, .diff-ctx', (els) => els.slice(0, 2).map((e) => getComputedStyle(e).backgroundColor));
  assert.notEqual(addBg, ctxBg);

  // A long write folds its diff (closed details) until opened.
  const long = Array.from({ length: 30 }, (_, i) => `line ${i + 1}`).join('\\n');
  await sendPrompt(page, `@tool write {"file_path":"notes/long.txt","content":"${long}\\n"}`);
  await decideNext(page, 'write');
  assert.equal(await lastTurnSettled(page), 'ok');
  const [longWrite] = await lastTurnCards(page, 'write');
  const fold = await longWrite.$('[data-testid="fold"]');
  assert.ok(fold, 'a 30-line diff is folded');
  assert.equal(await fold.evaluate((el) => el.open), false);
  assert.match(await fold.$eval('summary', (el) => el.textContent), /\d+ lines$/);
  assert.equal(await longWrite.$eval('.diff-add', (el) => el.checkVisibility()), false);
  await fold.$eval('summary', (el) => el.click());
  assert.equal(await longWrite.$eval('.diff-add', (el) => el.checkVisibility()), true);
  assert.equal(await longWrite.$$eval('.diff-add', (els) => els.length), 30);
  await fold.$eval('summary', (el) => el.click());

  // bash: an exit-code card, or (no bubblewrap here) the SANDBOX_UNAVAILABLE error card.
  await sendPrompt(page, '@tool bash {"command":"echo hi; exit 3","description":"x"}');
  await decideNext(page, 'bash');
  assert.equal(await lastTurnSettled(page), 'ok');
  const [bash] = await lastTurnCards(page, 'bash');
  assert.equal(await bash.$eval('[data-testid="tool-command"]', (el) => el.textContent), 'echo hi; exit 3');
  if (await bash.getAttribute('data-error-code')) {
    t.diagnostic(`bash: ${await bash.getAttribute('data-error-code')}`);
    assert.equal(await bash.getAttribute('data-error-code'), 'SANDBOX_UNAVAILABLE');
    assert.match(await bash.$eval('[data-testid="tool-error"]', (el) => el.textContent), /SANDBOX_UNAVAILABLE/);
  } else {
    assert.equal(await bash.getAttribute('data-exit-code'), '3');
    assert.equal(await bash.$eval('[data-testid="exit-code"]', (el) => el.textContent), 'exit 3');
    assert.match(await bash.$eval('.tool-result pre', (el) => el.textContent), /^hi\n?$/);
  }

  // An error result: highlighted, with its error.code.
  await sendPrompt(page, '@tool read {"file_path":"missing.txt"}');
  assert.equal(await lastTurnSettled(page), 'ok');
  const [missing] = await lastTurnCards(page, 'read');
  assert.equal(await missing.getAttribute('data-state'), 'error');
  assert.equal(await missing.getAttribute('data-error-code'), 'NOT_FOUND');
  assert.equal(await missing.evaluate((el) => el.open), true, 'an error card stays open');
  assert.equal(await missing.$eval('.error-code', (el) => el.textContent), 'NOT_FOUND');
  assert.ok(await missing.evaluate((el) => el.classList.contains('is-error')));

  // todo_write: the checklist panel follows the latest list, live.
  const todos = (s1, s2, s3) => `@tool todo_write {"todos":[{"content":"Write the notes","status":"${s1}"},`
    + `{"content":"Edit the second line","status":"${s2}"},{"content":"Run the checks","status":"${s3}"}]}`;
  assert.equal(await page.isHidden('[data-testid="todo-panel"]'), true);
  await sendPrompt(page, todos('completed', 'in_progress', 'pending'));
  assert.equal(await lastTurnSettled(page), 'ok');
  const panelTodos = () => page.$$eval('[data-testid="todo-panel"] [data-testid="todo"]',
    (els) => els.map((e) => [e.dataset.status, e.querySelector('.todo-text').textContent]));
  assert.deepEqual(await panelTodos(), [
    ['completed', 'Write the notes'], ['in_progress', 'Edit the second line'], ['pending', 'Run the checks']]);
  assert.equal(await page.textContent('[data-testid="todo-count"]'), '1/3 done');
  const [todoCard] = await lastTurnCards(page, 'todo_write');
  assert.equal(await todoCard.$$eval('[data-testid="todo"]', (els) => els.length), 3);

  await sendPrompt(page, todos('completed', 'completed', 'in_progress'));
  await page.waitForFunction(() => document.querySelector('[data-testid="todo-count"]')?.textContent === '2/3 done');
  assert.equal(await lastTurnSettled(page), 'ok');
  // The picture: from the edit's diff down to the checklist panel.
  await edit.scrollIntoViewIfNeeded();
  await edit.evaluate((el) => el.closest('[data-testid="turn"]').scrollIntoView({ block: 'start' }));
  await page.screenshot({ path: path.join(screenshotDir, 'ui-tools.png') });
  // And from the command's card down: its exit code (or the sandbox's error), the NOT_FOUND card, the todos.
  await bash.evaluate((el) => el.closest('[data-testid="turn"]').scrollIntoView({ block: 'start' }));
  await page.screenshot({ path: path.join(screenshotDir, 'ui-tools-bash.png') });

  // After a reload the cards and the checklist come back from session/events.
  if (storeKind !== 'memory') {
    t.diagnostic('reloading: the cards and the checklist from session/events');
    await page.reload();
    await page.waitForSelector('#status[data-state="connected"]');
    await page.waitForFunction(() => document.querySelector('[data-testid="todo-count"]')?.textContent === '2/3 done');
    assert.deepEqual((await panelTodos()).map(([s]) => s), ['completed', 'completed', 'in_progress']);
    await page.waitForSelector('[data-testid="tool-call"][data-name="edit"] .diff-del');
    assert.equal(await page.$$eval('[data-testid="tool-call"]', (els) => els.length), 8);
    assert.equal(await page.$eval('[data-testid="tool-call"][data-error-code="NOT_FOUND"] .error-code', (el) => el.textContent), 'NOT_FOUND');
  }
  // Nothing from the daemon became markup.
  assert.equal(await page.$$eval('.transcript script, .transcript img', (els) => els.length), 0);
  assert.deepEqual(pageErrors.filter((e) => !/WebSocket connection to .* failed/.test(e)), []);
  await page.close();
});

// ---- approvals and questions: any tab of the session can answer -------------

const APPROVAL = '[data-testid="approval-card"]';
const QUESTION = '[data-testid="question-card"]';

test('an approval asked in one tab is given from a second tab opened while the turn waits', {
  skip: skipReason, timeout: 90000,
}, async (t) => {
  if (needsHistory(t)) return;
  const tabA = await openPage();
  const id = await newSession(tabA);
  const target = path.join(workspaceRoot, id, 'approved.txt');
  await sendPrompt(tabA, '@tool write {"file_path":"approved.txt","content":"from tab B\\nsecond line\\n"}');
  await tabA.waitForSelector(`${APPROVAL}[data-state="pending"]`);
  // The card sits inside the write's tool card, and the call has not run.
  assert.equal(await tabA.$eval(APPROVAL, (el) => el.closest('[data-testid="tool-call"]')?.dataset.name), 'write');
  assert.equal(fs.existsSync(target), false, 'the write ran before it was allowed');

  // B opens the session after the request: it rebuilds the card from the log and the subscription.
  const tabB = await openPage(`?session=${encodeURIComponent(id)}`);
  const cardB = await tabB.waitForSelector(`${APPROVAL}[data-state="pending"]`);
  assert.equal(await cardB.$eval('[data-testid="approval-tool"]', (el) => el.textContent), 'write');
  assert.ok((await cardB.$eval('[data-testid="approval-reason"]', (el) => el.textContent)).length > 0, 'a reason');
  assert.deepEqual(await cardB.$$eval('.diff-add', (els) => els.map((e) => e.textContent)), ['+from tab B', '+second line']);
  assert.equal(await cardB.$$eval('button:disabled', (els) => els.length), 0);
  // The sidebar (session/list's `waiting`) says the session needs a decision.
  assert.equal(await tabB.textContent(`[data-testid="session-item"][data-session="${id}"] .badge[data-status="waiting"]`),
    'needs approval');
  await cardB.scrollIntoViewIfNeeded();
  await tabB.screenshot({ path: path.join(screenshotDir, 'approval-card.png') });

  await tabB.click(`${APPROVAL} button[data-outcome="allowed-once"]`);
  // Both tabs show the outcome and disable the card; A's turn ends with the tool's result.
  for (const tab of [tabA, tabB]) {
    await tab.waitForSelector(`${APPROVAL}[data-state="resolved"][data-outcome="allowed-once"]`);
    assert.equal(await tab.$$eval(`${APPROVAL} button:not(:disabled)`, (els) => els.length), 0);
    assert.match(await tab.$eval(`${APPROVAL} [data-testid="decision-outcome"]`, (el) => el.textContent), /allowed once/);
  }
  assert.equal(await lastTurnSettled(tabA), 'ok');
  const [write] = await lastTurnCards(tabA, 'write');
  assert.equal(await write.getAttribute('data-state'), 'ok');
  assert.match(await lastTurnText(tabA), /^write said: /);
  assert.equal(fs.readFileSync(target, 'utf8'), 'from tab B\nsecond line\n');

  // A settled card that is made clickable again gets the daemon's not-pending error, shown inline.
  await tabB.$eval(`${APPROVAL} button[data-outcome="rejected"]`, (el) => { el.disabled = false; el.click(); });
  await tabB.waitForSelector(`${APPROVAL} [data-testid="decision-error"]:not([hidden])`);
  assert.match(await tabB.$eval(`${APPROVAL} [data-testid="decision-error"]`, (el) => el.textContent), /no longer pending/i);

  // A rejection with a message: the call does not run and the model reads why.
  await sendPrompt(tabA, '@tool edit {"file_path":"approved.txt","old_string":"second","new_string":"2nd"}');
  const edit = `[data-testid="turn"]:last-child ${APPROVAL}[data-tool="edit"]`;
  await tabA.waitForSelector(`${edit}[data-state="pending"]`);
  assert.deepEqual(await tabA.$$eval(`${edit} .diff-line`, (els) => els.map((e) => [e.dataset.kind, e.textContent]))
    .then((rows) => rows.filter(([k]) => k === 'add' || k === 'del')), [['del', '-second'], ['add', '+2nd']]);
  await tabA.fill(`${edit} [data-testid="approval-message"]`, 'keep the long word');
  await tabA.click(`${edit} button[data-outcome="rejected"]`);
  await tabB.waitForSelector(`[data-testid="turn"]:last-child ${APPROVAL}[data-outcome="rejected"]`);
  assert.equal(await lastTurnSettled(tabA), 'ok');
  const [rejected] = await lastTurnCards(tabA, 'edit');
  assert.equal(await rejected.getAttribute('data-error-code'), 'REJECTED');
  assert.match(await rejected.textContent(), /keep the long word/);
  assert.equal(fs.readFileSync(target, 'utf8'), 'from tab B\nsecond line\n');
  await tabB.close();
  await tabA.close();
});

test('a question is answered through its form, after a reload while it waits', {
  skip: skipReason, timeout: 90000,
}, async (t) => {
  if (needsHistory(t)) return;
  const page = await openPage();
  const id = await newSession(page);
  const questions = [
    { id: 'db', question: 'Which database?', header: 'Storage',
      options: [{ label: 'Postgres', description: 'shared, needs a server' }, { label: 'SQLite', description: 'one file' }] },
    { id: 'extras', question: 'What else?', options: [{ label: 'tests' }, { label: 'docs' }], multi_select: true },
    { id: 'name', question: 'Project name?' },
  ];
  await sendPrompt(page, `@tool ask_user_question ${JSON.stringify({ questions })}`);
  await page.waitForSelector(`${QUESTION}[data-state="pending"]`);
  // The form is rebuilt from session/events after a reload; the turn waits on.
  await page.reload();
  await page.waitForSelector('#status[data-state="connected"]');
  const card = await page.waitForSelector(`${QUESTION}[data-state="pending"]`);
  assert.equal(await page.$eval(`${QUESTION} legend`, (el) => el.textContent), 'Storage');
  assert.deepEqual(await card.$$eval('[data-question="db"] input[type="radio"]', (els) => els.map((e) => e.value)), ['Postgres', 'SQLite']);
  assert.deepEqual(await card.$$eval('[data-question="extras"] input[type="checkbox"]', (els) => els.map((e) => e.value)), ['tests', 'docs']);
  assert.match(await card.$eval('[data-question="db"]', (el) => el.textContent), /one file/);
  await page.check(`${QUESTION} [data-question="db"] input[value="SQLite"]`);
  await page.check(`${QUESTION} [data-question="extras"] input[value="tests"]`);
  await page.check(`${QUESTION} [data-question="extras"] input[value="docs"]`);
  await page.fill(`${QUESTION} [data-question="name"] [data-testid="question-custom"]`, '<b>harness</b> ✓');
  await card.scrollIntoViewIfNeeded();
  await page.screenshot({ path: path.join(screenshotDir, 'question-card.png') });
  await page.click(`${QUESTION} button[type="submit"]`);
  await page.waitForSelector(`${QUESTION}[data-state="resolved"][data-outcome="answered"]`);
  assert.equal(await page.$$eval(`${QUESTION} input:not(:disabled), ${QUESTION} button:not(:disabled)`, (els) => els.length), 0);
  assert.equal(await lastTurnSettled(page), 'ok');
  const [ask] = await lastTurnCards(page, 'ask_user_question');
  const result = JSON.parse(await ask.$eval('.tool-result pre', (el) => el.textContent));
  assert.deepEqual(result, [{ id: 'db', selected: ['SQLite'] }, { id: 'extras', selected: ['tests', 'docs'] },
    { id: 'name', selected: [], custom: '<b>harness</b> ✓' }]);
  assert.equal(await page.$$eval('.transcript b', (els) => els.length), 0);

  // Skip declines: the answers are [].
  await sendPrompt(page, `@tool ask_user_question ${JSON.stringify({ questions: questions.slice(0, 1) })}`);
  await page.click(`[data-testid="turn"]:last-child ${QUESTION}[data-state="pending"] [data-testid="question-skip"]`);
  await page.waitForSelector(`[data-testid="turn"]:last-child ${QUESTION}[data-state="resolved"]`);
  assert.equal(await lastTurnSettled(page), 'ok');
  const [declined] = await lastTurnCards(page, 'ask_user_question');
  assert.deepEqual(JSON.parse(await declined.$eval('.tool-result pre', (el) => el.textContent)), []);
  await page.close();
});

// A daemon of its own: the window is a setting of the daemon (or of
// initialize, which the UI does not send), and the other tests need a large one.
async function startSmallWindowDaemon(dir) {
  const ready = path.join(dir, 'ready.json');
  const args = ['--listen', 'ws://127.0.0.1:0', '--ready-file', ready, '--store', 'jsonl',
    '--session-root', path.join(dir, 'sessions'), '--workspace-root', path.join(dir, 'workspaces'),
    '--context-window', '1000'];
  if (process.env.HARNESSD_ARGS) args.push(...process.env.HARNESSD_ARGS.split(/\s+/).filter(Boolean));
  const proc = spawn(path.resolve(harnessdBin), args, { cwd: repo, stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  proc.stdout.on('data', (d) => { log += d; });
  proc.stderr.on('data', (d) => { log += d; });
  let exited = null;
  proc.on('exit', (code, sig) => { exited = `exited with ${code ?? sig}`; });
  const stop = async () => {
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    const gone = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGTERM');
    const timer = setTimeout(() => proc.kill('SIGKILL'), 5000);
    await gone;
    clearTimeout(timer);
  };
  const deadline = Date.now() + 20000;
  for (;;) {
    if (fs.existsSync(ready)) {
      try {
        const { listen } = JSON.parse(fs.readFileSync(ready, 'utf8'));
        const ws = listen.find((u) => u.startsWith('ws://'));
        if (ws) return { url: `http://127.0.0.1:${new URL(ws).port}/`, stop };
      } catch {
        // Partially written file: read again.
      }
    }
    if (exited) throw new Error(`harnessd (--context-window 1000) ${exited} before it was ready:\n${log}`);
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`harnessd (--context-window 1000) not ready after 20 s:\n${log}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

test('context notes: the request header, workspace instructions and a compaction divider', {
  skip: skipReason, timeout: 90000,
}, async (t) => {
  if (storeKind === 'memory') {
    t.skip('--store memory keeps no events to read back');
    return;
  }
  const dir = fs.mkdtempSync(path.join(tmp, 'compaction-'));
  fs.mkdirSync(path.join(dir, 'workspaces'));
  // Workspace text is as untrusted as the model's: it must show as text.
  fs.writeFileSync(path.join(dir, 'workspaces', 'AGENTS.md'), 'Answer <b>briefly</b>.\n');
  const daemon = await startSmallWindowDaemon(dir);
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  try {
    if (fromDisk) await routeWebFromDisk(ctx, new URL(daemon.url).origin);
    const page = await ctx.newPage();
    page.setDefaultTimeout(15000);
    page.on('pageerror', (err) => pageErrors.push(String(err)));
    await page.goto(daemon.url);
    await page.waitForSelector('#status[data-state="connected"]');
    await newSession(page);

    // Each prompt is ~1500 bytes (~375 tokens at 4 bytes a token) and echoed
    // back, so by the second turn the conversation is past 80 % of 1000 tokens.
    const prompt = (i) => `prompt ${i} ${'lorem ipsum dolor sit amet '.repeat(55)}`.trim();
    await sendPrompt(page, prompt(1));
    assert.equal(await lastTurnSettled(page), 'ok');
    const [first] = await page.$$('[data-testid="turn"]');
    // The header is a folded note of the first turn, and the answer still shows below it.
    const header = await first.waitForSelector('[data-testid="header-note"]');
    assert.match(await header.$eval('summary', (el) => el.textContent), /^Request header: \S.*, \d+ tools?$/);
    assert.equal(await header.evaluate((el) => el.open), false);
    assert.equal(await header.$eval('.context-prompt', (el) => el.checkVisibility()), false);
    await header.$eval('summary', (el) => el.click());
    assert.ok((await header.$eval('.context-prompt', (el) => el.textContent)).length > 0);
    assert.match(await lastTurnText(page), /^echo: prompt 1 lorem/);
    assert.equal(await first.$eval('.msg.assistant', (el) => el.hidden), false);
    const instructions = await first.waitForSelector('[data-testid="instructions-note"]');
    assert.match(await instructions.$eval('summary', (el) => el.textContent), /^Workspace instructions: .*AGENTS\.md$/);
    await instructions.$eval('summary', (el) => el.click());
    assert.equal(await instructions.$eval('pre', (el) => el.textContent), 'Answer <b>briefly</b>.\n');
    assert.equal(await page.$$eval('.transcript b, #transcript b', (els) => els.length), 0);

    for (const i of [2, 3]) {
      await sendPrompt(page, prompt(i));
      await page.waitForFunction((n) => document.querySelectorAll('[data-testid="turn"][data-status]').length === n, i);
      assert.equal(await lastTurnSettled(page), 'ok');
    }
    const divider = await page.waitForSelector('[data-testid="compaction"][data-state="done"]');
    assert.match(await divider.$eval('summary', (el) => el.textContent), /^Context compacted: [\d,]+ → [\d,]+ tokens$/);
    const summaryEl = await divider.$('[data-testid="compaction-summary"]');
    assert.equal(await summaryEl.isVisible(), false);
    await divider.$eval('summary', (el) => el.click());
    await page.waitForFunction((el) => el.checkVisibility(), summaryEl);
    assert.match(await summaryEl.textContent(), /scripted summary of \d+ messages/);
    // The turn that compacted answered as usual.
    const compactedTurn = await divider.evaluateHandle((el) => el.closest('[data-testid="turn"]'));
    assert.equal(await compactedTurn.evaluate((el) => el.dataset.status), 'ok');
    assert.match(await compactedTurn.evaluate((el) => el.querySelector('[data-testid="assistant-text"]').textContent), /^echo: prompt \d/);
    await divider.scrollIntoViewIfNeeded();
    await page.screenshot({ path: path.join(screenshotDir, 'compaction-divider.png') });

    // From the log after a reload: the same notes at the same places.
    const count = () => page.$$eval('[data-testid="compaction"]', (els) => els.length);
    const shown = await count();
    await page.reload();
    await page.waitForSelector('#status[data-state="connected"]');
    await page.waitForSelector('[data-testid="compaction"][data-state="done"]');
    assert.equal(await count(), shown);
    assert.equal(await page.$$eval('[data-testid="header-note"]', (els) => els.length), 1);
    await page.close();
  } finally {
    await ctx.close().catch(() => {});
    await daemon.stop();
  }
});

test('assistant Markdown renders safely: a code block, emphasis, and HTML kept as text', {
  skip: skipReason, timeout: 60000,
}, async () => {
  const page = await openPage();
  await newSession(page);
  // The scripted provider echoes the prompt's lines after "echo: ".
  const prompt = [
    'Here is **bold** text and a block:',
    '```js',
    'const x = 1 < 2;',
    '```',
    '<script>window.__pwned = 1</script>',
    '<img src="x" onerror="window.__pwned = 2">',
    '[a link](javascript:window.__pwned=3)',
  ].join('\n');
  await sendPrompt(page, prompt);
  assert.equal(await lastTurnSettled(page), 'ok');
  const last = '[data-testid="turn"]:last-child [data-testid="assistant-text"]';
  assert.equal(await page.$eval(`${last} strong`, (el) => el.textContent), 'bold');
  assert.equal((await page.$eval(`${last} pre > code`, (el) => el.textContent)).trim(), 'const x = 1 < 2;');
  // The model's HTML is text: no element from it, nothing ran, the characters are shown.
  const found = await page.$$eval('#transcript script, #transcript img, #transcript [onerror]', (els) => els.length);
  assert.equal(found, 0);
  const text = await page.$eval(last, (el) => el.textContent);
  assert.match(text, /<script>window\.__pwned = 1<\/script>/);
  assert.match(text, /<img src="x" onerror=/);
  const href = await page.$eval(`${last} a`, (el) => el.getAttribute('href')).catch(() => null);
  assert.ok(href === null || !/^javascript:/i.test(href), `link href ${href}`);
  await page.waitForTimeout(200);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  await page.$eval(last, (el) => el.scrollIntoView());
  await page.screenshot({ path: path.join(screenshotDir, 'markdown.png') });
  await page.close();
});

test('no uncaught errors in the page', { skip: skipReason }, () => {
  // A WebSocket refused while the server was down logs a console error; that is expected.
  const unexpected = pageErrors.filter((e) => !/WebSocket connection to .* failed/.test(e));
  assert.deepEqual(unexpected, []);
});
