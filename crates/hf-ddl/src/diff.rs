//! The diff: a pure function from (current schema, desired schema, rename hints) to a [`Plan`].
//!
//! Order is what makes a plan runnable, so every change goes into one of a fixed list of
//! [`Step`]s and the steps run in that order: renames first (so later steps see the new names),
//! then everything that goes away in reverse dependency order (foreign keys, constraints,
//! indexes, columns, tables, schemas), then everything new in dependency order (schemas, tables,
//! columns, column changes, keys, indexes, foreign keys), and finally comments and grants. Within
//! a step, changes follow the sorted order of schemas and tables and the order of columns, so the
//! same inputs always give the same plan.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use crate::diagnostics::{self as text, Diagnostic, DiagnosticCode, Lint, LintCode, Severity};
use crate::markers::ManagedSet;
use crate::plan::{Action, Change, Plan, Precheck, Renames, Summary};
use crate::schema::{
    Column, ColumnDefault, FkAction, ForeignKey, Index, Namespace, PrimaryKey, Privilege, Schema,
    SqlType, Table, UniqueConstraint, ValueCheck,
};
use crate::sqltext::Ddl;
use crate::validate::{validate, Side};

/// Plans the DDL that turns `current` into `desired`.
///
/// Pure: it reads its arguments and nothing else. Problems with the inputs come back as error
/// diagnostics in the plan (which apply then refuses), never as a panic or `Err`. Things in the
/// current schema that are not `managed` are reported as diagnostics and never dropped.
pub fn plan(current: &Schema, desired: &Schema, renames: &Renames) -> Plan {
    let mut diagnostics = validate(current, Side::Current);
    diagnostics.extend(validate(desired, Side::Desired));
    let managed = ManagedSet::of(current, desired);
    if diagnostics.iter().any(|d| d.severity == Severity::Error) {
        return Plan {
            changes: Vec::new(),
            summary: Summary::default(),
            diagnostics,
            managed,
        };
    }
    let mut planner = Planner {
        steps: BTreeMap::new(),
        diagnostics,
        adopting_table: false,
    };
    let mut working = current.clone();
    planner.renames(&mut working, desired, renames);
    planner.diff(&working, desired);
    let changes: Vec<Change> = planner.steps.into_values().flatten().collect();
    Plan {
        summary: Summary::of(&changes),
        changes,
        diagnostics: planner.diagnostics,
        managed,
    }
}

/// The phases of a plan, in execution order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Step {
    Rename,
    DropForeignKey,
    DropConstraint,
    DropIndex,
    RenameConstraint,
    DropColumn,
    DropTable,
    DropSchema,
    CreateSchema,
    CreateTable,
    AddColumn,
    AlterColumn,
    RemoveValues,
    AddConstraint,
    CreateIndex,
    AddForeignKey,
    Comment,
    Grant,
}

struct Planner {
    steps: BTreeMap<Step, Vec<Change>>,
    diagnostics: Vec<Diagnostic>,
    /// Set while diffing a table made by hand that the plan adopts: one `Adopted` note for the
    /// table says it all, so its columns and keys are not noted one by one.
    adopting_table: bool,
}

/// A change being described, before its SQL is known to be valid.
struct Draft {
    action: Action,
    target: String,
    sql: Ddl,
    destructive: bool,
    lints: Vec<Lint>,
    precheck: Option<(Ddl, &'static str)>,
    loses_data_if: Option<Ddl>,
}

fn draft(action: Action, target: String, sql: Ddl) -> Draft {
    Draft {
        action,
        target,
        sql,
        destructive: false,
        lints: Vec::new(),
        precheck: None,
        loses_data_if: None,
    }
}

impl Draft {
    fn destructive(mut self, why: &str) -> Self {
        self.destructive = true;
        self.lints.push(Lint::new(LintCode::DataLoss, why));
        self
    }

    fn lint(mut self, code: LintCode, message: &str) -> Self {
        self.lints.push(Lint::new(code, message));
        self
    }

    fn precheck(mut self, sql: Ddl, failure: &'static str) -> Self {
        self.precheck = Some((sql, failure));
        self
    }

    /// Destructive only when `query` (`SELECT EXISTS ...`) finds rows it would change.
    fn destructive_if(mut self, why: &str, query: Ddl) -> Self {
        self = self.destructive(why);
        self.loses_data_if = Some(query);
        self
    }
}

impl Planner {
    fn push(&mut self, step: Step, draft: Draft) {
        let sql = draft.sql.finish();
        let precheck = draft.precheck.map(|(sql, failure)| (sql.finish(), failure));
        let loses_data_if = draft.loses_data_if.map(Ddl::finish).transpose();
        match (sql, precheck, loses_data_if) {
            (Ok(sql), None, Ok(loses_data_if)) => {
                self.steps.entry(step).or_default().push(Change {
                    action: draft.action,
                    target: draft.target,
                    sql,
                    destructive: draft.destructive,
                    lints: draft.lints,
                    precheck: None,
                    loses_data_if,
                })
            }
            (Ok(sql), Some((Ok(check), failure)), Ok(loses_data_if)) => {
                self.steps.entry(step).or_default().push(Change {
                    action: draft.action,
                    target: draft.target,
                    sql,
                    destructive: draft.destructive,
                    lints: draft.lints,
                    precheck: Some(Precheck {
                        sql: check,
                        failure: failure.to_owned(),
                    }),
                    loses_data_if,
                })
            }
            (Err(error), _, _) | (_, Some((Err(error), _)), _) | (_, _, Err(error)) => {
                // Validation checks every name first, so this only guards against a name that
                // slipped past it; the plan then carries an error and apply refuses it.
                self.diagnostics.push(Diagnostic::new(
                    Severity::Error,
                    DiagnosticCode::InvalidIdentifier,
                    &draft.target,
                    error.to_string(),
                ));
            }
        }
    }

    fn note(&mut self, severity: Severity, code: DiagnosticCode, target: &str, message: String) {
        self.diagnostics
            .push(Diagnostic::new(severity, code, target, message));
    }

    /// Whether a rename hint applies; see [`Renames`].
    fn rename_applies(&mut self, target: &str, cur: (bool, bool), desired: (bool, bool)) -> bool {
        let (cur_from, cur_to) = cur;
        let (desired_from, desired_to) = desired;
        if !cur_from || !desired_to {
            return false;
        }
        if cur_to || desired_from {
            self.note(
                Severity::Warning,
                DiagnosticCode::RenameConflict,
                target,
                "both the old and the new name exist, so the rename hint is ignored".to_owned(),
            );
            return false;
        }
        true
    }

    /// Plans the hinted renames and applies them to `cur`, so that the diff afterwards compares
    /// like with like.
    fn renames(&mut self, cur: &mut Schema, desired: &Schema, renames: &Renames) {
        for r in &renames.schemas {
            let applies = self.rename_applies(
                &r.to,
                (
                    cur.schemas.contains_key(&r.from),
                    cur.schemas.contains_key(&r.to),
                ),
                (
                    desired.schemas.contains_key(&r.from),
                    desired.schemas.contains_key(&r.to),
                ),
            );
            if !applies {
                continue;
            }
            let Some(namespace) = cur.schemas.remove(&r.from) else {
                continue;
            };
            cur.schemas.insert(r.to.clone(), namespace);
            let sql = Ddl::new("ALTER SCHEMA ")
                .ident(&r.from)
                .kw(" RENAME TO ")
                .ident(&r.to);
            self.push(Step::Rename, draft(Action::RenameSchema, r.to.clone(), sql));
            for_each_foreign_key(cur, |fk| {
                if fk.references.schema == r.from {
                    fk.references.schema.clone_from(&r.to);
                }
            });
        }
        for r in &renames.tables {
            let Some(namespace) = cur.schemas.get_mut(&r.schema) else {
                continue;
            };
            let wanted = desired.schemas.get(&r.schema);
            let applies = self.rename_applies(
                &format!("{}.{}", r.schema, r.to),
                (
                    namespace.tables.contains_key(&r.from),
                    namespace.tables.contains_key(&r.to),
                ),
                (
                    wanted.is_some_and(|n| n.tables.contains_key(&r.from)),
                    wanted.is_some_and(|n| n.tables.contains_key(&r.to)),
                ),
            );
            if !applies {
                continue;
            }
            let Some(table) = namespace.tables.remove(&r.from) else {
                continue;
            };
            namespace.tables.insert(r.to.clone(), table);
            let sql = Ddl::new("ALTER TABLE ")
                .qualified(&r.schema, &r.from)
                .kw(" RENAME TO ")
                .ident(&r.to);
            self.push(
                Step::Rename,
                draft(Action::RenameTable, format!("{}.{}", r.schema, r.to), sql),
            );
            for_each_foreign_key(cur, |fk| {
                if fk.references.schema == r.schema && fk.references.table == r.from {
                    fk.references.table.clone_from(&r.to);
                }
            });
        }
        for r in &renames.columns {
            let target = format!("{}.{}.{}", r.schema, r.table, r.to);
            let Some(table) = cur
                .schemas
                .get_mut(&r.schema)
                .and_then(|n| n.tables.get_mut(&r.table))
            else {
                continue;
            };
            let wanted = desired
                .schemas
                .get(&r.schema)
                .and_then(|n| n.tables.get(&r.table));
            let applies = self.rename_applies(
                &target,
                (
                    table.column(&r.from).is_some(),
                    table.column(&r.to).is_some(),
                ),
                (
                    wanted.is_some_and(|t| t.column(&r.from).is_some()),
                    wanted.is_some_and(|t| t.column(&r.to).is_some()),
                ),
            );
            if !applies {
                continue;
            }
            rename_column_in_table(table, &r.from, &r.to);
            let sql = Ddl::new("ALTER TABLE ")
                .qualified(&r.schema, &r.table)
                .kw(" RENAME COLUMN ")
                .ident(&r.from)
                .kw(" TO ")
                .ident(&r.to);
            self.push(Step::Rename, draft(Action::RenameColumn, target, sql));
            for_each_foreign_key(cur, |fk| {
                if fk.references.schema == r.schema && fk.references.table == r.table {
                    rename_in(&mut fk.referenced_columns, &r.from, &r.to);
                }
            });
        }
    }

    fn diff(&mut self, cur: &Schema, desired: &Schema) {
        for (name, namespace) in &cur.schemas {
            if !desired.schemas.contains_key(name) {
                self.drop_schema(name, namespace, desired);
            }
        }
        for (name, wanted) in &desired.schemas {
            match cur.schemas.get(name) {
                None => self.create_schema(name, wanted),
                Some(namespace) => self.alter_schema(name, namespace, wanted, desired),
            }
        }
    }

    fn drop_schema(&mut self, s: &str, namespace: &Namespace, desired: &Schema) {
        if !namespace.managed {
            self.note(
                Severity::Info,
                DiagnosticCode::Unmanaged,
                s,
                "schema not made by hf; left alone".to_owned(),
            );
            return;
        }
        let mut keeps_unmanaged = false;
        for (t, table) in &namespace.tables {
            if table.managed {
                self.drop_table(s, t, table, desired);
            } else {
                keeps_unmanaged = true;
                self.unmanaged_table(s, t);
            }
        }
        if keeps_unmanaged {
            self.note(
                Severity::Warning,
                DiagnosticCode::SchemaNotEmpty,
                s,
                "the module is gone but the schema holds tables made by hand, so it is not dropped"
                    .to_owned(),
            );
            return;
        }
        let sql = Ddl::new("DROP SCHEMA ").ident(s);
        self.push(
            Step::DropSchema,
            draft(Action::DropSchema, s.to_owned(), sql).destructive(text::DROP_SCHEMA),
        );
    }

    /// Drops a table. Its foreign keys to other tables that go away too are dropped first (in
    /// the foreign-key phase): tables are dropped in name order, and a table cannot be dropped
    /// while another table's foreign key still references it.
    fn drop_table(&mut self, s: &str, t: &str, table: &Table, desired: &Schema) {
        for fk in &table.foreign_keys {
            let target = &fk.references;
            let to_itself = target.schema == s && target.table == t;
            let target_goes = !desired
                .schemas
                .get(&target.schema)
                .is_some_and(|namespace| namespace.tables.contains_key(&target.table));
            if !to_itself && target_goes {
                self.drop_keyed::<ForeignKey>(s, t, &fk.name);
            }
        }
        let sql = Ddl::new("DROP TABLE ").qualified(s, t);
        self.push(
            Step::DropTable,
            draft(Action::DropTable, format!("{s}.{t}"), sql).destructive(text::DROP_TABLE),
        );
    }

    fn unmanaged_table(&mut self, s: &str, t: &str) {
        self.note(
            Severity::Info,
            DiagnosticCode::Unmanaged,
            &format!("{s}.{t}"),
            "table not made by hf; left alone".to_owned(),
        );
    }

    fn create_schema(&mut self, s: &str, wanted: &Namespace) {
        let sql = Ddl::new("CREATE SCHEMA ").ident(s);
        self.push(
            Step::CreateSchema,
            draft(Action::CreateSchema, s.to_owned(), sql),
        );
        if wanted.comment.is_some() {
            self.comment_schema(s, wanted.comment.as_deref());
        }
        self.grants(GrantOn::Schema(s), &BTreeMap::new(), &wanted.grants, true);
        for (t, table) in &wanted.tables {
            self.create_table(s, t, table);
        }
    }

    fn alter_schema(
        &mut self,
        s: &str,
        namespace: &Namespace,
        wanted: &Namespace,
        desired: &Schema,
    ) {
        if !namespace.managed {
            self.adopted(s, "schema");
        }
        if namespace.comment != wanted.comment {
            self.comment_schema(s, wanted.comment.as_deref());
        }
        self.grants(
            GrantOn::Schema(s),
            &namespace.grants,
            &wanted.grants,
            !namespace.managed,
        );
        for (t, table) in &namespace.tables {
            if !wanted.tables.contains_key(t) {
                if table.managed {
                    self.drop_table(s, t, table, desired);
                } else {
                    self.unmanaged_table(s, t);
                }
            }
        }
        for (t, table) in &wanted.tables {
            match namespace.tables.get(t) {
                None => self.create_table(s, t, table),
                Some(existing) => self.alter_table(s, t, existing, table),
            }
        }
    }

    fn adopted(&mut self, target: &str, what: &str) {
        if self.adopting_table {
            return;
        }
        self.note(
            Severity::Info,
            DiagnosticCode::Adopted,
            target,
            format!("{what} made by hand is now managed by hf"),
        );
    }

    fn comment_schema(&mut self, s: &str, comment: Option<&str>) {
        let sql = Ddl::new("COMMENT ON SCHEMA ")
            .ident(s)
            .kw(" IS ")
            .literal(comment);
        self.push(Step::Comment, draft(Action::Comment, s.to_owned(), sql));
    }

    fn comment_table(&mut self, s: &str, t: &str, comment: Option<&str>) {
        let sql = Ddl::new("COMMENT ON TABLE ")
            .qualified(s, t)
            .kw(" IS ")
            .literal(comment);
        self.push(
            Step::Comment,
            draft(Action::Comment, format!("{s}.{t}"), sql),
        );
    }

    fn comment_column(&mut self, s: &str, t: &str, c: &str, comment: Option<&str>) {
        let sql = Ddl::new("COMMENT ON COLUMN ")
            .qualified(s, t)
            .kw(".")
            .ident(c)
            .kw(" IS ")
            .literal(comment);
        self.push(
            Step::Comment,
            draft(Action::Comment, format!("{s}.{t}.{c}"), sql),
        );
    }

    /// Grants what `wanted` has and `have` lacks, when the item is new or newly adopted.
    /// Afterwards grants are the administrator's: a revoked privilege is reported, not restored.
    fn grants(
        &mut self,
        on: GrantOn<'_>,
        have: &BTreeMap<String, BTreeSet<Privilege>>,
        wanted: &BTreeMap<String, BTreeSet<Privilege>>,
        fresh: bool,
    ) {
        let empty = BTreeSet::new();
        for (role, privileges) in wanted {
            let held = have.get(role).unwrap_or(&empty);
            let missing: Vec<Privilege> = privileges.difference(held).copied().collect();
            if missing.is_empty() {
                continue;
            }
            let target = on.target();
            if !fresh {
                let names: Vec<&str> = missing.iter().map(|p| p.as_sql()).collect();
                self.note(
                    Severity::Info,
                    DiagnosticCode::GrantNarrowed,
                    &target,
                    format!(
                        "`{role}` lacks {} here; grants are made once and then left to administrators",
                        names.join(", ")
                    ),
                );
                continue;
            }
            let mut sql = Ddl::new("GRANT ");
            for (i, privilege) in missing.iter().enumerate() {
                if i > 0 {
                    sql = sql.kw(", ");
                }
                sql = sql.kw(privilege.as_sql());
            }
            sql = match on {
                GrantOn::Schema(s) => sql.kw(" ON SCHEMA ").ident(s),
                GrantOn::Table(s, t) => sql.kw(" ON TABLE ").qualified(s, t),
            };
            sql = sql.kw(" TO ").ident(role);
            self.push(Step::Grant, draft(Action::Grant, target, sql));
        }
    }

    fn create_table(&mut self, s: &str, t: &str, table: &Table) {
        let mut sql = Ddl::new("CREATE TABLE ").qualified(s, t).kw(" (");
        let mut first = true;
        for column in &table.columns {
            sql = sql.kw(if first { "\n  " } else { ",\n  " });
            first = false;
            sql = column_definition(sql, column);
        }
        if let Some(pk) = &table.primary_key {
            sql = sql.kw(if first { "\n  " } else { ",\n  " });
            first = false;
            sql = sql
                .kw("CONSTRAINT ")
                .ident(&pk.name)
                .kw(" PRIMARY KEY ")
                .ident_list(&pk.columns);
        }
        sql = sql.kw(if first { ")" } else { "\n)" });
        self.push(
            Step::CreateTable,
            draft(Action::CreateTable, format!("{s}.{t}"), sql),
        );
        for unique in &table.uniques {
            self.add_unique(s, t, unique, false);
        }
        for index in &table.indexes {
            self.create_index(s, t, index, false);
        }
        for fk in &table.foreign_keys {
            self.add_foreign_key(s, t, fk, false);
        }
        for check in &table.checks {
            self.add_check(s, t, check, false);
        }
        if table.comment.is_some() {
            self.comment_table(s, t, table.comment.as_deref());
        }
        for column in table.columns.iter().filter(|c| c.comment.is_some()) {
            self.comment_column(s, t, &column.name, column.comment.as_deref());
        }
        self.grants(GrantOn::Table(s, t), &BTreeMap::new(), &table.grants, true);
    }

    fn alter_table(&mut self, s: &str, t: &str, table: &Table, wanted: &Table) {
        let target = format!("{s}.{t}");
        if !table.managed {
            self.adopted(&target, "table");
        }
        self.adopting_table = !table.managed;
        for column in &table.columns {
            if wanted.column(&column.name).is_some() {
                continue;
            }
            let column_target = format!("{target}.{}", column.name);
            if column.managed {
                let sql = Ddl::new("ALTER TABLE ")
                    .qualified(s, t)
                    .kw(" DROP COLUMN ")
                    .ident(&column.name);
                self.push(
                    Step::DropColumn,
                    draft(Action::DropColumn, column_target, sql).destructive(text::DROP_COLUMN),
                );
            } else {
                self.note(
                    Severity::Info,
                    DiagnosticCode::Unmanaged,
                    &column_target,
                    "column not made by hf; left alone".to_owned(),
                );
            }
        }
        for column in &wanted.columns {
            match table.column(&column.name) {
                None => self.add_column(s, t, column),
                Some(existing) => self.alter_column(s, t, existing, column),
            }
        }
        self.keys(s, t, table, wanted);
        self.adopting_table = false;
        if table.comment != wanted.comment {
            self.comment_table(s, t, wanted.comment.as_deref());
        }
        self.grants(
            GrantOn::Table(s, t),
            &table.grants,
            &wanted.grants,
            !table.managed,
        );
    }

    fn add_column(&mut self, s: &str, t: &str, column: &Column) {
        let sql = column_definition(
            Ddl::new("ALTER TABLE ").qualified(s, t).kw(" ADD COLUMN "),
            column,
        );
        let mut change = draft(Action::AddColumn, format!("{s}.{t}.{}", column.name), sql);
        if column.not_null && column.default.is_none() {
            change = change
                .lint(LintCode::MayFail, text::ADD_REQUIRED_FAILS)
                .precheck(exists_row(s, t), text::PRECHECK_ROWS);
        }
        if column.default == Some(ColumnDefault::GenRandomUuid) {
            change = change.lint(LintCode::TableRewrite, text::VOLATILE_DEFAULT_REWRITE);
        }
        self.push(Step::AddColumn, change);
        if column.comment.is_some() {
            self.comment_column(s, t, &column.name, column.comment.as_deref());
        }
    }

    fn alter_column(&mut self, s: &str, t: &str, column: &Column, wanted: &Column) {
        let c = &column.name;
        let target = format!("{s}.{t}.{c}");
        let alter = || {
            Ddl::new("ALTER TABLE ")
                .qualified(s, t)
                .kw(" ALTER COLUMN ")
                .ident(c)
        };
        if !column.managed {
            self.adopted(&target, "column");
        }
        // The default the column has once the type is right: a constant default cannot follow
        // the column to another type (`'a'::text` is no `text[]`), so it is dropped first and
        // the wanted one set after.
        let mut current_default = column.default.as_ref();
        if column.data_type != wanted.data_type {
            if current_default.is_some_and(ColumnDefault::is_literal) {
                let sql = alter().kw(" DROP DEFAULT");
                self.push(
                    Step::AlterColumn,
                    draft(Action::DropDefault, target.clone(), sql),
                );
                current_default = None;
            }
            let mut sql = alter().kw(" TYPE ").kw(wanted.data_type.as_str());
            let mut change = match type_change(&column.data_type, &wanted.data_type) {
                TypeChange::IntoArray => {
                    sql = sql
                        .kw(" USING CASE WHEN ")
                        .ident(c)
                        .kw(" IS NULL THEN NULL ELSE ARRAY[")
                        .ident(c)
                        .kw("] END");
                    draft(Action::AlterColumnType, target.clone(), Ddl::default())
                        .lint(LintCode::TableRewrite, text::TYPE_REWRITE)
                }
                TypeChange::FirstOfArray => {
                    sql = sql.kw(" USING ").ident(c).kw("[1]");
                    draft(Action::AlterColumnType, target.clone(), Ddl::default())
                        .destructive(text::FIRST_OF_ARRAY)
                        .lint(LintCode::TableRewrite, text::TYPE_REWRITE)
                }
                TypeChange::Safe { rewrite } => {
                    let change = draft(Action::AlterColumnType, target.clone(), Ddl::default());
                    if rewrite {
                        change.lint(LintCode::TableRewrite, text::TYPE_REWRITE)
                    } else {
                        change
                    }
                }
                TypeChange::Lossy { via_text } => {
                    sql = sql
                        .kw(" USING ")
                        .ident(c)
                        .kw(if via_text { "::text::" } else { "::" });
                    sql = sql.kw(wanted.data_type.as_str());
                    draft(Action::AlterColumnType, target.clone(), Ddl::default())
                        .destructive(text::LOSSY_TYPE)
                        .lint(LintCode::TableRewrite, text::TYPE_REWRITE)
                }
            };
            change.sql = sql;
            self.push(Step::AlterColumn, change);
        }
        if current_default != wanted.default.as_ref() {
            let sql = match &wanted.default {
                Some(default) => alter().kw(" SET DEFAULT ").kw(default.as_str()),
                None => alter().kw(" DROP DEFAULT"),
            };
            let action = if wanted.default.is_some() {
                Action::SetDefault
            } else {
                Action::DropDefault
            };
            self.push(Step::AlterColumn, draft(action, target.clone(), sql));
        }
        if column.not_null && !wanted.not_null {
            let sql = alter().kw(" DROP NOT NULL");
            self.push(
                Step::AlterColumn,
                draft(Action::DropNotNull, target.clone(), sql),
            );
        }
        if !column.not_null && wanted.not_null {
            let sql = alter().kw(" SET NOT NULL");
            let check = Ddl::new("SELECT EXISTS (SELECT 1 FROM ")
                .qualified(s, t)
                .kw(" WHERE ")
                .ident(c)
                .kw(" IS NULL)");
            let change = draft(Action::SetNotNull, target.clone(), sql)
                .lint(LintCode::FullTableScan, text::SET_NOT_NULL_SCAN)
                .lint(LintCode::MayFail, text::SET_NOT_NULL_FAILS)
                .precheck(check, text::PRECHECK_NULLS);
            self.push(Step::AlterColumn, change);
        }
        if column.comment != wanted.comment {
            self.comment_column(s, t, c, wanted.comment.as_deref());
        }
    }

    /// Primary key, unique constraints, indexes, foreign keys and value checks of a table that
    /// exists. Each kind is matched on its own: what no longer fits is dropped, what only
    /// changed name is renamed ([`Planner::drop_and_rename`]), and what is missing is created.
    fn keys(&mut self, s: &str, t: &str, table: &Table, wanted: &Table) {
        let pk = match_items(table.primary_key.as_slice(), wanted.primary_key.as_slice());
        self.drop_and_rename(s, t, &pk);
        for new in &pk.created {
            let sql = Ddl::new("ALTER TABLE ")
                .qualified(s, t)
                .kw(" ADD CONSTRAINT ")
                .ident(&new.name)
                .kw(" PRIMARY KEY ")
                .ident_list(&new.columns);
            let change = draft(Action::AddPrimaryKey, format!("{s}.{t}.{}", new.name), sql)
                .lint(LintCode::BlocksWrites, text::PRIMARY_KEY_BLOCKS);
            self.push(Step::AddConstraint, change);
        }

        let uniques = match_items(&table.uniques, &wanted.uniques);
        self.drop_and_rename(s, t, &uniques);
        for new in &uniques.created {
            self.add_unique(s, t, new, true);
        }

        let indexes = match_items(&table.indexes, &wanted.indexes);
        self.drop_and_rename(s, t, &indexes);
        for new in &indexes.created {
            self.create_index(s, t, new, true);
        }

        let fks = match_items(&table.foreign_keys, &wanted.foreign_keys);
        self.drop_and_rename(s, t, &fks);
        for new in &fks.created {
            self.add_foreign_key(s, t, new, true);
        }

        let checks = match_items(&table.checks, &wanted.checks);
        self.drop_and_rename(s, t, &checks);
        for new in &checks.created {
            let column_kept = table
                .column(&new.column)
                .zip(wanted.column(&new.column))
                .is_some_and(|(have, want)| have.data_type == want.data_type);
            let before = checks
                .dropped
                .iter()
                .find(|old| old.column == new.column && old.multi == new.multi);
            if let (true, Some(old)) = (column_kept, before) {
                self.remove_values(s, t, old, new);
            }
            self.add_check(s, t, new, true);
        }
    }

    /// Empties the values of the choices `old` has and `new` lacks: NULL for a picklist, the
    /// key taken out of the array for a multi-select one. Destructive only when rows hold them.
    fn remove_values(&mut self, s: &str, t: &str, old: &ValueCheck, new: &ValueCheck) {
        let removed: Vec<String> = old
            .values
            .iter()
            .filter(|key| !new.values.contains(key))
            .cloned()
            .collect();
        if removed.is_empty() {
            return;
        }
        let c = &new.column;
        let holds = |sql: Ddl| {
            let sql = sql.ident(c);
            if new.multi {
                key_array(sql.kw(" && "), &removed)
            } else {
                key_array(sql.kw(" = ANY ("), &removed).kw(")")
            }
        };
        let mut sql = Ddl::new("UPDATE ")
            .qualified(s, t)
            .kw(" SET ")
            .ident(c)
            .kw(" = ");
        if new.multi {
            sql = nested_array_remove(sql, c, &removed);
        } else {
            sql = sql.kw("NULL");
        }
        sql = holds(sql.kw(" WHERE "));
        let check = holds(
            Ddl::new("SELECT EXISTS (SELECT 1 FROM ")
                .qualified(s, t)
                .kw(" WHERE "),
        )
        .kw(")");
        let change = draft(Action::RemoveValues, format!("{s}.{t}.{c}"), sql)
            .destructive_if(text::REMOVE_VALUES, check)
            .lint(LintCode::FullTableScan, text::REMOVE_VALUES_SCAN);
        self.push(Step::RemoveValues, change);
    }

    fn add_check(&mut self, s: &str, t: &str, check: &ValueCheck, existing_table: bool) {
        let condition = |sql: Ddl| {
            let sql = sql.ident(&check.column);
            if check.multi {
                key_array(sql.kw(" <@ "), &check.values)
            } else {
                key_array(sql.kw(" = ANY ("), &check.values).kw(")")
            }
        };
        let sql = condition(
            Ddl::new("ALTER TABLE ")
                .qualified(s, t)
                .kw(" ADD CONSTRAINT ")
                .ident(&check.name)
                .kw(" CHECK ("),
        )
        .kw(")");
        let mut change = draft(Action::AddCheck, format!("{s}.{t}.{}", check.name), sql);
        if existing_table {
            let query = condition(
                Ddl::new("SELECT EXISTS (SELECT 1 FROM ")
                    .qualified(s, t)
                    .kw(" WHERE NOT ("),
            )
            .kw("))");
            change = change
                .lint(LintCode::FullTableScan, text::CHECK_SCAN)
                .lint(LintCode::MayFail, text::CHECK_FAILS)
                .precheck(query, text::PRECHECK_VALUES);
        }
        self.push(Step::AddConstraint, change);
    }

    /// Diagnostics for the items a match left alone or took over.
    fn report<T: Keyed>(&mut self, s: &str, t: &str, matched: &Matched<'_, T>) {
        for item in &matched.unmanaged {
            self.note(
                Severity::Info,
                DiagnosticCode::Unmanaged,
                &format!("{s}.{t}.{}", item.name()),
                format!("{} not made by hf; left alone", T::WHAT),
            );
        }
        for item in &matched.adopted {
            self.adopted(&format!("{s}.{t}.{}", item.name()), T::WHAT);
        }
    }

    /// Reports the items of one kind that a match left alone or took over, then drops those it
    /// found unwanted and renames those whose definition stayed (see [`Keyed`] for the SQL).
    /// Drops the key, constraint or index `name` of table `s.t`, in its kind's phase.
    fn drop_keyed<T: Keyed>(&mut self, s: &str, t: &str, name: &str) {
        let (step, action) = T::DROP;
        let sql = T::drop_sql(s, t, name);
        self.push(step, draft(action, format!("{s}.{t}.{name}"), sql));
    }

    fn drop_and_rename<T: Keyed>(&mut self, s: &str, t: &str, matched: &Matched<'_, T>) {
        self.report(s, t, matched);
        for old in &matched.dropped {
            self.drop_keyed::<T>(s, t, old.name());
        }
        for (old, new) in &matched.renamed {
            let (action, sql) = T::rename_sql(s, t, old.name(), new.name());
            self.push(
                Step::RenameConstraint,
                draft(action, format!("{s}.{t}.{}", new.name()), sql),
            );
        }
    }

    fn add_unique(&mut self, s: &str, t: &str, unique: &UniqueConstraint, existing_table: bool) {
        let sql = Ddl::new("ALTER TABLE ")
            .qualified(s, t)
            .kw(" ADD CONSTRAINT ")
            .ident(&unique.name)
            .kw(" UNIQUE ")
            .ident_list(&unique.columns);
        let mut change = draft(Action::AddUnique, format!("{s}.{t}.{}", unique.name), sql);
        if existing_table {
            let mut check = Ddl::new("SELECT EXISTS (SELECT 1 FROM ")
                .qualified(s, t)
                .kw(" WHERE ");
            for (i, column) in unique.columns.iter().enumerate() {
                check = check
                    .kw(if i > 0 { " AND " } else { "" })
                    .ident(column)
                    .kw(" IS NOT NULL");
            }
            check = check.kw(" GROUP BY ");
            for (i, column) in unique.columns.iter().enumerate() {
                check = check.kw(if i > 0 { ", " } else { "" }).ident(column);
            }
            check = check.kw(" HAVING count(*) > 1)");
            change = change
                .lint(LintCode::BlocksWrites, text::UNIQUE_BLOCKS)
                .lint(LintCode::MayFail, text::UNIQUE_FAILS)
                .precheck(check, text::PRECHECK_DUPLICATES);
        }
        self.push(Step::AddConstraint, change);
    }

    fn create_index(&mut self, s: &str, t: &str, index: &Index, existing_table: bool) {
        let sql = Ddl::new(if index.unique {
            "CREATE UNIQUE INDEX "
        } else {
            "CREATE INDEX "
        })
        .ident(&index.name)
        .kw(" ON ")
        .qualified(s, t)
        .kw(" ")
        .ident_list(&index.columns);
        let mut change = draft(Action::CreateIndex, format!("{s}.{t}.{}", index.name), sql);
        if existing_table {
            change = change.lint(LintCode::BlocksWrites, text::INDEX_BLOCKS);
        }
        self.push(Step::CreateIndex, change);
    }

    fn add_foreign_key(&mut self, s: &str, t: &str, fk: &ForeignKey, existing_table: bool) {
        let (rs, rt) = (&fk.references.schema, &fk.references.table);
        let mut sql = Ddl::new("ALTER TABLE ")
            .qualified(s, t)
            .kw(" ADD CONSTRAINT ")
            .ident(&fk.name)
            .kw(" FOREIGN KEY ")
            .ident_list(&fk.columns)
            .kw(" REFERENCES ")
            .qualified(rs, rt)
            .kw(" ")
            .ident_list(&fk.referenced_columns);
        if fk.on_delete != FkAction::NoAction {
            sql = sql.kw(" ON DELETE ").kw(fk.on_delete.as_sql());
        }
        let mut change = draft(Action::AddForeignKey, format!("{s}.{t}.{}", fk.name), sql);
        if existing_table {
            let mut check = Ddl::new("SELECT EXISTS (SELECT 1 FROM ")
                .qualified(s, t)
                .kw(" AS r WHERE ");
            for column in &fk.columns {
                check = check.kw("r.").ident(column).kw(" IS NOT NULL AND ");
            }
            check = check
                .kw("NOT EXISTS (SELECT 1 FROM ")
                .qualified(rs, rt)
                .kw(" AS p WHERE ");
            for (i, (column, referenced)) in
                fk.columns.iter().zip(&fk.referenced_columns).enumerate()
            {
                check = check
                    .kw(if i > 0 { " AND " } else { "" })
                    .kw("p.")
                    .ident(referenced)
                    .kw(" = r.")
                    .ident(column);
            }
            check = check.kw("))");
            change = change
                .lint(LintCode::FullTableScan, text::FOREIGN_KEY_SCAN)
                .lint(LintCode::MayFail, text::FOREIGN_KEY_FAILS)
                .precheck(check, text::PRECHECK_ORPHANS);
        }
        self.push(Step::AddForeignKey, change);
    }
}

/// What a grant is on.
#[derive(Clone, Copy)]
enum GrantOn<'a> {
    Schema(&'a str),
    Table(&'a str, &'a str),
}

impl GrantOn<'_> {
    fn target(self) -> String {
        match self {
            GrantOn::Schema(s) => s.to_owned(),
            GrantOn::Table(s, t) => format!("{s}.{t}"),
        }
    }
}

/// `"name" type [NOT NULL] [DEFAULT expr]`.
fn column_definition(sql: Ddl, column: &Column) -> Ddl {
    let mut sql = sql
        .ident(&column.name)
        .kw(" ")
        .kw(column.data_type.as_str());
    if column.not_null {
        sql = sql.kw(" NOT NULL");
    }
    if let Some(default) = &column.default {
        sql = sql.kw(" DEFAULT ").kw(default.as_str());
    }
    sql
}

/// `ARRAY['a', 'b']::text[]`: picklist keys as literals (DDL takes no parameters; the keys are
/// `[a-z0-9_]` by the model's grammar, and quoted all the same).
fn key_array(mut sql: Ddl, keys: &[String]) -> Ddl {
    sql = sql.kw("ARRAY[");
    for (i, key) in keys.iter().enumerate() {
        sql = sql.kw(if i > 0 { ", " } else { "" }).literal(Some(key));
    }
    sql.kw("]::text[]")
}

/// `array_remove(array_remove("c", 'a'), 'b')`: the array without the removed keys.
fn nested_array_remove(mut sql: Ddl, c: &str, removed: &[String]) -> Ddl {
    for _ in removed {
        sql = sql.kw("array_remove(");
    }
    sql = sql.ident(c);
    for key in removed {
        sql = sql.kw(", ").literal(Some(key)).kw(")");
    }
    sql
}

/// `SELECT EXISTS (SELECT 1 FROM "s"."t")`: whether the table has rows.
fn exists_row(s: &str, t: &str) -> Ddl {
    Ddl::new("SELECT EXISTS (SELECT 1 FROM ")
        .qualified(s, t)
        .kw(")")
}

/// How a type change treats existing values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TypeChange {
    /// Every old value has an equal new value; `rewrite` when PostgreSQL rewrites the table.
    Safe { rewrite: bool },
    /// Some values change or fail to convert; `via_text` when PostgreSQL has no direct cast, so
    /// the conversion goes through the text form.
    Lossy { via_text: bool },
    /// `text` to `text[]` (a picklist becomes multi-select): each value becomes a one-key array.
    IntoArray,
    /// `text[]` to `text` (a multi-select picklist becomes single): each array keeps its first
    /// key, so the others are lost.
    FirstOfArray,
}

fn type_change(from: &SqlType, to: &SqlType) -> TypeChange {
    use SqlType::*;
    let numeric = |t: &SqlType| {
        matches!(
            t,
            Smallint | Integer | Bigint | Numeric | Real | DoublePrecision
        )
    };
    match (from, to) {
        (Smallint, Integer | Bigint | Numeric)
        | (Integer, Bigint | Numeric)
        | (Bigint, Numeric)
        | (Real, DoublePrecision)
        | (Date, Timestamp) => TypeChange::Safe { rewrite: true },
        (Text, TextArray) => TypeChange::IntoArray,
        (TextArray, Text) => TypeChange::FirstOfArray,
        (Other(name), Text) if name.starts_with("character varying") => {
            TypeChange::Safe { rewrite: false }
        }
        (_, Text) => TypeChange::Safe { rewrite: true },
        (a, b) if numeric(a) && numeric(b) => TypeChange::Lossy { via_text: false },
        _ => TypeChange::Lossy { via_text: true },
    }
}

/// A key, index or check of a table, for matching the current ones against the desired ones
/// and for dropping and renaming them.
trait Keyed {
    /// What it is, in diagnostics.
    const WHAT: &'static str;
    /// The plan step and action that drop one.
    const DROP: (Step, Action);
    fn name(&self) -> &str;
    fn managed(&self) -> bool;
    fn same_definition(&self, other: &Self) -> bool;

    /// The statement that drops `name` from table `s.t`: a constraint's, unless overridden.
    fn drop_sql(s: &str, t: &str, name: &str) -> Ddl {
        Ddl::new("ALTER TABLE ")
            .qualified(s, t)
            .kw(" DROP CONSTRAINT ")
            .ident(name)
    }

    /// The action and statement that rename `from` to `to` on table `s.t`: a constraint's,
    /// unless overridden.
    fn rename_sql(s: &str, t: &str, from: &str, to: &str) -> (Action, Ddl) {
        let sql = Ddl::new("ALTER TABLE ")
            .qualified(s, t)
            .kw(" RENAME CONSTRAINT ")
            .ident(from)
            .kw(" TO ")
            .ident(to);
        (Action::RenameConstraint, sql)
    }
}

impl Keyed for PrimaryKey {
    const WHAT: &'static str = "primary key";
    const DROP: (Step, Action) = (Step::DropConstraint, Action::DropPrimaryKey);
    fn name(&self) -> &str {
        &self.name
    }
    fn managed(&self) -> bool {
        self.managed
    }
    fn same_definition(&self, other: &Self) -> bool {
        self.columns == other.columns
    }
}

impl Keyed for UniqueConstraint {
    const WHAT: &'static str = "unique constraint";
    const DROP: (Step, Action) = (Step::DropConstraint, Action::DropUnique);
    fn name(&self) -> &str {
        &self.name
    }
    fn managed(&self) -> bool {
        self.managed
    }
    fn same_definition(&self, other: &Self) -> bool {
        self.columns == other.columns
    }
}

impl Keyed for Index {
    const WHAT: &'static str = "index";
    const DROP: (Step, Action) = (Step::DropIndex, Action::DropIndex);
    fn name(&self) -> &str {
        &self.name
    }
    fn managed(&self) -> bool {
        self.managed
    }
    fn same_definition(&self, other: &Self) -> bool {
        self.columns == other.columns
            && self.unique == other.unique
            && self.definition.is_none()
            && other.definition.is_none()
    }
    /// Indexes belong to the schema, not the table.
    fn drop_sql(s: &str, _t: &str, name: &str) -> Ddl {
        Ddl::new("DROP INDEX ").qualified(s, name)
    }

    fn rename_sql(s: &str, _t: &str, from: &str, to: &str) -> (Action, Ddl) {
        let sql = Ddl::new("ALTER INDEX ")
            .qualified(s, from)
            .kw(" RENAME TO ")
            .ident(to);
        (Action::RenameIndex, sql)
    }
}

impl Keyed for ValueCheck {
    const WHAT: &'static str = "check constraint";
    const DROP: (Step, Action) = (Step::DropConstraint, Action::DropCheck);
    fn name(&self) -> &str {
        &self.name
    }
    fn managed(&self) -> bool {
        self.managed
    }
    fn same_definition(&self, other: &Self) -> bool {
        self.column == other.column && self.values == other.values && self.multi == other.multi
    }
}

impl Keyed for ForeignKey {
    const WHAT: &'static str = "foreign key";
    const DROP: (Step, Action) = (Step::DropForeignKey, Action::DropForeignKey);
    fn name(&self) -> &str {
        &self.name
    }
    fn managed(&self) -> bool {
        self.managed
    }
    fn same_definition(&self, other: &Self) -> bool {
        self.columns == other.columns
            && self.references == other.references
            && self.referenced_columns == other.referenced_columns
            && self.on_delete == other.on_delete
    }
}

/// How the current items of one kind relate to the desired ones.
struct Matched<'x, T> {
    /// Same definition, different name: renamed in place.
    renamed: Vec<(&'x T, &'x T)>,
    /// Desired and missing.
    created: Vec<&'x T>,
    /// Current, not desired, and managed (or in the way of a desired name).
    dropped: Vec<&'x T>,
    /// Current, not desired, made by hand: left alone.
    unmanaged: Vec<&'x T>,
    /// Desired items that exist but were made by hand.
    adopted: Vec<&'x T>,
}

/// Matches by name and definition first, then by definition alone (a rename: the item's table
/// or columns were renamed, or somebody renamed it by hand).
fn match_items<'x, T: Keyed>(cur: &'x [T], desired: &'x [T]) -> Matched<'x, T> {
    let mut used = vec![false; cur.len()];
    let mut done = vec![false; desired.len()];
    let mut matched = Matched {
        renamed: Vec::new(),
        created: Vec::new(),
        dropped: Vec::new(),
        unmanaged: Vec::new(),
        adopted: Vec::new(),
    };
    for (di, d) in desired.iter().enumerate() {
        let found = (0..cur.len())
            .find(|&ci| !used[ci] && cur[ci].name() == d.name() && cur[ci].same_definition(d));
        if let Some(ci) = found {
            used[ci] = true;
            done[di] = true;
            if !cur[ci].managed() {
                matched.adopted.push(d);
            }
        }
    }
    for (di, d) in desired.iter().enumerate() {
        if done[di] {
            continue;
        }
        let found = (0..cur.len()).find(|&ci| !used[ci] && cur[ci].same_definition(d));
        match found {
            Some(ci) => {
                used[ci] = true;
                matched.renamed.push((&cur[ci], d));
            }
            None => matched.created.push(d),
        }
    }
    let wanted_names: HashSet<&str> = desired.iter().map(|d| d.name()).collect();
    for (ci, c) in cur.iter().enumerate() {
        if used[ci] {
            continue;
        }
        if c.managed() || wanted_names.contains(c.name()) {
            matched.dropped.push(c);
        } else {
            matched.unmanaged.push(c);
        }
    }
    matched
}

fn for_each_foreign_key(schema: &mut Schema, mut f: impl FnMut(&mut ForeignKey)) {
    for namespace in schema.schemas.values_mut() {
        for table in namespace.tables.values_mut() {
            for fk in &mut table.foreign_keys {
                f(fk);
            }
        }
    }
}

fn rename_in(columns: &mut [String], from: &str, to: &str) {
    for column in columns.iter_mut().filter(|c| *c == from) {
        *column = to.to_owned();
    }
}

/// Renames a column everywhere its table mentions it.
fn rename_column_in_table(table: &mut Table, from: &str, to: &str) {
    for column in table.columns.iter_mut().filter(|c| c.name == from) {
        column.name = to.to_owned();
    }
    if let Some(pk) = &mut table.primary_key {
        rename_in(&mut pk.columns, from, to);
    }
    for unique in &mut table.uniques {
        rename_in(&mut unique.columns, from, to);
    }
    for index in &mut table.indexes {
        rename_in(&mut index.columns, from, to);
    }
    for fk in &mut table.foreign_keys {
        rename_in(&mut fk.columns, from, to);
    }
    for check in table.checks.iter_mut().filter(|c| c.column == from) {
        check.column = to.to_owned();
    }
}
