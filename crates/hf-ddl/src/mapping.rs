//! The mapping from a metadata model to the [`Schema`] it needs (schema = module,
//! table = object, column = field, grants to `hf:authenticated`, system-column and picklist
//! defaults; the full rules are in `docs/ddl.md`).
//!
//! A schema per module, a table per concrete object with every effective field as a column
//! (inherited fields are copied into each concrete table), system columns `id`, `created_at`
//! and `updated_at`, labels as comments, and the grants of the `hf:authenticated` role.
//! Formula and rollup fields are computed at read time, so they have no column.

use std::collections::BTreeMap;

use hf_model::{FieldKind, Model, QualifiedName, ScalarType};

use crate::diagnostics::{Diagnostic, DiagnosticCode, Severity};
use crate::names;
use crate::schema::{
    Column, ColumnDefault, ForeignKey, Index, Namespace, PrimaryKey, Privilege, Schema, SqlType,
    Table, TableRef, UniqueConstraint, ValueCheck, AUTHENTICATED_ROLE,
};

/// The schema a model needs: what [`crate::plan`] takes as `desired`.
pub fn desired_schema(model: &Model) -> Schema {
    map_model(model).0
}

/// The schema a model needs, with the notes the mapping makes on the way: lookups that get no
/// foreign key and constraint names that had to be hashed to stay unique.
pub fn map_model(model: &Model) -> (Schema, Vec<Diagnostic>) {
    let mut diagnostics = Vec::new();
    let mut schema = Schema::default();
    for module in model.modules.values() {
        let mut namespace = Namespace {
            managed: true,
            comment: label_comment(&module.label),
            grants: BTreeMap::from([(AUTHENTICATED_ROLE.to_owned(), [Privilege::Usage].into())]),
            tables: BTreeMap::new(),
        };
        for object in module.objects.values().filter(|o| !o.is_abstract) {
            let name = QualifiedName::new(&module.key, &object.key);
            let table = object_table(model, &name, &object.label, &mut diagnostics);
            namespace.tables.insert(object.key.clone(), table);
        }
        keep_relation_names_unique(&module.key, &mut namespace, &mut diagnostics);
        schema.schemas.insert(module.key.clone(), namespace);
    }
    (schema, diagnostics)
}

/// The comment that carries a label. PostgreSQL stores an empty comment as none (`COMMENT ON
/// ... IS ''` drops it), so an empty label wants no comment: wanting `''` would plan the same
/// `COMMENT` after every apply.
fn label_comment(label: &str) -> Option<String> {
    (!label.is_empty()).then(|| label.to_owned())
}

/// The column type of a scalar type: the model's one mapping ([`ScalarType::sql_type`]), read
/// as the planner's [`SqlType`].
pub fn column_type(scalar: ScalarType) -> SqlType {
    SqlType::parse(scalar.sql_type())
}

fn system_column(name: &str, data_type: SqlType, default: ColumnDefault) -> Column {
    Column {
        name: name.to_owned(),
        data_type,
        not_null: true,
        default: Some(default),
        comment: None,
        managed: true,
    }
}

fn object_table(
    model: &Model,
    name: &QualifiedName,
    label: &str,
    diagnostics: &mut Vec<Diagnostic>,
) -> Table {
    let t = name.object.as_str();
    let mut table = Table {
        managed: true,
        comment: label_comment(label),
        primary_key: Some(PrimaryKey {
            name: names::primary_key_name(t),
            columns: vec!["id".to_owned()],
            managed: true,
        }),
        grants: BTreeMap::from([(
            AUTHENTICATED_ROLE.to_owned(),
            [
                Privilege::Select,
                Privilege::Insert,
                Privilege::Update,
                Privilege::Delete,
            ]
            .into(),
        )]),
        ..Table::default()
    };
    table.columns.push(system_column(
        "id",
        SqlType::Uuid,
        ColumnDefault::GenRandomUuid,
    ));
    for effective in model.effective_fields(name) {
        let field = effective.field;
        let key = field.key.as_str();
        let (data_type, required, unique, indexed, default) = match &field.kind {
            FieldKind::Scalar {
                field_type,
                required,
                unique,
                indexed,
                values,
                default_value,
            } => {
                if field_type.is_picklist() {
                    table.checks.push(ValueCheck {
                        name: names::check_name(t, key),
                        column: key.to_owned(),
                        values: values.iter().map(|value| value.key.clone()).collect(),
                        multi: *field_type == ScalarType::Multipicklist,
                        managed: true,
                    });
                }
                let default = default_value
                    .as_deref()
                    .and_then(|key| column_default(*field_type, key));
                (
                    column_type(*field_type),
                    *required,
                    *unique,
                    *indexed,
                    default,
                )
            }
            FieldKind::Lookup {
                target,
                required,
                indexed,
            } => {
                if let Some(fk) = lookup_foreign_key(model, t, key, target, diagnostics, name) {
                    table.foreign_keys.push(fk);
                }
                (SqlType::Uuid, *required, false, *indexed, None)
            }
            FieldKind::Formula { .. } | FieldKind::Rollup { .. } => continue,
        };
        table.columns.push(Column {
            name: key.to_owned(),
            data_type,
            not_null: required,
            default,
            comment: label_comment(&field.label),
            managed: true,
        });
        if unique {
            table.uniques.push(UniqueConstraint {
                name: names::unique_name(t, &[key]),
                columns: vec![key.to_owned()],
                managed: true,
            });
        } else if indexed {
            // A unique constraint already has an index, so `indexed` adds one only without it.
            table.indexes.push(Index {
                name: names::index_name(t, &[key]),
                columns: vec![key.to_owned()],
                unique: false,
                definition: None,
                managed: true,
            });
        }
    }
    table.columns.push(system_column(
        "created_at",
        SqlType::Timestamptz,
        ColumnDefault::Now,
    ));
    table.columns.push(system_column(
        "updated_at",
        SqlType::Timestamptz,
        ColumnDefault::Now,
    ));
    // Who created and last changed the record through hf (a principal id); rows written with
    // plain SQL leave them null.
    for name in ["created_by", "updated_by"] {
        table.columns.push(Column {
            name: name.to_owned(),
            data_type: SqlType::Uuid,
            not_null: false,
            default: None,
            comment: None,
            managed: true,
        });
    }
    table
}

/// The column DEFAULT of a field's `defaultValue`, so a row inserted with plain SQL gets it as a
/// record created through hf does: the key as `text`, or a one-key `text[]` for a multi-select
/// picklist. The model gives a `defaultValue` to picklists only; on any other type it would not
/// be a key, so it maps to no default.
fn column_default(field_type: ScalarType, key: &str) -> Option<ColumnDefault> {
    match field_type {
        ScalarType::Picklist => ColumnDefault::text(key),
        ScalarType::Multipicklist => ColumnDefault::text_array(&[key]),
        _ => None,
    }
}

/// The foreign key of a lookup, when its target's records live in exactly one table: a concrete
/// target without concrete subtypes. Otherwise the column is a plain uuid and the data layer
/// checks the reference; a note says so.
fn lookup_foreign_key(
    model: &Model,
    t: &str,
    key: &str,
    target: &QualifiedName,
    diagnostics: &mut Vec<Diagnostic>,
    owner: &QualifiedName,
) -> Option<ForeignKey> {
    let single_table = model.object(target).is_some_and(|o| !o.is_abstract)
        && model.concrete_subtypes(target).is_empty();
    if !single_table {
        diagnostics.push(Diagnostic::new(
            Severity::Info,
            DiagnosticCode::LookupWithoutForeignKey,
            &format!("{}.{}.{key}", owner.module, owner.object),
            format!(
                "the records of `{}.{}` live in more than one table (or none), so this lookup has no foreign key",
                target.module, target.object
            ),
        ));
        return None;
    }
    Some(ForeignKey {
        name: names::foreign_key_name(t, &[key]),
        columns: vec![key.to_owned()],
        references: TableRef {
            schema: target.module.clone(),
            table: target.object.clone(),
        },
        referenced_columns: vec!["id".to_owned()],
        on_delete: Default::default(),
        managed: true,
    })
}

/// Tables, primary keys, unique constraints and indexes share one namespace per schema. A
/// generated name that another relation also has (`a_b` + `c` and `a` + `b_c` both give
/// `a_b_c_key`, or an object keyed `account_pkey`) is replaced by its hashed form; tables keep
/// their names, since those are the object keys.
fn keep_relation_names_unique(
    s: &str,
    namespace: &mut Namespace,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for (t, table) in &namespace.tables {
        *counts.entry(t.clone()).or_default() += 1;
        let generated = table
            .primary_key
            .iter()
            .map(|pk| &pk.name)
            .chain(table.uniques.iter().map(|u| &u.name))
            .chain(table.indexes.iter().map(|i| &i.name));
        for name in generated {
            *counts.entry(name.clone()).or_default() += 1;
        }
    }
    let clashes = |name: &str| counts.get(name).is_some_and(|n| *n > 1);
    let mut renamed = Vec::new();
    for (t, table) in &mut namespace.tables {
        if let Some(pk) = table.primary_key.as_mut().filter(|pk| clashes(&pk.name)) {
            pk.name = names::hashed(t, &[], "pkey");
            renamed.push(format!("{s}.{t}.{}", pk.name));
        }
        for unique in table.uniques.iter_mut().filter(|u| clashes(&u.name)) {
            let columns: Vec<&str> = unique.columns.iter().map(String::as_str).collect();
            unique.name = names::hashed(t, &columns, "key");
            renamed.push(format!("{s}.{t}.{}", unique.name));
        }
        for index in table.indexes.iter_mut().filter(|i| clashes(&i.name)) {
            let columns: Vec<&str> = index.columns.iter().map(String::as_str).collect();
            index.name = names::hashed(t, &columns, "idx");
            renamed.push(format!("{s}.{t}.{}", index.name));
        }
    }
    for target in renamed {
        diagnostics.push(Diagnostic::new(
            Severity::Info,
            DiagnosticCode::NameHashed,
            &target,
            "the readable name clashed with another table, constraint or index of the schema, so it carries a hash"
                .to_owned(),
        ));
    }
}

#[cfg(test)]
mod tests {
    use hf_model::{Module, Object};

    use super::*;

    /// Metadata written before empty labels were refused still plans to a fixed point: an empty
    /// label wants no comment, which is what PostgreSQL keeps of `COMMENT ... IS ''`.
    #[test]
    fn an_empty_label_wants_no_comment() {
        let mut model = Model::default();
        let mut module = Module::new("crm", "");
        module
            .objects
            .insert("deal".into(), Object::new("deal", ""));
        model.modules.insert("crm".into(), module);
        let (schema, _) = map_model(&model);
        let namespace = &schema.schemas["crm"];
        assert_eq!(namespace.comment, None);
        assert_eq!(namespace.tables["deal"].comment, None);
        assert_eq!(label_comment("Deal"), Some("Deal".to_owned()));
    }
}
