//! The `:name` parameters a `{#query}` block gives a value the compiler knows, so that a host can
//! type-check them against its model when the screen is written (see [`crate::QueryParam`]).
//!
//! Only values written as literals in the block's parameter object count
//! (`{ stage: "won", limit: 10, open: true }`): their value, and so their type, is the same every
//! time the query runs. A variable is not followed, even one initialised with a literal: state
//! may be given a value of another type later, and a name in the markup may stand for an
//! `{#each}` item or another local that hides the script's variable. Reporting only what is
//! certain keeps the check sound: a parameter the host refuses would fail every run too.

use oxc::allocator::Allocator;
use oxc::ast::ast::{Expression, ObjectPropertyKind, PropertyKey, PropertyKind, UnaryOperator};
use oxc::parser::Parser;
use oxc::span::GetSpan;

use crate::markup::Span;
use crate::QueryParam;

/// The parameters of the parameter object at `span` of `source` whose value is a literal, in the
/// order written (a name given twice keeps its last value, as in JavaScript). Anything that is
/// not a plain object literal gives none.
pub(crate) fn literal_params(alloc: &Allocator, source: &str, span: Span) -> Vec<QueryParam> {
    let text = &source[span.start..span.end];
    // Parenthesised so that `{ … }` is an object, not a block.
    let wrapped = alloc.alloc_str(&format!("({text})"));
    let Ok(expr) = Parser::new(alloc, wrapped, crate::js::ts_module()).parse_expression() else {
        return Vec::new();
    };
    let Expression::ParenthesizedExpression(paren) = expr else {
        return Vec::new();
    };
    let Expression::ObjectExpression(object) = &paren.expression else {
        return Vec::new();
    };
    let mut params: Vec<QueryParam> = Vec::new();
    for property in &object.properties {
        let ObjectPropertyKind::ObjectProperty(property) = property else {
            // A spread may set any parameter: what was known before it no longer is.
            params.clear();
            continue;
        };
        let name = match &property.key {
            PropertyKey::StaticIdentifier(id) if !property.computed => id.name.as_str(),
            PropertyKey::StringLiteral(s) if !property.computed => s.value.as_str(),
            _ => {
                // A computed key may be any name.
                params.clear();
                continue;
            }
        };
        params.retain(|p| p.name != name);
        if property.kind != PropertyKind::Init || property.method {
            continue;
        }
        if let Some(json) = literal_json(&property.value) {
            // `span.start - 1`: the `(` added above.
            let at = property.value.span().start as usize;
            params.push(QueryParam {
                name: name.to_owned(),
                json,
                offset: span.start + at - 1,
            });
        }
    }
    params
}

/// The JSON text of a literal value: a string (or a template without `${}`), a finite number
/// (possibly negated), `true`, `false` or `null`; `None` for anything else.
fn literal_json(value: &Expression<'_>) -> Option<String> {
    match value {
        Expression::StringLiteral(s) => Some(json_string(s.value.as_str())),
        Expression::TemplateLiteral(t) if t.expressions.is_empty() => {
            let cooked = t.quasis.first()?.value.cooked.as_ref()?;
            Some(json_string(cooked.as_str()))
        }
        Expression::NumericLiteral(n) => json_number(n.value),
        Expression::UnaryExpression(u) if u.operator == UnaryOperator::UnaryNegation => {
            match &u.argument {
                Expression::NumericLiteral(n) => json_number(-n.value),
                _ => None,
            }
        }
        Expression::BooleanLiteral(b) => Some(b.value.to_string()),
        Expression::NullLiteral(_) => Some("null".to_owned()),
        Expression::ParenthesizedExpression(p) => literal_json(&p.expression),
        _ => None,
    }
}

/// A number as JSON writes it (`None` for one JSON cannot hold); integers without a fraction.
fn json_number(value: f64) -> Option<String> {
    value.is_finite().then(|| format!("{value}"))
}

/// A string as a JSON string literal.
fn json_string(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(text: &str) -> Vec<(String, String, String)> {
        let alloc = Allocator::default();
        let source = format!("xx{text}");
        let span = Span {
            start: 2,
            end: source.len(),
        };
        literal_params(&alloc, &source, span)
            .into_iter()
            .map(|p| {
                let at = source[p.offset..].chars().take(3).collect();
                (p.name, p.json, at)
            })
            .collect()
    }

    #[test]
    fn literals_are_reported_with_their_json_and_offset() {
        let found = params(
            r#"{ a: "x\"y", 'b': -2.5, c: `t`, d: true, e: null, f: 10, g: n, h: `${n}`, i() { return 1; } }"#,
        );
        let expected = [
            ("a", r#""x\"y""#, "\"x\\"),
            ("b", "-2.5", "-2."),
            ("c", r#""t""#, "`t`"),
            ("d", "true", "tru"),
            ("e", "null", "nul"),
            ("f", "10", "10,"),
        ];
        let expected: Vec<(String, String, String)> = expected
            .iter()
            .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
            .collect();
        assert_eq!(found, expected);
    }

    #[test]
    fn spreads_and_computed_keys_forget_what_came_before() {
        assert_eq!(params("{ a: 1, ...rest, b: 2 }").len(), 1);
        assert_eq!(params("{ a: 1, [k]: 2 }"), Vec::new());
        assert_eq!(params("{ a: 1, a: x }"), Vec::new());
        assert_eq!(params("filters"), Vec::new());
    }
}
