// An independent client of hf: logs in over HTTP, fetches the published JWKS over HTTP, and
// verifies the token with nothing but Node's built-in crypto — the check a third-party service
// would make before trusting an hf token.
//
// Usage: node verify_login.mjs BASE_URL USERNAME PASSWORD
// Prints {"verified": true, "header": …, "claims": …} and exits 0, or prints why not and exits 1.

import { createHash, createPublicKey, verify } from 'node:crypto';

function fail(reason) {
  console.error(reason);
  process.exit(1);
}

const [baseUrl, username, password] = process.argv.slice(2);

const login = await fetch(`${baseUrl}/auth/login`, {
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ username, password }),
});
if (login.status !== 200) fail(`login answered ${login.status}: ${await login.text()}`);
const { token, expiresIn } = await login.json();
if (typeof token !== 'string' || !Number.isInteger(expiresIn)) fail('login body lacks token/expiresIn');

const jwksResponse = await fetch(`${baseUrl}/.well-known/jwks.json`);
if (jwksResponse.status !== 200) fail(`jwks answered ${jwksResponse.status}`);
const jwks = await jwksResponse.json();

const parts = token.split('.');
if (parts.length !== 3) fail('not three parts');
const [headerB64, payloadB64, signatureB64] = parts;
const header = JSON.parse(Buffer.from(headerB64, 'base64url').toString('utf8'));
if (header.alg !== 'ES256') fail(`alg ${header.alg}`);
if (header.typ !== 'JWT') fail(`typ ${header.typ}`);

const jwk = jwks.keys.find((key) => key.kid === header.kid);
if (!jwk) fail(`kid ${header.kid} is not published`);
const members = Object.keys(jwk).sort().join(',');
if (members !== 'alg,crv,kid,kty,use,x,y') fail(`JWK members ${members}`);
if (jwk.alg !== 'ES256' || jwk.crv !== 'P-256' || jwk.kty !== 'EC' || jwk.use !== 'sig') {
  fail(`JWK is not an ES256 signing key: ${JSON.stringify(jwk)}`);
}
// RFC 7638: the kid is the thumbprint of the key it names.
const canonical = JSON.stringify({ crv: jwk.crv, kty: jwk.kty, x: jwk.x, y: jwk.y });
if (createHash('sha256').update(canonical).digest('base64url') !== jwk.kid) {
  fail('kid is not the RFC 7638 thumbprint');
}

const key = createPublicKey({ key: { kty: jwk.kty, crv: jwk.crv, x: jwk.x, y: jwk.y }, format: 'jwk' });
const signed = Buffer.from(`${headerB64}.${payloadB64}`, 'ascii');
const signature = Buffer.from(signatureB64, 'base64url');
if (!verify('sha256', signed, { key, dsaEncoding: 'ieee-p1363' }, signature)) fail('bad signature');

const claims = JSON.parse(Buffer.from(payloadB64, 'base64url').toString('utf8'));
for (const claim of ['iss', 'sub', 'role', 'jti']) {
  if (typeof claims[claim] !== 'string') fail(`claim ${claim} missing`);
}
if (typeof claims.admin !== 'boolean') fail('claim admin missing');
if (!Number.isInteger(claims.iat) || !Number.isInteger(claims.exp)) fail('iat/exp missing');
const now = Math.floor(Date.now() / 1000);
if (claims.exp <= now) fail('expired');
if (claims.iat > now + 30) fail('issued in the future');
if (claims.exp - claims.iat !== expiresIn) fail(`exp - iat = ${claims.exp - claims.iat}, expiresIn = ${expiresIn}`);

console.log(JSON.stringify({ verified: true, header, claims }));
