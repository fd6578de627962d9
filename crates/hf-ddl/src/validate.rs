//! Checks both sides of a plan before diffing, so that SQL generation can trust its inputs.
//!
//! Every name must be one PostgreSQL keeps as written; the desired side must also be something
//! the planner can write (known types and defaults) and be consistent (columns and tables that
//! keys point at exist, no two relations of a schema share a name).

use std::collections::{BTreeMap, BTreeSet};

use crate::diagnostics::{Diagnostic, DiagnosticCode, Severity};
use crate::schema::{Schema, Table};

/// Which side of the plan a schema is; the current side only needs valid names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Current,
    Desired,
}

/// All problems of one side, as error diagnostics.
pub(crate) fn validate(schema: &Schema, side: Side) -> Vec<Diagnostic> {
    let mut v = Validator {
        diagnostics: Vec::new(),
    };
    for (s, namespace) in &schema.schemas {
        v.ident(s, s);
        v.comment(s, namespace.comment.as_deref());
        for role in namespace.grants.keys() {
            v.ident(s, role);
        }
        // Tables, indexes and the indexes of key constraints share one namespace per schema.
        let mut relations: BTreeMap<&str, usize> = BTreeMap::new();
        for (t, table) in &namespace.tables {
            let target = format!("{s}.{t}");
            v.ident(&target, t);
            *relations.entry(t).or_default() += 1;
            v.table(&target, table);
            for name in table
                .primary_key
                .iter()
                .map(|pk| pk.name.as_str())
                .chain(table.uniques.iter().map(|u| u.name.as_str()))
                .chain(table.indexes.iter().map(|i| i.name.as_str()))
            {
                *relations.entry(name).or_default() += 1;
            }
            if side == Side::Desired {
                v.desired_table(schema, &target, table);
            }
        }
        if side == Side::Desired {
            for (name, count) in relations {
                if count > 1 {
                    v.error(
                        DiagnosticCode::DuplicateName,
                        &format!("{s}.{name}"),
                        format!("`{name}` names more than one table, constraint or index in schema `{s}`"),
                    );
                }
            }
        }
    }
    v.diagnostics
}

struct Validator {
    diagnostics: Vec<Diagnostic>,
}

impl Validator {
    fn error(&mut self, code: DiagnosticCode, target: &str, message: String) {
        self.diagnostics
            .push(Diagnostic::new(Severity::Error, code, target, message));
    }

    fn ident(&mut self, target: &str, name: &str) {
        if let Err(error) = hf_sql::check_ident(name) {
            self.error(DiagnosticCode::InvalidIdentifier, target, error.to_string());
        }
    }

    fn comment(&mut self, target: &str, comment: Option<&str>) {
        if comment.is_some_and(|c| c.contains('\0')) {
            self.error(
                DiagnosticCode::InvalidComment,
                target,
                "a comment may not contain a NUL character".to_owned(),
            );
        }
    }

    /// Names on both sides.
    fn table(&mut self, target: &str, table: &Table) {
        self.comment(target, table.comment.as_deref());
        for role in table.grants.keys() {
            self.ident(target, role);
        }
        for column in &table.columns {
            let column_target = format!("{target}.{}", column.name);
            self.ident(&column_target, &column.name);
            self.comment(&column_target, column.comment.as_deref());
        }
        let names = table
            .primary_key
            .iter()
            .map(|pk| (&pk.name, &pk.columns))
            .chain(table.uniques.iter().map(|u| (&u.name, &u.columns)))
            .chain(table.indexes.iter().map(|i| (&i.name, &i.columns)))
            .chain(table.foreign_keys.iter().map(|f| (&f.name, &f.columns)));
        for check in &table.checks {
            let item_target = format!("{target}.{}", check.name);
            self.ident(&item_target, &check.name);
            self.ident(&item_target, &check.column);
        }
        for (name, columns) in names {
            let item_target = format!("{target}.{name}");
            self.ident(&item_target, name);
            for column in columns {
                self.ident(&item_target, column);
            }
        }
        for fk in &table.foreign_keys {
            let item_target = format!("{target}.{}", fk.name);
            self.ident(&item_target, &fk.references.schema);
            self.ident(&item_target, &fk.references.table);
            for column in &fk.referenced_columns {
                self.ident(&item_target, column);
            }
        }
    }

    /// What only the desired side must satisfy.
    fn desired_table(&mut self, schema: &Schema, target: &str, table: &Table) {
        let mut seen = BTreeSet::new();
        for column in &table.columns {
            let column_target = format!("{target}.{}", column.name);
            if !seen.insert(column.name.as_str()) {
                self.error(
                    DiagnosticCode::DuplicateName,
                    &column_target,
                    format!("column `{}` appears twice", column.name),
                );
            }
            if !column.data_type.is_known() {
                self.error(
                    DiagnosticCode::UnsupportedType,
                    &column_target,
                    format!(
                        "the planner does not create columns of type `{}`",
                        column.data_type
                    ),
                );
            }
            if let Some(default) = column.default.as_ref().filter(|d| !d.is_known()) {
                self.error(
                    DiagnosticCode::UnsupportedDefault,
                    &column_target,
                    format!(
                        "the planner does not write the default `{}`",
                        default.as_str()
                    ),
                );
            }
        }
        let keyed = table
            .primary_key
            .iter()
            .map(|pk| (&pk.name, &pk.columns))
            .chain(table.uniques.iter().map(|u| (&u.name, &u.columns)))
            .chain(table.indexes.iter().map(|i| (&i.name, &i.columns)))
            .chain(table.foreign_keys.iter().map(|f| (&f.name, &f.columns)));
        for (name, columns) in keyed {
            self.columns_exist(&format!("{target}.{name}"), table, columns);
        }
        for check in &table.checks {
            let check_target = format!("{target}.{}", check.name);
            self.columns_exist(&check_target, table, std::slice::from_ref(&check.column));
            let bad_key = check
                .values
                .iter()
                .find(|key| !hf_model::is_picklist_key(key));
            if check.values.is_empty() || bad_key.is_some() {
                self.error(
                    DiagnosticCode::InvalidCheck,
                    &check_target,
                    "a check lists one or more keys of 1 to 63 lower-case letters, digits or \
                     underscores"
                        .to_owned(),
                );
            }
        }
        let mut fk_names = BTreeSet::new();
        for fk in &table.foreign_keys {
            let fk_target = format!("{target}.{}", fk.name);
            if !fk_names.insert(fk.name.as_str()) {
                self.error(
                    DiagnosticCode::DuplicateName,
                    &fk_target,
                    format!("foreign key `{}` appears twice", fk.name),
                );
            }
            let referenced = schema
                .schemas
                .get(&fk.references.schema)
                .and_then(|namespace| namespace.tables.get(&fk.references.table));
            let Some(referenced) = referenced else {
                self.error(
                    DiagnosticCode::UnknownTable,
                    &fk_target,
                    format!(
                        "the referenced table `{}.{}` is not in the desired schema",
                        fk.references.schema, fk.references.table
                    ),
                );
                continue;
            };
            self.columns_exist(&fk_target, referenced, &fk.referenced_columns);
            if fk.columns.len() != fk.referenced_columns.len() {
                self.error(
                    DiagnosticCode::UnknownColumn,
                    &fk_target,
                    "a foreign key needs as many referenced columns as columns".to_owned(),
                );
            }
        }
    }

    fn columns_exist(&mut self, target: &str, table: &Table, columns: &[String]) {
        if columns.is_empty() {
            self.error(
                DiagnosticCode::UnknownColumn,
                target,
                "a key needs at least one column".to_owned(),
            );
        }
        for column in columns {
            if table.column(column).is_none() {
                self.error(
                    DiagnosticCode::UnknownColumn,
                    target,
                    format!("column `{column}` does not exist in its table"),
                );
            }
        }
    }
}
