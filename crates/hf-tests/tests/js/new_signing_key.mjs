// Makes an ES256 signing key the way `hf keys rotate` stores it, for the key rotation test.
// Prints {"pem": "<PKCS#8 PEM>", "kid": "<RFC 7638 thumbprint>"}. Built-in crypto only.

import { createHash, generateKeyPairSync } from 'node:crypto';

const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const jwk = publicKey.export({ format: 'jwk' });
const canonical = JSON.stringify({ crv: jwk.crv, kty: jwk.kty, x: jwk.x, y: jwk.y });
const kid = createHash('sha256').update(canonical).digest('base64url');
const pem = privateKey.export({ format: 'pem', type: 'pkcs8' });
console.log(JSON.stringify({ pem, kid }));
