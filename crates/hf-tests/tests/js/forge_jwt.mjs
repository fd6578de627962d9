// Makes tokens an attacker (or a broken issuer) could present, for the tests that hf refuses them.
// Built-in crypto only.
//
// Usage: node forge_jwt.mjs < spec.json, where spec is
//   {"header": {...}, "payload": {...}, "sign": "es256", "pem": "<PKCS#8 PEM>"}   signed with that key
//   {"header": {...}, "payload": {...}, "sign": "es256-fresh"}                      signed with a new key
//   {"header": {...}, "payload": {...}, "sign": "hs256", "secret": "<text>"}        HMAC with that secret
//   {"header": {...}, "payload": {...}, "sign": "none"}                             empty signature
// Prints the compact token.

import { createHmac, createPrivateKey, generateKeyPairSync, sign } from 'node:crypto';
import { readFileSync } from 'node:fs';

const spec = JSON.parse(readFileSync(0, 'utf8'));
const b64 = (value) => Buffer.from(JSON.stringify(value)).toString('base64url');
const input = `${b64(spec.header)}.${b64(spec.payload)}`;

let signature;
switch (spec.sign) {
  case 'es256': {
    const key = createPrivateKey(spec.pem);
    signature = sign('sha256', Buffer.from(input), { key, dsaEncoding: 'ieee-p1363' });
    break;
  }
  case 'es256-fresh': {
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    signature = sign('sha256', Buffer.from(input), { key: privateKey, dsaEncoding: 'ieee-p1363' });
    break;
  }
  case 'hs256':
    signature = createHmac('sha256', spec.secret).update(input).digest();
    break;
  case 'none':
    signature = Buffer.alloc(0);
    break;
  default:
    throw new Error(`unknown signing mode ${spec.sign}`);
}
process.stdout.write(`${input}.${signature.toString('base64url')}`);
