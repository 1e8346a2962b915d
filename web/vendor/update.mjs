// The browser builds of the web UI's Markdown renderer and sanitizer, copied
// from the versions web/package-lock.json pins (after `npm ci` in web/).
// The daemon embeds web/vendor/ at build time, so building it needs no npm
// and the browser never fetches them from elsewhere.
//   node vendor/update.mjs          copy them here
//   node vendor/update.mjs --check  fail unless the copies here are those files
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const web = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const FILES = {
  'marked.esm.js': 'node_modules/marked/lib/marked.esm.js',
  // The UMD build sets globalThis.DOMPurify when imported as a module.
  'purify.min.js': 'node_modules/dompurify/dist/purify.min.js',
};
const check = process.argv.includes('--check');
let stale = 0;
for (const [name, from] of Object.entries(FILES)) {
  const src = path.join(web, from);
  const dest = path.join(web, 'vendor', name);
  if (!fs.existsSync(src)) {
    console.error(`${src} is missing: run npm ci in web/`);
    process.exit(1);
  }
  const want = fs.readFileSync(src);
  if (check) {
    if (!fs.existsSync(dest) || !want.equals(fs.readFileSync(dest))) {
      console.error(`web/vendor/${name} differs from ${from}: run npm run vendor in web/`);
      stale += 1;
    }
  } else {
    fs.writeFileSync(dest, want);
    console.log(`web/vendor/${name} <- ${from}`);
  }
}
process.exit(stale ? 1 : 0);
