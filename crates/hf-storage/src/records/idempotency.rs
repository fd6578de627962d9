//! Idempotency keys of record creates (`Idempotency-Key`).
//!
//! A create whose answer was lost (a dropped connection, a timeout, `COMMIT_OUTCOME_UNKNOWN`)
//! cannot be told apart by the client from one that did nothing, and sending it again would make
//! a second record. With a key, the create's own statement also stores the key, the request's
//! fingerprint and the new record's id (`hf_caller.idempotency_keys`, whose key columns are all a
//! caller's role may write of the service's), from the row it inserted: either both are there
//! or neither, and a refused create stores no key. The same create sent again with the same key
//! then fails on the key's primary key, and is answered with the record the first one made; a
//! concurrent repeat waits for the first to commit or roll back, so two copies never both
//! create. The same key with another request (another object or other values) is refused. Keys
//! belong to the principal that sent them and are kept 24 hours: an older one is deleted when
//! it is met again, and all of them when an instance starts.

use sha2::{Digest, Sha256};

use super::{request_problem, Body, Problem, ProblemCode};
use crate::{Pool, Result};

/// How long a key is remembered.
pub const KEPT_HOURS: i32 = 24;

/// The longest key accepted, in bytes.
pub const MAX_KEY_BYTES: usize = 255;

/// A client's name for one create: printable ASCII without spaces, 1 to [`MAX_KEY_BYTES`]
/// bytes (a UUID is the usual choice).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// Checks a key as the client sent it.
    pub fn parse(text: &str) -> std::result::Result<Self, Problem> {
        let printable = text.bytes().all(|byte| byte.is_ascii_graphic());
        if text.is_empty() || text.len() > MAX_KEY_BYTES || !printable {
            return Err(request_problem(
                ProblemCode::InvalidIdempotencyKey,
                format!(
                    "`Idempotency-Key` must be 1 to {MAX_KEY_BYTES} printable ASCII characters without spaces (a UUID, say)."
                ),
            ));
        }
        Ok(Self(text.to_owned()))
    }

    /// The key's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What identifies a create's request besides its key: the object and the body's properties
/// (in any order, each value as sent), hashed.
pub(super) fn fingerprint(object: &str, body: &Body) -> String {
    let mut entries: Vec<(&str, &str)> = body
        .entries()
        .iter()
        .map(|(key, value)| (key.as_str(), value.get()))
        .collect();
    entries.sort_unstable();
    let mut hash = Sha256::new();
    hash.update(object.as_bytes());
    for (key, value) in entries {
        // Lengths first, so that no two different bodies hash the same bytes.
        hash.update((key.len() as u64).to_be_bytes());
        hash.update(key.as_bytes());
        hash.update((value.len() as u64).to_be_bytes());
        hash.update(value.as_bytes());
    }
    hex::encode(hash.finalize())
}

/// A key stored by an earlier create of the principal.
pub(super) struct Remembered {
    pub(super) fingerprint: String,
    pub(super) record_id: uuid::Uuid,
}

/// The key as stored for `principal_id`, if it is there and younger than [`KEPT_HOURS`]; an
/// older one is deleted, so that the create may store it anew (on the service's own
/// connection: a caller's role may neither read nor delete keys).
pub(super) async fn remembered(
    pool: &Pool,
    principal_id: uuid::Uuid,
    key: &IdempotencyKey,
) -> Result<Option<Remembered>> {
    let client = pool.get().await?;
    client
        .execute(
            "DELETE FROM hf_caller.idempotency_keys \
             WHERE principal_id = $1 AND key = $2 \
               AND created_at < now() - make_interval(hours => $3)",
            &[&principal_id, &key.as_str(), &KEPT_HOURS],
        )
        .await?;
    let row = client
        .query_opt(
            "SELECT fingerprint, record_id FROM hf_caller.idempotency_keys \
             WHERE principal_id = $1 AND key = $2",
            &[&principal_id, &key.as_str()],
        )
        .await?;
    row.map(|row| {
        Ok(Remembered {
            fingerprint: row.try_get(0)?,
            record_id: row.try_get(1)?,
        })
    })
    .transpose()
}

/// Forgets every key older than [`KEPT_HOURS`] (at start-up; a create also replaces its own
/// key once expired). Returns how many were removed.
pub async fn forget_expired_keys(pool: &Pool) -> Result<u64> {
    let client = pool.get().await?;
    let removed = client
        .execute(
            "DELETE FROM hf_caller.idempotency_keys \
             WHERE created_at < now() - make_interval(hours => $1)",
            &[&KEPT_HOURS],
        )
        .await?;
    Ok(removed)
}

/// Whether a failed statement is the key's primary key refusing a second use.
pub(super) fn is_key_taken(error: &tokio_postgres::Error) -> bool {
    error.as_db_error().is_some_and(|db| {
        *db.code() == tokio_postgres::error::SqlState::UNIQUE_VIOLATION
            && db.schema() == Some("hf_caller")
            && db.table() == Some("idempotency_keys")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_printable_ascii_of_bounded_length() {
        for good in [
            "a",
            "0b6f9f0e-8d2c-4c8e-9a55-0c7a6f1f2b3c",
            &"k".repeat(255),
        ] {
            assert!(IdempotencyKey::parse(good).is_ok(), "{good}");
        }
        for bad in ["", "with space", "tab\t", "é", &"k".repeat(256), "nul\0"] {
            let problem = IdempotencyKey::parse(bad).unwrap_err();
            assert_eq!(problem.code, ProblemCode::InvalidIdempotencyKey, "{bad:?}");
        }
    }

    #[test]
    fn the_fingerprint_ignores_property_order_but_not_values_or_the_object() {
        let body = |text: &str| Body::parse(text.as_bytes()).unwrap();
        let a = fingerprint("crm.account", &body(r#"{"name":"A","phone":"1"}"#));
        let reordered = fingerprint("crm.account", &body(r#"{"phone":"1","name":"A"}"#));
        let other_value = fingerprint("crm.account", &body(r#"{"name":"A","phone":"2"}"#));
        let other_object = fingerprint("crm.contact", &body(r#"{"name":"A","phone":"1"}"#));
        let shifted = fingerprint("crm.account", &body(r#"{"name":"A\",\"phone","1":"x"}"#));
        assert_eq!(a, reordered);
        assert_ne!(a, other_value);
        assert_ne!(a, other_object);
        assert_ne!(a, shifted);
    }
}
