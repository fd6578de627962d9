//! Keyset paging: the cursor a page of a query ends with, and how the next page starts after it.
//!
//! A paged query sorts by its ORDER BY and then by `id`, so every record has a distinct position;
//! the statement also returns each record's sort values (`json_build_array(...)`), and the cursor
//! holds those of a page's last record. The next page selects the records after that position
//! (`WHERE (k1, ..., id) > (v1, ..., id)`, spelled out per direction and NULL order), so records
//! inserted or deleted before the position never shift a later page, and the last page costs as
//! much as the first (an index on the sort keys serves every page).
//!
//! A cursor is `<values>.<tag>`, both base64url: the values as JSON and the first 16 bytes of
//! HMAC-SHA-256 over the query's binding (its text, parameters and time zone) and the values,
//! keyed with the server's secret ([`Binding::signed`]). A cursor of another query, or one
//! truncated, edited or forged, does not match its tag and is refused. The values are not
//! secret; without the key nobody can make a cursor the server accepts, and even a forged one
//! would only move the start of the page: each value is still checked against its key's type
//! and bound as a parameter. When the server's secret is rotated, the replaced one keeps
//! verifying for a grace period ([`Binding::also_accepting`]) but signs nothing.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

use crate::RequestParams;

/// The bytes of a tag kept in a cursor.
const TAG_BYTES: usize = 16;

/// The longest cursor accepted, in bytes (the values of one record's sort keys).
pub const MAX_CURSOR_BYTES: usize = 16 * 1024;

/// What ties cursors to one query: a digest of its text, parameters and time zone, and the key
/// that signs its cursors.
#[derive(Clone, PartialEq, Eq)]
pub struct Binding {
    digest: [u8; 32],
    key: Vec<u8>,
    /// Keys that no longer sign but still verify (a rotated secret's grace period).
    retiring: Vec<Vec<u8>>,
}

impl std::fmt::Debug for Binding {
    /// Shows the digest, never the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Binding")
            .field("digest", &URL_SAFE_NO_PAD.encode(self.digest))
            .finish_non_exhaustive()
    }
}

impl Binding {
    /// The binding of a query as a request states it (parameters in key order, so the order
    /// of a JSON object's keys does not matter).
    pub fn new(source: &str, params: &RequestParams, time_zone: &str) -> Binding {
        let mut hasher = Sha256::new();
        hasher.update(b"hf-cursor-v1\0");
        hasher.update(source.as_bytes());
        hasher.update(b"\0");
        let mut keys: Vec<&String> = params.keys().collect();
        keys.sort();
        for key in keys {
            hasher.update(key.as_bytes());
            hasher.update(b"\0");
            if let Some(value) = params.get(key) {
                hasher.update(value.get().trim().as_bytes());
            }
            hasher.update(b"\0");
        }
        hasher.update(time_zone.as_bytes());
        Binding {
            digest: hasher.finalize().into(),
            key: Vec::new(),
            retiring: Vec::new(),
        }
    }

    /// The same binding with its cursors signed by `secret`, a key the server keeps (every
    /// instance the same one, so a cursor works on any of them). Without it the tag only binds
    /// the cursor to its query, and anyone can compute it.
    pub fn signed(self, secret: &[u8]) -> Binding {
        Binding {
            key: secret.to_vec(),
            ..self
        }
    }

    /// The same binding, also accepting cursors signed with `secret`, a key that was replaced
    /// but whose grace period lasts: it verifies cursors and never signs one.
    pub fn also_accepting(mut self, secret: &[u8]) -> Binding {
        self.retiring.push(secret.to_vec());
        self
    }

    fn mac(&self, key: &[u8], values: &str) -> Hmac<Sha256> {
        // HMAC takes keys of any length, so this never fails.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key)
            .unwrap_or_else(|_| unreachable!("HMAC accepts keys of any length"));
        mac.update(&self.digest);
        mac.update(values.as_bytes());
        mac
    }

    fn tag(&self, values: &str) -> [u8; TAG_BYTES] {
        let digest = self.mac(&self.key, values).finalize().into_bytes();
        let mut tag = [0; TAG_BYTES];
        tag.copy_from_slice(&digest[..TAG_BYTES]);
        tag
    }

    /// The cursor after a record whose sort values PostgreSQL gave as a JSON array.
    pub fn encode(&self, values: &str) -> String {
        format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(values),
            URL_SAFE_NO_PAD.encode(self.tag(values))
        )
    }

    /// The sort values a cursor of this query holds; `None` when the cursor is not one this
    /// query gave (another query's, truncated, edited, not base64 or not a JSON array).
    pub fn decode(&self, cursor: &str) -> Option<Vec<Box<RawValue>>> {
        if cursor.len() > MAX_CURSOR_BYTES {
            return None;
        }
        let (values, tag) = cursor.split_once('.')?;
        let values = String::from_utf8(URL_SAFE_NO_PAD.decode(values).ok()?).ok()?;
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        if tag.len() != TAG_BYTES {
            return None;
        }
        // Constant-time, so timing does not reveal how much of a forged tag was right.
        let genuine = std::iter::once(&self.key)
            .chain(&self.retiring)
            .any(|key| self.mac(key, &values).verify_truncated_left(&tag).is_ok());
        if !genuine {
            return None;
        }
        serde_json::from_str(&values).ok()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// One sort value as PostgreSQL's `json_build_array` writes it.
    fn sort_value() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<i64>().prop_map(|n| n.to_string()),
            any::<String>().prop_map(|text| serde_json::Value::String(text).to_string()),
            Just("null".to_owned()),
            Just("true".to_owned()),
            "-?(0|[1-9][0-9]{0,19})\\.[0-9]{1,10}",
        ]
    }

    proptest! {
        /// Whatever sort values a page ends with come back from its cursor as they were, and
        /// another query's binding refuses the cursor.
        #[test]
        fn any_sort_values_round_trip(
            values in prop::collection::vec(sort_value(), 1..5),
            query in "SELECT [a-z]{1,8} FROM crm\\.[a-z]{1,8}",
        ) {
            let binding = Binding::new(&query, &params("{}"), "UTC");
            let cursor = binding.encode(&format!("[{}]", values.join(",")));
            let decoded = binding.decode(&cursor).unwrap();
            let texts: Vec<&str> = decoded.iter().map(|value| value.get()).collect();
            prop_assert_eq!(texts, values);
            let other = Binding::new(&format!("{query} LIMIT 5"), &params("{}"), "UTC");
            prop_assert!(other.decode(&cursor).is_none());
        }
    }

    fn params(json: &str) -> RequestParams {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn cursors_round_trip_and_refuse_other_queries_and_edits() {
        let binding = Binding::new("SELECT name FROM crm.account", &params("{}"), "UTC");
        let cursor = binding.encode("[\"Acme\",\"6f9619ff-8b86-d011-b42d-00c04fc964ff\"]");
        let values = binding.decode(&cursor).unwrap();
        assert_eq!(values.len(), 2);
        let other = Binding::new("SELECT name FROM crm.account ", &params("{}"), "UTC");
        assert!(other.decode(&cursor).is_none());
        let zone = Binding::new(
            "SELECT name FROM crm.account",
            &params("{}"),
            "Europe/Paris",
        );
        assert!(zone.decode(&cursor).is_none());
        assert!(binding.decode(&cursor[..cursor.len() - 2]).is_none());
        assert!(binding.decode("garbage").is_none());
        let edited = cursor.replacen('W', "X", 1);
        assert!(edited == cursor || binding.decode(&edited).is_none());
        // Parameter order does not matter; values do.
        let a = Binding::new("q", &params(r#"{"a": 1, "b": 2}"#), "UTC");
        let b = Binding::new("q", &params(r#"{"b": 2, "a": 1}"#), "UTC");
        let c = Binding::new("q", &params(r#"{"a": 1, "b": 3}"#), "UTC");
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn signed_cursors_need_the_server_secret() {
        let query = || Binding::new("SELECT name FROM crm.account", &params("{}"), "UTC");
        let signed = query().signed(b"server secret");
        let values = "[\"Acme\",\"6f9619ff-8b86-d011-b42d-00c04fc964ff\"]";
        let cursor = signed.encode(values);
        assert!(signed.decode(&cursor).is_some());
        // Another instance with the same secret accepts it.
        assert!(query().signed(b"server secret").decode(&cursor).is_some());
        // A cursor computed without the secret, or with another one, is refused.
        assert!(signed.decode(&query().encode(values)).is_none());
        assert!(query().signed(b"other").decode(&cursor).is_none());
        assert!(query().decode(&cursor).is_none());
        // A tag cut short is refused, not checked on fewer bytes.
        let (body, tag) = cursor.split_once('.').unwrap();
        let short = format!("{body}.{}", &tag[..8]);
        assert!(signed.decode(&short).is_none());
        assert!(!format!("{signed:?}").contains("secret"));
    }

    #[test]
    fn a_retiring_key_verifies_and_never_signs() {
        let query = || Binding::new("SELECT name FROM crm.account", &params("{}"), "UTC");
        let values = "[\"Acme\",\"6f9619ff-8b86-d011-b42d-00c04fc964ff\"]";
        let old_cursor = query().signed(b"old").encode(values);
        let rotated = query().signed(b"new").also_accepting(b"old");
        assert!(rotated.decode(&old_cursor).is_some());
        let new_cursor = rotated.encode(values);
        assert_eq!(new_cursor, query().signed(b"new").encode(values));
        assert!(query().signed(b"old").decode(&new_cursor).is_none());
        // Once the old key is dropped, its cursors are refused.
        assert!(query().signed(b"new").decode(&old_cursor).is_none());
    }
}
