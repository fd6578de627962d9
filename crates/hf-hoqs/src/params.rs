//! Bind parameters: every value of a compiled statement, and the conversion of request
//! parameters (JSON) into them.
//!
//! Values never become SQL text. Every parameter is sent as text and cast in the SQL
//! (`$3::numeric`), so one driver call binds any statement, the statement reads the same in a
//! snapshot, in `psql` and in `pgbench`, and PostgreSQL does the final parsing of the value.
//! Request parameters are checked here first, so a wrong JSON type is a located type error
//! rather than a database failure.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use serde_json::Value;

use crate::types::Type;

/// The bind parameters of a statement under construction, numbered `$1, $2, ...`.
///
/// Equal literal values of the same type share one parameter, so an expression compiled twice
/// (a formula used in the select list and in GROUP BY) gives identical SQL both times, which
/// PostgreSQL needs to match grouped expressions. Callers that put their own values first (the
/// records layer's `WITH new AS (SELECT $1::bigint AS "amount", ...)`) [`Params::push`] them
/// before compiling expressions into the same `Params`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Params {
    values: Vec<Option<String>>,
    interned: HashMap<(Type, String), usize>,
    named: HashMap<String, (usize, Type)>,
}

impl Params {
    /// No parameters yet.
    pub fn new() -> Params {
        Params::default()
    }

    /// Adds a value (`None` is SQL NULL) and returns its number `n` for `$n`.
    pub fn push(&mut self, value: Option<String>) -> usize {
        self.values.push(value);
        self.values.len()
    }

    /// The values in `$n` order, each to be bound as text.
    pub fn values(&self) -> &[Option<String>] {
        &self.values
    }

    /// The values, consumed.
    pub fn into_values(self) -> Vec<Option<String>> {
        self.values
    }

    /// The number of a literal value of a type, shared with earlier equal literals.
    pub(crate) fn literal(&mut self, ty: Type, text: String) -> usize {
        match self.interned.entry((ty, text)) {
            Entry::Occupied(entry) => *entry.get(),
            Entry::Vacant(entry) => {
                self.values.push(Some(entry.key().1.clone()));
                *entry.insert(self.values.len())
            }
        }
    }

    /// The number and type of a request parameter already bound, by name.
    pub(crate) fn named(&self, name: &str) -> Option<(usize, Type)> {
        self.named.get(name).copied()
    }

    /// Binds a request parameter under its name.
    pub(crate) fn bind_named(&mut self, name: &str, ty: Type, value: Option<String>) -> usize {
        let number = self.push(value);
        self.named.insert(name.to_owned(), (number, ty));
        number
    }
}

/// The type a request parameter has when nothing around it says which type it must be.
pub(crate) fn natural_type(value: &Value) -> Type {
    match value {
        Value::Null => Type::Null,
        Value::Bool(_) => Type::Boolean,
        Value::Number(number) if number.is_i64() => Type::Integer,
        Value::Number(_) => Type::Decimal,
        Value::String(_) => Type::Text,
        Value::Array(_) | Value::Object(_) => Type::Json,
    }
}

/// Converts a request parameter to the text of a value of `ty`, or says what was expected.
///
/// JSON `null` is SQL NULL for every type. Decimals accept a JSON number or a string holding a
/// decimal number (so exact values survive JSON); everything else takes exactly one JSON kind.
pub(crate) fn param_text(value: &Value, ty: Type) -> Result<Option<String>, &'static str> {
    if value.is_null() {
        return Ok(None);
    }
    let text = match (ty, value) {
        (Type::Null | Type::Text, Value::String(text)) => text.clone(),
        (Type::Integer, Value::Number(number)) if number.is_i64() => number.to_string(),
        (Type::Integer, _) => return Err("a whole number between -2^63 and 2^63-1"),
        (Type::Decimal, Value::Number(number)) => number.to_string(),
        (Type::Decimal, Value::String(text)) if is_decimal(text) => text.clone(),
        (Type::Decimal, _) => return Err("a number, or a string holding a decimal like \"12.50\""),
        (Type::Float, Value::Number(number)) => number.to_string(),
        (Type::Float, _) => return Err("a number"),
        (Type::Boolean, Value::Bool(flag)) => flag.to_string(),
        (Type::Boolean, _) => return Err("true or false"),
        (Type::Date, Value::String(text)) if is_date(text) => text.clone(),
        (Type::Date, _) => return Err("a date string like \"2024-01-31\""),
        (Type::Datetime, Value::String(text)) if is_datetime(text) => text.clone(),
        (Type::Datetime, _) => {
            return Err("a datetime string like \"2024-01-31T10:00:00Z\" (with Z or an offset)")
        }
        (Type::Uuid, Value::String(text)) if is_uuid(text) => text.clone(),
        (Type::Uuid, _) => {
            return Err("a uuid string like \"6f9619ff-8b86-d011-b42d-00c04fc964ff\"")
        }
        (Type::Json, other) => other.to_string(),
        (Type::Null | Type::Text, _) => return Err("a string"),
    };
    Ok(Some(text))
}

/// An optional sign, digits, and an optional point followed by digits: what `numeric` reads
/// without surprises (no exponents, no `NaN`).
pub(crate) fn is_decimal(text: &str) -> bool {
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (whole, fraction) = match unsigned.split_once('.') {
        Some((whole, fraction)) => (whole, Some(fraction)),
        None => (unsigned, None),
    };
    let digits = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    digits(whole) && fraction.is_none_or(digits)
}

/// `YYYY-MM-DD` naming a real calendar day.
pub(crate) fn is_date(text: &str) -> bool {
    let bytes = text.as_bytes();
    if bytes.len() != 10 || bytes[4] != b'-' || bytes[7] != b'-' {
        return false;
    }
    let number = |range: std::ops::Range<usize>| -> Option<u32> {
        let part = text.get(range)?;
        if !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        part.parse().ok()
    };
    let (Some(year), Some(month), Some(day)) = (number(0..4), number(5..7), number(8..10)) else {
        return false;
    };
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// A date, `T` (or a space), a time, and a zone (`Z` or `±HH:MM`): RFC 3339. PostgreSQL
/// checks the ranges of the time part; a zone is required so the instant is unambiguous.
pub(crate) fn is_datetime(text: &str) -> bool {
    let (Some(date), Some(rest)) = (text.get(..10), text.get(10..)) else {
        return false;
    };
    let Some(time) = rest.strip_prefix(['T', 't', ' ']) else {
        return false;
    };
    let (clock, zone_ok) = if let Some(clock) = time.strip_suffix(['Z', 'z']) {
        (clock, true)
    } else {
        match time
            .len()
            .checked_sub(6)
            .and_then(|at| time.get(at..).map(|z| (at, z)))
        {
            Some((at, zone)) => {
                let zone = zone.as_bytes();
                let ok = matches!(zone[0], b'+' | b'-')
                    && zone[1].is_ascii_digit()
                    && zone[2].is_ascii_digit()
                    && zone[3] == b':'
                    && zone[4].is_ascii_digit()
                    && zone[5].is_ascii_digit();
                (time.get(..at).unwrap_or(""), ok)
            }
            None => ("", false),
        }
    };
    let clock = clock.as_bytes();
    let hms = clock.len() >= 8
        && clock[2] == b':'
        && clock[5] == b':'
        && [0, 1, 3, 4, 6, 7]
            .iter()
            .all(|&i| clock[i].is_ascii_digit());
    let fraction = match clock.get(8..) {
        None | Some([]) => true,
        Some([b'.', digits @ ..]) => {
            !digits.is_empty() && digits.len() <= 9 && digits.iter().all(u8::is_ascii_digit)
        }
        Some(_) => false,
    };
    is_date(date) && zone_ok && hms && fraction
}

/// 32 hexadecimal digits, optionally in the 8-4-4-4-12 groups.
pub(crate) fn is_uuid(text: &str) -> bool {
    let bytes = text.as_bytes();
    let grouped = bytes.len() == 36
        && [8, 13, 18, 23].iter().all(|&i| bytes[i] == b'-')
        && bytes
            .iter()
            .enumerate()
            .all(|(i, b)| [8, 13, 18, 23].contains(&i) || b.is_ascii_hexdigit());
    let plain = bytes.len() == 32 && bytes.iter().all(u8::is_ascii_hexdigit);
    grouped || plain
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn equal_literals_share_a_parameter() {
        let mut params = Params::new();
        let first = params.literal(Type::Text, "won".into());
        let other = params.literal(Type::Text, "lost".into());
        let again = params.literal(Type::Text, "won".into());
        let number = params.literal(Type::Integer, "won".into());
        assert_eq!((first, other, again, number), (1, 2, 1, 3));
        assert_eq!(params.values().len(), 3);
    }

    #[test]
    fn request_values_are_checked_per_type() {
        assert_eq!(param_text(&json!(5), Type::Integer), Ok(Some("5".into())));
        assert!(param_text(&json!(5.5), Type::Integer).is_err());
        assert!(param_text(&json!("5"), Type::Integer).is_err());
        assert_eq!(
            param_text(&json!("12.50"), Type::Decimal),
            Ok(Some("12.50".into()))
        );
        assert!(param_text(&json!("1e5"), Type::Decimal).is_err());
        assert_eq!(param_text(&json!(null), Type::Date), Ok(None));
        assert!(param_text(&json!("2024-02-30"), Type::Date).is_err());
        assert!(param_text(&json!("2024-02-29"), Type::Date).is_ok());
        assert!(param_text(&json!("2024-01-31T10:00:00Z"), Type::Datetime).is_ok());
        assert!(param_text(&json!("2024-01-31T10:00:00.5+02:00"), Type::Datetime).is_ok());
        assert!(param_text(&json!("2024-01-31T10:00:00"), Type::Datetime).is_err());
        assert!(param_text(&json!("6f9619ff-8b86-d011-b42d-00c04fc964ff"), Type::Uuid).is_ok());
        assert!(param_text(&json!("6f9619ff"), Type::Uuid).is_err());
        assert_eq!(
            param_text(&json!({"a": [1]}), Type::Json),
            Ok(Some("{\"a\":[1]}".into()))
        );
        assert!(param_text(&json!(1), Type::Text).is_err());
    }
}
