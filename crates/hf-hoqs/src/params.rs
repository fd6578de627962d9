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

use hf_model::ScalarType;
use serde_json::value::RawValue;

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
    /// No parameters yet, with room for those of a typical statement.
    pub fn new() -> Params {
        Params {
            values: Vec::with_capacity(16),
            interned: HashMap::with_capacity(16),
            named: HashMap::new(),
        }
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

/// The values of a request's `:name` parameters, each the raw JSON text it was sent as, so
/// numbers keep every digit.
pub type RequestParams = HashMap<String, Box<RawValue>>;

/// The type a request parameter has when nothing around it says which type it must be.
pub(crate) fn natural_type(value: &RawValue) -> Type {
    ScalarType::of_json(value.get()).map_or(Type::Null, Type::from_scalar)
}

/// Converts a request parameter to the text of a value of `ty` by the model's value grammar
/// ([`ScalarType::parse_json`]: the rules a record field of that type follows), or says what
/// was expected. JSON `null` is SQL NULL for every type; a parameter of type `null` (nothing
/// says which type, and the value is `null`) must be `null`.
pub(crate) fn param_text(value: &RawValue, ty: Type) -> Result<Option<String>, String> {
    let raw = value.get().trim();
    if ty == Type::Multipicklist && raw.starts_with('"') {
        // As in a literal, a text joins keys with `;`: `{"tags": "hot;q4"}`.
        let text = ScalarType::Text.parse_json(raw)?.unwrap_or_default();
        return ScalarType::Multipicklist.parse_text(&text).map(Some);
    }
    match ty.scalar() {
        Some(scalar) => scalar.parse_json(value.get()),
        None => ScalarType::Text.parse_json(value.get()),
    }
}

/// The elements of a parameter whose value is a JSON array, or `None` when it is not one.
pub(crate) fn array_elements(value: &RawValue) -> Option<Vec<&RawValue>> {
    serde_json::from_str(value.get()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn raw(json: &str) -> Box<RawValue> {
        RawValue::from_string(json.to_owned()).unwrap()
    }

    #[test]
    fn request_values_follow_the_model_grammar() {
        assert_eq!(param_text(&raw("5"), Type::Integer), Ok(Some("5".into())));
        assert!(param_text(&raw("5.5"), Type::Integer).is_err());
        assert!(param_text(&raw("\"5\""), Type::Integer).is_err());
        assert_eq!(
            param_text(&raw("\"12.50\""), Type::Decimal),
            Ok(Some("12.50".into()))
        );
        // Exact: a number a double cannot hold is refused, not rounded.
        assert!(param_text(&raw("12345678901234567.5"), Type::Decimal).is_err());
        assert!(param_text(&raw("\"1e5\""), Type::Decimal).is_err());
        assert_eq!(param_text(&raw("null"), Type::Date), Ok(None));
        assert!(param_text(&raw("\"0000-01-01\""), Type::Date).is_err());
        assert!(param_text(&raw("\"2024-02-29\""), Type::Date).is_ok());
        assert!(param_text(&raw("\"2024-01-31T10:00:00\""), Type::Datetime).is_err());
        assert_eq!(
            param_text(&raw("{\"a\": [1]}"), Type::Json),
            Ok(Some("{\"a\": [1]}".into()))
        );
        assert!(param_text(&raw("1"), Type::Text).is_err());
        assert_eq!(natural_type(&raw("99999999999999999999")), Type::Decimal);
        assert_eq!(array_elements(&raw("[1, \"a\"]")).map(|v| v.len()), Some(2));
        assert!(array_elements(&raw("{}")).is_none());
    }
}
