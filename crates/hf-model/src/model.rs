//! The metadata types: a [`Model`] holds every module of one snapshot.
//!
//! These are plain values with public fields. They are cloned for each write (the store applies
//! a change to a copy), compared to find which files a change touched, and never carry I/O.
//! Maps are `BTreeMap`s so every iteration, file and list is sorted by key.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use crate::error::Error;
use crate::key::{FieldPath, QualifiedName};

/// All modules of one snapshot of the metadata, keyed by module key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Model {
    /// The modules, keyed by module key (equal to each module's `key`).
    pub modules: BTreeMap<String, Module>,
}

/// A module: a namespace of objects and screens, and a PostgreSQL schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module {
    /// The module key (the directory name and the schema name).
    pub key: String,
    /// The human-readable name.
    pub label: String,
    /// Optional longer text for people.
    pub description: Option<String>,
    /// Colour and icon shown for the module.
    pub identity: Identity,
    /// The vendor that packages this module, if it comes from a package (see docs/metadata.md).
    pub vendor_key: Option<String>,
    /// The key this module had before a rename (`renamedFrom`): a hint kept in the file so that
    /// every later plan renames the schema instead of dropping it (see docs/ddl.md).
    pub renamed_from: Option<String>,
    /// The objects, keyed by object key.
    pub objects: BTreeMap<String, Object>,
    /// The screens, keyed by screen key.
    pub screens: BTreeMap<String, Screen>,
}

impl Module {
    /// A module with a key and a label and nothing else, the starting point of most edits.
    pub fn new(key: impl Into<String>, label: impl Into<String>) -> Self {
        Module {
            key: key.into(),
            label: label.into(),
            description: None,
            identity: Identity::default(),
            vendor_key: None,
            renamed_from: None,
            objects: BTreeMap::new(),
            screens: BTreeMap::new(),
        }
    }
}

/// How a module or an object is shown: a colour (a kebab-case hue) and an icon name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    /// A kebab-case hue such as `blue` or `deep-orange`.
    pub color: Option<String>,
    /// An icon name.
    pub icon: Option<String>,
}

/// An object: a record type, and a table unless it is abstract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    /// The object key (the file name and the table name).
    pub key: String,
    /// The human-readable name.
    pub label: String,
    /// Optional longer text for people.
    pub description: Option<String>,
    /// An abstract object takes no records; only its concrete subtypes do.
    pub is_abstract: bool,
    /// The parent object this one extends, if any.
    pub extends: Option<QualifiedName>,
    /// How this object extends its parent, as written; see [`Object::effective_extension_kind`].
    pub extension_kind: Option<ExtensionKind>,
    /// Colour and icon shown for the object.
    pub identity: Identity,
    /// The key this object had before a rename (`renamedFrom`, same module): a hint kept in the
    /// file so that every later plan renames the table instead of dropping it.
    pub renamed_from: Option<String>,
    /// Validation rules keyed by rule key.
    pub rules: BTreeMap<String, Rule>,
    /// The fields declared on this object (not the inherited ones), keyed by field key.
    pub fields: BTreeMap<String, Field>,
}

impl Object {
    /// A concrete object with a key and a label and nothing else.
    pub fn new(key: impl Into<String>, label: impl Into<String>) -> Self {
        Object {
            key: key.into(),
            label: label.into(),
            description: None,
            is_abstract: false,
            extends: None,
            extension_kind: None,
            identity: Identity::default(),
            renamed_from: None,
            rules: BTreeMap::new(),
            fields: BTreeMap::new(),
        }
    }

    /// The extension kind in force: the written one, or `subtype` when `extends` is set.
    pub fn effective_extension_kind(&self) -> Option<ExtensionKind> {
        match (&self.extends, self.extension_kind) {
            (_, Some(kind)) => Some(kind),
            (Some(_), None) => Some(ExtensionKind::Subtype),
            (None, None) => None,
        }
    }
}

/// How an object extends its parent. Version 1 knows only `subtype`; see docs/metadata.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExtensionKind {
    /// The child has its own table with the parent's fields and rules; queries on the parent
    /// include the child's records.
    Subtype,
}

impl ExtensionKind {
    /// The spelling in files and in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            ExtensionKind::Subtype => "subtype",
        }
    }
}

impl FromStr for ExtensionKind {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self, Error> {
        match text {
            "subtype" => Ok(ExtensionKind::Subtype),
            _ => Err(Error::UnknownValue {
                property: "extensionKind",
                value: text.to_owned(),
                expected: "subtype",
            }),
        }
    }
}

/// A validation rule: a formula that must hold for every record, and the message shown otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The expression that must evaluate to true (`amount >= 0`).
    pub assert: String,
    /// The message shown to the user when the rule fails.
    pub message: String,
    /// The field the failure is reported on; `None` makes it a record-level failure.
    pub field: Option<String>,
}

/// A field of an object: its key, its label and its kind-specific properties.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// The field key (the column name for stored fields).
    pub key: String,
    /// The human-readable name.
    pub label: String,
    /// Optional longer text for people.
    pub description: Option<String>,
    /// The key this field had before a rename (`renamedFrom`, same object): a hint kept in the
    /// file so that every later plan renames the column instead of dropping it.
    pub renamed_from: Option<String>,
    /// What kind of field this is, with the properties of that kind.
    pub kind: FieldKind,
}

impl Field {
    /// A field from its parts.
    pub fn new(key: impl Into<String>, label: impl Into<String>, kind: FieldKind) -> Self {
        Field {
            key: key.into(),
            label: label.into(),
            description: None,
            renamed_from: None,
            kind,
        }
    }

    /// The type of the value this field yields: lookups yield the target record's id (a uuid).
    pub fn value_type(&self) -> ScalarType {
        match &self.kind {
            FieldKind::Scalar { field_type, .. }
            | FieldKind::Formula { field_type, .. }
            | FieldKind::Rollup { field_type, .. } => *field_type,
            FieldKind::Lookup { .. } => ScalarType::Uuid,
        }
    }

    /// The choices of a picklist field; empty for every other field.
    pub fn picklist_values(&self) -> &[PicklistValue] {
        match &self.kind {
            FieldKind::Scalar { values, .. } => values,
            _ => &[],
        }
    }

    /// Checks the raw JSON text of a value for this field and converts it to the text bound for
    /// it: the value grammar of the field's type ([`ScalarType::parse_json_in`]) with its
    /// picklist choices.
    pub fn parse_json(&self, raw: &str) -> Result<Option<String>, String> {
        self.value_type().parse_json_in(raw, self.picklist_values())
    }

    /// Whether the field is a column of the object's table (formulas and rollups are computed).
    pub fn is_stored(&self) -> bool {
        matches!(
            self.kind,
            FieldKind::Scalar { .. } | FieldKind::Lookup { .. }
        )
    }
}

/// The four kinds of field; each variant carries only the properties that kind has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldKind {
    /// A stored value of a scalar type.
    Scalar {
        /// The value type.
        field_type: ScalarType,
        /// NOT NULL.
        required: bool,
        /// A unique constraint on the column.
        unique: bool,
        /// An index on the column.
        indexed: bool,
        /// The choices of a `picklist` or `multipicklist` field, in the order people see them;
        /// empty for every other type.
        values: Vec<PicklistValue>,
        /// The key a new record gets when its body leaves a picklist field out.
        default_value: Option<String>,
    },
    /// A value computed from other fields of the same record.
    Formula {
        /// The expression (`probability * amount / 100`).
        formula: String,
        /// The type of the computed value.
        field_type: ScalarType,
    },
    /// A reference to a record of another object, stored as its id with a foreign key.
    Lookup {
        /// The referenced object.
        target: QualifiedName,
        /// NOT NULL.
        required: bool,
        /// An index on the column.
        indexed: bool,
    },
    /// An aggregate over the records of another object whose lookup points at this record.
    Rollup {
        /// The aggregate function.
        function: RollupFunction,
        /// The lookup field, on the aggregated object, that points at this object.
        source: FieldPath,
        /// The aggregated field of the source object; `None` only for `count`.
        field: Option<String>,
        /// An optional expression that selects which source records count.
        filter: Option<String>,
        /// The type of the aggregate's value.
        field_type: ScalarType,
    },
}

impl FieldKind {
    /// The kind's spelling in files and in the API (`fieldKind`).
    pub fn name(&self) -> &'static str {
        match self {
            FieldKind::Scalar { .. } => "scalar",
            FieldKind::Formula { .. } => "formula",
            FieldKind::Lookup { .. } => "lookup",
            FieldKind::Rollup { .. } => "rollup",
        }
    }
}

/// One choice of a picklist: the key stored and compared, the label shown.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PicklistValue {
    /// What is stored (`^[a-z0-9_]{1,63}$`); unique within the field.
    pub key: String,
    /// What people see, and what `TOLABEL` gives.
    pub label: String,
}

impl PicklistValue {
    /// A choice from its key and label.
    pub fn new(key: impl Into<String>, label: impl Into<String>) -> Self {
        PicklistValue {
            key: key.into(),
            label: label.into(),
        }
    }
}

/// The scalar value types; the contract maps each to a PostgreSQL type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScalarType {
    /// `text`.
    Text,
    /// 64-bit integer, `bigint`.
    Integer,
    /// Exact decimal, `numeric` (a JSON string in the API).
    Decimal,
    /// `double precision`.
    Float,
    /// `boolean`.
    Boolean,
    /// `date`.
    Date,
    /// UTC timestamp, `timestamptz`.
    Datetime,
    /// `uuid`.
    Uuid,
    /// `jsonb`.
    Json,
    /// One key of a fixed list of choices, stored as `text` that a CHECK constraint restricts
    /// to the keys.
    Picklist,
    /// Distinct keys of a fixed list of choices (a JSON array), stored as `text[]`.
    Multipicklist,
}

impl ScalarType {
    /// Every scalar type, in the order of the contract.
    pub const ALL: [ScalarType; 11] = [
        ScalarType::Text,
        ScalarType::Integer,
        ScalarType::Decimal,
        ScalarType::Float,
        ScalarType::Boolean,
        ScalarType::Date,
        ScalarType::Datetime,
        ScalarType::Uuid,
        ScalarType::Json,
        ScalarType::Picklist,
        ScalarType::Multipicklist,
    ];

    /// The spelling in files and in the API (`fieldType`).
    pub fn as_str(self) -> &'static str {
        match self {
            ScalarType::Text => "text",
            ScalarType::Integer => "integer",
            ScalarType::Decimal => "decimal",
            ScalarType::Float => "float",
            ScalarType::Boolean => "boolean",
            ScalarType::Date => "date",
            ScalarType::Datetime => "datetime",
            ScalarType::Uuid => "uuid",
            ScalarType::Json => "json",
            ScalarType::Picklist => "picklist",
            ScalarType::Multipicklist => "multipicklist",
        }
    }

    /// Whether values are keys of a list of choices the field declares.
    pub fn is_picklist(self) -> bool {
        matches!(self, ScalarType::Picklist | ScalarType::Multipicklist)
    }

    /// Whether `sum` and `avg` apply.
    pub fn is_numeric(self) -> bool {
        matches!(
            self,
            ScalarType::Integer | ScalarType::Decimal | ScalarType::Float
        )
    }

    /// Whether `min` and `max` apply.
    pub fn is_ordered(self) -> bool {
        self.is_numeric()
            || matches!(
                self,
                ScalarType::Text | ScalarType::Date | ScalarType::Datetime | ScalarType::Picklist
            )
    }
}

impl fmt::Display for ScalarType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ScalarType {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self, Error> {
        ScalarType::ALL
            .into_iter()
            .find(|t| t.as_str() == text)
            .ok_or_else(|| Error::UnknownValue {
                property: "fieldType",
                value: text.to_owned(),
                expected: "text, integer, decimal, float, boolean, date, datetime, uuid, json, \
                           picklist, multipicklist",
            })
    }
}

/// The aggregate functions of rollup fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RollupFunction {
    /// Number of source records.
    Count,
    /// Sum of a numeric field.
    Sum,
    /// Smallest value of an ordered field.
    Min,
    /// Largest value of an ordered field.
    Max,
    /// Average of a numeric field.
    Avg,
}

impl RollupFunction {
    /// Every function, in the order of the contract.
    pub const ALL: [RollupFunction; 5] = [
        RollupFunction::Count,
        RollupFunction::Sum,
        RollupFunction::Min,
        RollupFunction::Max,
        RollupFunction::Avg,
    ];

    /// The spelling in files and in the API (`rollupFunction`).
    pub fn as_str(self) -> &'static str {
        match self {
            RollupFunction::Count => "count",
            RollupFunction::Sum => "sum",
            RollupFunction::Min => "min",
            RollupFunction::Max => "max",
            RollupFunction::Avg => "avg",
        }
    }
}

impl fmt::Display for RollupFunction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RollupFunction {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self, Error> {
        RollupFunction::ALL
            .into_iter()
            .find(|f| f.as_str() == text)
            .ok_or_else(|| Error::UnknownValue {
                property: "rollupFunction",
                value: text.to_owned(),
                expected: "count, sum, min, max, avg",
            })
    }
}

/// A screen: an HFX component stored with the module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Screen {
    /// The screen key (the file name).
    pub key: String,
    /// The human-readable name, if any.
    pub label: Option<String>,
    /// The HFX source of the component.
    pub hfx_source: String,
    /// The HFX language version the source is written in (1 today).
    pub hfx_version: i32,
    /// Optional TypeScript imported by the component as `./sidecar`.
    pub sidecar: Option<String>,
}

impl Screen {
    /// A version-1 screen without label or sidecar.
    pub fn new(key: impl Into<String>, hfx_source: impl Into<String>) -> Self {
        Screen {
            key: key.into(),
            label: None,
            hfx_source: hfx_source.into(),
            hfx_version: 1,
            sidecar: None,
        }
    }
}
