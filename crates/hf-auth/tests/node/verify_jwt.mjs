// Verifies an hf token independently of our Rust code, with nothing but Node's built-in crypto
// and the published JWKS: the check a third-party client would make.
//
// Usage: node verify_jwt.mjs DIR, where DIR holds token.txt, jwks.json and now.txt (Unix seconds).
// Prints the verified claims as JSON and exits 0, or prints why not and exits 1.

import { createHash, createPublicKey, verify } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

function fail(reason) {
  console.error(reason);
  process.exit(1);
}

const dir = process.argv[2];
const token = readFileSync(join(dir, 'token.txt'), 'utf8').trim();
const jwks = JSON.parse(readFileSync(join(dir, 'jwks.json'), 'utf8'));
const now = Number(readFileSync(join(dir, 'now.txt'), 'utf8'));

const parts = token.split('.');
if (parts.length !== 3) fail('not three parts');
const [headerB64, payloadB64, signatureB64] = parts;
const header = JSON.parse(Buffer.from(headerB64, 'base64url').toString('utf8'));
if (header.alg !== 'ES256') fail(`alg ${header.alg}`);
if (header.typ !== 'JWT') fail(`typ ${header.typ}`);

const jwk = jwks.keys.find((key) => key.kid === header.kid);
if (!jwk) fail(`unknown kid ${header.kid}`);
for (const member of ['alg', 'crv', 'kid', 'kty', 'use', 'x', 'y']) {
  if (typeof jwk[member] !== 'string') fail(`JWK member ${member} missing`);
}
if (Object.keys(jwk).length !== 7) fail(`JWK has extra members: ${Object.keys(jwk)}`);

// RFC 7638: the kid must be the thumbprint of the key it names.
const canonical = JSON.stringify({ crv: jwk.crv, kty: jwk.kty, x: jwk.x, y: jwk.y });
const thumbprint = createHash('sha256').update(canonical).digest('base64url');
if (thumbprint !== jwk.kid) fail('kid is not the RFC 7638 thumbprint');

const key = createPublicKey({ key: jwk, format: 'jwk' });
const signature = Buffer.from(signatureB64, 'base64url');
const signed = Buffer.from(`${headerB64}.${payloadB64}`, 'ascii');
if (!verify('sha256', signed, { key, dsaEncoding: 'ieee-p1363' }, signature)) fail('bad signature');

const claims = JSON.parse(Buffer.from(payloadB64, 'base64url').toString('utf8'));
for (const claim of ['iss', 'sub', 'role', 'jti']) {
  if (typeof claims[claim] !== 'string') fail(`claim ${claim} missing`);
}
if (typeof claims.admin !== 'boolean') fail('claim admin missing');
if (!Number.isInteger(claims.iat) || !Number.isInteger(claims.exp)) fail('iat/exp missing');
if (claims.exp <= now) fail('expired');

console.log(JSON.stringify({ verified: true, kid: header.kid, claims }));
