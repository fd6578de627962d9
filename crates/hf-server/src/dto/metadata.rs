//! Metadata resources as the contract shows them (Part 1 "Resources"), and the bodies of
//! metadata writes.

use std::collections::BTreeMap;
use std::str::FromStr;

use hf_model::{
    Field, FieldKind, FieldPath, Identity, Module, Object, PicklistValue, QualifiedName,
    RollupFunction, Rule, ScalarType, Screen,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{ApiError, Code};

/// Declares a string schema whose values are a list the model owns, so the document's enum and
/// the values the service accepts come from one place.
macro_rules! string_enum_schema {
    ($(#[$doc:meta])* $name:ident => $values:expr) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $name;

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String)
                    .enum_values(Some($values))
                    .into()
            }
        }

        impl ToSchema for $name {}
    };
}

string_enum_schema! {
    /// `fieldType`: a scalar type of the model.
    FieldType => ScalarType::ALL.iter().map(|t| t.as_str())
}

string_enum_schema! {
    /// `rollupFunction`: how a rollup aggregates.
    RollupFunctionName => RollupFunction::ALL.iter().map(|f| f.as_str())
}

string_enum_schema! {
    /// `fieldKind`: which variant a field is.
    FieldKindName => FIELD_KINDS
}

/// The field kinds of the contract; a field body's `fieldKind` selects one.
pub const FIELD_KINDS: [&str; 4] = ["scalar", "formula", "lookup", "rollup"];

/// A module.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModuleDto {
    module_key: String,
    label: String,
    description: Option<String>,
    identity_color: Option<String>,
    identity_icon: Option<String>,
    vendor_key: Option<String>,
}

impl From<&Module> for ModuleDto {
    fn from(module: &Module) -> Self {
        Self {
            module_key: module.key.clone(),
            label: module.label.clone(),
            description: module.description.clone(),
            identity_color: module.identity.color.clone(),
            identity_icon: module.identity.icon.clone(),
            vendor_key: module.vendor_key.clone(),
        }
    }
}

/// A validation rule of an object.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuleDto {
    /// The formula that must hold.
    assert: String,
    /// The message shown when it does not.
    message: String,
    /// The field the failure anchors to; the record when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    field: Option<String>,
}

/// An object (its fields are listed separately).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectDto {
    module_key: String,
    object_key: String,
    label: String,
    is_abstract: bool,
    description: Option<String>,
    extends: Option<String>,
    extension_kind: Option<String>,
    identity_color: Option<String>,
    identity_icon: Option<String>,
    rules: BTreeMap<String, RuleDto>,
}

impl ObjectDto {
    /// The object of `module`.
    pub fn new(module: &str, object: &Object) -> Self {
        Self {
            module_key: module.to_owned(),
            object_key: object.key.clone(),
            label: object.label.clone(),
            is_abstract: object.is_abstract,
            description: object.description.clone(),
            extends: object.extends.as_ref().map(ToString::to_string),
            extension_kind: object
                .effective_extension_kind()
                .map(|k| k.as_str().to_owned()),
            identity_color: object.identity.color.clone(),
            identity_icon: object.identity.icon.clone(),
            rules: object
                .rules
                .iter()
                .map(|(key, rule)| {
                    let dto = RuleDto {
                        assert: rule.assert.clone(),
                        message: rule.message.clone(),
                        field: rule.field.clone(),
                    };
                    (key.clone(), dto)
                })
                .collect(),
        }
    }
}

/// One choice of a `picklist` or `multipicklist` field.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PicklistValueDto {
    /// What records store and queries compare; unique within the field.
    #[schema(pattern = r"^[a-z0-9_]{1,63}$")]
    key: String,
    /// What people see, and what `TOLABEL` gives.
    label: String,
}

fn picklist_values(values: Option<Vec<PicklistValueDto>>) -> Vec<PicklistValue> {
    values
        .unwrap_or_default()
        .into_iter()
        .map(|value| PicklistValue::new(value.key, value.label))
        .collect()
}

/// A field.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FieldDto {
    module_key: String,
    object_key: String,
    field_key: String,
    #[schema(value_type = FieldKindName)]
    field_kind: &'static str,
    label: String,
    description: Option<String>,
    #[schema(value_type = Option<FieldType>)]
    field_type: Option<&'static str>,
    formula: Option<String>,
    lookup_target: Option<String>,
    #[schema(value_type = Option<RollupFunctionName>)]
    rollup_function: Option<&'static str>,
    indexed: bool,
    required: bool,
    unique_constraint: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    filter: Option<String>,
    /// The choices of a `picklist` or `multipicklist` field, in order.
    #[serde(skip_serializing_if = "Option::is_none")]
    values: Option<Vec<PicklistValueDto>>,
    /// The key a new record gets when it gives none (picklists only).
    #[serde(skip_serializing_if = "Option::is_none")]
    default_value: Option<String>,
}

impl FieldDto {
    /// The field declared on `object`.
    pub fn new(object: &QualifiedName, field: &Field) -> Self {
        let mut dto = Self {
            module_key: object.module.clone(),
            object_key: object.object.clone(),
            field_key: field.key.clone(),
            field_kind: field.kind.name(),
            label: field.label.clone(),
            description: field.description.clone(),
            field_type: None,
            formula: None,
            lookup_target: None,
            rollup_function: None,
            indexed: false,
            required: false,
            unique_constraint: false,
            source: None,
            field: None,
            filter: None,
            values: None,
            default_value: None,
        };
        match &field.kind {
            FieldKind::Scalar {
                field_type,
                required,
                unique,
                indexed,
                values,
                default_value,
            } => {
                dto.field_type = Some(field_type.as_str());
                dto.required = *required;
                dto.unique_constraint = *unique;
                dto.indexed = *indexed;
                if field_type.is_picklist() || !values.is_empty() {
                    let values = values.iter().map(|value| PicklistValueDto {
                        key: value.key.clone(),
                        label: value.label.clone(),
                    });
                    dto.values = Some(values.collect());
                }
                dto.default_value.clone_from(default_value);
            }
            FieldKind::Formula {
                formula,
                field_type,
            } => {
                dto.formula = Some(formula.clone());
                dto.field_type = Some(field_type.as_str());
            }
            FieldKind::Lookup {
                target,
                required,
                indexed,
            } => {
                dto.lookup_target = Some(target.to_string());
                dto.required = *required;
                dto.indexed = *indexed;
            }
            FieldKind::Rollup {
                function,
                source,
                field,
                filter,
                field_type,
            } => {
                dto.rollup_function = Some(function.as_str());
                dto.source = Some(source.to_string());
                dto.field = field.clone();
                dto.filter = filter.clone();
                dto.field_type = Some(field_type.as_str());
            }
        }
        dto
    }
}

/// A screen.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScreenDto {
    module_key: String,
    screen_key: String,
    hfx_source: String,
    hfx_version: i32,
    label: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sidecar: Option<String>,
}

impl ScreenDto {
    /// The screen of `module`.
    pub fn new(module: &str, screen: &Screen) -> Self {
        Self {
            module_key: module.to_owned(),
            screen_key: screen.key.clone(),
            hfx_source: screen.hfx_source.clone(),
            hfx_version: screen.hfx_version,
            label: screen.label.clone(),
            sidecar: screen.sidecar.clone(),
        }
    }
}

/// `{color?, icon?}` of a write body.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct IdentityBody {
    color: Option<String>,
    icon: Option<String>,
}

fn identity(body: Option<IdentityBody>) -> Identity {
    let body = body.unwrap_or_default();
    Identity {
        color: body.color,
        icon: body.icon,
    }
}

/// Body of a module write.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModuleBody {
    label: String,
    description: Option<String>,
    identity: Option<IdentityBody>,
    vendor_key: Option<String>,
    /// The key this item had before (a rename): the old item moves to the new key, and the DDL
    /// renames instead of dropping. Kept in the metadata file; not shown by reads.
    renamed_from: Option<String>,
}

impl ModuleBody {
    /// The module with the key from the path.
    pub fn into_module(self, key: &str) -> Module {
        let mut module = Module::new(key, self.label);
        module.description = self.description;
        module.identity = identity(self.identity);
        module.vendor_key = self.vendor_key;
        module.renamed_from = self.renamed_from;
        module
    }
}

/// Body of an object write.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObjectBody {
    label: String,
    description: Option<String>,
    identity: Option<IdentityBody>,
    #[serde(default)]
    rules: BTreeMap<String, RuleDto>,
    extends: Option<String>,
    extension_kind: Option<String>,
    #[serde(default)]
    is_abstract: bool,
    /// The key this item had before (a rename): the old item moves to the new key, and the DDL
    /// renames instead of dropping. Kept in the metadata file; not shown by reads.
    renamed_from: Option<String>,
}

impl ObjectBody {
    /// The object with the key from the path. Keeps `fields` of an existing object (a `PUT`
    /// replaces the object's own definition; fields are written separately).
    pub fn into_object(self, key: &str) -> Result<Object, ApiError> {
        let mut object = Object::new(key, self.label);
        object.description = self.description;
        object.identity = identity(self.identity);
        object.is_abstract = self.is_abstract;
        object.renamed_from = self.renamed_from;
        object.extends = match self.extends {
            Some(text) => Some(QualifiedName::parse(&text).map_err(|e| invalid("extends", e))?),
            None => None,
        };
        object.extension_kind = match self.extension_kind {
            Some(text) => Some(text.parse().map_err(|e| invalid("extensionKind", e))?),
            None => None,
        };
        object.rules = self
            .rules
            .into_iter()
            .map(|(key, rule)| {
                (
                    key,
                    Rule {
                        assert: rule.assert,
                        message: rule.message,
                        field: rule.field,
                    },
                )
            })
            .collect();
        Ok(object)
    }
}

/// Body of a field write: `fieldKind` picks the variant, whose properties sit beside it. Each
/// variant is a complete object that holds its own `fieldKind`, so the document's `oneOf` has
/// exactly one matching branch for every valid body; the route reads `fieldKind` first and then
/// that variant (see `routes::metadata`).
#[derive(Debug, ToSchema)]
#[serde(untagged)]
#[schema(example = json!({"fieldKind": "scalar", "label": "Name", "fieldType": "text", "required": true}))]
pub enum FieldBody {
    /// A stored value.
    Scalar(ScalarBody),
    /// A value computed from other fields of the record.
    Formula(FormulaBody),
    /// A reference to a record of another object.
    Lookup(LookupBody),
    /// An aggregate over the records that look up this one.
    Rollup(RollupBody),
}

/// `fieldKind` of a scalar field body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ScalarKind {
    /// The only value.
    Scalar,
}

/// Properties of a scalar field.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScalarBody {
    /// Always `scalar`.
    #[expect(
        dead_code,
        reason = "read to select the variant; kept so the schema has it"
    )]
    field_kind: ScalarKind,
    label: String,
    description: Option<String>,
    #[schema(value_type = FieldType)]
    field_type: String,
    #[serde(default)]
    required: bool,
    #[serde(default)]
    unique_constraint: bool,
    #[serde(default)]
    indexed: bool,
    /// The choices, in order: required (at least one) for `picklist` and `multipicklist`,
    /// refused for the other types. Keys are unique.
    values: Option<Vec<PicklistValueDto>>,
    /// For `picklist` and `multipicklist`: the key a new record gets when it gives none.
    #[schema(pattern = r"^[a-z0-9_]{1,63}$")]
    default_value: Option<String>,
    /// The key this item had before (a rename): the old item moves to the new key, and the DDL
    /// renames instead of dropping. Kept in the metadata file; not shown by reads.
    renamed_from: Option<String>,
}

/// `fieldKind` of a formula field body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum FormulaKind {
    /// The only value.
    Formula,
}

/// Properties of a formula field.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FormulaBody {
    /// Always `formula`.
    #[expect(
        dead_code,
        reason = "read to select the variant; kept so the schema has it"
    )]
    field_kind: FormulaKind,
    label: String,
    description: Option<String>,
    formula: String,
    #[schema(value_type = FieldType)]
    field_type: String,
    /// The key this item had before (a rename): the old item moves to the new key, and the DDL
    /// renames instead of dropping. Kept in the metadata file; not shown by reads.
    renamed_from: Option<String>,
}

/// `fieldKind` of a lookup field body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum LookupKind {
    /// The only value.
    Lookup,
}

/// Properties of a lookup field.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LookupBody {
    /// Always `lookup`.
    #[expect(
        dead_code,
        reason = "read to select the variant; kept so the schema has it"
    )]
    field_kind: LookupKind,
    label: String,
    description: Option<String>,
    lookup_target: String,
    #[serde(default)]
    required: bool,
    #[serde(default)]
    indexed: bool,
    /// The key this item had before (a rename): the old item moves to the new key, and the DDL
    /// renames instead of dropping. Kept in the metadata file; not shown by reads.
    renamed_from: Option<String>,
}

/// `fieldKind` of a rollup field body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RollupKind {
    /// The only value.
    Rollup,
}

/// Properties of a rollup field.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RollupBody {
    /// Always `rollup`.
    #[expect(
        dead_code,
        reason = "read to select the variant; kept so the schema has it"
    )]
    field_kind: RollupKind,
    label: String,
    description: Option<String>,
    #[schema(value_type = RollupFunctionName)]
    rollup_function: String,
    source: String,
    field: Option<String>,
    filter: Option<String>,
    #[schema(value_type = FieldType)]
    field_type: String,
    /// The key this item had before (a rename): the old item moves to the new key, and the DDL
    /// renames instead of dropping. Kept in the metadata file; not shown by reads.
    renamed_from: Option<String>,
}

impl FieldBody {
    /// The field with the key from the path.
    pub fn into_field(self, key: &str) -> Result<Field, ApiError> {
        let field_type =
            |text: &str| ScalarType::from_str(text).map_err(|e| invalid("fieldType", e));
        let (label, description, renamed_from, kind) = match self {
            FieldBody::Scalar(b) => {
                let kind = FieldKind::Scalar {
                    field_type: field_type(&b.field_type)?,
                    required: b.required,
                    unique: b.unique_constraint,
                    indexed: b.indexed,
                    values: picklist_values(b.values),
                    default_value: b.default_value,
                };
                (b.label, b.description, b.renamed_from, kind)
            }
            FieldBody::Formula(b) => {
                let kind = FieldKind::Formula {
                    formula: b.formula,
                    field_type: field_type(&b.field_type)?,
                };
                (b.label, b.description, b.renamed_from, kind)
            }
            FieldBody::Lookup(b) => {
                let target = QualifiedName::parse(&b.lookup_target)
                    .map_err(|e| invalid("lookupTarget", e))?;
                (
                    b.label,
                    b.description,
                    b.renamed_from,
                    FieldKind::Lookup {
                        target,
                        required: b.required,
                        indexed: b.indexed,
                    },
                )
            }
            FieldBody::Rollup(b) => {
                let kind = FieldKind::Rollup {
                    function: RollupFunction::from_str(&b.rollup_function)
                        .map_err(|e| invalid("rollupFunction", e))?,
                    source: FieldPath::parse(&b.source).map_err(|e| invalid("source", e))?,
                    field: b.field,
                    filter: b.filter,
                    field_type: field_type(&b.field_type)?,
                };
                (b.label, b.description, b.renamed_from, kind)
            }
        };
        let mut field = Field::new(key, label, kind);
        field.description = description;
        field.renamed_from = renamed_from;
        Ok(field)
    }
}

/// Body of a screen write.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScreenBody {
    /// The HFX source.
    pub hfx_source: String,
    /// The HFX language version; 1.
    #[serde(default = "default_hfx_version")]
    pub hfx_version: i32,
    /// A display name.
    pub label: Option<String>,
    /// An optional TypeScript module the screen imports as `./sidecar`.
    pub sidecar: Option<String>,
}

fn default_hfx_version() -> i32 {
    1
}

impl ScreenBody {
    /// The screen with the key from the path.
    pub fn into_screen(self, key: &str) -> Screen {
        let mut screen = Screen::new(key, self.hfx_source);
        screen.hfx_version = self.hfx_version;
        screen.label = self.label;
        screen.sidecar = self.sidecar;
        screen
    }
}

/// The `apply` object of a live write.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplyDto {
    tables_created: u64,
    columns_added: u64,
    ddl_executed: u64,
}

impl From<hf_ddl::ApplyStats> for ApplyDto {
    fn from(stats: hf_ddl::ApplyStats) -> Self {
        Self {
            tables_created: stats.tables_created,
            columns_added: stats.columns_added,
            ddl_executed: stats.ddl_executed,
        }
    }
}

/// The answer to every metadata write.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WriteResponse {
    /// `created`, `updated` or `deleted`.
    pub status: &'static str,
    /// The branch written, without `metadata@`.
    pub branch: String,
    /// The item's file, relative to the metadata directory.
    pub file: String,
    /// The DDL that ran with a live-branch write (for a dry run: would run); null on other
    /// branches.
    pub apply: Option<ApplyDto>,
    /// Present and true when the write was a dry run (`?dryRun=true`): nothing was written.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// The DDL plan of a live-branch dry run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanDto>,
}

/// One step of a DDL plan.
#[derive(Debug, Serialize, ToSchema)]
pub struct PlanChange {
    /// What kind of step (`create_table`, `add_column`, ...).
    pub action: &'static str,
    /// What it touches (`schema.table.column`).
    pub target: String,
    /// The statement.
    pub sql: String,
    /// Whether it loses data.
    pub destructive: bool,
}

/// Counts of a DDL plan.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanSummary {
    /// `CREATE TABLE` statements.
    pub tables_created: u64,
    /// `ADD COLUMN` statements.
    pub columns_added: u64,
    /// All statements.
    pub ddl_statements: u64,
    /// Statements that lose data.
    pub destructive: u64,
}

/// A DDL plan: its steps in order and their counts.
#[derive(Debug, Serialize, ToSchema)]
pub struct PlanDto {
    /// The ordered steps; empty when the database is up to date.
    pub changes: Vec<PlanChange>,
    /// Counts.
    pub summary: PlanSummary,
}

impl From<hf_ddl::Plan> for PlanDto {
    fn from(plan: hf_ddl::Plan) -> Self {
        let summary = &plan.summary;
        Self {
            summary: PlanSummary {
                tables_created: summary.tables_created,
                columns_added: summary.columns_added,
                ddl_statements: summary.ddl_statements,
                destructive: summary.destructive,
            },
            changes: plan
                .changes
                .into_iter()
                .map(|c| PlanChange {
                    action: c.action.as_str(),
                    target: c.target,
                    sql: c.sql,
                    destructive: c.destructive,
                })
                .collect(),
        }
    }
}

/// One branch of `GET /branches`.
#[derive(Debug, Serialize, ToSchema)]
pub struct BranchDto {
    /// The branch id.
    pub branch: String,
    /// Its head commit.
    pub commit: String,
    /// Whether the database reflects it.
    pub live: bool,
}

fn invalid(property: &str, error: hf_model::Error) -> ApiError {
    ApiError::field(
        Code::InvalidBody,
        format!("`{property}`: {error}."),
        property,
    )
}
