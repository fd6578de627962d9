//! A record body as sent: the properties of one JSON object, each kept as its raw JSON text.
//!
//! Keeping the raw text (rather than a parsed `serde_json::Value`) is what lets a decimal written
//! `0.10` stay `0.10` and lets `1e999` be reported as an invalid value of its field instead of
//! failing the whole body; nested JSON is captured without recursion, so a deeply nested value
//! is judged by the field it belongs to (see `hf_model::MAX_JSON_DEPTH`).

use std::fmt;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

/// The properties of a record body, in the order they were sent.
#[derive(Debug, Default)]
pub struct Body {
    entries: Vec<(String, Box<RawValue>)>,
}

/// Why a body is not a record body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// The bytes are not JSON.
    #[error("the request body is not valid JSON: {message}")]
    Malformed {
        /// serde_json's description.
        message: String,
        /// 1-based line of the problem (0 when unknown).
        line: usize,
        /// 1-based column of the problem, in bytes (0 when unknown).
        column: usize,
    },
    /// The JSON is not an object.
    #[error("the request body must be a JSON object of field values")]
    NotAnObject,
    /// A property appears twice, so which value is meant is unclear.
    #[error("the property `{key}` appears more than once")]
    DuplicateKey {
        /// The repeated property.
        key: String,
    },
}

impl Body {
    /// Parses a request body; it must be one JSON object.
    pub fn parse(bytes: &[u8]) -> Result<Body, BodyError> {
        let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
        let parsed = serde_json::from_slice::<Entries>(bytes).map_err(|error| {
            if first.is_some_and(|b| *b != b'{') && error.is_data() {
                return BodyError::NotAnObject;
            }
            BodyError::Malformed {
                message: error.to_string(),
                line: error.line(),
                column: error.column(),
            }
        })?;
        let mut seen = std::collections::HashSet::new();
        for (key, _) in &parsed.0 {
            if !seen.insert(key.as_str()) {
                return Err(BodyError::DuplicateKey { key: key.clone() });
            }
        }
        Ok(Body { entries: parsed.0 })
    }

    /// A body from entries, for tests and for callers that build records themselves.
    pub fn from_entries(entries: Vec<(String, Box<RawValue>)>) -> Body {
        Body { entries }
    }

    /// The properties in the order they were sent.
    pub fn entries(&self) -> &[(String, Box<RawValue>)] {
        &self.entries
    }

    /// The raw value of one property.
    pub fn get(&self, key: &str) -> Option<&RawValue> {
        self.entries
            .iter()
            .find(|(name, _)| name == key)
            .map(|(_, value)| &**value)
    }
}

/// The entries of a JSON object, duplicates kept so they can be reported.
struct Entries(Vec<(String, Box<RawValue>)>);

impl<'de> serde::Deserialize<'de> for Entries {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntriesVisitor;

        impl<'de> Visitor<'de> for EntriesVisitor {
            type Value = Entries;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries, A::Error> {
                let mut entries = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, Box<RawValue>>()? {
                    entries.push((key, value));
                }
                Ok(Entries(entries))
            }
        }

        deserializer.deserialize_map(EntriesVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_raw_values_in_order() {
        let body = Body::parse(br#" {"b": 0.10, "a": {"x": [1e999]}} "#).unwrap();
        let keys: Vec<&str> = body.entries().iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["b", "a"]);
        assert_eq!(body.get("b").unwrap().get(), "0.10");
        assert_eq!(body.get("a").unwrap().get(), r#"{"x": [1e999]}"#);
    }

    #[test]
    fn refuses_what_is_not_one_object() {
        assert_eq!(Body::parse(b"[1]").unwrap_err(), BodyError::NotAnObject);
        assert_eq!(Body::parse(b"42").unwrap_err(), BodyError::NotAnObject);
        assert!(matches!(
            Body::parse(b"{\"a\": }").unwrap_err(),
            BodyError::Malformed { line: 1, .. }
        ));
        assert!(matches!(
            Body::parse(b"{} {}").unwrap_err(),
            BodyError::Malformed { .. }
        ));
        assert_eq!(
            Body::parse(br#"{"a": 1, "a": 2}"#).unwrap_err(),
            BodyError::DuplicateKey { key: "a".into() }
        );
    }

    #[test]
    fn captures_deep_values_without_recursing() {
        let deep = format!("{{\"j\": {}{}}}", "[".repeat(100_000), "]".repeat(100_000));
        let body = Body::parse(deep.as_bytes()).unwrap();
        assert_eq!(body.get("j").unwrap().get().len(), 200_000);
    }
}
