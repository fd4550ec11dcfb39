// Independent check of a key-signed sigstore bundle with sigstore-js (@sigstore/verify), the
// verifier npm's own provenance uses. Usage:
//   node verify_bundle.js BUNDLE.json KEY.pub TRUSTED_ROOT.json SUBJECT_SHA256_HEX
// Prints "OK" and exits 0 when the DSSE signature verifies with the key and the in-toto
// statement names the subject; prints the error and exits 1 otherwise.
'use strict';
const fs = require('fs');
const crypto = require('crypto');
const { bundleFromJSON } = require('@sigstore/bundle');
const { TrustedRoot } = require('@sigstore/protobuf-specs');
const { Verifier, toSignedEntity, toTrustMaterial } = require('@sigstore/verify');

const [bundlePath, keyPath, rootPath, subjectHex] = process.argv.slice(2);
try {
  const bundle = bundleFromJSON(JSON.parse(fs.readFileSync(bundlePath, 'utf8')));
  const root = TrustedRoot.fromJSON(JSON.parse(fs.readFileSync(rootPath, 'utf8')));
  const publicKey = crypto.createPublicKey(fs.readFileSync(keyPath));
  // the key's hint as sigstore-go computes it: base64 of the SHA-256 of the DER public key
  const ours = crypto.createHash('sha256').update(publicKey.export({ type: 'spki', format: 'der' })).digest('base64');
  const trust = toTrustMaterial(root, (hint) => {
    if (hint !== ours) throw new Error(`bundle names key ${hint}, not ${ours}`);
    return { publicKey, validFor: () => true };
  });
  // no transparency log, no timestamps: what a bundle signed offline with a key carries
  const verifier = new Verifier(trust, { tlogThreshold: 0, ctlogThreshold: 0, timestampThreshold: 0 });
  verifier.verify(toSignedEntity(bundle));
  const statement = JSON.parse(Buffer.from(bundle.content.dsseEnvelope.payload).toString('utf8'));
  if (!statement.subject.some((s) => s.digest && s.digest.sha256 === subjectHex)) {
    throw new Error(`statement does not name sha256:${subjectHex}`);
  }
  console.log('OK');
} catch (e) {
  console.log(`FAIL ${e.code || ""} ${e.message}`); if (process.env.DEBUG) console.log(e.stack);
  process.exit(1);
}
