//! The shapes of the metadata files and their conversion to and from the model.
//!
//! The file shapes use the contract's property names (`fieldKind`, `lookupTarget`,
//! `identityColor`...), refuse unknown properties, and keep no keys: a key is the file name (or
//! the property name inside `fields` and `rules`). [`FieldFile`] is also the flat shape of a field
//! in a write request (`fieldKind` plus the variant's own properties at the top level), so the
//! HTTP layer can reuse [`FieldFile::into_field`] to turn a request body into a [`Field`].

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use super::json5_write::{ObjBuilder, Value};
use crate::error::Error;
use crate::key::{FieldPath, QualifiedName};
use crate::model::{
    ExtensionKind, Field, FieldKind, Identity, Module, Object, PicklistValue, RollupFunction, Rule,
    ScalarType, Screen,
};

/// `<m>/module.json5`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ModuleFile {
    /// The module's label.
    pub label: String,
    /// Optional description.
    pub description: Option<String>,
    /// Optional vendor key.
    pub vendor_key: Option<String>,
    /// Optional identity colour.
    pub identity_color: Option<String>,
    /// Optional identity icon.
    pub identity_icon: Option<String>,
    /// The module's key before a rename: a hint for the DDL planner.
    pub renamed_from: Option<String>,
}

/// `<m>/objects/<o>.json5`: an object with its fields.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ObjectFile {
    /// The object's label.
    pub label: String,
    /// Optional description.
    pub description: Option<String>,
    /// Abstract objects take no records.
    #[serde(default)]
    pub is_abstract: bool,
    /// The parent, `module.object`.
    pub extends: Option<String>,
    /// How the object extends its parent (`subtype`).
    pub extension_kind: Option<String>,
    /// Optional identity colour.
    pub identity_color: Option<String>,
    /// Optional identity icon.
    pub identity_icon: Option<String>,
    /// The object's key before a rename (same module): a hint for the DDL planner.
    pub renamed_from: Option<String>,
    /// Rules keyed by rule key.
    #[serde(default)]
    pub rules: UniqueMap<RuleFile>,
    /// Fields keyed by field key.
    #[serde(default)]
    pub fields: UniqueMap<FieldFile>,
}

/// One rule inside an object file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RuleFile {
    /// The expression that must hold.
    pub assert: String,
    /// The message shown when it does not.
    pub message: String,
    /// The field the failure anchors to.
    pub field: Option<String>,
}

/// One field inside an object file, and the flat body of a field write request.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FieldFile {
    /// The field's label.
    pub label: String,
    /// Optional description.
    pub description: Option<String>,
    /// `scalar`, `formula`, `lookup` or `rollup`.
    pub field_kind: String,
    /// The value type (scalar, formula, rollup).
    pub field_type: Option<String>,
    /// NOT NULL (scalar, lookup).
    pub required: Option<bool>,
    /// A unique constraint (scalar).
    pub unique_constraint: Option<bool>,
    /// An index (scalar, lookup).
    pub indexed: Option<bool>,
    /// The choices, in order (scalar `picklist` and `multipicklist`).
    pub values: Option<Vec<PicklistValueFile>>,
    /// The key new records get when they give none (scalar `picklist` and `multipicklist`).
    pub default_value: Option<String>,
    /// The formula (formula).
    pub formula: Option<String>,
    /// The target object, `module.object` (lookup).
    pub lookup_target: Option<String>,
    /// The aggregate function (rollup).
    pub rollup_function: Option<String>,
    /// The source lookup, `module.object.field` (rollup).
    pub source: Option<String>,
    /// The aggregated source field (rollup).
    pub field: Option<String>,
    /// The filter expression (rollup).
    pub filter: Option<String>,
    /// The field's key before a rename (same object), any kind: a hint for the DDL planner.
    pub renamed_from: Option<String>,
}

/// One choice of a picklist field: `{key, label}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PicklistValueFile {
    /// The stored key.
    pub key: String,
    /// The label people see.
    pub label: String,
}

/// `<m>/screens/<s>.json5`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScreenFile {
    /// Optional label.
    pub label: Option<String>,
    /// The HFX source.
    pub hfx_source: String,
    /// The HFX version; 1 when absent.
    #[serde(default = "default_hfx_version")]
    pub hfx_version: i32,
    /// Optional TypeScript sidecar.
    pub sidecar: Option<String>,
}

fn default_hfx_version() -> i32 {
    1
}

/// A map that refuses duplicate keys, which a hand-edited file may contain by mistake.
#[derive(Debug, Clone)]
pub struct UniqueMap<T>(pub BTreeMap<String, T>);

impl<T> Default for UniqueMap<T> {
    fn default() -> Self {
        UniqueMap(BTreeMap::new())
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for UniqueMap<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MapVisitor<T>(PhantomData<T>);

        impl<'de, T: Deserialize<'de>> Visitor<'de> for MapVisitor<T> {
            type Value = UniqueMap<T>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
                let mut map = BTreeMap::new();
                while let Some(key) = access.next_key::<String>()? {
                    if map.contains_key(&key) {
                        return Err(de::Error::custom(format!("duplicate key `{key}`")));
                    }
                    let value = access.next_value()?;
                    map.insert(key, value);
                }
                Ok(UniqueMap(map))
            }
        }

        deserializer.deserialize_map(MapVisitor(PhantomData))
    }
}

impl ModuleFile {
    /// The module with this key, without objects and screens.
    pub fn into_module(self, key: &str) -> Module {
        Module {
            key: key.to_owned(),
            label: self.label,
            description: self.description,
            identity: Identity {
                color: self.identity_color,
                icon: self.identity_icon,
            },
            vendor_key: self.vendor_key,
            renamed_from: self.renamed_from,
            objects: BTreeMap::new(),
            screens: BTreeMap::new(),
        }
    }
}

impl ObjectFile {
    /// The object with this key; errors name the property path inside the file.
    pub fn into_object(self, key: &str) -> Result<Object, (String, Error)> {
        let extends = match &self.extends {
            Some(text) => Some(QualifiedName::parse(text).map_err(|e| ("extends".to_owned(), e))?),
            None => None,
        };
        let extension_kind = match &self.extension_kind {
            Some(text) => Some(
                text.parse::<ExtensionKind>()
                    .map_err(|e| ("extensionKind".to_owned(), e))?,
            ),
            None => None,
        };
        let rules = self
            .rules
            .0
            .into_iter()
            .map(|(rule_key, rule)| {
                let rule = Rule {
                    assert: rule.assert,
                    message: rule.message,
                    field: rule.field,
                };
                (rule_key, rule)
            })
            .collect();
        let mut fields = BTreeMap::new();
        for (field_key, field) in self.fields.0 {
            let field = field
                .into_field(&field_key)
                .map_err(|e| (format!("fields.{field_key}"), e))?;
            fields.insert(field_key, field);
        }
        Ok(Object {
            key: key.to_owned(),
            label: self.label,
            description: self.description,
            is_abstract: self.is_abstract,
            extends,
            extension_kind,
            identity: Identity {
                color: self.identity_color,
                icon: self.identity_icon,
            },
            renamed_from: self.renamed_from,
            rules,
            fields,
        })
    }
}

impl ScreenFile {
    /// The screen with this key.
    pub fn into_screen(self, key: &str) -> Screen {
        Screen {
            key: key.to_owned(),
            label: self.label,
            hfx_source: self.hfx_source,
            hfx_version: self.hfx_version,
            sidecar: self.sidecar,
        }
    }
}

/// The properties of one field kind: which it needs, which it allows.
struct KindProperties {
    name: &'static str,
    allowed: &'static [&'static str],
}

const SCALAR: KindProperties = KindProperties {
    name: "scalar",
    allowed: &[
        "fieldType",
        "required",
        "uniqueConstraint",
        "indexed",
        "values",
        "defaultValue",
    ],
};
const FORMULA: KindProperties = KindProperties {
    name: "formula",
    allowed: &["fieldType", "formula"],
};
const LOOKUP: KindProperties = KindProperties {
    name: "lookup",
    allowed: &["lookupTarget", "required", "indexed"],
};
const ROLLUP: KindProperties = KindProperties {
    name: "rollup",
    allowed: &["fieldType", "rollupFunction", "source", "field", "filter"],
};

impl FieldFile {
    /// The field with this key, or the first property problem: an unknown `fieldKind`, a
    /// property the kind needs but lacks, or a property of another kind. A boolean of another
    /// kind is tolerated when `false`, since the read shape shows all three booleans on every
    /// field and a client may send back what it read.
    pub fn into_field(self, key: &str) -> Result<Field, Error> {
        let kind = match self.field_kind.as_str() {
            "scalar" => &SCALAR,
            "formula" => &FORMULA,
            "lookup" => &LOOKUP,
            "rollup" => &ROLLUP,
            _ => {
                return Err(Error::UnknownValue {
                    property: "fieldKind",
                    value: self.field_kind,
                    expected: "scalar, formula, lookup, rollup",
                })
            }
        };
        self.check_properties(kind)?;
        let field_kind = match kind.name {
            "scalar" => FieldKind::Scalar {
                field_type: required_type(self.field_type.as_deref())?,
                required: self.required.unwrap_or(false),
                unique: self.unique_constraint.unwrap_or(false),
                indexed: self.indexed.unwrap_or(false),
                values: self
                    .values
                    .unwrap_or_default()
                    .into_iter()
                    .map(|value| PicklistValue::new(value.key, value.label))
                    .collect(),
                default_value: self.default_value,
            },
            "formula" => FieldKind::Formula {
                formula: required_text("formula", self.formula)?,
                field_type: required_type(self.field_type.as_deref())?,
            },
            "lookup" => FieldKind::Lookup {
                target: QualifiedName::parse(&required_text("lookupTarget", self.lookup_target)?)?,
                required: self.required.unwrap_or(false),
                indexed: self.indexed.unwrap_or(false),
            },
            _ => FieldKind::Rollup {
                function: required_text("rollupFunction", self.rollup_function)?
                    .parse::<RollupFunction>()?,
                source: FieldPath::parse(&required_text("source", self.source)?)?,
                field: self.field,
                filter: self.filter,
                field_type: required_type(self.field_type.as_deref())?,
            },
        };
        Ok(Field {
            key: key.to_owned(),
            label: self.label,
            description: self.description,
            renamed_from: self.renamed_from,
            kind: field_kind,
        })
    }

    fn check_properties(&self, kind: &KindProperties) -> Result<(), Error> {
        // (property, present, harmless): a `false` boolean of another kind is harmless.
        let properties: [(&'static str, bool, bool); 12] = [
            ("fieldType", self.field_type.is_some(), false),
            (
                "required",
                self.required.is_some(),
                self.required == Some(false),
            ),
            (
                "uniqueConstraint",
                self.unique_constraint.is_some(),
                self.unique_constraint == Some(false),
            ),
            (
                "indexed",
                self.indexed.is_some(),
                self.indexed == Some(false),
            ),
            ("values", self.values.is_some(), false),
            ("defaultValue", self.default_value.is_some(), false),
            ("formula", self.formula.is_some(), false),
            ("lookupTarget", self.lookup_target.is_some(), false),
            ("rollupFunction", self.rollup_function.is_some(), false),
            ("source", self.source.is_some(), false),
            ("field", self.field.is_some(), false),
            ("filter", self.filter.is_some(), false),
        ];
        for (property, present, harmless) in properties {
            if present && !harmless && !kind.allowed.contains(&property) {
                return Err(Error::PropertyNotAllowed {
                    property,
                    kind: kind.name,
                });
            }
        }
        Ok(())
    }

    /// The flat shape of a field, as written to files.
    pub fn from_field(field: &Field) -> FieldFile {
        let mut file = FieldFile {
            label: field.label.clone(),
            description: field.description.clone(),
            field_kind: field.kind.name().to_owned(),
            renamed_from: field.renamed_from.clone(),
            ..FieldFile::default()
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
                file.field_type = Some(field_type.as_str().to_owned());
                file.required = Some(*required);
                file.unique_constraint = Some(*unique);
                file.indexed = Some(*indexed);
                if field_type.is_picklist() || !values.is_empty() {
                    file.values = Some(
                        values
                            .iter()
                            .map(|value| PicklistValueFile {
                                key: value.key.clone(),
                                label: value.label.clone(),
                            })
                            .collect(),
                    );
                }
                file.default_value.clone_from(default_value);
            }
            FieldKind::Formula {
                formula,
                field_type,
            } => {
                file.field_type = Some(field_type.as_str().to_owned());
                file.formula = Some(formula.clone());
            }
            FieldKind::Lookup {
                target,
                required,
                indexed,
            } => {
                file.lookup_target = Some(target.to_string());
                file.required = Some(*required);
                file.indexed = Some(*indexed);
            }
            FieldKind::Rollup {
                function,
                source,
                field: aggregated,
                filter,
                field_type,
            } => {
                file.field_type = Some(field_type.as_str().to_owned());
                file.rollup_function = Some(function.as_str().to_owned());
                file.source = Some(source.to_string());
                file.field = aggregated.clone();
                file.filter = filter.clone();
            }
        }
        file
    }
}

fn required_text(property: &'static str, value: Option<String>) -> Result<String, Error> {
    value.ok_or(Error::MissingProperty { property })
}

fn required_type(value: Option<&str>) -> Result<ScalarType, Error> {
    value
        .ok_or(Error::MissingProperty {
            property: "fieldType",
        })?
        .parse()
}

/// The JSON5 value of `<m>/module.json5`.
pub(crate) fn module_value(module: &Module) -> Value {
    ObjBuilder::default()
        .str("label", &module.label)
        .opt_str("description", module.description.as_deref())
        .opt_str("vendorKey", module.vendor_key.as_deref())
        .opt_str("identityColor", module.identity.color.as_deref())
        .opt_str("identityIcon", module.identity.icon.as_deref())
        .opt_str("renamedFrom", module.renamed_from.as_deref())
        .build()
}

/// The JSON5 value of `<m>/objects/<o>.json5`.
pub(crate) fn object_value(object: &Object) -> Value {
    let rules = object
        .rules
        .iter()
        .map(|(key, rule)| {
            let value = ObjBuilder::default()
                .str("assert", &rule.assert)
                .str("message", &rule.message)
                .opt_str("field", rule.field.as_deref())
                .build();
            (key.clone(), value)
        })
        .collect();
    let fields = object
        .fields
        .values()
        .map(|field| (field.key.clone(), field_value(field)))
        .collect();
    ObjBuilder::default()
        .str("label", &object.label)
        .opt_str("description", object.description.as_deref())
        .flag("isAbstract", object.is_abstract)
        .opt_str(
            "extends",
            object.extends.as_ref().map(ToString::to_string).as_deref(),
        )
        .opt_str(
            "extensionKind",
            object.extension_kind.map(ExtensionKind::as_str),
        )
        .opt_str("identityColor", object.identity.color.as_deref())
        .opt_str("identityIcon", object.identity.icon.as_deref())
        .opt_str("renamedFrom", object.renamed_from.as_deref())
        .non_empty_obj("rules", rules)
        .non_empty_obj("fields", fields)
        .build()
}

fn field_value(field: &Field) -> Value {
    let builder = ObjBuilder::default()
        .str("label", &field.label)
        .opt_str("description", field.description.as_deref())
        .opt_str("renamedFrom", field.renamed_from.as_deref())
        .str("fieldKind", field.kind.name());
    match &field.kind {
        FieldKind::Scalar {
            field_type,
            required,
            unique,
            indexed,
            values,
            default_value,
        } => {
            let builder = builder
                .str("fieldType", field_type.as_str())
                .flag("required", *required)
                .flag("uniqueConstraint", *unique)
                .flag("indexed", *indexed);
            let builder = if field_type.is_picklist() || !values.is_empty() {
                let items = values
                    .iter()
                    .map(|value| {
                        ObjBuilder::default()
                            .str("key", &value.key)
                            .str("label", &value.label)
                            .build()
                    })
                    .collect();
                builder.list("values", items)
            } else {
                builder
            };
            builder.opt_str("defaultValue", default_value.as_deref())
        }
        FieldKind::Formula {
            formula,
            field_type,
        } => builder
            .str("fieldType", field_type.as_str())
            .str("formula", formula),
        FieldKind::Lookup {
            target,
            required,
            indexed,
        } => builder
            .str("lookupTarget", &target.to_string())
            .flag("required", *required)
            .flag("indexed", *indexed),
        FieldKind::Rollup {
            function,
            source,
            field: aggregated,
            filter,
            field_type,
        } => builder
            .str("fieldType", field_type.as_str())
            .str("rollupFunction", function.as_str())
            .str("source", &source.to_string())
            .opt_str("field", aggregated.as_deref())
            .opt_str("filter", filter.as_deref()),
    }
    .build()
}

/// The JSON5 value of `<m>/screens/<s>.json5`.
pub(crate) fn screen_value(screen: &Screen) -> Value {
    ObjBuilder::default()
        .opt_str("label", screen.label.as_deref())
        .int("hfxVersion", i64::from(screen.hfx_version))
        .str("hfxSource", &screen.hfx_source)
        .opt_str("sidecar", screen.sidecar.as_deref())
        .build()
}
