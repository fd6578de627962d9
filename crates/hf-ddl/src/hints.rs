//! The rename hints of a model: `renamedFrom` on modules, objects and fields, in the planner's
//! [`Renames`] form.
//!
//! The hints stay in the metadata files after they were applied, so this runs on every plan; the
//! planner ignores a hint whose old name is no longer in the database. A hint whose old key is
//! again in use in the model (a new field took the old key) is stale by definition and is left
//! out here, so it never produces a `RENAME_CONFLICT` warning.

use hf_model::{Model, QualifiedName};

use crate::plan::{ColumnRename, Renames, SchemaRename, TableRename};

/// The renames a model's `renamedFrom` hints ask for.
///
/// A module hint renames its schema; a concrete object's hint renames its table (abstract objects
/// have none); a stored field's hint renames its column in every table that holds the field: the
/// declaring object's (when concrete) and those of its concrete subtypes, which copy it.
pub fn rename_hints(model: &Model) -> Renames {
    let mut renames = Renames::default();
    for module in model.modules.values() {
        if let Some(from) = &module.renamed_from {
            if !model.modules.contains_key(from) {
                renames.schemas.push(SchemaRename {
                    from: from.clone(),
                    to: module.key.clone(),
                });
            }
        }
        for object in module.objects.values() {
            let name = QualifiedName::new(&module.key, &object.key);
            if let Some(from) = &object.renamed_from {
                if !object.is_abstract && !module.objects.contains_key(from) {
                    renames.tables.push(TableRename {
                        schema: module.key.clone(),
                        from: from.clone(),
                        to: object.key.clone(),
                    });
                }
            }
            let mut tables = model.concrete_subtypes(&name);
            if !object.is_abstract {
                tables.insert(0, name.clone());
            }
            for field in object.fields.values().filter(|f| f.is_stored()) {
                let Some(from) = &field.renamed_from else {
                    continue;
                };
                for table in &tables {
                    if model.effective_field(table, from).is_some() {
                        continue;
                    }
                    renames.columns.push(ColumnRename {
                        schema: table.module.clone(),
                        table: table.object.clone(),
                        from: from.clone(),
                        to: field.key.clone(),
                    });
                }
            }
        }
    }
    renames
}
