// secret-vectors.mjs — sys_secret vectors sealed by the platform's own code.
//
// Usage (from the repository root):
//   export OBJECTSTACK_NODE_MODULES=$(scripts/objectstack/install.sh)
//   node scripts/checksums/secret-vectors.mjs > internal/ossecret/testdata/vectors.json
//
// Seals a few known plaintexts with LocalCryptoProvider of
// @objectstack/service-settings 17.4.0 (the provider behind OS_SECRET_KEY)
// under a fixed test key, given to it both as 64 hex characters and as
// base64, and prints them as sys_secret rows with their plaintext. Nonces
// are random, so each run prints different ciphertexts; any run's output
// must open. See gen.mjs for OBJECTSTACK_NODE_MODULES.
import { importPinned } from './gen.mjs';

const { LocalCryptoProvider } = await importPinned('@objectstack/service-settings', '17.4.0');

// A test key: bytes 0x00…0x1f. Not a secret.
const keyBytes = Buffer.from(Array.from({ length: 32 }, (_, i) => i));
const keys = {
  key_hex: keyBytes.toString('hex'),
  key_base64: keyBytes.toString('base64'),
  key_base64url: keyBytes.toString('base64url'),
};
const provider = (k) => new LocalCryptoProvider({ env: { OS_SECRET_KEY: k } });
const hexProvider = provider(keys.key_hex);
const b64Provider = provider(keys.key_base64);

const cases = [
  { p: hexProvider, namespace: 'datasource', key: 'crm', plaintext: 's3cret-Passw0rd!' },
  { p: hexProvider, namespace: 'datasource', key: 'warehouse', plaintext: '' },
  { p: hexProvider, namespace: 'datasource', key: 'ünïcode|pipe', plaintext: 'pässwörd 😀 中文 "quoted" \\ \n' },
  { p: b64Provider, namespace: 'mail', key: 'api_key', plaintext: 'x'.repeat(1000) },
  { p: hexProvider, namespace: null, key: 'orphan', plaintext: 'namespace is NULL' },
  { p: hexProvider, namespace: 'datasource', key: 'rotated', plaintext: 'after rotation', rotate: true },
];

const vectors = [];
for (const c of cases) {
  const ctx = { namespace: c.namespace, key: c.key };
  let h = await c.p.encrypt(c.plaintext, ctx);
  if (c.rotate) h = await c.p.rotateKey(h, ctx);
  // Every vector must open with the other spelling of the key too.
  const other = c.p === hexProvider ? b64Provider : hexProvider;
  if ((await other.decrypt(h, ctx)) !== c.plaintext) throw new Error(`${c.key}: does not round-trip`);
  vectors.push({
    id: h.id,
    namespace: c.namespace,
    key: c.key,
    kms_key_id: h.kmsKeyId,
    alg: h.alg,
    version: h.version,
    ciphertext: h.ciphertext,
    plaintext: c.plaintext,
  });
}

process.stdout.write(JSON.stringify({
  source: '@objectstack/service-settings@17.4.0 LocalCryptoProvider.encrypt (rotateKey for the local:v2 row)',
  ...keys,
  vectors,
}, null, 1) + '\n');
