//! `managed` markers: which schemas, tables, columns, constraints and indexes hf made.
//!
//! A column that is in the database but not in the model is either a field that was deleted
//! (drop it, destructively) or a column somebody added by hand (leave it alone). The catalog
//! alone cannot tell the two apart, so apply records every managed item in one small table,
//! `hf_ddl.managed`, in the same transaction as the DDL, and introspection reads it back.
//! Module keys may not start with `hf`, so the `hf_ddl` schema never clashes with a module.

use serde::{Deserialize, Serialize};

use crate::schema::Schema;

/// The schema that holds the marker table.
pub const MARKER_SCHEMA: &str = "hf_ddl";
/// The marker table.
pub const MARKER_TABLE: &str = "managed";

/// What kind of item a marker names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MarkerKind {
    /// A schema.
    Schema,
    /// A table.
    Table,
    /// A column of a table.
    Column,
    /// A primary key, unique or foreign key constraint of a table.
    Constraint,
    /// An index of a table.
    Index,
}

impl MarkerKind {
    /// The text stored in the marker table.
    pub fn as_str(self) -> &'static str {
        match self {
            MarkerKind::Schema => "schema",
            MarkerKind::Table => "table",
            MarkerKind::Column => "column",
            MarkerKind::Constraint => "constraint",
            MarkerKind::Index => "index",
        }
    }

    /// Reads the stored text.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "schema" => Some(MarkerKind::Schema),
            "table" => Some(MarkerKind::Table),
            "column" => Some(MarkerKind::Column),
            "constraint" => Some(MarkerKind::Constraint),
            "index" => Some(MarkerKind::Index),
            _ => None,
        }
    }
}

/// One managed item; `table` and `name` are empty where they do not apply.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Marker {
    /// What it is.
    pub kind: MarkerKind,
    /// Its schema.
    pub schema: String,
    /// Its table (empty for a schema).
    pub table: String,
    /// Its name within the table (empty for a schema or table).
    pub name: String,
}

/// The markers apply writes: the markers of `scope` are replaced by `markers`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManagedSet {
    /// The schemas whose markers are replaced (every schema of both sides of the plan).
    pub scope: Vec<String>,
    /// Every item of the desired schema.
    pub markers: Vec<Marker>,
}

impl ManagedSet {
    /// After a plan from `current` to `desired` has run, exactly the desired items are managed.
    pub fn of(current: &Schema, desired: &Schema) -> Self {
        let mut scope: Vec<String> = current
            .schemas
            .keys()
            .chain(desired.schemas.keys())
            .cloned()
            .collect();
        scope.sort();
        scope.dedup();
        Self {
            scope,
            markers: markers_of(desired),
        }
    }
}

/// Every item of a schema, as markers.
pub fn markers_of(schema: &Schema) -> Vec<Marker> {
    let mut markers = Vec::new();
    let mark = |kind, s: &str, t: &str, n: &str| Marker {
        kind,
        schema: s.to_owned(),
        table: t.to_owned(),
        name: n.to_owned(),
    };
    for (s, namespace) in &schema.schemas {
        markers.push(mark(MarkerKind::Schema, s, "", ""));
        for (t, table) in &namespace.tables {
            markers.push(mark(MarkerKind::Table, s, t, ""));
            for column in &table.columns {
                markers.push(mark(MarkerKind::Column, s, t, &column.name));
            }
            if let Some(pk) = &table.primary_key {
                markers.push(mark(MarkerKind::Constraint, s, t, &pk.name));
            }
            for unique in &table.uniques {
                markers.push(mark(MarkerKind::Constraint, s, t, &unique.name));
            }
            for fk in &table.foreign_keys {
                markers.push(mark(MarkerKind::Constraint, s, t, &fk.name));
            }
            for check in &table.checks {
                markers.push(mark(MarkerKind::Constraint, s, t, &check.name));
            }
            for index in &table.indexes {
                markers.push(mark(MarkerKind::Index, s, t, &index.name));
            }
        }
    }
    markers
}

/// Sets every `managed` flag of an introspected schema from the markers: an item is managed
/// exactly when a marker names it.
pub fn mark_managed(schema: &mut Schema, markers: &[Marker]) {
    let set: std::collections::HashSet<(MarkerKind, &str, &str, &str)> = markers
        .iter()
        .map(|m| (m.kind, m.schema.as_str(), m.table.as_str(), m.name.as_str()))
        .collect();
    let has = |kind, s: &str, t: &str, n: &str| set.contains(&(kind, s, t, n));
    for (s, namespace) in &mut schema.schemas {
        namespace.managed = has(MarkerKind::Schema, s, "", "");
        for (t, table) in &mut namespace.tables {
            table.managed = has(MarkerKind::Table, s, t, "");
            for column in &mut table.columns {
                column.managed = has(MarkerKind::Column, s, t, &column.name);
            }
            if let Some(pk) = &mut table.primary_key {
                pk.managed = has(MarkerKind::Constraint, s, t, &pk.name);
            }
            for unique in &mut table.uniques {
                unique.managed = has(MarkerKind::Constraint, s, t, &unique.name);
            }
            for fk in &mut table.foreign_keys {
                fk.managed = has(MarkerKind::Constraint, s, t, &fk.name);
            }
            for check in &mut table.checks {
                check.managed = has(MarkerKind::Constraint, s, t, &check.name);
            }
            for index in &mut table.indexes {
                index.managed = has(MarkerKind::Index, s, t, &index.name);
            }
        }
    }
}
