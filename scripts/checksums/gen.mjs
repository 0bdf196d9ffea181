// gen.mjs — regenerate checksum vectors from the platform's own function.
//
// Usage (from the repository root):
//   export OBJECTSTACK_NODE_MODULES=$(scripts/objectstack/install.sh)
//   node scripts/checksums/gen.mjs internal/hashspec/testdata/checksums.json   # = the committed file
//   node scripts/checksums/gen.mjs scripts/checksums/extra.jsonl > internal/hashspec/testdata/extra.json
//
// INPUT is either a vectors file (an object with a "vectors" array, such as
// internal/hashspec/testdata/checksums.json) or JSON lines, one
// {"name":…,"body":…} per line. A body that is not UTF-8 text is given as
// "body_base64" instead of "body"; it is decoded as the platform's
// PostgreSQL driver decodes a text column (Buffer#toString("utf8")).
// The output holds, for each input, {name, body|body_base64, canonical,
// checksum}, where checksum is hashSpec(JSON.parse(body)) and canonical the
// exact text it hashed (canonicalize).
//
// OBJECTSTACK_NODE_MODULES is a node_modules directory (or a directory
// holding one) where @objectstack/metadata-core 17.4.0 is installed: the
// one scripts/objectstack/install.sh prints, or a folder where
//   npm install --save-exact @objectstack/metadata-core@17.4.0
// ran. The script refuses any other version.
import { readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const PACKAGE = '@objectstack/metadata-core';
const VERSION = '17.4.0';

function die(msg) {
  process.stderr.write(`gen.mjs: ${msg}\n`);
  process.exit(1);
}

// importPinned imports a package's ESM entry point from the node_modules
// directory named by OBJECTSTACK_NODE_MODULES, checking its version.
export async function importPinned(name, version) {
  let dir = process.env.OBJECTSTACK_NODE_MODULES;
  if (!dir) die('set OBJECTSTACK_NODE_MODULES to a node_modules directory holding the pinned @objectstack packages');
  if (existsSync(join(dir, 'node_modules'))) dir = join(dir, 'node_modules');
  const pkgDir = join(dir, ...name.split('/'));
  let pkg;
  try {
    pkg = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8'));
  } catch (e) {
    die(`${name} is not installed under ${dir}: ${e.message}`);
  }
  if (pkg.version !== version) die(`${name} under ${dir} is ${pkg.version}, want ${version}`);
  const entry = pkg.exports?.['.']?.import?.default ?? pkg.module ?? pkg.main;
  return import(pathToFileURL(join(pkgDir, entry)).href);
}

function readInputs(path) {
  const text = readFileSync(path, 'utf8');
  let inputs;
  try {
    const doc = JSON.parse(text);
    inputs = Array.isArray(doc?.vectors) ? doc.vectors : undefined;
  } catch {
    // not one JSON document: JSON lines
  }
  if (!inputs) {
    inputs = text.split('\n').filter((l) => l.trim() !== '').map((l, i) => {
      try {
        return JSON.parse(l);
      } catch (e) {
        die(`${path}:${i + 1}: ${e.message}`);
      }
    });
  }
  return inputs;
}

async function main() {
  const input = process.argv[2];
  if (!input) die('usage: gen.mjs INPUT (a vectors file or JSON lines of {name, body|body_base64})');
  const { hashSpec, canonicalize } = await importPinned(PACKAGE, VERSION);
  const vectors = [];
  for (const v of readInputs(input)) {
    if (typeof v.name !== 'string') die(`an input has no name: ${JSON.stringify(v).slice(0, 80)}`);
    const text = v.body_base64 !== undefined ? Buffer.from(v.body_base64, 'base64').toString('utf8') : v.body;
    if (typeof text !== 'string') die(`${v.name}: no body`);
    // A lone surrogate in the body text itself cannot be stored as UTF-8
    // (a reader sees U+FFFD); write it as a \u escape inside the body.
    if (/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(text)) {
      die(`${v.name}: the body text holds a lone surrogate; escape it (\\udxxx) inside the JSON text`);
    }
    let value;
    try {
      value = JSON.parse(text);
    } catch (e) {
      die(`${v.name}: JSON.parse: ${e.message}`);
    }
    const out = { name: v.name };
    if (v.body_base64 !== undefined) out.body_base64 = v.body_base64;
    else out.body = v.body;
    out.canonical = canonicalize(value);
    out.checksum = hashSpec(value);
    vectors.push(out);
  }
  const doc = {
    source: `${PACKAGE}@${VERSION} hashSpec = "sha256:" + sha256hex(utf8(canonicalize(JSON.parse(body))))`,
    note: 'body is the JSON text as an out-of-band writer would hold it; canonical is the exact string hashed',
    vectors,
  };
  process.stdout.write(JSON.stringify(doc, null, 1) + '\n');
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) await main();
