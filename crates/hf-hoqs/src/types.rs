//! The static types of the expression language, how they combine, and how values of each type
//! are written in SQL and in the JSON of result records.
//!
//! The types are the metadata's scalar types plus `null`, the type of the `NULL` literal, which
//! fits wherever any type is expected. A picklist's value is its key, plain `text` (so `=`,
//! `IN`, `LIKE` and the text functions apply); a multi-select picklist's value is a
//! `multipicklist`, a `text[]` that only `INCLUDES`/`EXCLUDES`, `=`/`!=` and `IS NULL` take. Keeping the combination rules (which types compare, which
//! widen to which) in this one file is what makes a formula mean the same thing in a query, a
//! rule and a rollup filter.

use std::fmt;

use hf_model::ScalarType;

/// The type of an expression.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    /// The type of `NULL` (and of a parameter whose value is JSON `null` with nothing to say
    /// otherwise); it fits any other type.
    Null,
    /// `text`.
    Text,
    /// A 64-bit integer (`bigint`).
    Integer,
    /// An exact decimal (`numeric`); a JSON string in results.
    Decimal,
    /// A double-precision float.
    Float,
    /// `boolean`.
    Boolean,
    /// A calendar date.
    Date,
    /// A UTC instant (`timestamptz`), RFC 3339 with `Z` in results.
    Datetime,
    /// `uuid`; also the value of a lookup field.
    Uuid,
    /// `jsonb`.
    Json,
    /// The keys of a multi-select picklist, `text[]` (a JSON array in results).
    Multipicklist,
}

impl Type {
    /// The type of values of a metadata scalar type.
    pub fn from_scalar(scalar: ScalarType) -> Type {
        match scalar {
            ScalarType::Text => Type::Text,
            ScalarType::Integer => Type::Integer,
            ScalarType::Decimal => Type::Decimal,
            ScalarType::Float => Type::Float,
            ScalarType::Boolean => Type::Boolean,
            ScalarType::Date => Type::Date,
            ScalarType::Datetime => Type::Datetime,
            ScalarType::Uuid => Type::Uuid,
            ScalarType::Json => Type::Json,
            ScalarType::Picklist => Type::Text,
            ScalarType::Multipicklist => Type::Multipicklist,
        }
    }

    /// The name used in messages and in docs/formulas.md.
    pub fn name(self) -> &'static str {
        match self {
            Type::Null => "null",
            Type::Text => "text",
            Type::Integer => "integer",
            Type::Decimal => "decimal",
            Type::Float => "float",
            Type::Boolean => "boolean",
            Type::Date => "date",
            Type::Datetime => "datetime",
            Type::Uuid => "uuid",
            Type::Json => "json",
            Type::Multipicklist => "multipicklist",
        }
    }

    /// The metadata scalar type of values of this type; `None` for `null`.
    pub fn scalar(self) -> Option<ScalarType> {
        Some(match self {
            Type::Null => return None,
            Type::Text => ScalarType::Text,
            Type::Integer => ScalarType::Integer,
            Type::Decimal => ScalarType::Decimal,
            Type::Float => ScalarType::Float,
            Type::Boolean => ScalarType::Boolean,
            Type::Date => ScalarType::Date,
            Type::Datetime => ScalarType::Datetime,
            Type::Uuid => ScalarType::Uuid,
            Type::Json => ScalarType::Json,
            Type::Multipicklist => ScalarType::Multipicklist,
        })
    }

    /// The PostgreSQL type a value of this type is cast to: the model's mapping
    /// ([`ScalarType::sql_type`]); `null` is cast as `text`.
    pub fn sql_type(self) -> &'static str {
        self.scalar().map_or("text", ScalarType::sql_type)
    }

    /// Integer, decimal or float.
    pub fn is_numeric(self) -> bool {
        matches!(self, Type::Integer | Type::Decimal | Type::Float)
    }

    /// Whether `<`, `MIN`, `GREATEST` and sorting make sense for the type.
    pub fn is_ordered(self) -> bool {
        self.is_numeric() || matches!(self, Type::Text | Type::Date | Type::Datetime)
    }

    /// Date or datetime.
    pub fn is_temporal(self) -> bool {
        matches!(self, Type::Date | Type::Datetime)
    }

    /// Whether a value of this type may stand where `expected` is wanted: the same type,
    /// `null`, or any numeric type for a numeric one (the value is converted, as a formula
    /// declared `decimal` over integers is).
    pub fn fits(self, expected: Type) -> bool {
        self == expected || self == Type::Null || (self.is_numeric() && expected.is_numeric())
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The rank of a numeric type in the widening order integer < decimal < float.
fn numeric_rank(ty: Type) -> u8 {
    match ty {
        Type::Integer => 1,
        Type::Decimal => 2,
        _ => 3,
    }
}

/// The common type of two operands that are compared, listed together (`IN`, `COALESCE`,
/// `IF`'s branches), or `None` when they do not go together.
///
/// `null` takes the other type; numbers widen (integer < decimal < float); a date meets a
/// datetime as a datetime (midnight UTC).
pub fn unify(a: Type, b: Type) -> Option<Type> {
    match (a, b) {
        (Type::Null, other) | (other, Type::Null) => Some(other),
        _ if a == b => Some(a),
        _ if a.is_numeric() && b.is_numeric() => Some(if numeric_rank(a) >= numeric_rank(b) {
            a
        } else {
            b
        }),
        _ if a.is_temporal() && b.is_temporal() => Some(Type::Datetime),
        _ => None,
    }
}

/// The result type of `+ - *` over two numbers: the wider one.
pub fn widest_numeric(a: Type, b: Type) -> Type {
    match (a, b) {
        (Type::Null, other) | (other, Type::Null) => other,
        _ if numeric_rank(a) >= numeric_rank(b) => a,
        _ => b,
    }
}

/// Wraps a value of type `ty` so that `json_build_object` renders it as the contract wants:
/// decimals as JSON strings (exact), datetimes as RFC 3339 in UTC ending in `Z`, everything
/// else as PostgreSQL's JSON of the value (numbers, booleans, strings, embedded JSON).
///
/// The datetime form does not depend on the session's time zone, so the same SQL gives the
/// same text wherever it runs.
pub fn json_value(sql: &str, ty: Type) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    push_json_value(&mut out, sql, ty);
    out
}

/// [`json_value`], written at the end of `out`.
pub fn push_json_value(out: &mut String, sql: &str, ty: Type) {
    match ty {
        Type::Decimal => {
            out.push('(');
            out.push_str(sql);
            out.push_str(")::text");
        }
        Type::Datetime => {
            out.push_str("((to_json((");
            out.push_str(sql);
            out.push_str(") AT TIME ZONE 'UTC') #>> '{}') || 'Z')");
        }
        _ => out.push_str(sql),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unify_widens_numbers_and_absorbs_null() {
        assert_eq!(unify(Type::Integer, Type::Decimal), Some(Type::Decimal));
        assert_eq!(unify(Type::Float, Type::Integer), Some(Type::Float));
        assert_eq!(unify(Type::Null, Type::Date), Some(Type::Date));
        assert_eq!(unify(Type::Date, Type::Datetime), Some(Type::Datetime));
        assert_eq!(unify(Type::Text, Type::Integer), None);
        assert_eq!(unify(Type::Uuid, Type::Text), None);
    }

    #[test]
    fn fits_allows_numeric_conversion_only() {
        assert!(Type::Integer.fits(Type::Decimal));
        assert!(Type::Decimal.fits(Type::Integer));
        assert!(Type::Null.fits(Type::Json));
        assert!(!Type::Text.fits(Type::Integer));
        assert!(!Type::Date.fits(Type::Datetime));
    }
}
