//! Issuing and strictly verifying the service's JWTs (JWS compact form, ES256 only).
//!
//! The JWT is parsed and checked here by hand instead of through josekit's `JwtPayloadValidator`,
//! because that validator accepts tokens without `exp` or `aud` (it checks them only
//! when present) and has no clock leeway. josekit only
//! does the elliptic-curve arithmetic. The order of checks is deliberate: the header's `alg` is
//! judged before any key is touched, the signature before any claim is trusted.
//!
//! ECDSA signatures are malleable (a second valid signature exists for the same token), so a token
//! is identified by its `jti`, never by its text.

use std::time::{Duration, SystemTime};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use rand::rngs::OsRng;
use rand::RngCore as _;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::keys::{KeySet, SigningKey, VerifyingKey, ALGORITHM};
use crate::{unix_seconds, Error};

/// The clock skew tolerated between issuer and verifier (PostgREST uses the same).
pub const DEFAULT_LEEWAY: Duration = Duration::from_secs(30);
/// The header `typ` of every token.
pub const TOKEN_TYPE: &str = "JWT";
/// Tokens longer than this are refused before decoding; ours are about 500 bytes.
pub const MAX_TOKEN_BYTES: usize = 8 * 1024;

/// Who a new token speaks for; the issuer adds `iss`, `iat`, `exp` and `jti`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    /// The principal's stable `sub`.
    pub sub: String,
    /// The principal's PostgreSQL role (`pgRole`), which requests run as.
    pub role: String,
    /// Whether the principal may use admin-only routes.
    pub admin: bool,
}

/// The claims of a verified token: every one is present and of the right type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Claims {
    /// The issuer, equal to the one the verifier expects.
    pub iss: String,
    /// The principal's `sub`.
    pub sub: String,
    /// The principal's PostgreSQL role.
    pub role: String,
    /// Whether the principal was an admin when the token was issued.
    pub admin: bool,
    /// Issued at, Unix seconds.
    pub iat: i64,
    /// Expires at, Unix seconds.
    pub exp: i64,
    /// A random id unique to this token.
    pub jti: String,
}

#[derive(Serialize)]
struct Header<'a> {
    alg: &'a str,
    kid: &'a str,
    typ: &'a str,
}

/// Issues a token for `subject`, signed with `key`, valid from `now` for `ttl`.
pub fn issue(
    key: &SigningKey,
    issuer: &str,
    subject: &Subject,
    now: SystemTime,
    ttl: Duration,
) -> Result<String, Error> {
    let iat = unix_seconds(now)?;
    let exp = iat.saturating_add(i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX));
    let mut jti = [0u8; 16];
    OsRng.fill_bytes(&mut jti);
    let claims = Claims {
        iss: issuer.to_owned(),
        sub: subject.sub.clone(),
        role: subject.role.clone(),
        admin: subject.admin,
        iat,
        exp,
        jti: URL_SAFE_NO_PAD.encode(jti),
    };
    let header = Header {
        alg: ALGORITHM,
        kid: key.kid(),
        typ: TOKEN_TYPE,
    };
    let mut token = encode_json(&header)?;
    token.push('.');
    token.push_str(&encode_json(&claims)?);
    let signature = key.sign(token.as_bytes())?;
    token.push('.');
    token.push_str(&URL_SAFE_NO_PAD.encode(signature));
    Ok(token)
}

fn encode_json(value: &impl Serialize) -> Result<String, Error> {
    let json = serde_json::to_vec(value).map_err(Error::Serialize)?;
    Ok(URL_SAFE_NO_PAD.encode(json))
}

/// Verifies a token strictly and returns its claims.
///
/// Accepts only: three base64url parts; a header with `alg: ES256`, `typ: JWT`, no `crit`, and a
/// `kid` found in `keys`; a valid signature; all of `iss, sub, role, admin, iat, exp, jti` with
/// their types; `iss == issuer`; `exp` not passed and `iat` (and `nbf`, if present) not in the
/// future, each with `leeway` (use [`DEFAULT_LEEWAY`]).
pub fn verify(
    token: &str,
    keys: &KeySet,
    issuer: &str,
    now: SystemTime,
    leeway: Duration,
) -> Result<Claims, Error> {
    if token.len() > MAX_TOKEN_BYTES {
        return Err(Error::MalformedToken {
            reason: "token too long",
        });
    }
    let mut parts = token.split('.');
    let (Some(header_b64), Some(payload_b64), Some(signature_b64), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Error::MalformedToken {
            reason: "not three dot-separated parts",
        });
    };

    let header = decode_json_object(
        header_b64,
        "header is not base64url",
        "header is not a JSON object",
    )?;
    let key = choose_key(&header, keys)?;

    let signature = URL_SAFE_NO_PAD
        .decode(signature_b64)
        .map_err(|_| Error::MalformedToken {
            reason: "signature is not base64url",
        })?;
    // The signing input is the token up to its last dot; the split above makes the slice exact.
    let signed_len = header_b64.len() + 1 + payload_b64.len();
    key.verify(&token.as_bytes()[..signed_len], &signature)?;

    let payload = decode_json_object(
        payload_b64,
        "payload is not base64url",
        "payload is not a JSON object",
    )?;
    let claims = read_claims(&payload)?;
    if claims.iss != issuer {
        return Err(Error::WrongIssuer {
            expected: issuer.to_owned(),
            found: claims.iss,
        });
    }
    check_times(&claims, time_claim(&payload, "nbf")?, now, leeway)?;
    Ok(claims)
}

/// Judges the header before any key is used: only ES256, only `typ: JWT`, no `crit`, and a `kid`
/// that names a published key.
fn choose_key<'k>(
    header: &Map<String, Value>,
    keys: &'k KeySet,
) -> Result<&'k VerifyingKey, Error> {
    match header.get("alg") {
        Some(Value::String(alg)) if alg == ALGORITHM => {}
        Some(Value::String(alg)) => return Err(Error::UnsupportedAlgorithm { alg: alg.clone() }),
        Some(_) => {
            return Err(Error::MalformedToken {
                reason: "header alg is not a string",
            })
        }
        None => {
            return Err(Error::MalformedToken {
                reason: "header has no alg",
            })
        }
    }
    match header.get("typ") {
        Some(Value::String(typ)) if typ == TOKEN_TYPE => {}
        Some(Value::String(typ)) => return Err(Error::UnsupportedTokenType { typ: typ.clone() }),
        Some(_) => {
            return Err(Error::MalformedToken {
                reason: "header typ is not a string",
            })
        }
        None => return Err(Error::UnsupportedTokenType { typ: String::new() }),
    }
    if header.contains_key("crit") {
        return Err(Error::CriticalHeader);
    }
    match header.get("kid") {
        Some(Value::String(kid)) => keys
            .find(kid)
            .ok_or_else(|| Error::UnknownKeyId { kid: kid.clone() }),
        Some(_) => Err(Error::MalformedToken {
            reason: "header kid is not a string",
        }),
        None => Err(Error::MissingKeyId),
    }
}

/// Reads every required claim, refusing absent ones and wrong JSON types.
fn read_claims(payload: &Map<String, Value>) -> Result<Claims, Error> {
    Ok(Claims {
        iss: string_claim(payload, "iss")?,
        sub: string_claim(payload, "sub")?,
        role: string_claim(payload, "role")?,
        admin: bool_claim(payload, "admin")?,
        iat: time_claim(payload, "iat")?.ok_or(Error::MissingClaim { claim: "iat" })?,
        exp: time_claim(payload, "exp")?.ok_or(Error::MissingClaim { claim: "exp" })?,
        jti: string_claim(payload, "jti")?,
    })
}

/// Checks `exp`, `iat` and the optional `nbf` against the clock, each with the leeway.
fn check_times(
    claims: &Claims,
    nbf: Option<i64>,
    now: SystemTime,
    leeway: Duration,
) -> Result<(), Error> {
    if claims.exp < claims.iat {
        return Err(Error::InvalidClaim {
            claim: "exp",
            expected: "not before iat",
        });
    }
    let now = unix_seconds(now)?;
    let leeway = i64::try_from(leeway.as_secs()).unwrap_or(i64::MAX);
    if now.saturating_sub(leeway) >= claims.exp {
        return Err(Error::TokenExpired {
            exp: claims.exp,
            now,
        });
    }
    if claims.iat > now.saturating_add(leeway) {
        return Err(Error::TokenIssuedInFuture {
            iat: claims.iat,
            now,
        });
    }
    if let Some(nbf) = nbf {
        if nbf > now.saturating_add(leeway) {
            return Err(Error::TokenNotYetValid { nbf, now });
        }
    }
    Ok(())
}

fn decode_json_object(
    part: &str,
    not_base64: &'static str,
    not_object: &'static str,
) -> Result<Map<String, Value>, Error> {
    let bytes = URL_SAFE_NO_PAD
        .decode(part)
        .map_err(|_| Error::MalformedToken { reason: not_base64 })?;
    serde_json::from_slice(&bytes).map_err(|_| Error::MalformedToken { reason: not_object })
}

fn string_claim(payload: &Map<String, Value>, claim: &'static str) -> Result<String, Error> {
    match payload.get(claim) {
        Some(Value::String(value)) => Ok(value.clone()),
        Some(_) => Err(Error::InvalidClaim {
            claim,
            expected: "a string",
        }),
        None => Err(Error::MissingClaim { claim }),
    }
}

fn bool_claim(payload: &Map<String, Value>, claim: &'static str) -> Result<bool, Error> {
    match payload.get(claim) {
        Some(Value::Bool(value)) => Ok(*value),
        Some(_) => Err(Error::InvalidClaim {
            claim,
            expected: "a boolean",
        }),
        None => Err(Error::MissingClaim { claim }),
    }
}

/// A NumericDate claim; `None` when absent so callers decide whether it is required.
fn time_claim(payload: &Map<String, Value>, claim: &'static str) -> Result<Option<i64>, Error> {
    match payload.get(claim) {
        Some(Value::Number(value)) => match value.as_i64() {
            Some(seconds) => Ok(Some(seconds)),
            None => Err(Error::InvalidClaim {
                claim,
                expected: "an integer number of seconds",
            }),
        },
        Some(_) => Err(Error::InvalidClaim {
            claim,
            expected: "an integer number of seconds",
        }),
        None => Ok(None),
    }
}
