//! The planner's own description of a PostgreSQL database: schemas, tables, columns, keys,
//! indexes, comments, grants and `managed` markers.
//!
//! Both sides of a diff use these types: [`crate::introspect`] reads the live catalog into a
//! [`Schema`], the model mapping builds the desired one. Keeping the planner on its own types
//! (instead of the metadata model) lets it be tested with hand-written catalogs and keeps the
//! diff a pure function of two values.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

/// The group role of every principal; object tables and module schemas are granted to it
/// (SELECT, INSERT, UPDATE, DELETE on tables, USAGE on schemas).
pub const AUTHENTICATED_ROLE: &str = "hf:authenticated";

/// A whole database as far as the planner cares: the managed schemas by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schema {
    /// PostgreSQL schemas (one per module) by name.
    #[serde(default)]
    pub schemas: BTreeMap<String, Namespace>,
}

/// One PostgreSQL schema (a `pg_namespace` row); named `Namespace` so that it does not clash
/// with [`Schema`], the whole database.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Namespace {
    /// Whether hf created (or adopted) it; only managed things are ever dropped.
    #[serde(default = "yes")]
    pub managed: bool,
    /// `COMMENT ON SCHEMA`, the module label.
    #[serde(default)]
    pub comment: Option<String>,
    /// Privileges by role; for schemas only `USAGE` is planned.
    #[serde(default)]
    pub grants: BTreeMap<String, BTreeSet<Privilege>>,
    /// Tables by name.
    #[serde(default)]
    pub tables: BTreeMap<String, Table>,
}

impl Default for Namespace {
    fn default() -> Self {
        Self {
            managed: true,
            comment: None,
            grants: BTreeMap::new(),
            tables: BTreeMap::new(),
        }
    }
}

/// One table: a concrete object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Table {
    /// Whether hf created (or adopted) it.
    #[serde(default = "yes")]
    pub managed: bool,
    /// `COMMENT ON TABLE`, the object label.
    #[serde(default)]
    pub comment: Option<String>,
    /// Columns in table order (PostgreSQL cannot reorder, so the order only matters on create).
    #[serde(default)]
    pub columns: Vec<Column>,
    /// The primary key, `id` for object tables.
    #[serde(default)]
    pub primary_key: Option<PrimaryKey>,
    /// Unique constraints (`uniqueConstraint` fields).
    #[serde(default)]
    pub uniques: Vec<UniqueConstraint>,
    /// Indexes that back no constraint (`indexed` fields).
    #[serde(default)]
    pub indexes: Vec<Index>,
    /// Foreign keys (lookup fields).
    #[serde(default)]
    pub foreign_keys: Vec<ForeignKey>,
    /// CHECK constraints that restrict a column to a list of keys (picklist fields).
    #[serde(default)]
    pub checks: Vec<ValueCheck>,
    /// Table privileges by role.
    #[serde(default)]
    pub grants: BTreeMap<String, BTreeSet<Privilege>>,
}

impl Default for Table {
    fn default() -> Self {
        Self {
            managed: true,
            comment: None,
            columns: Vec::new(),
            primary_key: None,
            uniques: Vec::new(),
            indexes: Vec::new(),
            foreign_keys: Vec::new(),
            checks: Vec::new(),
            grants: BTreeMap::new(),
        }
    }
}

impl Table {
    /// The column of that name, if any.
    pub fn column(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|c| c.name == name)
    }
}

/// One column: a stored field or a system column.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Column {
    /// The column name (the field key).
    pub name: String,
    /// The PostgreSQL type.
    #[serde(rename = "type")]
    pub data_type: SqlType,
    /// `NOT NULL` (`required` fields and system columns).
    #[serde(default)]
    pub not_null: bool,
    /// The column default.
    #[serde(default)]
    pub default: Option<ColumnDefault>,
    /// `COMMENT ON COLUMN`, the field label.
    #[serde(default)]
    pub comment: Option<String>,
    /// Whether hf created (or adopted) it.
    #[serde(default = "yes")]
    pub managed: bool,
}

/// A primary key constraint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PrimaryKey {
    /// The constraint name.
    pub name: String,
    /// The key columns in order.
    pub columns: Vec<String>,
    /// Whether hf created (or adopted) it.
    #[serde(default = "yes")]
    pub managed: bool,
}

/// A unique constraint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct UniqueConstraint {
    /// The constraint name, unique per schema (PostgreSQL names its index after it).
    pub name: String,
    /// The columns in order.
    pub columns: Vec<String>,
    /// Whether hf created (or adopted) it.
    #[serde(default = "yes")]
    pub managed: bool,
}

/// An index that backs no constraint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Index {
    /// The index name, unique per schema.
    pub name: String,
    /// The key columns in order.
    pub columns: Vec<String>,
    /// `CREATE UNIQUE INDEX`.
    #[serde(default)]
    pub unique: bool,
    /// For an index the planner cannot describe by its columns alone (expressions, a predicate,
    /// INCLUDE columns, a method other than btree): its full `pg_get_indexdef` text. Such an
    /// index never equals a planned one; the text is shown, never executed.
    #[serde(default)]
    pub definition: Option<String>,
    /// Whether hf created (or adopted) it.
    #[serde(default = "yes")]
    pub managed: bool,
}

/// A foreign key constraint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ForeignKey {
    /// The constraint name, unique per table.
    pub name: String,
    /// The referencing columns in order.
    pub columns: Vec<String>,
    /// The referenced table.
    pub references: TableRef,
    /// The referenced columns, in the order of `columns`.
    pub referenced_columns: Vec<String>,
    /// What happens to referencing rows when the referenced row is deleted.
    #[serde(default)]
    pub on_delete: FkAction,
    /// Whether hf created (or adopted) it.
    #[serde(default = "yes")]
    pub managed: bool,
}

/// A CHECK constraint that restricts one column to a list of keys: `c = ANY (ARRAY[…])` for a
/// `text` column (a picklist), `c <@ ARRAY[…]` for a `text[]` column (a multi-select
/// picklist). NULL passes both, as in every CHECK.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ValueCheck {
    /// The constraint name, unique per table.
    pub name: String,
    /// The restricted column.
    pub column: String,
    /// The allowed keys, in the order the field declares them.
    pub values: Vec<String>,
    /// Whether the column is an array whose every element must be a key.
    #[serde(default)]
    pub multi: bool,
    /// Whether hf created (or adopted) it.
    #[serde(default = "yes")]
    pub managed: bool,
}

/// A table named by schema and table name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableRef {
    /// The schema name.
    pub schema: String,
    /// The table name.
    pub table: String,
}

/// `ON DELETE` of a foreign key; lookups use the default, `NO ACTION`, so that deleting a
/// referenced record fails instead of silently changing other records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum FkAction {
    /// `NO ACTION` (the PostgreSQL default).
    #[default]
    NoAction,
    /// `RESTRICT`.
    Restrict,
    /// `CASCADE`.
    Cascade,
    /// `SET NULL`.
    SetNull,
    /// `SET DEFAULT`.
    SetDefault,
}

impl FkAction {
    /// The SQL keywords, written by us (never taken from input).
    pub fn as_sql(self) -> &'static str {
        match self {
            FkAction::NoAction => "NO ACTION",
            FkAction::Restrict => "RESTRICT",
            FkAction::Cascade => "CASCADE",
            FkAction::SetNull => "SET NULL",
            FkAction::SetDefault => "SET DEFAULT",
        }
    }
}

/// A privilege the planner grants: `USAGE` on schemas, the four DML privileges on tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Privilege {
    /// `USAGE` on a schema.
    Usage,
    /// `SELECT` on a table.
    Select,
    /// `INSERT` on a table.
    Insert,
    /// `UPDATE` on a table.
    Update,
    /// `DELETE` on a table.
    Delete,
}

impl Privilege {
    /// The SQL keyword.
    pub fn as_sql(self) -> &'static str {
        match self {
            Privilege::Usage => "USAGE",
            Privilege::Select => "SELECT",
            Privilege::Insert => "INSERT",
            Privilege::Update => "UPDATE",
            Privilege::Delete => "DELETE",
        }
    }

    /// Parses PostgreSQL's `aclexplode` spelling; other privileges are not planned.
    pub fn from_sql(name: &str) -> Option<Self> {
        match name {
            "USAGE" => Some(Privilege::Usage),
            "SELECT" => Some(Privilege::Select),
            "INSERT" => Some(Privilege::Insert),
            "UPDATE" => Some(Privilege::Update),
            "DELETE" => Some(Privilege::Delete),
            _ => None,
        }
    }
}

/// A column type. The known types are the ones the mapping produces plus their narrower
/// relatives (so that widening can be recognised); anything else that introspection finds is
/// kept as [`SqlType::Other`] with PostgreSQL's `format_type` text. `Other` is never written into
/// SQL: a desired schema that contains one is reported as a diagnostic.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SqlType {
    /// `smallint`.
    Smallint,
    /// `integer`.
    Integer,
    /// `bigint` (hf `integer`).
    Bigint,
    /// `numeric` without precision (hf `decimal`).
    Numeric,
    /// `real`.
    Real,
    /// `double precision` (hf `float`).
    DoublePrecision,
    /// `boolean`.
    Boolean,
    /// `text`.
    Text,
    /// `date`.
    Date,
    /// `timestamp without time zone`.
    Timestamp,
    /// `timestamp with time zone` (hf `datetime`).
    Timestamptz,
    /// `uuid` (hf `uuid` and lookups).
    Uuid,
    /// `json`.
    Json,
    /// `jsonb` (hf `json`).
    Jsonb,
    /// `text[]` (hf `multipicklist`).
    TextArray,
    /// Any other type, as `format_type` spells it (e.g. `character varying(20)`).
    Other(String),
}

impl SqlType {
    /// Reads a type name: `format_type`'s spelling or a common alias (`timestamptz`, `int8`).
    pub fn parse(name: &str) -> Self {
        match name.trim().to_ascii_lowercase().as_str() {
            "smallint" | "int2" => SqlType::Smallint,
            "integer" | "int" | "int4" => SqlType::Integer,
            "bigint" | "int8" => SqlType::Bigint,
            "numeric" | "decimal" => SqlType::Numeric,
            "real" | "float4" => SqlType::Real,
            "double precision" | "float8" => SqlType::DoublePrecision,
            "boolean" | "bool" => SqlType::Boolean,
            "text" => SqlType::Text,
            "date" => SqlType::Date,
            "timestamp without time zone" | "timestamp" => SqlType::Timestamp,
            "timestamp with time zone" | "timestamptz" => SqlType::Timestamptz,
            "uuid" => SqlType::Uuid,
            "json" => SqlType::Json,
            "jsonb" => SqlType::Jsonb,
            "text[]" | "_text" => SqlType::TextArray,
            _ => SqlType::Other(name.to_owned()),
        }
    }

    /// The canonical spelling (`format_type`'s), for SQL and for display.
    pub fn as_str(&self) -> &str {
        match self {
            SqlType::Smallint => "smallint",
            SqlType::Integer => "integer",
            SqlType::Bigint => "bigint",
            SqlType::Numeric => "numeric",
            SqlType::Real => "real",
            SqlType::DoublePrecision => "double precision",
            SqlType::Boolean => "boolean",
            SqlType::Text => "text",
            SqlType::Date => "date",
            SqlType::Timestamp => "timestamp without time zone",
            SqlType::Timestamptz => "timestamp with time zone",
            SqlType::Uuid => "uuid",
            SqlType::Json => "json",
            SqlType::Jsonb => "jsonb",
            SqlType::TextArray => "text[]",
            SqlType::Other(name) => name,
        }
    }

    /// Whether this is a type the planner may write into SQL.
    pub fn is_known(&self) -> bool {
        !matches!(self, SqlType::Other(_))
    }
}

impl fmt::Display for SqlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for SqlType {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for SqlType {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        Ok(SqlType::parse(&name))
    }
}

/// A column default. The planner writes the two defaults of the system columns and constant
/// text defaults (a picklist's `defaultValue`); any other default that introspection finds is
/// kept as text in [`ColumnDefault::Other`] and never executed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ColumnDefault {
    /// `gen_random_uuid()`, the default of `id`.
    GenRandomUuid,
    /// `now()`, the default of `created_at` and `updated_at`.
    Now,
    /// A constant of type `text` or `text[]`, spelled as `pg_get_expr` prints it
    /// (`'open'::text`, `'{open}'::text[]`) so a default read back compares equal to the one
    /// planned. Made only by [`ColumnDefault::text`], [`ColumnDefault::text_array`] or
    /// [`ColumnDefault::parse`], which accept nothing but one well-quoted literal and a cast.
    Literal(String),
    /// Any other default expression, as `pg_get_expr` prints it.
    Other(String),
}

impl ColumnDefault {
    /// Reads `pg_get_expr`'s text.
    pub fn parse(expression: &str) -> Self {
        match expression.trim() {
            "gen_random_uuid()" => ColumnDefault::GenRandomUuid,
            "now()" | "CURRENT_TIMESTAMP" => ColumnDefault::Now,
            other if is_text_constant(other) => ColumnDefault::Literal(other.to_owned()),
            other => ColumnDefault::Other(other.to_owned()),
        }
    }

    /// The constant text `value` (`'value'::text`); `None` for a text with a NUL character,
    /// which no PostgreSQL string can hold.
    pub fn text(value: &str) -> Option<Self> {
        let quoted = crate::sqltext::quote_literal(value)?;
        Some(ColumnDefault::Literal(format!("{quoted}::text")))
    }

    /// The constant array of texts `values` (`'{a,b}'::text[]`); `None` as for
    /// [`ColumnDefault::text`].
    pub fn text_array(values: &[impl AsRef<str>]) -> Option<Self> {
        let items: Vec<String> = values
            .iter()
            .map(|value| array_item(value.as_ref()))
            .collect();
        let quoted = crate::sqltext::quote_literal(&format!("{{{}}}", items.join(",")))?;
        Some(ColumnDefault::Literal(format!("{quoted}::text[]")))
    }

    /// The SQL expression text.
    pub fn as_str(&self) -> &str {
        match self {
            ColumnDefault::GenRandomUuid => "gen_random_uuid()",
            ColumnDefault::Now => "now()",
            ColumnDefault::Literal(text) | ColumnDefault::Other(text) => text,
        }
    }

    /// Whether this is a default the planner may write into SQL.
    pub fn is_known(&self) -> bool {
        !matches!(self, ColumnDefault::Other(_))
    }

    /// Whether the default is a constant, which PostgreSQL stores once for the rows a new
    /// column gets (no rewrite) and which cannot follow a column to another type.
    pub fn is_literal(&self) -> bool {
        matches!(self, ColumnDefault::Literal(_))
    }
}

/// One element of an array literal, as PostgreSQL prints it: bare when it is a plain word,
/// else in double quotes with `"` and `\` escaped.
fn array_item(value: &str) -> String {
    let plain = !value.is_empty()
        && !value.eq_ignore_ascii_case("null")
        && value.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        return value.to_owned();
    }
    let mut item = String::with_capacity(value.len() + 2);
    item.push('"');
    for c in value.chars() {
        if c == '"' || c == '\\' {
            item.push('\\');
        }
        item.push(c);
    }
    item.push('"');
    item
}

/// Whether `expression` is exactly one string literal (quotes doubled inside, nothing else)
/// cast to `text` or `text[]`: the only defaults besides the system ones the planner writes.
fn is_text_constant(expression: &str) -> bool {
    let Some(literal) = expression
        .strip_suffix("::text")
        .or_else(|| expression.strip_suffix("::text[]"))
    else {
        return false;
    };
    let Some(inner) = literal
        .strip_prefix('\'')
        .and_then(|rest| rest.strip_suffix('\''))
    else {
        return false;
    };
    // Inside, every quote is one of a doubled pair.
    inner.split("''").all(|piece| !piece.contains('\''))
}

impl Serialize for ColumnDefault {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ColumnDefault {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Ok(ColumnDefault::parse(&text))
    }
}

/// Serde default for the `managed` flags: hand-written catalogs describe managed things unless
/// they say otherwise.
fn yes() -> bool {
    true
}
