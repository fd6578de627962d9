//! The one value grammar: how a JSON value (a record field, a query parameter) or a text literal
//! becomes the text PostgreSQL reads for a scalar type, and which PostgreSQL type that is.
//!
//! Every value hf sends is bound as text and cast in the statement (`$7::numeric`), so this is
//! the one place that decides what a value of each type may be: the database only ever sees text
//! that casts without an error. The record layer, query parameters, HOQS literals and the DDL
//! mapping all come here, so a value accepted in one place is accepted in every other. Each check
//! works on the value's raw JSON text, which keeps numbers exact: a decimal written `12.50` is
//! sent as `12.50`, and a number no double-precision parser could read exactly is refused instead
//! of silently rounded.

use crate::{PicklistValue, ScalarType};

/// How deeply arrays and objects may nest inside a `json` value.
pub const MAX_JSON_DEPTH: usize = 64;

/// The largest magnitude of a decimal PostgreSQL's `numeric` holds: digits before the point.
const MAX_NUMERIC_WHOLE_DIGITS: usize = 131_072;
/// Digits after the point `numeric` holds.
const MAX_NUMERIC_FRACTION_DIGITS: usize = 16_383;

impl ScalarType {
    /// The PostgreSQL type of the type's columns and casts; part of the
    /// interface, since users grant, write policies and run BI tools on the tables.
    pub fn sql_type(self) -> &'static str {
        match self {
            ScalarType::Text => "text",
            ScalarType::Integer => "bigint",
            ScalarType::Decimal => "numeric",
            ScalarType::Float => "double precision",
            ScalarType::Boolean => "boolean",
            ScalarType::Date => "date",
            ScalarType::Datetime => "timestamptz",
            ScalarType::Uuid => "uuid",
            ScalarType::Json => "jsonb",
            ScalarType::Picklist => "text",
            ScalarType::Multipicklist => "text[]",
        }
    }

    /// Converts the raw JSON text of a value to the text bound for this type.
    ///
    /// `Ok(None)` is SQL NULL (JSON `null`, for every type, `json` included). `Err` says in
    /// words what was expected, for messages such as `INVALID_VALUE`'s.
    pub fn parse_json(self, raw: &str) -> Result<Option<String>, String> {
        let text = raw.trim();
        if text == "null" {
            return Ok(None);
        }
        let converted = match self {
            ScalarType::Text => string(text, "text").and_then(|s| no_nul(s, "text")),
            ScalarType::Integer => integer(text),
            ScalarType::Decimal => decimal(text),
            ScalarType::Float => float(text),
            ScalarType::Boolean => boolean(text),
            ScalarType::Date => string(text, "a date").and_then(|s| date(&s)),
            ScalarType::Datetime => string(text, "a datetime").and_then(|s| datetime(&s)),
            ScalarType::Uuid => string(text, "a uuid").and_then(|s| uuid(&s)),
            ScalarType::Json => json(text),
            ScalarType::Picklist => string(text, "a picklist key").and_then(|s| no_nul(s, "a key")),
            ScalarType::Multipicklist => keys(text).map(|keys| array_literal(&keys)),
        };
        converted.map(Some)
    }

    /// [`Self::parse_json`] for a field whose picklist choices are `values` (ignored for the
    /// other types): a `picklist` value must be one of their keys; a `multipicklist` value is
    /// an array of distinct keys, bound in the order the choices are declared, so that equal
    /// sets are equal arrays.
    pub fn parse_json_in(
        self,
        raw: &str,
        values: &[PicklistValue],
    ) -> Result<Option<String>, String> {
        match self {
            ScalarType::Picklist => {
                let Some(key) = self.parse_json(raw)? else {
                    return Ok(None);
                };
                choice(&key, values).map(|_| Some(key))
            }
            ScalarType::Multipicklist => {
                if raw.trim() == "null" {
                    return Ok(None);
                }
                let given = keys(raw.trim())?;
                sorted_keys(&given, values).map(|keys| Some(array_literal(&keys)))
            }
            _ => self.parse_json(raw),
        }
    }

    /// Converts text that stands for a value of this type (a HOQS text literal compared with a
    /// date, an id in a URL path) to the text bound for it, by the rules of [`Self::parse_json`]
    /// for a JSON string holding that text.
    pub fn parse_text(self, text: &str) -> Result<String, String> {
        match self {
            ScalarType::Text => no_nul(text.to_owned(), "text"),
            ScalarType::Decimal if is_plain_decimal(text) => {
                fits_numeric(text).map(|()| text.to_owned())
            }
            ScalarType::Decimal => Err(format!(
                "expected a decimal number like \"12.50\", got \"{}\"",
                abbreviate(text)
            )),
            ScalarType::Date => date(text),
            ScalarType::Datetime => datetime(text),
            ScalarType::Uuid => uuid(text),
            ScalarType::Json => json(text),
            ScalarType::Picklist => no_nul(text.to_owned(), "a key"),
            // `'a;b'` stands for the keys `a` and `b`, as in `INCLUDES ('a;b')`.
            ScalarType::Multipicklist => {
                let keys: Vec<String> = text.split(';').map(str::to_owned).collect();
                if keys.iter().any(|key| key.contains('\0')) {
                    return Err("a key cannot contain the NUL character (\\u0000)".to_owned());
                }
                Ok(array_literal(&keys))
            }
            ScalarType::Integer | ScalarType::Float | ScalarType::Boolean => self
                .parse_json(text)?
                .ok_or_else(|| "expected a value, got null".to_owned()),
        }
    }

    /// The type a JSON value has when nothing around it says which type it must be: `None` for
    /// `null`; whole numbers in 64 bits are integers, other numbers decimals, arrays and
    /// objects json.
    pub fn of_json(raw: &str) -> Option<ScalarType> {
        let text = raw.trim();
        match text.as_bytes().first() {
            None | Some(b'n') => None,
            Some(b't' | b'f') => Some(ScalarType::Boolean),
            Some(b'"') => Some(ScalarType::Text),
            Some(b'[' | b'{') => Some(ScalarType::Json),
            Some(_) if text.parse::<i64>().is_ok() => Some(ScalarType::Integer),
            Some(_) => Some(ScalarType::Decimal),
        }
    }
}

/// Whether a text is a valid picklist key: 1 to 63 lower-case ASCII letters, digits and
/// underscores. Keys are stored in rows and written into CHECK constraints, so they are kept to
/// characters that need no quoting anywhere.
pub fn is_picklist_key(key: &str) -> bool {
    (1..=63).contains(&key.len())
        && key
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// The choice whose key is `key`, or what was expected instead.
fn choice<'v>(key: &str, values: &'v [PicklistValue]) -> Result<&'v PicklistValue, String> {
    values.iter().find(|value| value.key == key).ok_or_else(|| {
        let keys: Vec<&str> = values.iter().map(|value| value.key.as_str()).collect();
        format!(
            "\"{}\" is not one of the choices ({})",
            abbreviate(key),
            abbreviate(&keys.join(", "))
        )
    })
}

/// The given keys, each one a choice and none repeated, in the order of the choices.
fn sorted_keys(given: &[String], values: &[PicklistValue]) -> Result<Vec<String>, String> {
    for (at, key) in given.iter().enumerate() {
        choice(key, values)?;
        if given[..at].contains(key) {
            return Err(format!("\"{}\" is given twice", abbreviate(key)));
        }
    }
    Ok(values
        .iter()
        .filter(|value| given.contains(&value.key))
        .map(|value| value.key.clone())
        .collect())
}

/// The strings of a JSON array of strings (a multi-select picklist value).
fn keys(text: &str) -> Result<Vec<String>, String> {
    if !text.starts_with('[') {
        return Err(format!(
            "expected an array of picklist keys, got {}",
            kind_of(text)
        ));
    }
    if depth(text) > 1 {
        return Err("expected an array of picklist keys (strings)".to_owned());
    }
    let items: Vec<serde_json::Value> = serde_json::from_str(text)
        .map_err(|error| format!("the array is not valid JSON text: {error}"))?;
    items
        .into_iter()
        .map(|item| match item {
            serde_json::Value::String(key) => no_nul(key, "a key"),
            other => Err(format!(
                "expected an array of picklist keys (strings), got an item {}",
                kind_of(&other.to_string())
            )),
        })
        .collect()
}

/// PostgreSQL's text form of a `text[]` holding `items`: each element double-quoted, with `"`
/// and `\` escaped, so any text reads back as written.
fn array_literal(items: &[String]) -> String {
    let quoted: Vec<String> = items
        .iter()
        .map(|item| format!("\"{}\"", item.replace('\\', "\\\\").replace('"', "\\\"")))
        .collect();
    format!("{{{}}}", quoted.join(","))
}

/// The text of a JSON string, or what was expected instead.
/// `what` names the value the string holds, for the message (`a date`).
fn string(text: &str, what: &str) -> Result<String, String> {
    if !text.starts_with('"') {
        return Err(format!(
            "expected {what} as a JSON string, got {}",
            kind_of(text)
        ));
    }
    serde_json::from_str::<String>(text)
        .map_err(|error| format!("the string is not valid JSON text: {error}"))
}

/// PostgreSQL's `text` and `jsonb` cannot hold the NUL character.
fn no_nul(text: String, what: &str) -> Result<String, String> {
    if text.contains('\0') {
        return Err(format!("{what} cannot contain the NUL character (\\u0000)"));
    }
    Ok(text)
}

fn integer(text: &str) -> Result<String, String> {
    const EXPECTED: &str =
        "expected a whole number between -9223372036854775808 and 9223372036854775807";
    if !is_json_number(text) {
        return Err(format!("{EXPECTED}, got {}", kind_of(text)));
    }
    match text.parse::<i64>() {
        Ok(number) => Ok(number.to_string()),
        Err(_) => Err(format!("{EXPECTED}, got {}", abbreviate(text))),
    }
}

/// A decimal: a string holding a plain decimal number (`"12.50"`), or a JSON number that a
/// double-precision JSON parser reads exactly as written.
fn decimal(text: &str) -> Result<String, String> {
    if text.starts_with('"') {
        let inner = string(text, "a decimal")?;
        if !is_plain_decimal(&inner) {
            return Err(format!(
                "expected a decimal number like \"12.50\" (digits, an optional point and digits; \
                 no exponent, NaN or Infinity), got \"{}\"",
                abbreviate(&inner)
            ));
        }
        return fits_numeric(&inner).map(|()| inner);
    }
    if !is_json_number(text) {
        return Err(format!(
            "expected a decimal as a string like \"12.50\" or a number, got {}",
            kind_of(text)
        ));
    }
    if !is_exact_number(text) {
        return Err(format!(
            "the number {} cannot be represented exactly by a JSON number; send the decimal \
             as a string like \"12.50\"",
            abbreviate(text)
        ));
    }
    Ok(text.to_owned())
}

/// A float: any finite JSON number, sent as its shortest round-trip form.
fn float(text: &str) -> Result<String, String> {
    if !is_json_number(text) {
        return Err(format!("expected a number, got {}", kind_of(text)));
    }
    match text.parse::<f64>() {
        Ok(number) if number.is_finite() => Ok(format!("{number:e}")),
        _ => Err(format!(
            "the number {} is outside the range of a float",
            abbreviate(text)
        )),
    }
}

fn boolean(text: &str) -> Result<String, String> {
    match text {
        "true" | "false" => Ok(text.to_owned()),
        _ => Err(format!("expected true or false, got {}", kind_of(text))),
    }
}

/// `YYYY-MM-DD` naming a real calendar day of the years 1 to 9999.
fn date(text: &str) -> Result<String, String> {
    let expected = || {
        format!(
            "expected a date like \"2024-01-31\" (a real calendar day), got \"{}\"",
            abbreviate(text)
        )
    };
    let bytes = text.as_bytes();
    let shape = bytes.len() == 10
        && bytes[4] == b'-'
        && bytes[7] == b'-'
        && bytes
            .iter()
            .enumerate()
            .all(|(i, b)| i == 4 || i == 7 || b.is_ascii_digit());
    if !shape {
        return Err(expected());
    }
    match chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        Ok(day) if text[..4] != *"0000" => Ok(day.format("%Y-%m-%d").to_string()),
        _ => Err(expected()),
    }
}

/// An RFC 3339 date and time with a zone (`Z` or an offset), sent in UTC.
fn datetime(text: &str) -> Result<String, String> {
    use chrono::Datelike;
    match chrono::DateTime::parse_from_rfc3339(text).map(|t| t.with_timezone(&chrono::Utc)) {
        // PostgreSQL has no year 0: `0001-01-01T00:00:00+01:00` is out of its range. Years are
        // those of dates (1 to 9999) in UTC: `9999-12-31T23:59:59-05:00` is in the year 10000,
        // whose text (`+10000-…`) PostgreSQL would refuse.
        Ok(instant) if (1..=9999).contains(&instant.year()) => {
            Ok(instant.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string())
        }
        _ => Err(format!(
            "expected an RFC 3339 date and time with a zone, like \"2024-01-31T10:00:00Z\", \
             got \"{}\"",
            abbreviate(text)
        )),
    }
}

/// A uuid, hyphenated (`6f9619ff-8b86-d011-b42d-00c04fc964ff`) or as 32 hex digits; sent in the
/// hyphenated lower-case form.
fn uuid(text: &str) -> Result<String, String> {
    let plain_or_hyphenated = text.len() == 32 || text.len() == 36;
    match uuid::Uuid::try_parse(text) {
        Ok(id) if plain_or_hyphenated => Ok(id.hyphenated().to_string()),
        _ => Err(format!(
            "expected a uuid like \"6f9619ff-8b86-d011-b42d-00c04fc964ff\", got \"{}\"",
            abbreviate(text)
        )),
    }
}

/// Any JSON value nested at most [`MAX_JSON_DEPTH`] levels, without NUL characters in its
/// strings (`jsonb` cannot hold them) and with numbers `jsonb` can hold. The raw text is sent as
/// written, so numbers keep every digit.
fn json(text: &str) -> Result<String, String> {
    if depth(text) > MAX_JSON_DEPTH {
        return Err(format!(
            "JSON values may nest at most {MAX_JSON_DEPTH} arrays or objects deep"
        ));
    }
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|error| format!("the JSON value cannot be stored: {error}"))?;
    if contains_nul(&value) {
        return Err("JSON strings cannot contain the NUL character (\\u0000)".to_owned());
    }
    Ok(text.to_owned())
}

/// The deepest nesting of arrays and objects in a JSON text, counted without parsing it, so a
/// hostile value cannot make a parser recurse.
fn depth(text: &str) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for byte in text.bytes() {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

fn contains_nul(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::String(text) => text.contains('\0'),
        serde_json::Value::Array(items) => items.iter().any(contains_nul),
        serde_json::Value::Object(map) => map
            .iter()
            .any(|(key, item)| key.contains('\0') || contains_nul(item)),
        _ => false,
    }
}

/// Whether raw JSON text is a number (JSON's grammar already guarantees its shape).
fn is_json_number(text: &str) -> bool {
    text.starts_with(|c: char| c == '-' || c.is_ascii_digit())
}

/// An optional sign, digits, and an optional point followed by digits: what `numeric` reads
/// without surprises.
fn is_plain_decimal(text: &str) -> bool {
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (whole, fraction) = match unsigned.split_once('.') {
        Some((whole, fraction)) => (whole, Some(fraction)),
        None => (unsigned, None),
    };
    let digits = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    digits(whole) && fraction.is_none_or(digits)
}

/// Whether a plain decimal fits `numeric`'s limits on digits before and after the point.
fn fits_numeric(text: &str) -> Result<(), String> {
    let unsigned = text.trim_start_matches(['-', '+']);
    let (whole, fraction) = unsigned.split_once('.').unwrap_or((unsigned, ""));
    let whole = whole.trim_start_matches('0');
    if whole.len() > MAX_NUMERIC_WHOLE_DIGITS || fraction.len() > MAX_NUMERIC_FRACTION_DIGITS {
        return Err(format!(
            "a decimal holds at most {MAX_NUMERIC_WHOLE_DIGITS} digits before the point and \
             {MAX_NUMERIC_FRACTION_DIGITS} after it"
        ));
    }
    Ok(())
}

/// Whether a JSON number means exactly what a double-precision JSON parser (JavaScript's
/// `JSON.parse`, or ours) reads from it: integers that fit 64 bits, and any other number whose
/// value equals the shortest decimal form of the nearest double (`0.1`, `12.5`, `1e-7`).
/// `0.1000000000000000055` or `12345678901234567.5` carry more digits than a double keeps, and
/// `1e999` does not fit one at all.
fn is_exact_number(text: &str) -> bool {
    if text.parse::<i64>().is_ok() || text.parse::<u64>().is_ok() {
        return true;
    }
    let Ok(number) = text.parse::<f64>() else {
        return false;
    };
    if !number.is_finite() {
        return false;
    }
    let shortest = format!("{number:e}");
    match (normalize(text), normalize(&shortest)) {
        (Some(written), Some(read)) => written == read,
        _ => false,
    }
}

/// A decimal number's value as (negative, significant digits, exponent of the last digit),
/// with zero as `(false, "", 0)`; `None` when the text is not a number.
fn normalize(text: &str) -> Option<(bool, String, i64)> {
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let (mantissa, exponent) = match unsigned.split_once(['e', 'E']) {
        Some((mantissa, exponent)) => (mantissa, exponent.parse::<i64>().ok()?),
        None => (unsigned, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if whole.is_empty()
        || !whole
            .bytes()
            .chain(fraction.bytes())
            .all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let digits = format!("{whole}{fraction}");
    let fraction_len = i64::try_from(fraction.len()).ok()?;
    let trimmed_end = digits.trim_end_matches('0');
    let trailing = i64::try_from(digits.len() - trimmed_end.len()).ok()?;
    let significant = trimmed_end.trim_start_matches('0');
    if significant.is_empty() {
        return Some((false, String::new(), 0));
    }
    let exponent = exponent.checked_sub(fraction_len)?.checked_add(trailing)?;
    Some((negative, significant.to_owned(), exponent))
}

/// What kind of JSON value a raw text is, for messages.
fn kind_of(text: &str) -> String {
    match text.as_bytes().first() {
        Some(b'"') => format!("the string {}", abbreviate(text)),
        Some(b'[') => "an array".to_owned(),
        Some(b'{') => "an object".to_owned(),
        Some(b't' | b'f') => format!("the boolean {text}"),
        Some(_) => format!("the number {}", abbreviate(text)),
        None => "nothing".to_owned(),
    }
}

/// At most 40 characters of a text, for messages that quote what was sent.
fn abbreviate(text: &str) -> String {
    match text.char_indices().nth(40) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn convert(json: &str, ty: ScalarType) -> Result<Option<String>, String> {
        ty.parse_json(json)
    }

    fn ok(json: &str, ty: ScalarType) -> String {
        convert(json, ty).unwrap().unwrap()
    }

    fn bad(json: &str, ty: ScalarType) {
        assert!(convert(json, ty).is_err(), "{json} as {ty} was accepted");
    }

    #[test]
    fn null_is_sql_null_for_every_type() {
        for ty in ScalarType::ALL {
            assert_eq!(convert("null", ty), Ok(None));
        }
    }

    #[test]
    fn integers_are_json_whole_numbers_in_64_bits() {
        assert_eq!(ok("42", ScalarType::Integer), "42");
        assert_eq!(
            ok("-9223372036854775808", ScalarType::Integer),
            "-9223372036854775808"
        );
        bad("9223372036854775808", ScalarType::Integer);
        bad("\"42\"", ScalarType::Integer);
        bad("4.5", ScalarType::Integer);
        bad("1e3", ScalarType::Integer);
        bad("true", ScalarType::Integer);
        bad("1e999", ScalarType::Integer);
    }

    #[test]
    fn decimals_are_strings_or_exact_numbers() {
        assert_eq!(ok("\"12.50\"", ScalarType::Decimal), "12.50");
        assert_eq!(ok("12.5", ScalarType::Decimal), "12.5");
        assert_eq!(ok("0.1", ScalarType::Decimal), "0.1");
        assert_eq!(ok("1e-7", ScalarType::Decimal), "1e-7");
        assert_eq!(
            ok("18446744073709551615", ScalarType::Decimal),
            "18446744073709551615"
        );
        assert_eq!(
            ok(
                "\"123456789012345678901234567890.123\"",
                ScalarType::Decimal
            ),
            "123456789012345678901234567890.123"
        );
        bad("12345678901234567.5", ScalarType::Decimal);
        bad("0.10000000000000000555", ScalarType::Decimal);
        bad("1e999", ScalarType::Decimal);
        bad("\"1e999\"", ScalarType::Decimal);
        bad("\"NaN\"", ScalarType::Decimal);
        bad("\"Infinity\"", ScalarType::Decimal);
        bad("\"12,5\"", ScalarType::Decimal);
        bad("\".5\"", ScalarType::Decimal);
        bad("\"\"", ScalarType::Decimal);
        bad("true", ScalarType::Decimal);
    }

    #[test]
    fn floats_are_finite_numbers() {
        assert_eq!(ok("0.5", ScalarType::Float), "5e-1");
        assert_eq!(ok("3", ScalarType::Float), "3e0");
        bad("1e999", ScalarType::Float);
        bad("\"NaN\"", ScalarType::Float);
        bad("\"1.5\"", ScalarType::Float);
    }

    #[test]
    fn texts_are_strings_without_nul() {
        assert_eq!(ok("\"it's\"", ScalarType::Text), "it's");
        assert_eq!(ok("\"caf\\u00e9\"", ScalarType::Text), "café");
        bad("\"a\\u0000b\"", ScalarType::Text);
        bad("42", ScalarType::Text);
        bad("\"\\ud800\"", ScalarType::Text);
    }

    #[test]
    fn dates_are_real_calendar_days() {
        assert_eq!(ok("\"2024-02-29\"", ScalarType::Date), "2024-02-29");
        bad("\"2024-02-30\"", ScalarType::Date);
        bad("\"2023-02-29\"", ScalarType::Date);
        bad("\"2024-13-01\"", ScalarType::Date);
        bad("\"0000-01-01\"", ScalarType::Date);
        bad("\"2024-1-01\"", ScalarType::Date);
        bad("\"+2024-01-01\"", ScalarType::Date);
        bad("\"2024-01-01T00:00:00Z\"", ScalarType::Date);
        bad("20240101", ScalarType::Date);
    }

    #[test]
    fn datetimes_are_rfc3339_with_a_zone_and_become_utc() {
        assert_eq!(
            ok("\"2024-01-31T10:00:00+02:00\"", ScalarType::Datetime),
            "2024-01-31T08:00:00.000000Z"
        );
        assert_eq!(
            ok("\"2024-01-31T10:00:00.123456789Z\"", ScalarType::Datetime),
            "2024-01-31T10:00:00.123456Z"
        );
        bad("\"2024-01-31T10:00:00\"", ScalarType::Datetime);
        bad("\"2024-02-30T10:00:00Z\"", ScalarType::Datetime);
        bad("\"2024-01-31\"", ScalarType::Datetime);
        bad("1706695200", ScalarType::Datetime);
        bad("\"0001-01-01T00:00:00+01:00\"", ScalarType::Datetime);
        bad("\"9999-12-31T23:59:59-05:00\"", ScalarType::Datetime);
        ok("\"9999-12-31T23:59:59+05:00\"", ScalarType::Datetime);
    }

    #[test]
    fn uuids_are_hyphenated_or_plain_hex() {
        let canonical = "6f9619ff-8b86-d011-b42d-00c04fc964ff";
        assert_eq!(ok(&format!("\"{canonical}\""), ScalarType::Uuid), canonical);
        assert_eq!(
            ok("\"6F9619FF8B86D011B42D00C04FC964FF\"", ScalarType::Uuid),
            canonical
        );
        bad("\"6f9619ff\"", ScalarType::Uuid);
        bad(
            "\"{6f9619ff-8b86-d011-b42d-00c04fc964ff}\"",
            ScalarType::Uuid,
        );
        bad("\"not-a-uuid\"", ScalarType::Uuid);
        bad("42", ScalarType::Uuid);
    }

    #[test]
    fn booleans_are_true_or_false() {
        assert_eq!(ok("true", ScalarType::Boolean), "true");
        bad("\"true\"", ScalarType::Boolean);
        bad("1", ScalarType::Boolean);
    }

    #[test]
    fn json_values_are_kept_as_written_and_bounded() {
        assert_eq!(
            ok("{\"a\": [1, 2.50]}", ScalarType::Json),
            "{\"a\": [1, 2.50]}"
        );
        assert_eq!(ok("\"x\"", ScalarType::Json), "\"x\"");
        let deep = format!("{}{}", "[".repeat(65), "]".repeat(65));
        bad(&deep, ScalarType::Json);
        let fine = format!("{}{}", "[".repeat(64), "]".repeat(64));
        assert_eq!(ok(&fine, ScalarType::Json), fine);
        let very_deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        bad(&very_deep, ScalarType::Json);
        bad("{\"a\": \"\\u0000\"}", ScalarType::Json);
        bad("[1e999]", ScalarType::Json);
        assert_eq!(depth("[\"[[[\", {\"a\\\"[\": []}]"), 3);
    }

    #[test]
    fn exactness_compares_values_not_spellings() {
        assert!(is_exact_number("12.50"));
        assert!(is_exact_number("1.5e3"));
        assert!(is_exact_number("-0.0"));
        assert!(is_exact_number("9007199254740993"));
        assert!(!is_exact_number("9007199254740993.5"));
        assert!(!is_exact_number("1e400"));
    }

    #[test]
    fn text_stands_for_values_by_the_same_rules() {
        assert_eq!(
            ScalarType::Uuid.parse_text("6F9619FF8B86D011B42D00C04FC964FF"),
            Ok("6f9619ff-8b86-d011-b42d-00c04fc964ff".to_owned())
        );
        assert!(ScalarType::Date.parse_text("0000-01-01").is_err());
        assert!(ScalarType::Date.parse_text("2024-02-30").is_err());
        assert_eq!(
            ScalarType::Decimal.parse_text("12.50"),
            Ok("12.50".to_owned())
        );
        assert!(ScalarType::Decimal.parse_text("1e5").is_err());
        assert_eq!(ScalarType::Integer.parse_text("42"), Ok("42".to_owned()));
        assert!(ScalarType::Json.parse_text("{").is_err());
    }

    #[test]
    fn json_values_have_a_natural_type() {
        assert_eq!(ScalarType::of_json("null"), None);
        assert_eq!(ScalarType::of_json("5"), Some(ScalarType::Integer));
        assert_eq!(ScalarType::of_json("5.5"), Some(ScalarType::Decimal));
        assert_eq!(
            ScalarType::of_json("99999999999999999999"),
            Some(ScalarType::Decimal)
        );
        assert_eq!(ScalarType::of_json("\"x\""), Some(ScalarType::Text));
        assert_eq!(ScalarType::of_json("[1]"), Some(ScalarType::Json));
        assert_eq!(ScalarType::of_json("false"), Some(ScalarType::Boolean));
    }

    #[test]
    fn every_type_has_one_postgresql_type() {
        let names: Vec<&str> = ScalarType::ALL.iter().map(|t| t.sql_type()).collect();
        assert_eq!(
            names,
            [
                "text",
                "bigint",
                "numeric",
                "double precision",
                "boolean",
                "date",
                "timestamptz",
                "uuid",
                "jsonb",
                "text",
                "text[]"
            ]
        );
    }

    fn stages() -> Vec<PicklistValue> {
        vec![
            PicklistValue::new("open", "Open"),
            PicklistValue::new("won", "Won"),
            PicklistValue::new("lost", "Lost"),
        ]
    }

    #[test]
    fn picklist_values_are_keys_of_the_choices() {
        let values = stages();
        let pick = |raw: &str| ScalarType::Picklist.parse_json_in(raw, &values);
        assert_eq!(pick("\"won\""), Ok(Some("won".to_owned())));
        assert_eq!(pick("null"), Ok(None));
        assert!(pick("\"Won\"").is_err());
        assert!(pick("\"maybe\"").is_err());
        assert!(pick("1").is_err());
        assert!(pick("[\"won\"]").is_err());
    }

    #[test]
    fn multipicklist_values_are_distinct_keys_in_declared_order() {
        let values = stages();
        let pick = |raw: &str| ScalarType::Multipicklist.parse_json_in(raw, &values);
        assert_eq!(
            pick("[\"lost\", \"open\"]"),
            Ok(Some("{\"open\",\"lost\"}".to_owned()))
        );
        assert_eq!(pick("[]"), Ok(Some("{}".to_owned())));
        assert_eq!(pick("null"), Ok(None));
        assert!(pick("[\"won\", \"won\"]").is_err());
        assert!(pick("[\"maybe\"]").is_err());
        assert!(pick("\"won\"").is_err());
        assert!(pick("[1]").is_err());
        assert!(pick("[[\"won\"]]").is_err());
    }

    #[test]
    fn multipicklist_text_joins_keys_with_semicolons() {
        assert_eq!(
            ScalarType::Multipicklist.parse_text("a;b"),
            Ok("{\"a\",\"b\"}".to_owned())
        );
        assert_eq!(
            ScalarType::Multipicklist.parse_json("[\"a\\\"b\"]"),
            Ok(Some("{\"a\\\"b\"}".to_owned()))
        );
    }

    #[test]
    fn picklist_keys_follow_their_grammar() {
        assert!(is_picklist_key("closed_won"));
        assert!(is_picklist_key("2024"));
        assert!(!is_picklist_key(""));
        assert!(!is_picklist_key("Won"));
        assert!(!is_picklist_key("a-b"));
        assert!(!is_picklist_key(&"a".repeat(64)));
    }
}
