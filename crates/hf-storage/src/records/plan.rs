//! The SQL of every record operation on one object, built once per metadata tree.
//!
//! A plan is a pure function of the model, and the model of its git tree, so plans are built
//! the first time an object of a tree is used and shared (`Arc`) by every later request: the hot
//! path never re-reads metadata, re-compiles a formula or re-builds a statement. The statement
//! texts are fixed per object (which fields a body holds is a parameter, not a different text),
//! so each is prepared once per connection.
//!
//! Every write is one statement that computes the record as it would be stored (`"new"`),
//! checks it (required fields, references, unique values, read-only values, rules compiled by
//! `hf-hoqs` against `"new"`) in a `"check"` CTE, and writes only when every check holds. The
//! statement returns the checks, so all problems come back at once, and a rejected write has
//! changed nothing. A create also returns the record it stored, so it needs no read after it
//! (see `Builder::stored_record`).
//!
//! Parameters of write statements, all bound as text and cast in the SQL:
//! `$1` id, `$2` which columns the body gives (`boolean[]`), `$3` whether to write at all,
//! `$4` the `If-Match` tags (`text[]`, NULL without the header), `$5` the read-only values the
//! body gives (a `jsonb` array), `$6` which read-only fields it gives (`boolean[]`), then one
//! per stored column, then the literals of compiled expressions.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use hf_hoqs::{ExprCompiler, ExprUse, Params, PriorRow, Type};
use hf_metastore::Snapshot;
use hf_model::{FieldKind, Model, PicklistValue, QualifiedName, ScalarType};

use crate::{Error, Result};

/// The first parameter holding a column value.
pub(crate) const FIRST_COLUMN_PARAM: usize = 7;
/// Parameters of a write statement before the column values.
const WRITE_FIXED_PARAMS: usize = FIRST_COLUMN_PARAM - 1;
/// How many trees' plans are kept (the live one, and a few recent ones for requests in flight).
const TREES_KEPT: usize = 4;

/// The record keys of the system fields, as records and expressions spell them.
const ID: &str = "id";
const CREATED_AT: &str = "createdAt";
const UPDATED_AT: &str = "updatedAt";
const CREATED_BY: &str = "createdBy";
const UPDATED_BY: &str = "updatedBy";

/// The principal a write runs for, as the request's transaction sets it (`hf.caller_id`, see
/// `run_as`); NULL outside hf's writes.
const CALLER_ID: &str = "nullif(current_setting('hf.caller_id', true), '')::uuid";

/// Everything the record operations need to know about one object.
#[derive(Debug)]
pub(crate) struct ObjectPlan {
    /// The object.
    pub(crate) name: QualifiedName,
    /// Every key of a record, in record order, with what it is.
    pub(crate) keys: Vec<(String, KeyRole)>,
    /// The stored fields: one column and one parameter each.
    pub(crate) columns: Vec<Column>,
    /// The keys that are read-only (`id`, formulas, rollups, `createdAt`, `updatedAt`), in
    /// record order; an update may repeat their current values.
    pub(crate) read_only: Vec<String>,
    /// Reads a record by id among the object's records (its subtypes' included).
    pub(crate) read: Statement,
    /// The write statements; `None` for an abstract object, which has no table.
    pub(crate) writes: Option<Writes>,
}

/// What a key of a record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyRole {
    /// A stored field: the index of its column.
    Column(usize),
    /// A read-only field: its index in [`ObjectPlan::read_only`].
    ReadOnly(usize),
}

/// A stored field.
#[derive(Debug, Clone)]
pub(crate) struct Column {
    /// The field key, also the column name.
    pub(crate) key: String,
    /// The value type (lookups hold uuids).
    pub(crate) ty: ScalarType,
    /// NOT NULL.
    pub(crate) required: bool,
    /// Whether the field is a lookup.
    pub(crate) lookup: bool,
    /// Whether the field has a unique constraint (upserts may use it).
    pub(crate) unique: bool,
    /// Whether a btree index holds its values (it is unique or indexed), which bounds their
    /// length (see `input::MAX_INDEXED_VALUE_BYTES`).
    pub(crate) in_index: bool,
    /// The choices of a picklist field (empty otherwise), which its values must be keys of.
    pub(crate) values: Vec<PicklistValue>,
    /// The bound text a new record gets when its body leaves the field out (a picklist's
    /// `defaultValue`).
    pub(crate) default: Option<String>,
}

/// The statements of a concrete object.
#[derive(Debug)]
pub(crate) struct Writes {
    /// Reads a record by id from the object's own table (after a write).
    pub(crate) read_own: Statement,
    /// Creates a record.
    pub(crate) create: Write,
    /// Updates a record by id.
    pub(crate) update: Write,
    /// Deletes a record by id: `$1` id, `$2` the `If-Match` tags.
    pub(crate) delete: Statement,
    /// Upserts, by unique field key.
    pub(crate) upserts: BTreeMap<String, Upsert>,
}

/// The upsert by one unique field.
#[derive(Debug)]
pub(crate) struct Upsert {
    /// The column of the unique field.
    pub(crate) column: usize,
    /// The write.
    pub(crate) write: Write,
    /// Reads the record by the field's value (`$1`), from the object's own table.
    pub(crate) read: Statement,
}

/// A statement and its parameters: the first `own` are the caller's, the rest are literals of
/// compiled expressions, fixed per plan.
#[derive(Debug, Clone)]
pub(crate) struct Statement {
    pub(crate) sql: String,
    pub(crate) params: Vec<Option<String>>,
    pub(crate) own: usize,
}

/// A write statement and the meaning of the boolean columns `c1, c2, ...` it returns.
#[derive(Debug)]
pub(crate) struct Write {
    pub(crate) statement: Statement,
    pub(crate) checks: Vec<Check>,
    /// Whether the statement also returns the record it stored, as a read would (`record`
    /// and `version` columns, NULL when it wrote nothing), so that no read statement (and no
    /// explicit transaction around the two) has to follow it. Only creates do, and only when
    /// the record's fields do not read the object's own table (see `Builder::stored_record`).
    pub(crate) returns_record: bool,
    /// Creates only: the same statement storing an idempotency key as well, in
    /// `hf_caller.idempotency_keys`, when (and only when) it inserts the record. Its own
    /// parameters are the create's, then the create's literals, then the key and the request's
    /// fingerprint, all given per request (`own` counts them all).
    pub(crate) keyed: Option<Statement>,
}

/// One check of a write; it holds when its column is true.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Check {
    /// The `If-Match` tags name the record's current version.
    Precondition,
    /// A required column has a value.
    Required(usize),
    /// A lookup column names a visible record of the target object.
    Reference(usize),
    /// A unique column's value is not used by another record.
    Unique(usize),
    /// A read-only value in the body equals the current one.
    ReadOnly(usize),
    /// A rule's assert is not false.
    Rule {
        /// The rule key.
        key: String,
        /// The field the failure anchors to, if any.
        field: Option<String>,
        /// The rule's message.
        message: String,
    },
}

/// The plans of one tree, by object.
type TreePlans = HashMap<QualifiedName, Arc<ObjectPlan>>;

/// The plans built so far, per tree id, most recent first: one per application (it is the
/// state of `hf_app::App`, not a static), shared by every request it serves.
#[derive(Debug, Default)]
pub struct PlanCache {
    trees: Mutex<Vec<(String, TreePlans)>>,
}

impl PlanCache {
    /// The plan of an object of a snapshot, built on first use and shared afterwards.
    pub(crate) fn plan(
        &self,
        snapshot: &Snapshot,
        object: &QualifiedName,
    ) -> Result<Arc<ObjectPlan>> {
        if let Some(found) = self.cached(&snapshot.tree, object) {
            return Ok(found);
        }
        let built = Arc::new(build(&snapshot.model, object)?);
        let mut trees = self.lock();
        let position = trees.iter().position(|(tree, _)| *tree == snapshot.tree);
        let index = match position {
            Some(index) => index,
            None => {
                trees.insert(0, (snapshot.tree.clone(), HashMap::new()));
                trees.truncate(TREES_KEPT);
                0
            }
        };
        let plans = &mut trees[index].1;
        Ok(Arc::clone(
            plans.entry(object.clone()).or_insert_with(|| built),
        ))
    }

    fn cached(&self, tree: &str, object: &QualifiedName) -> Option<Arc<ObjectPlan>> {
        let trees = self.lock();
        let (_, plans) = trees.iter().find(|(t, _)| t == tree)?;
        plans.get(object).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(String, TreePlans)>> {
        self.trees
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Builds the plan of an object (which must exist in the model).
pub(crate) fn build(model: &Model, name: &QualifiedName) -> Result<ObjectPlan> {
    let object = model
        .object(name)
        .ok_or_else(|| internal(name, "the object is not in the model"))?;
    let mut keys = vec![(ID.to_owned(), KeyRole::ReadOnly(0))];
    let mut columns = Vec::new();
    let mut read_only = vec![ID.to_owned()];
    for effective in model.effective_fields(name) {
        let field = effective.field;
        let role = match &field.kind {
            FieldKind::Scalar {
                field_type,
                required,
                unique,
                indexed,
                values,
                default_value,
                ..
            } => {
                // The default is a key; as JSON it is that string, or a one-key array.
                let default = default_value.as_ref().and_then(|key| {
                    let raw = serde_json::Value::String(key.clone());
                    let raw = match field_type {
                        ScalarType::Multipicklist => serde_json::Value::Array(vec![raw]),
                        _ => raw,
                    };
                    field.parse_json(&raw.to_string()).ok().flatten()
                });
                columns.push(Column {
                    key: field.key.clone(),
                    ty: *field_type,
                    required: *required,
                    lookup: false,
                    unique: *unique,
                    in_index: *unique || *indexed,
                    values: values.clone(),
                    default,
                });
                KeyRole::Column(columns.len() - 1)
            }
            FieldKind::Lookup { required, .. } => {
                columns.push(Column {
                    key: field.key.clone(),
                    ty: ScalarType::Uuid,
                    required: *required,
                    lookup: true,
                    unique: false,
                    in_index: false,
                    values: Vec::new(),
                    default: None,
                });
                KeyRole::Column(columns.len() - 1)
            }
            FieldKind::Formula { .. } | FieldKind::Rollup { .. } => {
                read_only.push(field.key.clone());
                KeyRole::ReadOnly(read_only.len() - 1)
            }
        };
        keys.push((field.key.clone(), role));
    }
    for system in [CREATED_AT, UPDATED_AT, CREATED_BY, UPDATED_BY] {
        read_only.push(system.to_owned());
        keys.push((system.to_owned(), KeyRole::ReadOnly(read_only.len() - 1)));
    }
    let mut plan = ObjectPlan {
        name: name.clone(),
        keys,
        columns,
        read_only,
        read: Statement {
            sql: String::new(),
            params: Vec::new(),
            own: 0,
        },
        writes: None,
    };
    let builder = Builder { model, plan: &plan };
    let relation = builder.relation()?;
    let read = builder.read(&relation, "r", ID)?;
    let writes = if object.is_abstract {
        None
    } else {
        Some(builder.writes()?)
    };
    plan.read = read;
    plan.writes = writes;
    Ok(plan)
}

/// Builds the statements of one plan.
struct Builder<'a> {
    model: &'a Model,
    plan: &'a ObjectPlan,
}

impl Builder<'_> {
    fn writes(&self) -> Result<Writes> {
        let table = self.table(&self.plan.name)?;
        let read_own = self.read(&table, "r", ID)?;
        let create = self.write(&table, WriteKind::Create)?;
        let update = self.write(&table, WriteKind::Update)?;
        let delete = self.delete(&table)?;
        let mut upserts = BTreeMap::new();
        for (index, column) in self.plan.columns.iter().enumerate() {
            if !column.unique {
                continue;
            }
            let write = self.write(&table, WriteKind::Upsert(index))?;
            let read = self.read(&table, "r", &column.key)?;
            upserts.insert(
                column.key.clone(),
                Upsert {
                    column: index,
                    write,
                    read,
                },
            );
        }
        Ok(Writes {
            read_own,
            create,
            update,
            delete,
            upserts,
        })
    }

    /// `SELECT <record JSON>, <updatedAt> FROM <relation> AS "r" WHERE "r".<key> = $1`.
    fn read(&self, relation: &str, alias: &str, by: &str) -> Result<Statement> {
        let mut params = Params::new();
        params.push(None);
        let mut compiler = self.compiler(alias, params)?;
        let projection = self.projection(&mut compiler)?;
        let (joins, params) = compiler.finish();
        let alias = ident(alias)?;
        let (column, ty) = if by == ID {
            ("id".to_owned(), Type::Uuid)
        } else {
            let column = self.column(by)?;
            (column.key.clone(), Type::from_scalar(column.ty))
        };
        let items = projection_items(&projection)?;
        let mut sql = String::from("SELECT row_to_json(\"x\")::text, \"x\".\"updatedAt\" FROM (");
        sql.push_str(&format!(
            "SELECT {items} FROM {relation} AS {alias}{joins} WHERE {alias}.{} = $1::{}",
            ident(&column)?,
            ty.sql_type()
        ));
        sql.push_str(") AS \"x\"");
        Ok(statement(sql, params, 1))
    }

    /// The record's JSON-ready values, key by key, for the row the compiler reads.
    fn projection(&self, compiler: &mut ExprCompiler<'_>) -> Result<Vec<(String, String)>> {
        self.plan
            .keys
            .iter()
            .map(|(key, _)| Ok((key.clone(), self.value(compiler, key)?)))
            .collect()
    }

    /// One key's JSON-ready value; a computed field whose definition does not compile reads as
    /// NULL (metadata validation refuses such definitions, so this is a safety net).
    fn value(&self, compiler: &mut ExprCompiler<'_>, key: &str) -> Result<String> {
        match compiler
            .field(key)
            .map_err(|e| internal(&self.plan.name, e))?
        {
            Some(compiled) => Ok(json_ready(&compiled.sql, compiled.ty)),
            None => {
                tracing::warn!(object = %self.plan.name, field = key, "computed field does not compile; it reads as null");
                Ok("NULL".to_owned())
            }
        }
    }

    fn write(&self, table: &str, kind: WriteKind) -> Result<Write> {
        let plan = self.plan;
        let mut params = Params::new();
        for _ in 0..WRITE_FIXED_PARAMS + plan.columns.len() {
            params.push(None);
        }
        let own = params.values().len();

        // Expressions over the record as it would be stored.
        // Rules see the stored record as "old" (absent on create) and the caller through the
        // transaction's settings, so the statement stays the same for every caller.
        let prior = match kind {
            WriteKind::Create => PriorRow::Create,
            WriteKind::Update | WriteKind::Upsert(_) => PriorRow::Row("\"old\"".to_owned()),
        };
        let mut new_compiler = self.compiler("new", params)?.for_rules(prior);
        let mut checks = Vec::new();
        let mut conditions = Vec::new();
        if kind != WriteKind::Create {
            checks.push(Check::Precondition);
            let etag = json_ready("\"old\".\"updated_at\"", Type::Datetime);
            conditions.push(format!(
                "$4::text[] IS NULL OR (\"old\".\"id\" IS NOT NULL AND {etag} = ANY ($4::text[]))"
            ));
        }
        for (index, column) in plan.columns.iter().enumerate() {
            if column.required {
                checks.push(Check::Required(index));
                conditions.push(format!("\"new\".{} IS NOT NULL", ident(&column.key)?));
            }
        }
        for (index, column) in plan.columns.iter().enumerate() {
            if column.lookup {
                checks.push(Check::Reference(index));
                conditions.push(self.reference(index, column)?);
            }
        }
        for (index, column) in plan.columns.iter().enumerate() {
            if column.unique {
                let col = ident(&column.key)?;
                checks.push(Check::Unique(index));
                conditions.push(format!(
                    "NOT ($2::boolean[])[{}] OR \"new\".{col} IS NULL OR NOT EXISTS \
                     (SELECT FROM {table} AS \"dup\" WHERE \"dup\".{col} = \"new\".{col} \
                     AND \"dup\".\"id\" <> \"new\".\"id\")",
                    index + 1
                ));
            }
        }
        if kind != WriteKind::Create {
            for index in 0..plan.read_only.len() {
                checks.push(Check::ReadOnly(index));
                conditions.push(format!(
                    "NOT ($6::boolean[])[{n}] OR COALESCE(\"ro\".\"ro{n}\", false)",
                    n = index + 1
                ));
            }
        }
        for rule in self.model.effective_rules(&plan.name) {
            let compiled = new_compiler
                .compile(&rule.rule.assert, ExprUse::Assert)
                .map_err(|e| internal(&plan.name, e))?;
            let Some(expr) = compiled.expr else {
                let problems: Vec<String> = compiled
                    .diagnostics
                    .iter()
                    .map(|d| d.message.clone())
                    .collect();
                return Err(internal(
                    &plan.name,
                    format!(
                        "rule `{}` does not compile: {}",
                        rule.key,
                        problems.join("; ")
                    ),
                ));
            };
            checks.push(Check::Rule {
                key: rule.key.to_owned(),
                field: rule.rule.field.clone(),
                message: rule.rule.message.clone(),
            });
            conditions.push(format!("({}) IS NOT FALSE", expr.sql));
        }
        let (new_joins, params) = new_compiler.finish();
        let (stored_record, params) = match kind {
            WriteKind::Create => self.stored_record(params)?,
            WriteKind::Update | WriteKind::Upsert(_) => (None, params),
        };

        // The current values of read-only fields, compared with those the body repeats; in a
        // subquery of its own, so its joins cannot clash with those over "new".
        let (read_only_join, params) = if kind == WriteKind::Create {
            (String::new(), params)
        } else {
            let mut old_compiler = self.compiler("old", params)?;
            let mut items = Vec::new();
            for (index, key) in plan.read_only.iter().enumerate() {
                let value = self.value(&mut old_compiler, key)?;
                items.push(format!(
                    "CASE WHEN ($6::boolean[])[{n}] THEN COALESCE(to_jsonb({value}), 'null'::jsonb) \
                     = ($5::jsonb -> {i}) END AS \"ro{n}\"",
                    n = index + 1,
                    i = index
                ));
            }
            let (old_joins, params) = old_compiler.finish();
            let join = format!(
                " LEFT JOIN LATERAL (SELECT {} FROM \"old\"{old_joins}) AS \"ro\" ON true",
                items.join(", ")
            );
            (join, params)
        };

        let mut check_items: Vec<String> = conditions
            .iter()
            .enumerate()
            .map(|(i, condition)| format!("COALESCE(({condition}), false) AS \"c{}\"", i + 1))
            .collect();
        let all_ok = if conditions.is_empty() {
            "true".to_owned()
        } else {
            (1..=conditions.len())
                .map(|i| format!("\"check\".\"c{i}\""))
                .collect::<Vec<_>>()
                .join(" AND ")
        };
        let changed = self.changed()?;
        if kind != WriteKind::Create {
            check_items.push(format!("({changed}) AS \"changed\""));
        }
        let from = match kind {
            WriteKind::Create => format!("\"new\"{new_joins}"),
            WriteKind::Update => format!("\"old\" CROSS JOIN \"new\"{new_joins}{read_only_join}"),
            WriteKind::Upsert(_) => {
                format!("\"new\" LEFT JOIN \"old\" ON true{new_joins}{read_only_join}")
            }
        };

        let names = self.column_names()?;
        let all_columns = format!(
            "\"id\", {names}\"created_at\", \"updated_at\", \"created_by\", \"updated_by\""
        );
        let assignments = self.assignments()?;
        let mut sql = String::from("WITH ");
        match kind {
            WriteKind::Create => {}
            WriteKind::Update => sql.push_str(&format!(
                "\"old\" AS (SELECT * FROM {table} WHERE \"id\" = $1::uuid FOR UPDATE), "
            )),
            WriteKind::Upsert(key) => {
                let column = &plan.columns[key];
                sql.push_str(&format!(
                    "\"old\" AS (SELECT * FROM {table} WHERE {} = ${}::{} FOR UPDATE), ",
                    ident(&column.key)?,
                    FIRST_COLUMN_PARAM + key,
                    Type::from_scalar(column.ty).sql_type()
                ));
            }
        }
        sql.push_str(&format!("\"new\" AS ({}), ", self.new_row(kind)?));
        sql.push_str(&format!(
            "\"check\" AS (SELECT {} FROM {from})",
            check_items.join(", ")
        ));
        let insert =
            format!(
            "\"ins\" AS (INSERT INTO {table} ({all_columns}) SELECT {all_columns} FROM \"new\" \
             WHERE $3::boolean AND {exists_old}(SELECT {all_ok} FROM \"check\"){conflict} \
             RETURNING {returning})",
            returning = if stored_record.is_some() {
                all_columns.as_str()
            } else {
                "1"
            },
            exists_old = if kind == WriteKind::Create {
                ""
            } else {
                "NOT EXISTS (SELECT FROM \"old\") AND "
            },
            conflict = match kind {
                WriteKind::Upsert(key) =>
                    format!(" ON CONFLICT ({}) DO NOTHING", ident(&plan.columns[key].key)?),
                _ => String::new(),
            }
        );
        let update = format!(
            "\"upd\" AS (UPDATE {table} AS \"u\" SET {assignments} FROM \"new\", \"check\" \
             WHERE \"u\".\"id\" = \"new\".\"id\" AND $3::boolean AND {exists_old}{all_ok} \
             AND \"check\".\"changed\" RETURNING 1)",
            exists_old = if matches!(kind, WriteKind::Upsert(_)) {
                "EXISTS (SELECT FROM \"old\") AND "
            } else {
                ""
            }
        );
        let mut keyed = None;
        match kind {
            WriteKind::Create => {
                sql.push_str(&format!(", {insert}"));
                let mut select = String::from(
                    " SELECT \"check\".*, EXISTS (SELECT FROM \"ins\") AS \"written\"",
                );
                match &stored_record {
                    Some(stored) => select.push_str(&format!(
                        ", \"stored\".\"record\", \"stored\".\"version\" FROM \"check\" \
                         LEFT JOIN ({stored}) AS \"stored\" ON true"
                    )),
                    None => select.push_str(" FROM \"check\""),
                }
                // The key goes in with the record: from the insert's own row, so a refused
                // create stores no key either.
                let count = params.values().len();
                keyed = Some(Statement {
                    sql: format!(
                        "{sql}, \"kept\" AS (INSERT INTO hf_caller.idempotency_keys \
                         (\"key\", \"fingerprint\", \"record_id\") \
                         SELECT ${key}::text, ${fingerprint}::text, $1::uuid FROM \"ins\"){select}",
                        key = count + 1,
                        fingerprint = count + 2,
                    ),
                    params: vec![None; count + 2],
                    own: count + 2,
                });
                sql.push_str(&select);
            }
            WriteKind::Update => {
                sql.push_str(&format!(", {update} "));
                sql.push_str(
                    "SELECT \"check\".*, EXISTS (SELECT FROM \"upd\") AS \"written\" FROM \"check\"",
                );
            }
            WriteKind::Upsert(_) => {
                sql.push_str(&format!(", {insert}, {update} "));
                sql.push_str(
                    "SELECT \"check\".*, EXISTS (SELECT FROM \"ins\") AS \"inserted\", \
                     EXISTS (SELECT FROM \"upd\") AS \"updated\", \
                     (SELECT \"old\".\"id\"::text FROM \"old\") AS \"old_id\" FROM \"check\"",
                );
            }
        }
        Ok(Write {
            statement: statement(sql, params, own),
            checks,
            returns_record: stored_record.is_some(),
            keyed,
        })
    }

    /// The `SELECT` of the record a create stores (`record`, `version`), as `read_own` would
    /// read it, from the row the insert returns (`"ins"`, `RETURNING` its columns): the create
    /// then needs no read statement after it, so it is one statement in its own transaction.
    /// `None` (with `params` as given) when the record's fields read the object's own table,
    /// which a statement does not see change under its own insert: a formula through a lookup
    /// to a rollup over this object's records must be read by a statement of its own.
    fn stored_record(&self, params: Params) -> Result<(Option<String>, Params)> {
        let mut compiler = self.compiler("r", params.clone())?;
        let projection = self.projection(&mut compiler)?;
        if compiler.reads_table_of(&self.plan.name) {
            return Ok((None, params));
        }
        let (joins, with_record) = compiler.finish();
        let items = projection_items(&projection)?;
        let select = format!(
            "SELECT row_to_json(\"x\")::text AS \"record\", \"x\".\"updatedAt\" AS \"version\" \
             FROM (SELECT {items} FROM \"ins\" AS \"r\"{joins}) AS \"x\""
        );
        Ok((Some(select), with_record))
    }

    /// The `"new"` CTE: the record as it would be stored.
    fn new_row(&self, kind: WriteKind) -> Result<String> {
        let mut items = Vec::new();
        let value = |index: usize, column: &Column| {
            format!(
                "${}::{}",
                FIRST_COLUMN_PARAM + index,
                Type::from_scalar(column.ty).sql_type()
            )
        };
        match kind {
            WriteKind::Create => {
                items.push("$1::uuid AS \"id\"".to_owned());
                for (index, column) in self.plan.columns.iter().enumerate() {
                    items.push(format!(
                        "{} AS {}",
                        value(index, column),
                        ident(&column.key)?
                    ));
                }
                items.push("now() AS \"created_at\"".to_owned());
                items.push("now() AS \"updated_at\"".to_owned());
                items.push(format!("{CALLER_ID} AS \"created_by\""));
                items.push(format!("{CALLER_ID} AS \"updated_by\""));
                Ok(format!("SELECT {}", items.join(", ")))
            }
            WriteKind::Update => {
                items.push("\"old\".\"id\"".to_owned());
                for (index, column) in self.plan.columns.iter().enumerate() {
                    let col = ident(&column.key)?;
                    items.push(format!(
                        "CASE WHEN ($2::boolean[])[{}] THEN {} ELSE \"old\".{col} END AS {col}",
                        index + 1,
                        value(index, column)
                    ));
                }
                items.push("\"old\".\"created_at\"".to_owned());
                items.push(
                    "greatest(now(), \"old\".\"updated_at\" + interval '1 microsecond') \
                     AS \"updated_at\""
                        .to_owned(),
                );
                items.push("\"old\".\"created_by\"".to_owned());
                items.push(format!("{CALLER_ID} AS \"updated_by\""));
                Ok(format!("SELECT {} FROM \"old\"", items.join(", ")))
            }
            WriteKind::Upsert(_) => {
                items.push("coalesce(\"old\".\"id\", $1::uuid) AS \"id\"".to_owned());
                for (index, column) in self.plan.columns.iter().enumerate() {
                    let col = ident(&column.key)?;
                    items.push(format!(
                        "CASE WHEN \"old\".\"id\" IS NULL OR ($2::boolean[])[{}] THEN {} \
                         ELSE \"old\".{col} END AS {col}",
                        index + 1,
                        value(index, column)
                    ));
                }
                items.push("coalesce(\"old\".\"created_at\", now()) AS \"created_at\"".to_owned());
                items.push(
                    "CASE WHEN \"old\".\"id\" IS NULL THEN now() ELSE greatest(now(), \
                     \"old\".\"updated_at\" + interval '1 microsecond') END AS \"updated_at\""
                        .to_owned(),
                );
                items.push(format!(
                    "CASE WHEN \"old\".\"id\" IS NULL THEN {CALLER_ID} ELSE \"old\".\"created_by\" END \
                     AS \"created_by\""
                ));
                items.push(format!("{CALLER_ID} AS \"updated_by\""));
                Ok(format!(
                    "SELECT {} FROM (SELECT) AS \"one\" LEFT JOIN \"old\" ON true",
                    items.join(", ")
                ))
            }
        }
    }

    /// Whether the stored values of `"new"` differ from `"old"`.
    fn changed(&self) -> Result<String> {
        let parts: Vec<String> = self
            .plan
            .columns
            .iter()
            .map(|column| {
                let col = ident(&column.key)?;
                Ok(format!("\"new\".{col} IS DISTINCT FROM \"old\".{col}"))
            })
            .collect::<Result<_>>()?;
        Ok(if parts.is_empty() {
            "false".to_owned()
        } else {
            parts.join(" OR ")
        })
    }

    /// `"a", "b", ` (with the trailing separator, empty without columns).
    fn column_names(&self) -> Result<String> {
        let mut names = String::new();
        for column in &self.plan.columns {
            names.push_str(&ident(&column.key)?);
            names.push_str(", ");
        }
        Ok(names)
    }

    /// `"a" = "new"."a", ..., "updated_at" = "new"."updated_at"`.
    fn assignments(&self) -> Result<String> {
        let mut parts = Vec::new();
        for column in &self.plan.columns {
            let col = ident(&column.key)?;
            parts.push(format!("{col} = \"new\".{col}"));
        }
        parts.push("\"updated_at\" = \"new\".\"updated_at\"".to_owned());
        parts.push("\"updated_by\" = \"new\".\"updated_by\"".to_owned());
        Ok(parts.join(", "))
    }

    /// A lookup given in the body names a visible record of its target object (or of one of
    /// the target's subtypes).
    fn reference(&self, index: usize, column: &Column) -> Result<String> {
        let target = self
            .model
            .effective_field(&self.plan.name, &column.key)
            .and_then(|effective| match &effective.field.kind {
                FieldKind::Lookup { target, .. } => Some(target.clone()),
                _ => None,
            })
            .ok_or_else(|| internal(&self.plan.name, "a lookup lost its target"))?;
        let col = ident(&column.key)?;
        let mut found = Vec::new();
        for table in self.concrete_tables(&target) {
            found.push(format!(
                "EXISTS (SELECT FROM {} AS \"ref\" WHERE \"ref\".\"id\" = \"new\".{col})",
                self.table(&table)?
            ));
        }
        let found = if found.is_empty() {
            "false".to_owned()
        } else {
            found.join(" OR ")
        };
        Ok(format!(
            "NOT ($2::boolean[])[{}] OR \"new\".{col} IS NULL OR {found}",
            index + 1
        ))
    }

    fn delete(&self, table: &str) -> Result<Statement> {
        let etag_d = json_ready("\"d\".\"updated_at\"", Type::Datetime);
        let etag_c = json_ready("\"c\".\"updated_at\"", Type::Datetime);
        let sql = format!(
            "WITH \"del\" AS (DELETE FROM {table} AS \"d\" WHERE \"d\".\"id\" = $1::uuid \
             AND ($2::text[] IS NULL OR {etag_d} = ANY ($2::text[])) RETURNING 1) \
             SELECT EXISTS (SELECT FROM \"del\"), \
             (SELECT {etag_c} FROM {table} AS \"c\" WHERE \"c\".\"id\" = $1::uuid)"
        );
        let mut params = Params::new();
        params.push(None);
        params.push(None);
        Ok(statement(sql, params, 2))
    }

    /// The SQL relation of the object's records: its table, or the `UNION ALL` of its concrete
    /// tables and those of its concrete subtypes (the same relation HOQS queries read).
    fn relation(&self) -> Result<String> {
        let tables = self.concrete_tables(&self.plan.name);
        if let [only] = tables.as_slice() {
            return self.table(only);
        }
        let mut columns = vec![("id".to_owned(), Type::Uuid)];
        for column in &self.plan.columns {
            columns.push((column.key.clone(), Type::from_scalar(column.ty)));
        }
        columns.push(("created_at".to_owned(), Type::Datetime));
        columns.push(("updated_at".to_owned(), Type::Datetime));
        columns.push(("created_by".to_owned(), Type::Uuid));
        columns.push(("updated_by".to_owned(), Type::Uuid));
        if tables.is_empty() {
            let nulls: Vec<String> = columns
                .iter()
                .map(|(name, ty)| Ok(format!("NULL::{} AS {}", ty.sql_type(), ident(name)?)))
                .collect::<Result<_>>()?;
            return Ok(format!("(SELECT {} WHERE false)", nulls.join(", ")));
        }
        let list: Vec<String> = columns
            .iter()
            .map(|(name, _)| ident(name))
            .collect::<Result<_>>()?;
        let list = list.join(", ");
        let branches: Vec<String> = tables
            .iter()
            .map(|table| Ok(format!("SELECT {list} FROM {}", self.table(table)?)))
            .collect::<Result<_>>()?;
        Ok(format!("({})", branches.join(" UNION ALL ")))
    }

    /// The object itself when concrete, then its concrete subtypes.
    fn concrete_tables(&self, object: &QualifiedName) -> Vec<QualifiedName> {
        let mut tables = Vec::new();
        if self.model.object(object).is_some_and(|o| !o.is_abstract) {
            tables.push(object.clone());
        }
        tables.extend(self.model.concrete_subtypes(object));
        tables
    }

    fn table(&self, object: &QualifiedName) -> Result<String> {
        hf_sql::quote_qualified(&object.module, &object.object)
            .map_err(|e| internal(&self.plan.name, e))
    }

    fn column(&self, key: &str) -> Result<&Column> {
        self.plan
            .columns
            .iter()
            .find(|column| column.key == key)
            .ok_or_else(|| internal(&self.plan.name, format!("no column `{key}`")))
    }

    fn compiler(&self, alias: &str, params: Params) -> Result<ExprCompiler<'_>> {
        ExprCompiler::new(self.model, &self.plan.name, alias, params)
            .map_err(|e| internal(&self.plan.name, e))
    }
}

/// Which write statement is being built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WriteKind {
    Create,
    Update,
    /// By the unique column with this index.
    Upsert(usize),
}

/// `<sql> AS "<key>", ...`: the select list of a record.
fn projection_items(projection: &[(String, String)]) -> Result<String> {
    let items: Vec<String> = projection
        .iter()
        .map(|(key, sql)| Ok(format!("{sql} AS {}", ident(key)?)))
        .collect::<Result<_>>()?;
    Ok(items.join(", "))
}

fn statement(sql: String, params: Params, own: usize) -> Statement {
    Statement {
        sql,
        params: params.into_values(),
        own,
    }
}

/// Wraps a value so that `row_to_json` renders it as records do: decimals as JSON strings
/// (exact), datetimes as RFC 3339 in UTC ending in `Z`, everything else as PostgreSQL's JSON of
/// the value. The same rendering as HOQS query results (`hf_hoqs` `types::json_value`), which
/// the records tests compare.
fn json_ready(sql: &str, ty: Type) -> String {
    match ty {
        Type::Decimal => format!("({sql})::text"),
        Type::Datetime => format!("((to_json(({sql}) AT TIME ZONE 'UTC') #>> '{{}}') || 'Z')"),
        _ => sql.to_owned(),
    }
}

fn ident(name: &str) -> Result<String> {
    hf_sql::quote_ident(name).map_err(|error| Error::Internal(format!("identifier: {error}")))
}

fn internal(object: &QualifiedName, reason: impl std::fmt::Display) -> Error {
    Error::Internal(format!("records of {object}: {reason}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn demo() -> Model {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/demo");
        hf_model::files::load_dir(&dir).unwrap()
    }

    /// Every statement of a plan, for review in the snapshot.
    fn render(plan: &ObjectPlan) -> String {
        let mut out = String::new();
        let mut show = |name: &str, statement: &Statement| {
            out.push_str(&format!(
                "{name} (own {}, literals {:?}):\n{}\n\n",
                statement.own,
                &statement.params[statement.own..],
                statement.sql
            ));
        };
        show("read", &plan.read);
        if let Some(writes) = &plan.writes {
            show("read_own", &writes.read_own);
            show("create", &writes.create.statement);
            show("update", &writes.update.statement);
            show("delete", &writes.delete);
            if let Some(keyed) = &writes.create.keyed {
                show("create with an idempotency key", keyed);
            }
            for (key, upsert) in &writes.upserts {
                show(&format!("upsert by {key}"), &upsert.write.statement);
                show(&format!("read by {key}"), &upsert.read);
            }
            let checks = format!("checks of update: {:?}\n", writes.update.checks);
            out.push_str(&checks);
        }
        out
    }

    #[test]
    fn demo_statements() {
        let model = demo();
        for object in ["opportunity", "party", "account"] {
            let plan = build(&model, &QualifiedName::new("crm", object)).unwrap();
            insta::assert_snapshot!(object, render(&plan));
        }
    }

    #[test]
    fn a_create_returns_its_record_unless_the_record_reads_its_own_table() {
        let mut model = demo();
        let name = QualifiedName::new("crm", "opportunity");
        let plan = build(&model, &name).unwrap();
        let create = &plan.writes.as_ref().unwrap().create;
        assert!(create.returns_record);
        assert!(create
            .statement
            .sql
            .contains("RETURNING \"id\", \"account\""));

        // A formula through the lookup to a rollup over the opportunities themselves: the
        // insert's own statement would not count the new record yet.
        let opportunity = model
            .modules
            .get_mut("crm")
            .and_then(|module| module.objects.get_mut("opportunity"))
            .unwrap();
        let kind = FieldKind::Formula {
            formula: "account.opportunity_count".to_owned(),
            field_type: ScalarType::Integer,
        };
        opportunity.fields.insert(
            "siblings".into(),
            hf_model::Field::new("siblings", "Siblings", kind),
        );
        let plan = build(&model, &name).unwrap();
        let create = &plan.writes.as_ref().unwrap().create;
        assert!(!create.returns_record);
        assert!(create.statement.sql.contains("RETURNING 1"));
        assert!(!create.statement.sql.contains("\"stored\""));
    }

    #[test]
    fn upsert_statements() {
        let mut model = demo();
        let account = model
            .modules
            .get_mut("crm")
            .and_then(|module| module.objects.get_mut("account"))
            .unwrap();
        let kind = FieldKind::Scalar {
            field_type: ScalarType::Text,
            required: false,
            unique: true,
            indexed: false,
            values: Vec::new(),
            default_value: None,
        };
        account
            .fields
            .insert("code".into(), hf_model::Field::new("code", "Code", kind));
        let plan = build(&model, &QualifiedName::new("crm", "account")).unwrap();
        let writes = plan.writes.as_ref().unwrap();
        assert_eq!(writes.upserts.keys().collect::<Vec<_>>(), ["code"]);
        insta::assert_snapshot!("account_upsert_by_code", render(&plan));
    }
}
