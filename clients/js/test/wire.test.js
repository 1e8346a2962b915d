// The golden wire files (tests/wire/, named as its README says) checked
// with this package's own validators: every file must be a shape the
// package knows and accepts, and the same shape with a field of the wrong
// type must be refused. A file whose name maps to nothing fails, so a new
// shape needs a validator here too.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { classifyFrame, isChunk, isKnownEvent, CHUNK_TYPES, EVENT_TYPES, METHODS, NOTIFICATIONS } from '../src/index.js';
import { repo } from './daemon.js';

const wireDir = process.env.WIRE_DIR || path.join(repo, 'tests', 'wire');
const files = fs.existsSync(wireDir) ? fs.readdirSync(wireDir).filter((f) => f.endsWith('.json')).sort() : [];

const ERROR_CODES = {
  'parse-error': -32700, 'invalid-request': -32600, 'method-not-found': -32601, 'invalid-params': -32602,
  'internal-error': -32603, 'session-busy': -32001, 'not-initialized': -32002, 'shutting-down': -32003,
  unauthorized: -32004, overloaded: -32005, 'not-pending': -32602, 'unknown-session': -32602,
};

const dotted = (name) => name.replaceAll('/', '.');

/** The longest name of `names` (in dotted form) that `rest` is, or starts with followed by a dot. */
function longestMatch(rest, names) {
  return names
    .filter((n) => rest === dotted(n) || rest.startsWith(`${dotted(n)}.`))
    .sort((a, b) => b.length - a.length)[0];
}

/** What a file holds, by its name: a check of the content, or null for a name that maps to nothing. */
export function checkerFor(file) {
  const base = file.slice(0, -'.json'.length);
  const [kind, ...restParts] = base.split('.');
  const rest = restParts.join('.');
  if (kind === 'chunk') {
    const type = longestMatch(rest, CHUNK_TYPES);
    return type && ((v) => isChunk(v) && v.type === type);
  }
  if (kind === 'event') {
    const type = longestMatch(rest, EVENT_TYPES);
    return type && ((v) => isKnownEvent(v) && v.type === type);
  }
  if (kind === 'notification') {
    const method = longestMatch(rest, Object.keys(NOTIFICATIONS));
    return method && NOTIFICATIONS[method];
  }
  if (kind === 'error') {
    const code = ERROR_CODES[restParts[0]];
    return code !== undefined && ((v) => {
      const frame = classifyFrame(v);
      return v?.jsonrpc === '2.0' && frame.kind === 'error' && frame.error.code === code;
    });
  }
  const m = /^(.+)\.(params|result)(\..+)?$/.exec(base);
  if (!m) return null;
  const method = Object.keys(METHODS).find((name) => dotted(name) === m[1]);
  return method && METHODS[method][m[2]];
}

/** The same value with one field (at `at`, a key path) replaced by a value of another type. */
function mutations(value, at = []) {
  const out = [];
  if (value === null || typeof value !== 'object') return out;
  for (const [key, v] of Object.entries(value)) {
    const here = [...at, key];
    const wrong = typeof v === 'string' ? 12345 : typeof v === 'number' ? 'x' : typeof v === 'boolean' ? 'x'
      : Array.isArray(v) ? 'x' : v === null ? 'x' : 7;
    out.push({ path: here.join('.'), value: setAt(value, [key], wrong) });
    if (v && typeof v === 'object' && !Array.isArray(v)) {
      for (const inner of mutations(v, here)) out.push({ path: inner.path, value: setAt(value, [key], inner.value) });
    }
  }
  return out;
}

function setAt(obj, [key], v) {
  const copy = Array.isArray(obj) ? [...obj] : { ...obj };
  copy[key] = v;
  return copy;
}

// Opaque objects, whose inner fields the protocol leaves open: a client's
// own info, a tool result's extras, request settings, an error's data.
const FREE = [/^clientInfo\./, /^data\.meta\./, /^data\.settings\./, /^error\.data(\.|$)/];
const isFree = (p) => FREE.some((re) => re.test(p));

test('tests/wire has golden files', () => {
  assert.ok(files.length > 0, `no golden wire files in ${wireDir}`);
});

for (const file of files) {
  test(`wire ${file}`, () => {
    const value = JSON.parse(fs.readFileSync(path.join(wireDir, file), 'utf8'));
    const check = checkerFor(file);
    assert.ok(check, `${file}: the name maps to no shape this package knows`);
    assert.ok(check(value), `${file} is refused: ${JSON.stringify(value)}`);
    for (const m of mutations(value)) {
      // An error answer's id may be null or anything the request had.
      if (isFree(m.path) || (file.startsWith('error.') && m.path === 'id')) continue;
      assert.equal(check(m.value), false, `${file} with a wrong ${m.path} passes`);
    }
  });
}
