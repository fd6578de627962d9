//! Records: create, read, update, delete and upsert the records of an object, as the caller.
//!
//! Every operation runs in one transaction, as the caller's PostgreSQL role, in one round trip
//! (see `run`): table grants and row-level security decide what the caller may read and write,
//! and a record hidden by a policy is simply not found. The SQL of each operation is built once
//! per object and metadata tree (see `plan`) and prepared once per connection.
//!
//! A write is checked completely before anything is stored, and every problem is reported at
//! once ([`Outcome::Rejected`]): the body's values against their field types (`value`), unknown
//! and read-only fields (`input`), then, in the database and in the same statement as the
//! write, required fields, references, unique values and the object's rules, evaluated on the
//! record as it would be stored by the same expression compiler HOQS queries use. User
//! problems are data; `Err` means the operation could not run (the database is unreachable,
//! the caller lacks a privilege, ...).
//!
//! Records are JSON objects built by PostgreSQL: `id`, every effective field (formula and
//! rollup values computed at read time), `createdAt`, `updatedAt`. Their version, for `ETag`
//! and `If-Match`, is the `updatedAt` text, which moves on every update that changes a value.

mod body;
mod idempotency;
mod input;
mod plan;

use std::sync::Arc;

use hf_metastore::Snapshot;
use hf_model::key::{check_key, KeyKind};
use hf_model::QualifiedName;
use tokio_postgres::error::SqlState;
use tokio_postgres::Row;

use crate::run_as::{self, Ran, Step};
use crate::{Pool, Result};
pub use body::{Body, BodyError};
pub use hf_model::MAX_JSON_DEPTH;
pub use idempotency::{forget_expired_keys, IdempotencyKey, KEPT_HOURS, MAX_KEY_BYTES};
use input::{Input, Mode};
pub use plan::PlanCache;
use plan::{Check, ObjectPlan, Statement};

/// How often an upsert that lost a race for its key is retried (it then finds the record).
const UPSERT_ATTEMPTS: usize = 5;

/// Who runs an operation, and against which metadata.
#[derive(Debug, Clone, Copy)]
pub struct Caller<'a> {
    /// The pool to borrow the connection from.
    pub pool: &'a Pool,
    /// The caller's PostgreSQL role (the principal's name); every statement runs as it.
    pub role: &'a str,
    /// The principal's id: `createdBy`/`updatedBy` of what it writes, `$User.id` in rules.
    pub principal_id: uuid::Uuid,
    /// The live metadata, shared and never copied per request.
    pub snapshot: &'a Snapshot,
    /// The statement plans built so far (the application's).
    pub plans: &'a PlanCache,
}

/// Which object's records an operation addresses, as the request names it.
#[derive(Debug, Clone, Copy)]
pub struct ObjectRef<'a> {
    /// The module key.
    pub module: &'a str,
    /// The object key.
    pub object: &'a str,
}

/// A record as JSON text, ready to send, and its version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The record: `{"id": ..., <fields>, "createdAt": ..., "updatedAt": ...}`.
    pub json: String,
    /// The version: the record's `updatedAt` text (the `ETag` without its quotes).
    pub version: String,
}

/// The result of an upsert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upserted {
    /// The record as stored.
    pub record: Record,
    /// Whether the record was created (rather than found and updated).
    pub created: bool,
}

/// What an operation did: its result, or every problem that stopped it (nothing was written).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome<T> {
    /// The operation succeeded.
    Done(T),
    /// The request has problems; nothing was written.
    Rejected(Vec<Problem>),
}

/// One problem of a request, as the error envelope reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// What kind of problem.
    pub code: ProblemCode,
    /// English text for people.
    pub message: String,
    /// What the problem concerns.
    pub target: Target,
    /// The failing rule's key, for [`ProblemCode::RuleFailed`].
    pub rule: Option<String>,
}

/// What a problem concerns (the envelope's `scope` and `target`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A field, by key.
    Field(String),
    /// A record, by id; `None` for a record not created yet.
    Record(Option<String>),
    /// The request as a whole.
    Request,
}

/// The kinds of problem; the server maps each to its code and status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProblemCode {
    /// A module or object key in the path breaks the key grammar.
    InvalidKey,
    /// No module has this key.
    ModuleNotFound,
    /// The module has no object of this key.
    ObjectNotFound,
    /// The object has no field of this key (upsert).
    FieldNotFound,
    /// An upsert names a field without a unique constraint.
    NotUniqueField,
    /// The object is abstract and takes no records.
    AbstractObject,
    /// A record id in the path is not a uuid.
    InvalidId,
    /// No record with this id that the caller may see (or change).
    RecordNotFound,
    /// `If-Match` names another version of the record.
    PreconditionFailed,
    /// The body names a property that is not a field of the object.
    UnknownField,
    /// The body writes a computed or system field.
    ReadOnlyField,
    /// A value does not fit its field's type (or cannot be stored).
    InvalidValue,
    /// A required field has no value.
    Required,
    /// A lookup names a record that does not exist, is not visible, or is of another object.
    InvalidReference,
    /// Another record has the value of a unique field.
    UniqueViolation,
    /// A rule of the object does not hold.
    RuleFailed,
    /// The record is still referenced by other records' lookups.
    InUse,
    /// `Idempotency-Key` is not a key (see [`IdempotencyKey::parse`]).
    InvalidIdempotencyKey,
    /// `Idempotency-Key` was used by an earlier create of the principal with another request
    /// (another object or other values).
    IdempotencyKeyReused,
}

/// What a create made: the record, and whether it was made by an earlier request with the same
/// idempotency key (this one then made nothing).
#[derive(Debug, Clone)]
pub struct Created {
    /// The record as stored (when replayed: as it is now).
    pub record: Record,
    /// Whether an earlier create with the same idempotency key made it.
    pub replayed: bool,
}

/// Reads one record by id. An object's records include those of its subtypes.
pub async fn read(caller: Caller<'_>, object: ObjectRef<'_>, id: &str) -> Result<Outcome<Record>> {
    let plan = match resolve(caller.plans, caller.snapshot, object)? {
        Ok(plan) => plan,
        Err(problem) => return Ok(rejected(problem)),
    };
    let id = match parse_id(id) {
        Ok(id) => id,
        Err(problem) => return Ok(rejected(problem)),
    };
    let steps = [(&plan.read, vec![Some(id.clone())])];
    let ran = run(caller, Access::Read, &steps).await?;
    let rows = match ran {
        Ran::Rows(rows) => rows,
        Ran::Failed { step, error } => {
            return statement_failure(&plan, Op::Read, step, error, Some(&id))
                .map(Outcome::Rejected)
        }
    };
    match rows.first().and_then(|rows| rows.first()) {
        Some(row) => Ok(Outcome::Done(record(row)?)),
        None => Ok(rejected(not_found(&id))),
    }
}

/// Creates a record from a body of field values. With an idempotency key, a create the
/// principal already made with the same key and request is answered with that record instead
/// (see [`idempotency`]).
pub async fn create(
    caller: Caller<'_>,
    object: ObjectRef<'_>,
    body: &Body,
    key: Option<&IdempotencyKey>,
) -> Result<Outcome<Created>> {
    let plan = match resolve(caller.plans, caller.snapshot, object)? {
        Ok(plan) => plan,
        Err(problem) => return Ok(rejected(problem)),
    };
    let Some(writes) = &plan.writes else {
        return Ok(rejected(abstract_object(&plan)));
    };
    let fingerprint = key.map(|_| idempotency::fingerprint(&plan.name.to_string(), body));
    // A key taken by a create that has expired since it was looked for is tried once more.
    for _ in 0..2 {
        match create_once(caller, &plan, writes, body, key.zip(fingerprint.as_deref())).await? {
            Attempt::Made(outcome) => return Ok(outcome),
            Attempt::KeyTaken => {}
        }
        let (Some(key), Some(fingerprint)) = (key, &fingerprint) else {
            break;
        };
        let Some(remembered) =
            idempotency::remembered(caller.pool, caller.principal_id, key).await?
        else {
            continue;
        };
        if remembered.fingerprint != *fingerprint {
            return Ok(rejected(request_problem(
                ProblemCode::IdempotencyKeyReused,
                "This `Idempotency-Key` was used with another request (another object or other values); use a new key for a new create.".to_owned(),
            )));
        }
        let record = read(caller, object, &remembered.record_id.to_string()).await?;
        return Ok(match record {
            Outcome::Done(record) => Outcome::Done(Created {
                record,
                replayed: true,
            }),
            Outcome::Rejected(problems) => Outcome::Rejected(problems),
        });
    }
    Err(unexpected(
        &plan,
        "the idempotency key was taken, then not found, twice",
    ))
}

/// What one attempt of a create came to.
enum Attempt {
    /// Made here, or refused.
    Made(Outcome<Created>),
    /// The idempotency key is taken by an earlier create.
    KeyTaken,
}

/// Creates the record, and stores `key` (with the request's fingerprint) in the same
/// transaction if the record was made.
async fn create_once(
    caller: Caller<'_>,
    plan: &ObjectPlan,
    writes: &plan::Writes,
    body: &Body,
    key: Option<(&IdempotencyKey, &str)>,
) -> Result<Attempt> {
    let input = input::read(plan, body, Mode::Create);
    let id = uuid::Uuid::new_v4().hyphenated().to_string();
    let write = &writes.create;
    let mut own = write_params(&input, &id, None);
    // With a key, the statement that stores it too: its parameters are the create's own, its
    // literals, then the key and the fingerprint.
    let statement = match (key, &write.keyed) {
        (Some((key, fingerprint)), Some(keyed)) => {
            let literals = write.statement.params.get(write.statement.own..);
            own.extend(literals.unwrap_or_default().iter().cloned());
            own.push(Some(key.as_str().to_owned()));
            own.push(Some(fingerprint.to_owned()));
            keyed
        }
        _ => &write.statement,
    };
    let mut steps = vec![(statement, own)];
    // A create whose statement returns the record it stored is that one statement alone.
    if input.problems.is_empty() && !write.returns_record {
        steps.push(read_step(&writes.read_own, &id));
    }
    let ran = run(caller, Access::Write, &steps).await?;
    let rows = match ran {
        Ran::Rows(rows) => rows,
        Ran::Failed { error, .. } if key.is_some() && idempotency::is_key_taken(&error) => {
            return Ok(Attempt::KeyTaken)
        }
        Ran::Failed { step, error } => {
            return statement_failure(plan, Op::Write, step, error, None)
                .map(|problems| Attempt::Made(Outcome::Rejected(problems)))
        }
    };
    let Some(result) = rows.first().and_then(|rows| rows.first()) else {
        return Err(unexpected(plan, "the create statement returned no row"));
    };
    let mut problems = input.problems.clone();
    problems.extend(failed_checks(
        plan,
        &write.checks,
        result,
        &input,
        None,
        false,
    )?);
    if !problems.is_empty() {
        return Ok(Attempt::Made(Outcome::Rejected(problems)));
    }
    let made = |record| {
        Attempt::Made(Outcome::Done(Created {
            record,
            replayed: false,
        }))
    };
    if !write.returns_record {
        return Ok(match written_record(plan, &rows, &id)? {
            Outcome::Done(record) => made(record),
            Outcome::Rejected(problems) => Attempt::Made(Outcome::Rejected(problems)),
        });
    }
    let json: Option<String> = result.try_get("record")?;
    let version: Option<String> = result.try_get("version")?;
    match json.zip(version) {
        Some((json, version)) => Ok(made(Record { json, version })),
        None => Err(unexpected(
            plan,
            &format!("the create of record {id} returned no record"),
        )),
    }
}

/// Changes the fields a body gives of the record with this id. `if_match` holds the versions
/// the caller accepts (from `If-Match`); `None` accepts any.
pub async fn update(
    caller: Caller<'_>,
    object: ObjectRef<'_>,
    id: &str,
    body: &Body,
    if_match: Option<&[String]>,
) -> Result<Outcome<Record>> {
    let plan = match resolve(caller.plans, caller.snapshot, object)? {
        Ok(plan) => plan,
        Err(problem) => return Ok(rejected(problem)),
    };
    let id = match parse_id(id) {
        Ok(id) => id,
        Err(problem) => return Ok(rejected(problem)),
    };
    let Some(writes) = &plan.writes else {
        return Ok(rejected(abstract_object(&plan)));
    };
    let input = input::read(&plan, body, Mode::Change);
    let write = &writes.update;
    let own = write_params(&input, &id, if_match);
    let mut steps = vec![(&write.statement, own)];
    if input.problems.is_empty() {
        steps.push(read_step(&writes.read_own, &id));
    }
    let ran = run(caller, Access::Write, &steps).await?;
    let rows = match ran {
        Ran::Rows(rows) => rows,
        Ran::Failed { step, error } => {
            return statement_failure(&plan, Op::Write, step, error, Some(&id))
                .map(Outcome::Rejected)
        }
    };
    let Some(result) = rows.first().and_then(|rows| rows.first()) else {
        return Ok(rejected(not_found(&id)));
    };
    let unchanged = !result.try_get::<_, bool>("changed")?;
    let mut problems = input.problems.clone();
    problems.extend(failed_checks(
        &plan,
        &write.checks,
        result,
        &input,
        Some(&id),
        unchanged,
    )?);
    if let Some(problems) = precondition_only(&problems) {
        return Ok(Outcome::Rejected(problems));
    }
    if !problems.is_empty() {
        return Ok(Outcome::Rejected(problems));
    }
    written_record(&plan, &rows, &id)
}

/// Creates or updates the record whose unique field `field` has the value the body gives:
/// the record found is updated with the fields the body gives (like [`update`]); otherwise a
/// record is created from the body (like [`create`]).
pub async fn upsert(
    caller: Caller<'_>,
    object: ObjectRef<'_>,
    field: &str,
    body: &Body,
    if_match: Option<&[String]>,
) -> Result<Outcome<Upserted>> {
    let plan = match resolve(caller.plans, caller.snapshot, object)? {
        Ok(plan) => plan,
        Err(problem) => return Ok(rejected(problem)),
    };
    let Some(writes) = &plan.writes else {
        return Ok(rejected(abstract_object(&plan)));
    };
    if let Err(error) = check_key(KeyKind::Field, field) {
        return Ok(rejected(request_problem(
            ProblemCode::InvalidKey,
            format!("{error}."),
        )));
    }
    let Some(upsert) = writes.upserts.get(field) else {
        let known = plan.keys.iter().any(|(key, _)| key == field);
        let problem = if known {
            Problem {
                code: ProblemCode::NotUniqueField,
                message: format!(
                    "`{field}` has no unique constraint, so it cannot identify a record of {}.",
                    plan.name
                ),
                target: Target::Field(field.to_owned()),
                rule: None,
            }
        } else {
            Problem {
                code: ProblemCode::FieldNotFound,
                message: format!("{} has no field `{field}`.", plan.name),
                target: Target::Field(field.to_owned()),
                rule: None,
            }
        };
        return Ok(rejected(problem));
    };
    let mut input = input::read(&plan, body, Mode::Upsert);
    // A default does not identify a record: the body itself must give the key.
    let key_value = input.values[upsert.column]
        .clone()
        .filter(|_| input.given[upsert.column]);
    if key_value.is_none() && !input.flawed.iter().any(|key| key == field) {
        input.flawed.push(field.to_owned());
        input.problems.push(Problem {
            code: ProblemCode::Required,
            message: format!("The body must give `{field}`, the value that identifies the record."),
            target: Target::Field(field.to_owned()),
            rule: None,
        });
    }
    for _ in 0..UPSERT_ATTEMPTS {
        let id = uuid::Uuid::new_v4().hyphenated().to_string();
        let own = write_params(&input, &id, if_match);
        let mut steps = vec![(&upsert.write.statement, own)];
        if input.problems.is_empty() {
            steps.push((&upsert.read, vec![key_value.clone()]));
        }
        let ran = run(caller, Access::Write, &steps).await?;
        let rows = match ran {
            Ran::Rows(rows) => rows,
            Ran::Failed { step, error } => {
                return statement_failure(&plan, Op::Write, step, error, None)
                    .map(Outcome::Rejected)
            }
        };
        let Some(result) = rows.first().and_then(|rows| rows.first()) else {
            return Err(unexpected(&plan, "the upsert statement returned no row"));
        };
        let existing_id: Option<String> = result.try_get("old_id")?;
        let existed = existing_id.is_some();
        let unchanged = existed && !result.try_get::<_, bool>("changed")?;
        let mut problems = input.problems.clone();
        problems.extend(failed_checks(
            &plan,
            &upsert.write.checks,
            result,
            &input,
            existing_id.as_deref(),
            unchanged,
        )?);
        if let Some(problems) = precondition_only(&problems) {
            return Ok(Outcome::Rejected(problems));
        }
        if !problems.is_empty() {
            return Ok(Outcome::Rejected(problems));
        }
        let inserted: bool = result.try_get("inserted")?;
        if !inserted && !existed {
            // Another request inserted the same key between our look-up and our insert; the
            // next attempt finds its record and updates it.
            continue;
        }
        let Some(row) = rows.get(1).and_then(|rows| rows.first()) else {
            return Err(unexpected(&plan, "the upserted record cannot be read back"));
        };
        return Ok(Outcome::Done(Upserted {
            record: record(row)?,
            created: inserted,
        }));
    }
    Err(unexpected(
        &plan,
        "the upsert kept losing races for its key",
    ))
}

/// Deletes the record with this id.
pub async fn delete(
    caller: Caller<'_>,
    object: ObjectRef<'_>,
    id: &str,
    if_match: Option<&[String]>,
) -> Result<Outcome<()>> {
    let plan = match resolve(caller.plans, caller.snapshot, object)? {
        Ok(plan) => plan,
        Err(problem) => return Ok(rejected(problem)),
    };
    let id = match parse_id(id) {
        Ok(id) => id,
        Err(problem) => return Ok(rejected(problem)),
    };
    let Some(writes) = &plan.writes else {
        return Ok(rejected(abstract_object(&plan)));
    };
    let params = vec![Some(id.clone()), if_match.map(text_array)];
    let steps = [(&writes.delete, params)];
    let ran = run(caller, Access::Write, &steps).await?;
    let rows = match ran {
        Ran::Rows(rows) => rows,
        Ran::Failed { step, error } => {
            return statement_failure(&plan, Op::Delete, step, error, Some(&id))
                .map(Outcome::Rejected)
        }
    };
    let Some(row) = rows.first().and_then(|rows| rows.first()) else {
        return Err(unexpected(&plan, "the delete statement returned no row"));
    };
    let deleted: bool = row.try_get(0)?;
    let version: Option<String> = row.try_get(1)?;
    if deleted {
        return Ok(Outcome::Done(()));
    }
    match (version, if_match) {
        (Some(version), Some(tags)) if !tags.contains(&version) => {
            Ok(rejected(precondition_failed(&id)))
        }
        _ => Ok(rejected(not_found(&id))),
    }
}

/// The plan of the object a request names, or the problem with the names.
fn resolve(
    plans: &PlanCache,
    snapshot: &Snapshot,
    object: ObjectRef<'_>,
) -> Result<std::result::Result<Arc<ObjectPlan>, Problem>> {
    for (kind, key) in [
        (KeyKind::Module, object.module),
        (KeyKind::Object, object.object),
    ] {
        if let Err(error) = check_key(kind, key) {
            return Ok(Err(request_problem(
                ProblemCode::InvalidKey,
                format!("{error}."),
            )));
        }
    }
    let Some(module) = snapshot.model.module(object.module) else {
        return Ok(Err(request_problem(
            ProblemCode::ModuleNotFound,
            format!("There is no module `{}`.", object.module),
        )));
    };
    if !module.objects.contains_key(object.object) {
        return Ok(Err(request_problem(
            ProblemCode::ObjectNotFound,
            format!("There is no object `{}.{}`.", object.module, object.object),
        )));
    }
    let name = QualifiedName::new(object.module, object.object);
    plans.plan(snapshot, &name).map(Ok)
}

/// The caller's values of a write statement, in the order of `plan`'s parameters.
fn write_params(input: &Input, id: &str, if_match: Option<&[String]>) -> Vec<Option<String>> {
    let mut own = vec![
        Some(id.to_owned()),
        Some(input.given_mask()),
        Some(input.problems.is_empty().to_string()),
        if_match.map(text_array),
        Some(input.read_only_values()),
        Some(input.read_only_mask()),
    ];
    own.extend(input.values.iter().cloned());
    own
}

fn read_step<'a>(statement: &'a Statement, id: &str) -> (&'a Statement, Vec<Option<String>>) {
    (statement, vec![Some(id.to_owned())])
}

/// Whether an operation only reads (read-only transaction, read timeout) or writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    Read,
    Write,
}

/// Runs statements with the caller's values (the statements' own literals follow them, borrowed
/// from the plan rather than copied) as the caller, in one transaction and one round trip.
async fn run(
    caller: Caller<'_>,
    access: Access,
    steps: &[(&Statement, Vec<Option<String>>)],
) -> Result<Ran> {
    let steps: Vec<Step<'_>> = steps
        .iter()
        .map(|(statement, own)| Step {
            sql: &statement.sql,
            params: own,
            fixed: statement.params.get(statement.own..).unwrap_or_default(),
        })
        .collect();
    let who = match access {
        Access::Read => run_as::Caller::reader(caller.role),
        Access::Write => run_as::Caller::writer(caller.role),
    }
    .for_principal(caller.principal_id);
    match (access, steps.as_slice()) {
        // A read by id: it may share a connection with the caller's other reads in flight.
        (Access::Read, [step]) => run_as::read_record(caller.pool, &who, step).await,
        _ => run_as::run_as(caller.pool, &who, &steps).await,
    }
}

/// The record a successful write's read step returned.
fn written_record(plan: &ObjectPlan, rows: &[Vec<Row>], id: &str) -> Result<Outcome<Record>> {
    match rows.get(1).and_then(|rows| rows.first()) {
        Some(row) => Ok(Outcome::Done(record(row)?)),
        None => Err(unexpected(
            plan,
            &format!("record {id} cannot be read back after the write"),
        )),
    }
}

fn record(row: &Row) -> Result<Record> {
    Ok(Record {
        json: row.try_get(0)?,
        version: row.try_get(1)?,
    })
}

/// The problems of the checks that failed, skipping those about fields that already have a
/// problem of their own (a required field whose value was invalid is not also "missing").
///
/// An update that would change no stored value (`unchanged`) is harmless: it writes nothing,
/// so only its version check and the read-only values it repeats can fail; the record's other
/// checks are about data already stored.
fn failed_checks(
    plan: &ObjectPlan,
    checks: &[Check],
    row: &Row,
    input: &Input,
    record: Option<&str>,
    unchanged: bool,
) -> Result<Vec<Problem>> {
    let flawed = |key: &str| input.flawed.iter().any(|flawed| flawed == key);
    let mut problems = Vec::new();
    for (index, check) in checks.iter().enumerate() {
        let holds: bool = row.try_get(index)?;
        let about_the_body = matches!(check, Check::Precondition | Check::ReadOnly(_));
        if holds || (unchanged && !about_the_body) {
            continue;
        }
        let column = |i: usize| plan.columns[i].key.clone();
        let problem = match check {
            Check::Precondition => precondition_failed(record.unwrap_or_default()),
            Check::Required(i) if !flawed(&column(*i)) => field_problem(
                ProblemCode::Required,
                &column(*i),
                format!("`{}` is required.", column(*i)),
            ),
            Check::Reference(i) => field_problem(
                ProblemCode::InvalidReference,
                &column(*i),
                format!(
                    "`{}` does not name a record of the object it looks up that you can see.",
                    column(*i)
                ),
            ),
            Check::Unique(i) => field_problem(
                ProblemCode::UniqueViolation,
                &column(*i),
                format!(
                    "Another record of {} already has this `{}`.",
                    plan.name,
                    column(*i)
                ),
            ),
            Check::ReadOnly(i) => field_problem(
                ProblemCode::ReadOnlyField,
                &plan.read_only[*i],
                format!(
                    "`{}` is computed by the service and cannot be changed.",
                    plan.read_only[*i]
                ),
            ),
            Check::Rule {
                key,
                field,
                message,
            } => {
                if field.as_deref().is_some_and(flawed) {
                    continue;
                }
                Problem {
                    code: ProblemCode::RuleFailed,
                    message: message.clone(),
                    target: match field {
                        Some(field) => Target::Field(field.clone()),
                        None => Target::Record(record.map(str::to_owned)),
                    },
                    rule: Some(key.clone()),
                }
            }
            Check::Required(_) => continue,
        };
        problems.push(problem);
    }
    Ok(problems)
}

/// When the version check failed, that alone is the answer (412): the caller must re-read the
/// record before anything else about its body matters.
fn precondition_only(problems: &[Problem]) -> Option<Vec<Problem>> {
    problems
        .iter()
        .find(|problem| problem.code == ProblemCode::PreconditionFailed)
        .map(|problem| vec![problem.clone()])
}

/// A failed statement: constraint errors of the write and values that cannot be stored or
/// computed (an overflow in a formula) become problems; anything else (missing privileges, an
/// unreachable database, a timeout) stays an error.
fn statement_failure(
    plan: &ObjectPlan,
    op: Op,
    step: Option<usize>,
    error: tokio_postgres::Error,
    record: Option<&str>,
) -> Result<Vec<Problem>> {
    let (Some(db), Some(step)) = (error.as_db_error(), step) else {
        return Err(error.into());
    };
    let in_write = step == 0 && op != Op::Read;
    let constraint_column = || {
        let table = &plan.name.object;
        db.constraint().and_then(|name| {
            plan.columns.iter().find(|column| {
                hf_ddl::unique_name(table, &[&column.key]) == name
                    || hf_ddl::foreign_key_name(table, &[&column.key]) == name
            })
        })
    };
    let problem = match *db.code() {
        SqlState::UNIQUE_VIOLATION if in_write => {
            let key = constraint_column().map(|column| column.key.clone());
            let message = match &key {
                Some(key) => format!("Another record of {} already has this `{key}`.", plan.name),
                None => format!(
                    "Another record of {} already has one of these values.",
                    plan.name
                ),
            };
            Problem {
                code: ProblemCode::UniqueViolation,
                message,
                target: key.map_or(Target::Record(record.map(str::to_owned)), Target::Field),
                rule: None,
            }
        }
        SqlState::FOREIGN_KEY_VIOLATION if in_write && op == Op::Delete => Problem {
            code: ProblemCode::InUse,
            message: "Other records still look this record up; change or delete them first."
                .to_owned(),
            target: Target::Record(record.map(str::to_owned)),
            rule: None,
        },
        SqlState::FOREIGN_KEY_VIOLATION if in_write => {
            let key = constraint_column().map(|column| column.key.clone());
            Problem {
                code: ProblemCode::InvalidReference,
                message: "A lookup names a record that no longer exists.".to_owned(),
                target: key.map_or(Target::Record(record.map(str::to_owned)), Target::Field),
                rule: None,
            }
        }
        SqlState::NOT_NULL_VIOLATION if in_write => {
            let key = db.column().unwrap_or_default().to_owned();
            field_problem(ProblemCode::Required, &key, format!("`{key}` is required."))
        }
        _ if db.code().code().starts_with("22") || *db.code() == SqlState::CHECK_VIOLATION => {
            Problem {
                code: ProblemCode::InvalidValue,
                message: format!(
                    "A value of the record cannot be stored or computed: {}.",
                    db.message()
                ),
                target: Target::Record(record.map(str::to_owned)),
                rule: None,
            }
        }
        _ => return Err(error.into()),
    };
    Ok(vec![problem])
}

/// Which operation failed, where that changes the meaning of an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// A read: only a value that cannot be computed is the record's problem.
    Read,
    /// Create, update or upsert.
    Write,
    /// Delete.
    Delete,
}

/// A PostgreSQL `text[]` literal holding these strings.
fn text_array(items: &[String]) -> String {
    let quoted: Vec<String> = items
        .iter()
        .map(|item| {
            let escaped = item.replace('\\', "\\\\").replace('"', "\\\"");
            format!("\"{escaped}\"")
        })
        .collect();
    format!("{{{}}}", quoted.join(","))
}

fn parse_id(text: &str) -> std::result::Result<String, Problem> {
    hf_model::ScalarType::Uuid
        .parse_text(text)
        .map_err(|expected| Problem {
            code: ProblemCode::InvalidId,
            message: format!("The record id in the path is not valid: {expected}."),
            target: Target::Record(Some(text.chars().take(100).collect())),
            rule: None,
        })
}

fn rejected<T>(problem: Problem) -> Outcome<T> {
    Outcome::Rejected(vec![problem])
}

fn request_problem(code: ProblemCode, message: String) -> Problem {
    Problem {
        code,
        message,
        target: Target::Request,
        rule: None,
    }
}

fn field_problem(code: ProblemCode, key: &str, message: String) -> Problem {
    Problem {
        code,
        message,
        target: Target::Field(key.to_owned()),
        rule: None,
    }
}

fn not_found(id: &str) -> Problem {
    Problem {
        code: ProblemCode::RecordNotFound,
        message: format!("There is no record `{id}` here that you may see or change."),
        target: Target::Record(Some(id.to_owned())),
        rule: None,
    }
}

fn precondition_failed(id: &str) -> Problem {
    Problem {
        code: ProblemCode::PreconditionFailed,
        message: "The record has changed since the version named in If-Match; read it again."
            .to_owned(),
        target: Target::Record(Some(id.to_owned())),
        rule: None,
    }
}

fn abstract_object(plan: &ObjectPlan) -> Problem {
    request_problem(
        ProblemCode::AbstractObject,
        format!(
            "{} is abstract and takes no records; write to one of its subtypes.",
            plan.name
        ),
    )
}

fn unexpected(plan: &ObjectPlan, what: &str) -> crate::Error {
    crate::Error::Internal(format!("records of {}: {what}", plan.name))
}
