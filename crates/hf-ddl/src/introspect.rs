//! Introspection: reads the managed schemas of a live database into a [`Schema`].
//!
//! A handful of catalog queries cover every table at once (schemas, tables, columns,
//! constraints, indexes, markers), so the cost does not grow with round trips per table. The
//! queries avoid per-row work in the server: comments are joined rather than looked up, defaults
//! are deparsed without opening their relation, and constraint and index columns come back as
//! attribute numbers that are named here from the columns already read (only a foreign key to a
//! table outside the read schemas names its columns in SQL). It reads
//! the catalog as it is, so hand-made changes (an extra column, a dropped index) show up in the
//! next plan. Pass a transaction (ideally REPEATABLE READ) for one consistent snapshot.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use tokio_postgres::GenericClient;

use crate::error::Error;
use crate::markers::{mark_managed, Marker, MarkerKind, MARKER_SCHEMA, MARKER_TABLE};
use crate::schema::{
    Column, ColumnDefault, FkAction, ForeignKey, Index, Namespace, PrimaryKey, Privilege, Schema,
    SqlType, Table, TableRef, UniqueConstraint, ValueCheck, AUTHENTICATED_ROLE,
};

const NAMESPACES: &str = "
SELECT n.nspname::text, obj_description(n.oid, 'pg_namespace'),
       ARRAY(SELECT a.privilege_type FROM aclexplode(n.nspacl) a
             WHERE a.grantee = (SELECT oid FROM pg_roles WHERE rolname = $2) ORDER BY 1)
FROM pg_namespace n
WHERE n.nspname = ANY($1)";

const TABLES: &str = "
SELECT n.nspname::text, c.relname::text, ds.description,
       ARRAY(SELECT a.privilege_type FROM aclexplode(c.relacl) a
             WHERE a.grantee = (SELECT oid FROM pg_roles WHERE rolname = $2) ORDER BY 1)
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_description ds
       ON ds.objoid = c.oid AND ds.classoid = 'pg_class'::regclass AND ds.objsubid = 0
WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition AND n.nspname = ANY($1)";

const COLUMNS: &str = "
SELECT n.nspname::text, c.relname::text, a.attname::text, format_type(a.atttypid, a.atttypmod),
       a.attnotnull,
       pg_get_expr(d.adbin, CASE WHEN a.attgenerated = '' THEN 0 ELSE d.adrelid END),
       ds.description, a.attnum, a.attrelid
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
LEFT JOIN pg_description ds
       ON ds.objoid = c.oid AND ds.classoid = 'pg_class'::regclass AND ds.objsubid = a.attnum
WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition AND n.nspname = ANY($1)
  AND a.attnum > 0 AND NOT a.attisdropped";

const CONSTRAINTS: &str = "
SELECT n.nspname::text, c.relname::text, con.conname::text, con.contype::text, con.conkey,
       fn.nspname::text, fc.relname::text, con.confkey,
       con.confdeltype::text,
       CASE WHEN con.contype = 'f' AND (NOT (fn.nspname = ANY($1)) OR fc.relispartition
                                         OR fc.relkind NOT IN ('r', 'p')) THEN
           ARRAY(SELECT att.attname::text FROM unnest(con.confkey) WITH ORDINALITY k(num, ord)
                 JOIN pg_attribute att ON att.attrelid = con.confrelid AND att.attnum = k.num
                 ORDER BY k.ord)
       END
FROM pg_constraint con
JOIN pg_class c ON c.oid = con.conrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_class fc ON fc.oid = con.confrelid
LEFT JOIN pg_namespace fn ON fn.oid = fc.relnamespace
WHERE con.contype IN ('p', 'u', 'f') AND c.relkind IN ('r', 'p') AND NOT c.relispartition
  AND n.nspname = ANY($1)
ORDER BY 1, 2, 3";

/// Single-column CHECK constraints, with PostgreSQL's own text of each; only those of the
/// picklist shape become [`ValueCheck`]s (see [`value_check`]).
const CHECKS: &str = "
SELECT n.nspname::text, c.relname::text, con.conname::text, att.attname::text,
       pg_get_constraintdef(con.oid)
FROM pg_constraint con
JOIN pg_class c ON c.oid = con.conrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute att ON att.attrelid = con.conrelid AND att.attnum = con.conkey[1]
WHERE con.contype = 'c' AND cardinality(con.conkey) = 1 AND c.relkind IN ('r', 'p')
  AND NOT c.relispartition AND n.nspname = ANY($1)
ORDER BY 1, 2, 3";

const INDEXES: &str = "
SELECT n.nspname::text, t.relname::text, i.relname::text, ix.indisunique, ix.indkey::int2[],
       p.plain,
       CASE WHEN p.plain THEN NULL ELSE pg_get_indexdef(ix.indexrelid) END
FROM pg_index ix
JOIN pg_class i ON i.oid = ix.indexrelid
JOIN pg_class t ON t.oid = ix.indrelid
JOIN pg_namespace n ON n.oid = t.relnamespace
JOIN pg_am am ON am.oid = i.relam
CROSS JOIN LATERAL (
    SELECT ix.indexprs IS NULL AND ix.indpred IS NULL AND am.amname = 'btree'
       AND ix.indnatts = ix.indnkeyatts AND NOT (0 = ANY(ix.indkey::int2[]))
       AND NOT EXISTS (SELECT 1 FROM unnest(ix.indoption::int2[]) o WHERE o <> 0) AS plain
) p
WHERE t.relkind IN ('r', 'p') AND NOT t.relispartition AND n.nspname = ANY($1)
  AND NOT EXISTS (SELECT 1 FROM pg_constraint con
                  WHERE con.conrelid = ix.indrelid AND con.conindid = ix.indexrelid
                    AND con.contype IN ('p', 'u', 'x'))
ORDER BY 1, 2, 3";

/// Reads `managed_schemas` (the module keys of the model) plus every schema that carries hf's
/// markers (so that the schema of a deleted module is seen and can be dropped).
///
/// Missing schemas are simply absent from the result. Grants are read for
/// [`AUTHENTICATED_ROLE`] only. Items without a marker come back with `managed: false`.
pub async fn introspect<C: GenericClient>(
    client: &C,
    managed_schemas: &[String],
) -> Result<Schema, Error> {
    let markers = read_markers(client).await?;
    let mut names: BTreeSet<String> = managed_schemas.iter().cloned().collect();
    names.extend(markers.iter().map(|m| m.schema.clone()));
    let names: Vec<String> = names.into_iter().collect();
    let role = AUTHENTICATED_ROLE;

    let mut schema = Schema::default();
    for row in query(client, "namespaces", NAMESPACES, &[&names, &role]).await? {
        let name: String = get(&row, 0, "namespaces")?;
        let namespace = Namespace {
            managed: false,
            comment: get(&row, 1, "namespaces")?,
            grants: grants(get(&row, 2, "namespaces")?),
            tables: BTreeMap::new(),
        };
        schema.schemas.insert(name, namespace);
    }
    for row in query(client, "tables", TABLES, &[&names, &role]).await? {
        let s: String = get(&row, 0, "tables")?;
        let t: String = get(&row, 1, "tables")?;
        let table = Table {
            managed: false,
            comment: get(&row, 2, "tables")?,
            grants: grants(get(&row, 3, "tables")?),
            ..Table::default()
        };
        if let Some(namespace) = schema.schemas.get_mut(&s) {
            namespace.tables.insert(t, table);
        }
    }
    // Sorted here by (table oid, attribute number) rather than by the server, which is cheaper.
    let mut columns = Vec::new();
    for row in query(client, "columns", COLUMNS, &[&names]).await? {
        let data_type: String = get(&row, 3, "columns")?;
        let default: Option<String> = get(&row, 5, "columns")?;
        let column = Column {
            name: get(&row, 2, "columns")?,
            data_type: SqlType::parse(&data_type),
            not_null: get(&row, 4, "columns")?,
            default: default.as_deref().map(ColumnDefault::parse),
            comment: get(&row, 6, "columns")?,
            managed: false,
        };
        let relation: u32 = get(&row, 8, "columns")?;
        let number: i16 = get(&row, 7, "columns")?;
        let s: String = get(&row, 0, "columns")?;
        let t: String = get(&row, 1, "columns")?;
        columns.push(((relation, number), s, t, column));
    }
    columns.sort_unstable_by_key(|(order, ..)| *order);
    let mut attnames = AttNames::default();
    for ((_, number), s, t, column) in columns {
        attnames.add(&s, &t, number, &column.name);
        if let Some(table) = table_mut(&mut schema, &s, &t) {
            table.columns.push(column);
        }
    }
    for row in query(client, "constraints", CONSTRAINTS, &[&names]).await? {
        let s: String = get(&row, 0, "constraints")?;
        let t: String = get(&row, 1, "constraints")?;
        let name: String = get(&row, 2, "constraints")?;
        let kind: String = get(&row, 3, "constraints")?;
        let numbers: Option<Vec<i16>> = get(&row, 4, "constraints")?;
        let columns = attnames.names(&s, &t, &numbers.unwrap_or_default());
        let Some(table) = table_mut(&mut schema, &s, &t) else {
            continue;
        };
        match kind.as_str() {
            "p" => {
                table.primary_key = Some(PrimaryKey {
                    name,
                    columns,
                    managed: false,
                })
            }
            "u" => table.uniques.push(UniqueConstraint {
                name,
                columns,
                managed: false,
            }),
            _ => {
                let on_delete: String = get(&row, 8, "constraints")?;
                let references = TableRef {
                    schema: get::<Option<String>>(&row, 5, "constraints")?.unwrap_or_default(),
                    table: get::<Option<String>>(&row, 6, "constraints")?.unwrap_or_default(),
                };
                // Named in SQL when the target is outside the tables read, else from them.
                let referenced_columns = match get::<Option<Vec<String>>>(&row, 9, "constraints")? {
                    Some(named) => named,
                    None => {
                        let numbers: Option<Vec<i16>> = get(&row, 7, "constraints")?;
                        attnames.names(
                            &references.schema,
                            &references.table,
                            &numbers.unwrap_or_default(),
                        )
                    }
                };
                table.foreign_keys.push(ForeignKey {
                    name,
                    columns,
                    references,
                    referenced_columns,
                    on_delete: fk_action(&on_delete),
                    managed: false,
                });
            }
        }
    }
    for row in query(client, "checks", CHECKS, &[&names]).await? {
        let s: String = get(&row, 0, "checks")?;
        let t: String = get(&row, 1, "checks")?;
        let column: String = get(&row, 3, "checks")?;
        let definition: String = get(&row, 4, "checks")?;
        let Some((values, multi)) = value_check(&column, &definition) else {
            continue;
        };
        if let Some(table) = table_mut(&mut schema, &s, &t) {
            table.checks.push(ValueCheck {
                name: get(&row, 2, "checks")?,
                column,
                values,
                multi,
                managed: false,
            });
        }
    }
    for row in query(client, "indexes", INDEXES, &[&names]).await? {
        let s: String = get(&row, 0, "indexes")?;
        let t: String = get(&row, 1, "indexes")?;
        let plain: bool = get(&row, 5, "indexes")?;
        let numbers: Vec<i16> = get(&row, 4, "indexes")?;
        let index = Index {
            name: get(&row, 2, "indexes")?,
            unique: get(&row, 3, "indexes")?,
            // An expression's number is 0, which names no column.
            columns: attnames.names(&s, &t, &numbers),
            definition: if plain {
                None
            } else {
                get(&row, 6, "indexes")?
            },
            managed: false,
        };
        if let Some(table) = table_mut(&mut schema, &s, &t) {
            table.indexes.push(index);
        }
    }
    mark_managed(&mut schema, &markers);
    Ok(schema)
}

/// The markers apply wrote, or none when apply never ran here.
async fn read_markers<C: GenericClient>(client: &C) -> Result<Vec<Marker>, Error> {
    let table = hf_sql::quote_qualified(MARKER_SCHEMA, MARKER_TABLE).unwrap_or_default();
    let rows = query(
        client,
        "markers",
        "SELECT to_regclass($1) IS NOT NULL",
        &[&table],
    )
    .await?;
    let exists = match rows.first() {
        Some(row) => get::<bool>(row, 0, "markers")?,
        None => false,
    };
    if !exists {
        return Ok(Vec::new());
    }
    let mut sql = String::from("SELECT kind, schema_name, table_name, item_name FROM ");
    sql.push_str(&table);
    let mut markers = Vec::new();
    for row in query(client, "markers", &sql, &[]).await? {
        let kind: String = get(&row, 0, "markers")?;
        let Some(kind) = MarkerKind::parse(&kind) else {
            continue;
        };
        markers.push(Marker {
            kind,
            schema: get(&row, 1, "markers")?,
            table: get(&row, 2, "markers")?,
            name: get(&row, 3, "markers")?,
        });
    }
    Ok(markers)
}

async fn query<C: GenericClient>(
    client: &C,
    name: &'static str,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Result<Vec<tokio_postgres::Row>, Error> {
    client
        .query(sql, params)
        .await
        .map_err(|source| Error::Catalog {
            query: name,
            source,
        })
}

fn get<'a, T: tokio_postgres::types::FromSql<'a>>(
    row: &'a tokio_postgres::Row,
    index: usize,
    name: &'static str,
) -> Result<T, Error> {
    row.try_get(index).map_err(|source| Error::Catalog {
        query: name,
        source,
    })
}

/// The column names of every table read, by attribute number, so that constraint and index
/// columns are named here instead of by a subquery per row.
#[derive(Default)]
struct AttNames(HashMap<String, HashMap<String, Vec<(i16, String)>>>);

impl AttNames {
    /// Records a column; the columns of a table arrive in attribute-number order.
    fn add(&mut self, s: &str, t: &str, number: i16, name: &str) {
        self.0
            .entry(s.to_owned())
            .or_default()
            .entry(t.to_owned())
            .or_default()
            .push((number, name.to_owned()));
    }

    /// The names of `numbers` in `s.t`, in order; a number without a column (0, for an index
    /// expression) is left out.
    fn names(&self, s: &str, t: &str, numbers: &[i16]) -> Vec<String> {
        let Some(columns) = self.0.get(s).and_then(|tables| tables.get(t)) else {
            return Vec::new();
        };
        numbers
            .iter()
            .filter_map(|number| {
                let at = columns.binary_search_by_key(number, |(n, _)| *n).ok()?;
                columns.get(at).map(|(_, name)| name.clone())
            })
            .collect()
    }
}

/// The keys and the array flag of a CHECK constraint the planner wrote, read back from
/// `pg_get_constraintdef`: `CHECK ((c = ANY (ARRAY['a'::text, 'b'::text])))` or
/// `CHECK ((c <@ ARRAY['a'::text, 'b'::text]))`. Any other CHECK is made by hand and is `None`:
/// the planner neither describes nor touches it.
fn value_check(column: &str, definition: &str) -> Option<(Vec<String>, bool)> {
    let quoted = hf_sql::quote_ident(column).ok()?;
    // PostgreSQL prints a column name without quotes when it needs none.
    let names = [quoted.clone(), column.to_owned()];
    let (list, multi) = names.iter().find_map(|name| {
        if let Some(rest) = definition.strip_prefix(&format!("CHECK (({name} = ANY (ARRAY[")) {
            return Some((rest.strip_suffix("])))")?, false));
        }
        let rest = definition.strip_prefix(&format!("CHECK (({name} <@ ARRAY["))?;
        Some((rest.strip_suffix("]))")?, true))
    })?;
    let values = list
        .split(", ")
        .map(|item| {
            let key = item.strip_prefix('\'')?.strip_suffix("'::text")?;
            hf_model::is_picklist_key(key).then(|| key.to_owned())
        })
        .collect::<Option<Vec<String>>>()?;
    Some((values, multi))
}

fn table_mut<'a>(schema: &'a mut Schema, s: &str, t: &str) -> Option<&'a mut Table> {
    schema.schemas.get_mut(s)?.tables.get_mut(t)
}

/// The planned privileges among `aclexplode`'s names, under the authenticated role.
fn grants(names: Vec<String>) -> BTreeMap<String, BTreeSet<Privilege>> {
    let privileges: BTreeSet<Privilege> = names
        .iter()
        .filter_map(|n| Privilege::from_sql(n))
        .collect();
    let mut grants = BTreeMap::new();
    if !privileges.is_empty() {
        grants.insert(AUTHENTICATED_ROLE.to_owned(), privileges);
    }
    grants
}

fn fk_action(code: &str) -> FkAction {
    match code {
        "r" => FkAction::Restrict,
        "c" => FkAction::Cascade,
        "n" => FkAction::SetNull,
        "d" => FkAction::SetDefault,
        _ => FkAction::NoAction,
    }
}
