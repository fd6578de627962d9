//! A small builder for DDL text.
//!
//! DDL statements take no bind parameters, so the planner writes them as text. This builder
//! keeps that text safe: keywords come from our own source code, every identifier goes through
//! `hf_sql::quote_ident`, and the only values ever written (comment texts, which `COMMENT ON`
//! cannot take as parameters) go through [`quote_literal`]. The first quoting failure is kept and
//! reported by [`Ddl::finish`], so building code reads as a straight sequence.

/// DDL text under construction; methods take and return it by value so a statement reads as
/// one chain.
#[derive(Debug, Default)]
pub(crate) struct Ddl {
    text: String,
    error: Option<hf_sql::Error>,
}

impl Ddl {
    /// Starts a statement with trusted SQL text.
    pub(crate) fn new(text: &str) -> Self {
        Self {
            text: text.to_owned(),
            error: None,
        }
    }

    /// Appends trusted SQL text written in this crate (keywords, punctuation, known types).
    pub(crate) fn kw(mut self, text: &str) -> Self {
        self.text.push_str(text);
        self
    }

    /// Appends one quoted identifier.
    pub(crate) fn ident(mut self, name: &str) -> Self {
        match hf_sql::quote_ident(name) {
            Ok(quoted) => self.text.push_str(&quoted),
            Err(error) => {
                self.error.get_or_insert(error);
            }
        }
        self
    }

    /// Appends `"schema"."name"`.
    pub(crate) fn qualified(mut self, schema: &str, name: &str) -> Self {
        match hf_sql::quote_qualified(schema, name) {
            Ok(quoted) => self.text.push_str(&quoted),
            Err(error) => {
                self.error.get_or_insert(error);
            }
        }
        self
    }

    /// Appends `("a", "b")`.
    pub(crate) fn ident_list<S: AsRef<str>>(mut self, names: &[S]) -> Self {
        self = self.kw("(");
        for (i, name) in names.iter().enumerate() {
            if i > 0 {
                self = self.kw(", ");
            }
            self = self.ident(name.as_ref());
        }
        self.kw(")")
    }

    /// Appends a string literal, or `NULL` for `None`.
    pub(crate) fn literal(mut self, value: Option<&str>) -> Self {
        match value.map(quote_literal) {
            None => self.kw("NULL"),
            Some(Some(quoted)) => self.kw(&quoted),
            Some(None) => {
                self.error.get_or_insert(hf_sql::Error::Nul);
                self
            }
        }
    }

    /// The finished text, or the first identifier that could not be quoted.
    pub(crate) fn finish(self) -> Result<String, hf_sql::Error> {
        match self.error {
            Some(error) => Err(error),
            None => Ok(self.text),
        }
    }
}

/// Quotes a string literal the way PostgreSQL's `quote_literal` does when
/// `standard_conforming_strings` is on (apply sets it for its transaction): single quotes are
/// doubled and backslashes are ordinary characters. `None` for a text with a NUL character,
/// which no PostgreSQL string can hold.
pub(crate) fn quote_literal(text: &str) -> Option<String> {
    if text.contains('\0') {
        return None;
    }
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('\'');
    for c in text.chars() {
        if c == '\'' {
            quoted.push('\'');
        }
        quoted.push(c);
    }
    quoted.push('\'');
    Some(quoted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_identifiers_and_literals() {
        let sql = Ddl::new("COMMENT ON TABLE ")
            .qualified("crm", "order")
            .kw(" IS ")
            .literal(Some("It's \\ fine"))
            .finish()
            .unwrap();
        assert_eq!(sql, "COMMENT ON TABLE \"crm\".\"order\" IS 'It''s \\ fine'");
    }

    #[test]
    fn keeps_the_first_error() {
        let result = Ddl::new("DROP TABLE ")
            .ident("")
            .ident(&"x".repeat(64))
            .finish();
        assert_eq!(result, Err(hf_sql::Error::Empty));
        assert_eq!(
            Ddl::new("x").literal(Some("a\0")).finish(),
            Err(hf_sql::Error::Nul)
        );
    }
}
