//! What the planner tells its user besides SQL: diagnostics about the inputs and lints on plan
//! steps, with all their texts in one place.
//!
//! Planning never fails with `Err`; problems in the schemas (a name PostgreSQL cannot hold, a
//! type the planner will not write) and things worth knowing (a column made by hand) are data
//! in [`crate::Plan::diagnostics`]. Lints mark steps a migration linter would flag.

use serde::Serialize;

/// How much a diagnostic matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Severity {
    /// Worth knowing; the plan is fine.
    Info,
    /// Probably not what was meant; the plan can still be applied.
    Warning,
    /// The plan is incomplete and cannot be applied.
    Error,
}

/// A stable code for each kind of diagnostic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DiagnosticCode {
    /// A name PostgreSQL cannot keep as written (empty, over 63 bytes, or with NUL).
    InvalidIdentifier,
    /// A desired column type the planner does not write.
    UnsupportedType,
    /// A desired column default the planner does not write.
    UnsupportedDefault,
    /// A comment text with a NUL character.
    InvalidComment,
    /// Two columns of one table, or two constraints or indexes of one schema, share a name.
    DuplicateName,
    /// A key, unique constraint, index or foreign key names a column its table does not have.
    UnknownColumn,
    /// A foreign key points at a table the desired schema does not have.
    UnknownTable,
    /// A schema, table, column, constraint or index in a managed schema that hf did not make;
    /// it is left alone.
    Unmanaged,
    /// Something made by hand that the desired schema also wants; the plan takes it over.
    Adopted,
    /// A managed schema that still holds unmanaged tables; it is not dropped.
    SchemaNotEmpty,
    /// A grant the planner made was revoked by hand; it is not granted again.
    GrantNarrowed,
    /// A rename hint that cannot apply because both names exist.
    RenameConflict,
    /// A lookup whose target has no single table, so it gets no foreign key.
    LookupWithoutForeignKey,
    /// A generated constraint or index name that would have collided and was hashed.
    NameHashed,
    /// A desired picklist CHECK lists no keys, or a key outside the picklist key grammar.
    InvalidCheck,
}

/// One finding about the inputs of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// How much it matters.
    pub severity: Severity,
    /// The stable code.
    pub code: DiagnosticCode,
    /// What it is about: `schema`, `schema.table` or `schema.table.item`.
    pub target: String,
    /// An English sentence for people.
    pub message: String,
}

impl Severity {
    /// The name printed by `hf plan` (`info`, `warning`, `error`).
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

impl DiagnosticCode {
    /// The stable SCREAMING_SNAKE_CASE code, as serialised.
    pub fn as_str(self) -> &'static str {
        match self {
            DiagnosticCode::InvalidIdentifier => "INVALID_IDENTIFIER",
            DiagnosticCode::UnsupportedType => "UNSUPPORTED_TYPE",
            DiagnosticCode::UnsupportedDefault => "UNSUPPORTED_DEFAULT",
            DiagnosticCode::InvalidComment => "INVALID_COMMENT",
            DiagnosticCode::DuplicateName => "DUPLICATE_NAME",
            DiagnosticCode::InvalidCheck => "INVALID_CHECK",
            DiagnosticCode::UnknownColumn => "UNKNOWN_COLUMN",
            DiagnosticCode::UnknownTable => "UNKNOWN_TABLE",
            DiagnosticCode::Unmanaged => "UNMANAGED",
            DiagnosticCode::Adopted => "ADOPTED",
            DiagnosticCode::SchemaNotEmpty => "SCHEMA_NOT_EMPTY",
            DiagnosticCode::GrantNarrowed => "GRANT_NARROWED",
            DiagnosticCode::RenameConflict => "RENAME_CONFLICT",
            DiagnosticCode::LookupWithoutForeignKey => "LOOKUP_WITHOUT_FOREIGN_KEY",
            DiagnosticCode::NameHashed => "NAME_HASHED",
        }
    }
}

/// `warning RENAME_CONFLICT crm.account.title: …`, one line for people (`hf plan`).
impl std::fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} {}: {}",
            self.severity.as_str(),
            self.code.as_str(),
            self.target,
            self.message
        )
    }
}

impl Diagnostic {
    pub(crate) fn new(
        severity: Severity,
        code: DiagnosticCode,
        target: &str,
        message: String,
    ) -> Self {
        Self {
            severity,
            code,
            target: target.to_owned(),
            message,
        }
    }
}

/// A stable code for each lint on a plan step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum LintCode {
    /// The step deletes stored data.
    DataLoss,
    /// The step rewrites the whole table under an ACCESS EXCLUSIVE lock.
    TableRewrite,
    /// The step scans the whole table while holding a lock that blocks readers or writers.
    FullTableScan,
    /// The step builds an index, blocking writes to the table meanwhile.
    BlocksWrites,
    /// The step can fail on existing rows; apply runs its pre-check first.
    MayFail,
}

/// One migration-linter finding on a plan step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Lint {
    /// The stable code.
    pub code: LintCode,
    /// An English sentence for people.
    pub message: String,
}

impl Lint {
    pub(crate) fn new(code: LintCode, message: &str) -> Self {
        Self {
            code,
            message: message.to_owned(),
        }
    }
}

// Lint texts, shared by every step that raises them.
pub(crate) const REMOVE_VALUES: &str =
    "empties the values of removed picklist choices in the rows that hold them";
pub(crate) const REMOVE_VALUES_SCAN: &str = "reads every row to find the removed choices";
pub(crate) const FIRST_OF_ARRAY: &str = "keeps only the first key of each multi-select value";
pub(crate) const CHECK_SCAN: &str = "reads every row to validate the constraint";
pub(crate) const CHECK_FAILS: &str =
    "fails if a row holds a value that is not a choice; apply checks first";
pub(crate) const PRECHECK_VALUES: &str = "rows hold values that are not among the choices";
pub(crate) const DROP_COLUMN: &str = "drops the column and its data";
pub(crate) const DROP_TABLE: &str = "drops the table and all its rows";
pub(crate) const DROP_SCHEMA: &str = "drops the schema";
pub(crate) const LOSSY_TYPE: &str =
    "the new type cannot hold every old value: values may be changed or the cast may fail";
pub(crate) const TYPE_REWRITE: &str =
    "changing the type rewrites the table under an ACCESS EXCLUSIVE lock";
pub(crate) const SET_NOT_NULL_SCAN: &str =
    "SET NOT NULL scans the whole table under an ACCESS EXCLUSIVE lock";
pub(crate) const SET_NOT_NULL_FAILS: &str = "fails if the column holds NULLs; apply checks first";
pub(crate) const ADD_REQUIRED_FAILS: &str =
    "a NOT NULL column without a default cannot be added to a table with rows; apply checks first";
pub(crate) const VOLATILE_DEFAULT_REWRITE: &str =
    "a volatile default is computed for every existing row, rewriting the table";
pub(crate) const UNIQUE_BLOCKS: &str =
    "adding a unique constraint builds an index under an ACCESS EXCLUSIVE lock";
pub(crate) const UNIQUE_FAILS: &str =
    "fails if the column holds duplicate values; apply checks first";
pub(crate) const PRIMARY_KEY_BLOCKS: &str =
    "adding a primary key builds an index and checks NOT NULL under an ACCESS EXCLUSIVE lock";
pub(crate) const INDEX_BLOCKS: &str =
    "CREATE INDEX blocks writes to the table while it builds (CONCURRENTLY cannot run in a transaction)";
pub(crate) const FOREIGN_KEY_SCAN: &str =
    "adding a foreign key validates every row, locking both tables against writes";
pub(crate) const FOREIGN_KEY_FAILS: &str =
    "fails if a row points at a missing target row; apply checks first";

// Pre-check failure texts: what apply reports when a pre-check finds rows that would fail.
pub(crate) const PRECHECK_NULLS: &str =
    "the column holds NULL values, so it cannot become NOT NULL";
pub(crate) const PRECHECK_ROWS: &str =
    "the table has rows, so a NOT NULL column without a default cannot be added";
pub(crate) const PRECHECK_DUPLICATES: &str =
    "the column holds duplicate values, so it cannot become unique";
pub(crate) const PRECHECK_ORPHANS: &str =
    "some rows point at target rows that do not exist, so the foreign key cannot be added";

#[cfg(test)]
mod tests {
    use super::{Diagnostic, DiagnosticCode, Severity};

    #[test]
    fn codes_print_as_they_serialise() {
        let codes = [
            DiagnosticCode::InvalidIdentifier,
            DiagnosticCode::UnsupportedType,
            DiagnosticCode::UnsupportedDefault,
            DiagnosticCode::InvalidComment,
            DiagnosticCode::DuplicateName,
            DiagnosticCode::UnknownColumn,
            DiagnosticCode::UnknownTable,
            DiagnosticCode::Unmanaged,
            DiagnosticCode::Adopted,
            DiagnosticCode::SchemaNotEmpty,
            DiagnosticCode::GrantNarrowed,
            DiagnosticCode::RenameConflict,
            DiagnosticCode::LookupWithoutForeignKey,
            DiagnosticCode::NameHashed,
        ];
        for code in codes {
            let json = serde_json::to_string(&code).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
        }
        let diagnostic = Diagnostic::new(
            Severity::Warning,
            DiagnosticCode::RenameConflict,
            "crm.account.title",
            "both exist".to_owned(),
        );
        assert_eq!(
            diagnostic.to_string(),
            "warning RENAME_CONFLICT crm.account.title: both exist"
        );
    }
}
