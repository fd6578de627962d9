//! The one place where SQL identifiers are quoted, and a small builder for parameterised SQL.
//!
//! Every identifier that reaches PostgreSQL (schema, table, column, role, constraint names) goes
//! through [`quote_ident`], so nothing taken from metadata or requests is ever spliced unquoted.
//! Values never become SQL text: [`Sql`] collects them as numbered `$n` parameters.
//!
//! It also holds the one table of what a failed statement's SQLSTATE says about the server
//! ([`sqlstate`]), shared by the planner's apply and the data path.

use std::fmt;

pub mod sqlstate;

/// PostgreSQL truncates identifiers longer than this many bytes (NAMEDATALEN - 1); we refuse them
/// instead, because a silently truncated name can collide with another one.
pub const MAX_IDENTIFIER_BYTES: usize = 63;

/// Why an identifier cannot be quoted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The identifier is the empty string, which PostgreSQL does not accept even quoted.
    #[error("an SQL identifier may not be empty")]
    Empty,
    /// The identifier is longer than PostgreSQL keeps; it would be truncated silently.
    #[error("the SQL identifier `{0}` is longer than 63 bytes")]
    TooLong(String),
    /// The identifier contains a NUL byte, which no PostgreSQL string may hold.
    #[error("an SQL identifier may not contain a NUL character")]
    Nul,
}

/// Quotes an identifier for PostgreSQL: wraps it in double quotes and doubles embedded ones.
///
/// Validates first and quotes second, because PostgreSQL would truncate a long name instead of
/// rejecting it.
pub fn quote_ident(name: &str) -> Result<String, Error> {
    let mut quoted = String::with_capacity(name.len() + 2);
    push_quoted_ident(&mut quoted, name)?;
    Ok(quoted)
}

/// [`quote_ident`], written at the end of `out` (which is left as it was on an error), for
/// code that builds a statement in one string.
pub fn push_quoted_ident(out: &mut String, name: &str) -> Result<(), Error> {
    check_ident(name)?;
    out.push('"');
    for (index, part) in name.split('"').enumerate() {
        if index > 0 {
            out.push_str("\"\"");
        }
        out.push_str(part);
    }
    out.push('"');
    Ok(())
}

/// Quotes `schema.name` as two identifiers.
pub fn quote_qualified(schema: &str, name: &str) -> Result<String, Error> {
    let mut quoted = String::with_capacity(schema.len() + name.len() + 5);
    push_quoted_ident(&mut quoted, schema)?;
    quoted.push('.');
    push_quoted_ident(&mut quoted, name)?;
    Ok(quoted)
}

/// Checks that PostgreSQL would keep the identifier exactly as given.
pub fn check_ident(name: &str) -> Result<(), Error> {
    if name.is_empty() {
        return Err(Error::Empty);
    }
    if name.len() > MAX_IDENTIFIER_BYTES {
        return Err(Error::TooLong(name.to_owned()));
    }
    if name.contains('\0') {
        return Err(Error::Nul);
    }
    Ok(())
}

/// SQL text under construction together with its bind parameters.
///
/// The parameter type is generic so that this crate needs no database driver; the storage crate
/// uses `Box<dyn ToSql + Sync + Send>`, the compilers a value enum of their own.
#[derive(Debug, Clone, PartialEq)]
pub struct Sql<P> {
    text: String,
    params: Vec<P>,
}

impl<P> Default for Sql<P> {
    fn default() -> Self {
        Self {
            text: String::new(),
            params: Vec::new(),
        }
    }
}

impl<P> Sql<P> {
    /// Starts an empty statement.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends trusted SQL text written in our own source code (keywords, punctuation).
    pub fn push(&mut self, text: &str) -> &mut Self {
        self.text.push_str(text);
        self
    }

    /// Appends a quoted identifier.
    pub fn push_ident(&mut self, name: &str) -> Result<&mut Self, Error> {
        let quoted = quote_ident(name)?;
        self.text.push_str(&quoted);
        Ok(self)
    }

    /// Appends a bind parameter placeholder (`$n`) and remembers its value.
    pub fn push_param(&mut self, value: P) -> &mut Self {
        self.params.push(value);
        self.text.push('$');
        self.text.push_str(&self.params.len().to_string());
        self
    }

    /// The statement text so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The parameters in `$n` order.
    pub fn params(&self) -> &[P] {
        &self.params
    }

    /// Splits the statement into its text and parameters.
    pub fn into_parts(self) -> (String, Vec<P>) {
        (self.text, self.params)
    }
}

impl<P> fmt::Display for Sql<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_and_doubles_embedded_quotes() {
        assert_eq!(quote_ident("order").unwrap(), "\"order\"");
        assert_eq!(quote_ident("a\"b").unwrap(), "\"a\"\"b\"");
        assert_eq!(
            quote_ident("hf:authenticated").unwrap(),
            "\"hf:authenticated\""
        );
        assert_eq!(quote_qualified("crm", "user").unwrap(), "\"crm\".\"user\"");
        let mut out = "t.".to_owned();
        push_quoted_ident(&mut out, "x\"").unwrap();
        assert_eq!(out, "t.\"x\"\"\"");
    }

    #[test]
    fn refuses_what_postgres_would_change() {
        assert_eq!(quote_ident(""), Err(Error::Empty));
        assert_eq!(quote_ident("a\0b"), Err(Error::Nul));
        assert!(quote_ident(&"x".repeat(63)).is_ok());
        assert!(matches!(
            quote_ident(&"x".repeat(64)),
            Err(Error::TooLong(_))
        ));
        // 63 bytes counted in UTF-8, not characters.
        assert!(matches!(
            quote_ident(&"é".repeat(32)),
            Err(Error::TooLong(_))
        ));
    }

    #[test]
    fn numbers_parameters_in_order() {
        let mut sql = Sql::<i64>::new();
        sql.push("SELECT * FROM ").push_ident("t").unwrap();
        sql.push(" WHERE a = ")
            .push_param(1)
            .push(" AND b = ")
            .push_param(2);
        assert_eq!(sql.text(), "SELECT * FROM \"t\" WHERE a = $1 AND b = $2");
        assert_eq!(sql.params(), &[1, 2]);
    }
}
