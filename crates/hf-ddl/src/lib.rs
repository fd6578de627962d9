//! The DDL planner: metadata to PostgreSQL, as an ordered plan.
//!
//! This crate is an API boundary (see `docs/ddl.md` for the mapping and every rule). It knows
//! nothing of HTTP. Its contract:
//!
//! - [`Schema`] is the planner's own description of a database: schemas, tables, columns, keys,
//!   indexes, comments, grants and `managed` markers.
//! - [`desired_schema`] maps a metadata [`hf_model::Model`] to the [`Schema`] it needs.
//! - [`rename_hints`] reads the model's `renamedFrom` hints as [`Renames`] for [`plan`].
//! - [`plan`] diffs two schemas into a [`Plan`]. It is a pure function: no IO, no panics;
//!   problems are diagnostics inside the plan, never `Err`.
//! - With the default feature `pg`: [`introspect`] reads a live database into a [`Schema`] in a
//!   handful of catalog queries, and [`apply`] runs a plan inside the caller's transaction with
//!   `lock_timeout` and `statement_timeout`. Without `pg` the crate builds without tokio.
//! - Every SQL identifier is quoted by `hf_sql::quote_ident`; the planner writes no value into
//!   SQL except comment texts (labels), which `COMMENT ON` cannot take as parameters and which
//!   are quoted as literals.
//!
//! ```
//! use hf_ddl::{plan, Renames, Schema};
//!
//! let desired: Schema = serde_json::from_str(r#"{"schemas": {"crm": {"tables": {"order": {
//!     "columns": [{"name": "select", "type": "text", "notNull": true}]}}}}}"#).unwrap();
//! let plan = plan(&Schema::default(), &desired, &Renames::default());
//! assert_eq!(plan.summary.tables_created, 1);
//! assert!(plan.changes[1].sql.contains(r#""crm"."order""#));
//! ```

mod diagnostics;
mod diff;
mod error;
mod hints;
mod mapping;
mod markers;
mod names;
mod plan;
mod schema;
mod sqltext;
mod validate;

#[cfg(feature = "pg")]
mod apply;
#[cfg(feature = "pg")]
mod introspect;

pub use diagnostics::{Diagnostic, DiagnosticCode, Lint, LintCode, Severity};
pub use diff::plan;
pub use error::{Error, ErrorKind};
pub use hints::rename_hints;
pub use mapping::{column_type, desired_schema, map_model};
pub use markers::{
    mark_managed, markers_of, ManagedSet, Marker, MarkerKind, MARKER_SCHEMA, MARKER_TABLE,
};
pub use names::{foreign_key_name, index_name, primary_key_name, unique_name};
pub use plan::{
    Action, Change, ColumnRename, Plan, Precheck, Renames, SchemaRename, Summary, TableRename,
};
pub use schema::{
    Column, ColumnDefault, FkAction, ForeignKey, Index, Namespace, PrimaryKey, Privilege, Schema,
    SqlType, Table, TableRef, UniqueConstraint, AUTHENTICATED_ROLE,
};

#[cfg(feature = "pg")]
pub use apply::{apply, refusal, ApplyOptions, ApplyStats};
#[cfg(feature = "pg")]
pub use introspect::introspect;
