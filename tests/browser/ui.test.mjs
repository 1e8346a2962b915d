// Browser test of the web UI (web/) as served by harnessd: Debian's headless
// Chromium driven by playwright-core, run with node's built-in test runner.
//
//   HARNESSD_BIN=build/release/harnessd node --test tests/browser/ui.test.mjs
//   BROWSER_TEST_PEER=node               node --test tests/browser/ui.test.mjs
//
// Env: HARNESSD_BIN (daemon to test), HARNESSD_ARGS (extra daemon args,
// space separated), BROWSER_TEST_PEER=node (use bench/peers/node-reference
// with --static web/ instead), CHROMIUM (default /usr/bin/chromium),
// SCREENSHOT_DIR (default tests/browser/out/).

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
const peerDir = path.join(repo, 'bench', 'peers', 'node-reference');
const screenshotDir = path.resolve(process.env.SCREENSHOT_DIR || path.join(here, 'out'));
const chromiumBin = process.env.CHROMIUM || '/usr/bin/chromium';
const useNodePeer = process.env.BROWSER_TEST_PEER === 'node';
const harnessdBin = process.env.HARNESSD_BIN;

const skipReason = !useNodePeer && !harnessdBin
  ? 'set HARNESSD_BIN=path/to/harnessd or BROWSER_TEST_PEER=node'
  : !fs.existsSync(chromiumBin) ? `no Chromium at ${chromiumBin} (apt-get install -y chromium)` : false;

const CHROMIUM_ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];

/** The scripted provider's `@chunks N BYTES` text: chunk i is 'a'+(i%26) repeated BYTES times. */
function chunksText(n, bytes) {
  let s = '';
  for (let i = 0; i < n; i++) s += String.fromCharCode(97 + (i % 26)).repeat(bytes);
  return s;
}

// ---- server under test ------------------------------------------------------

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'harnessd-browser-'));
let server = null;
let serverLog = '';
let wsPort = null;
let baseUrl = null;

async function startServer(port = 0) {
  const ready = path.join(tmp, `ready-${Date.now()}.json`);
  let cmd;
  let args;
  if (useNodePeer) {
    if (!fs.existsSync(path.join(peerDir, 'node_modules', 'ws'))) {
      execFileSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: peerDir, stdio: 'inherit' });
    }
    cmd = process.execPath;
    args = [path.join(peerDir, 'server.mjs'), '--ws', `127.0.0.1:${port}`,
      '--static', path.join(repo, 'web'), '--ready-file', ready];
  } else {
    cmd = path.resolve(harnessdBin);
    args = ['--listen', `ws://127.0.0.1:${port}`, '--ready-file', ready, '--store', 'memory'];
    if (process.env.HARNESSD_ARGS) args.push(...process.env.HARNESSD_ARGS.split(/\s+/).filter(Boolean));
  }
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

// ---- page helpers -------------------------------------------------------------

let browser = null;
let context = null;
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

// ---- tests ------------------------------------------------------------------

before(async () => {
  if (skipReason) return;
  fs.mkdirSync(screenshotDir, { recursive: true });
  await startServer();
  browser = await chromium.launch({ executablePath: chromiumBin, headless: true, args: CHROMIUM_ARGS });
  context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
});

after(async () => {
  await browser?.close().catch(() => {});
  await stopServer();
  fs.rmSync(tmp, { recursive: true, force: true });
});

test('page loads, connects and streams @chunks 20 8', { skip: skipReason, timeout: 60000 }, async () => {
  page1 = await openPage();
  assert.equal(await page1.title(), 'harnessd');
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

test('no uncaught errors in the page', { skip: skipReason }, () => {
  // A WebSocket refused while the server was down logs a console error; that is expected.
  const unexpected = pageErrors.filter((e) => !/WebSocket connection to .* failed/.test(e));
  assert.deepEqual(unexpected, []);
});
