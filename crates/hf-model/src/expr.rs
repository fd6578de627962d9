//! The one place where model validation checks formula, rule and filter expressions.
//!
//! The expression language arrives with the HOQS work (`hf-hoqs-syntax`); until then an
//! expression is stored as text and only checked for being non-empty. Keeping the check behind
//! this single function means the full parse is a change to this file alone.

/// Checks one expression (a formula, a rule's `assert` or a rollup's `filter`).
///
/// Returns a short description of the problem when the expression is not acceptable.
pub fn check_expression(text: &str) -> Result<(), String> {
    if text.trim().is_empty() {
        return Err("the expression is empty".to_owned());
    }
    Ok(())
}
