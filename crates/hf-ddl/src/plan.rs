//! The plan: what [`crate::plan`] returns and [`crate::apply`] executes.
//!
//! A plan is an ordered list of changes, each one SQL statement with what it does, what it
//! touches, whether it loses data and what a migration linter would say about it. The types
//! serialise to the shape `POST /plan` answers with (see `docs/ddl.md`).

use serde::{Deserialize, Serialize};

use crate::diagnostics::{Diagnostic, Lint, Severity};
use crate::markers::ManagedSet;

/// An ordered migration from one schema to another.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    /// The statements in execution order.
    pub changes: Vec<Change>,
    /// Counts for the `/plan` response.
    pub summary: Summary,
    /// Findings about the inputs: errors (the plan cannot be applied), warnings and the
    /// unmanaged things left alone.
    pub diagnostics: Vec<Diagnostic>,
    /// What apply records as managed once the statements have run.
    #[serde(skip)]
    pub managed: ManagedSet,
}

impl Plan {
    /// Whether the database already matches: no statement to run.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// Whether a diagnostic makes the plan incomplete, so that apply refuses it.
    pub fn has_errors(&self) -> bool {
        self.diagnostics
            .iter()
            .any(|d| d.severity == Severity::Error)
    }

    /// The changes that lose data and need `allowDestructive`.
    pub fn destructive_changes(&self) -> impl Iterator<Item = &Change> {
        self.changes.iter().filter(|c| c.destructive)
    }

    /// The plan as a readable SQL script, for `hf plan` and snapshots: each statement with a
    /// comment line naming its action and target, and its lints.
    pub fn to_sql_script(&self) -> String {
        let mut script = String::new();
        for change in &self.changes {
            script.push_str("-- ");
            script.push_str(change.action.as_str());
            script.push(' ');
            script.push_str(&change.target);
            if change.destructive {
                script.push_str(" (destructive)");
            }
            script.push('\n');
            for lint in &change.lints {
                script.push_str("--   ");
                script.push_str(lint_code_name(lint));
                script.push_str(": ");
                script.push_str(&lint.message);
                script.push('\n');
            }
            if let Some(query) = &change.loses_data_if {
                script.push_str("--   loses data only if: ");
                script.push_str(query);
                script.push('\n');
            }
            if let Some(precheck) = &change.precheck {
                script.push_str("--   pre-check: ");
                script.push_str(&precheck.sql);
                script.push('\n');
            }
            script.push_str(&change.sql);
            script.push_str(";\n");
        }
        script
    }
}

fn lint_code_name(lint: &Lint) -> &'static str {
    use crate::diagnostics::LintCode;
    match lint.code {
        LintCode::DataLoss => "DATA_LOSS",
        LintCode::TableRewrite => "TABLE_REWRITE",
        LintCode::FullTableScan => "FULL_TABLE_SCAN",
        LintCode::BlocksWrites => "BLOCKS_WRITES",
        LintCode::MayFail => "MAY_FAIL",
    }
}

/// One planned statement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    /// What kind of step it is.
    pub action: Action,
    /// What it touches: `schema`, `schema.table`, `schema.table.column` or
    /// `schema.table.constraint`.
    pub target: String,
    /// The statement, ready to execute; identifiers quoted, no values spliced except comment
    /// texts (see `docs/ddl.md`).
    pub sql: String,
    /// Whether it loses data (drops, lossy type changes); apply refuses these unless allowed.
    pub destructive: bool,
    /// What a migration linter would flag.
    pub lints: Vec<Lint>,
    /// A query apply runs right before the statement, in the same transaction, so that a step
    /// bound to fail on existing rows is reported clearly instead of by a PostgreSQL error.
    pub precheck: Option<Precheck>,
    /// For a destructive change that loses data only when rows hold certain values (a picklist
    /// choice removed): `SELECT EXISTS (...)`, `true` when some do. Apply refuses such a change
    /// without `allowDestructive` only when this query answers `true`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loses_data_if: Option<String>,
}

/// A query that predicts the failure of a step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Precheck {
    /// `SELECT EXISTS (...)`: `true` means the step would fail.
    pub sql: String,
    /// Why the step would fail, for people.
    pub failure: String,
}

/// The kind of a plan step; serialised in snake case as `/plan`'s `action`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// `ALTER SCHEMA … RENAME TO` (a module rename with a hint).
    RenameSchema,
    /// `ALTER TABLE … RENAME TO` (an object rename with a hint).
    RenameTable,
    /// `ALTER TABLE … RENAME COLUMN` (a field rename with a hint).
    RenameColumn,
    /// `ALTER TABLE … RENAME CONSTRAINT` (names follow their table and columns).
    RenameConstraint,
    /// `ALTER INDEX … RENAME TO`.
    RenameIndex,
    /// `ALTER TABLE … DROP CONSTRAINT` of a foreign key.
    DropForeignKey,
    /// `ALTER TABLE … DROP CONSTRAINT` of a primary key.
    DropPrimaryKey,
    /// `ALTER TABLE … DROP CONSTRAINT` of a unique constraint.
    DropUnique,
    /// `DROP INDEX`.
    DropIndex,
    /// `ALTER TABLE … DROP COLUMN` (destructive).
    DropColumn,
    /// `DROP TABLE` (destructive).
    DropTable,
    /// `DROP SCHEMA` (destructive).
    DropSchema,
    /// `CREATE SCHEMA`.
    CreateSchema,
    /// `CREATE TABLE`.
    CreateTable,
    /// `ALTER TABLE … ADD COLUMN`.
    AddColumn,
    /// `ALTER TABLE … ALTER COLUMN … TYPE`.
    AlterColumnType,
    /// `ALTER TABLE … ALTER COLUMN … SET DEFAULT`.
    SetDefault,
    /// `ALTER TABLE … ALTER COLUMN … DROP DEFAULT`.
    DropDefault,
    /// `ALTER TABLE … ALTER COLUMN … SET NOT NULL`.
    SetNotNull,
    /// `ALTER TABLE … ALTER COLUMN … DROP NOT NULL`.
    DropNotNull,
    /// `ALTER TABLE … ADD CONSTRAINT … PRIMARY KEY`.
    AddPrimaryKey,
    /// `ALTER TABLE … ADD CONSTRAINT … UNIQUE`.
    AddUnique,
    /// `CREATE INDEX`.
    CreateIndex,
    /// `ALTER TABLE … ADD CONSTRAINT … FOREIGN KEY`.
    AddForeignKey,
    /// `ALTER TABLE … DROP CONSTRAINT` of a CHECK on a picklist column.
    DropCheck,
    /// `UPDATE` that empties the values of removed picklist choices (destructive when rows
    /// hold them).
    RemoveValues,
    /// `ALTER TABLE … ADD CONSTRAINT … CHECK` restricting a picklist column to its keys.
    AddCheck,
    /// `COMMENT ON …` (labels).
    Comment,
    /// `GRANT …` to `hf:authenticated`.
    Grant,
}

impl Action {
    /// The snake-case name, as serialised.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::RenameSchema => "rename_schema",
            Action::RenameTable => "rename_table",
            Action::RenameColumn => "rename_column",
            Action::RenameConstraint => "rename_constraint",
            Action::RenameIndex => "rename_index",
            Action::DropForeignKey => "drop_foreign_key",
            Action::DropPrimaryKey => "drop_primary_key",
            Action::DropUnique => "drop_unique",
            Action::DropIndex => "drop_index",
            Action::DropColumn => "drop_column",
            Action::DropTable => "drop_table",
            Action::DropSchema => "drop_schema",
            Action::CreateSchema => "create_schema",
            Action::CreateTable => "create_table",
            Action::AddColumn => "add_column",
            Action::AlterColumnType => "alter_column_type",
            Action::SetDefault => "set_default",
            Action::DropDefault => "drop_default",
            Action::SetNotNull => "set_not_null",
            Action::DropNotNull => "drop_not_null",
            Action::AddPrimaryKey => "add_primary_key",
            Action::AddUnique => "add_unique",
            Action::CreateIndex => "create_index",
            Action::AddForeignKey => "add_foreign_key",
            Action::DropCheck => "drop_check",
            Action::RemoveValues => "remove_values",
            Action::AddCheck => "add_check",
            Action::Comment => "comment",
            Action::Grant => "grant",
        }
    }
}

/// Counts over a plan, as `/plan`'s `summary`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// `CREATE TABLE` statements.
    pub tables_created: u64,
    /// `ADD COLUMN` statements (columns of new tables are not counted).
    pub columns_added: u64,
    /// All statements.
    pub ddl_statements: u64,
    /// Destructive statements.
    pub destructive: u64,
}

impl Summary {
    /// Counts the changes.
    pub fn of(changes: &[Change]) -> Self {
        let count =
            |pred: &dyn Fn(&Change) -> bool| changes.iter().filter(|c| pred(c)).count() as u64;
        Self {
            tables_created: count(&|c| c.action == Action::CreateTable),
            columns_added: count(&|c| c.action == Action::AddColumn),
            ddl_statements: changes.len() as u64,
            destructive: count(&|c| c.destructive),
        }
    }
}

/// Explicit rename hints (a field's or object's `renamedFrom`), so that a rename plans as
/// `ALTER … RENAME` and keeps its data instead of becoming drop + add.
///
/// A hint applies when the old name exists in the database and the new one does not, and the
/// desired schema has the new name and not the old; otherwise it is ignored (it is stale once
/// applied), so hints may stay in the metadata.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Renames {
    /// Schema (module) renames.
    #[serde(default)]
    pub schemas: Vec<SchemaRename>,
    /// Table (object) renames within one schema.
    #[serde(default)]
    pub tables: Vec<TableRename>,
    /// Column (field) renames.
    #[serde(default)]
    pub columns: Vec<ColumnRename>,
}

/// A schema was renamed from `from` to `to`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchemaRename {
    /// The old schema name.
    pub from: String,
    /// The new schema name.
    pub to: String,
}

/// A table of `schema` (its name after schema renames) was renamed from `from` to `to`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableRename {
    /// The schema (its new name, if it was renamed too).
    pub schema: String,
    /// The old table name.
    pub from: String,
    /// The new table name.
    pub to: String,
}

/// A column of `schema.table` (their new names) was renamed from `from` to `to`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColumnRename {
    /// The schema (new name).
    pub schema: String,
    /// The table (new name).
    pub table: String,
    /// The old column name.
    pub from: String,
    /// The new column name.
    pub to: String,
}
