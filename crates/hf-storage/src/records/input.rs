//! Reading a record body against an object's plan: which columns it gives and their values,
//! which read-only values it repeats, and every problem found without the database.

use super::body::Body;
use super::plan::{KeyRole, ObjectPlan};
use super::{Problem, ProblemCode, Target};

/// The longest value a unique or indexed field may hold. Its values are kept in a btree index,
/// and PostgreSQL refuses an index entry over 2 704 bytes (a third of a page) with an error
/// about the index; checked here, such a value is the field's own problem, with the limit,
/// rather than a failure of the write. The margin leaves room for the entry's header and for values
/// whose stored form is longer than their text.
pub(crate) const MAX_INDEXED_VALUE_BYTES: usize = 2_000;

/// What a write binds, and the problems found before running it.
#[derive(Debug)]
pub(crate) struct Input {
    /// One value per column (`None` is NULL, or not given).
    pub(crate) values: Vec<Option<String>>,
    /// Whether the body gives each column (with a valid value).
    pub(crate) given: Vec<bool>,
    /// The raw JSON of each read-only field the body repeats.
    pub(crate) read_only: Vec<Option<String>>,
    /// Fields with a problem of their own; checks on them are not reported again.
    pub(crate) flawed: Vec<String>,
    /// The problems, in body order.
    pub(crate) problems: Vec<Problem>,
}

/// How a body is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// A new record: read-only fields may not appear at all.
    Create,
    /// A change of an existing record: read-only fields may repeat their current values, which
    /// the statement checks.
    Change,
    /// An upsert, which changes the record it finds or else creates one: read like
    /// [`Mode::Change`], and a field left out carries its default in `values` (not in
    /// `given`), which the statement stores only when it creates the record.
    Upsert,
}

/// Reads `body` for a write on `plan`.
pub(crate) fn read(plan: &ObjectPlan, body: &Body, mode: Mode) -> Input {
    let mut input = Input {
        values: vec![None; plan.columns.len()],
        given: vec![false; plan.columns.len()],
        read_only: vec![None; plan.read_only.len()],
        flawed: Vec::new(),
        problems: Vec::new(),
    };
    for (key, raw) in body.entries() {
        let role = plan
            .keys
            .iter()
            .find(|(name, _)| name == key)
            .map(|(_, role)| *role);
        match role {
            None => input.reject(
                key,
                ProblemCode::UnknownField,
                format!("`{}` is not a field of {}.", shorten(key), plan.name),
            ),
            Some(KeyRole::ReadOnly(index)) => match mode {
                Mode::Create => input.reject(
                    key,
                    ProblemCode::ReadOnlyField,
                    format!("`{key}` is computed by the service and cannot be written."),
                ),
                Mode::Change | Mode::Upsert => {
                    input.read_only[index] = Some(raw.get().to_owned());
                }
            },
            Some(KeyRole::Column(index)) => {
                let column = &plan.columns[index];
                match column.ty.parse_json_in(raw.get(), &column.values) {
                    Ok(Some(value)) if column.in_index && value.len() > MAX_INDEXED_VALUE_BYTES => {
                        input.reject(
                            key,
                            ProblemCode::InvalidValue,
                            format!(
                                "`{key}` is kept in an index (it is unique or indexed), so its value may be at most {MAX_INDEXED_VALUE_BYTES} bytes (this one has {}).",
                                value.len()
                            ),
                        );
                    }
                    Ok(value) => {
                        input.values[index] = value;
                        input.given[index] = true;
                    }
                    Err(expected) => {
                        let what = if column.lookup {
                            "record id"
                        } else {
                            column.ty.as_str()
                        };
                        input.reject(
                            key,
                            ProblemCode::InvalidValue,
                            format!("`{key}` is not a valid {what}: {expected}."),
                        );
                    }
                }
            }
        }
    }
    // A field's `defaultValue` stands for the field when the body leaves it out of a new
    // record. A create gives it; an upsert binds it without marking it given, so its statement
    // stores it only when it creates the record and keeps the stored value when it finds one.
    if mode != Mode::Change {
        for (index, column) in plan.columns.iter().enumerate() {
            if let (false, Some(default)) = (input.given[index], &column.default) {
                input.values[index] = Some(default.clone());
                input.given[index] = mode == Mode::Create;
            }
        }
    }
    input
}

impl Input {
    fn reject(&mut self, key: &str, code: ProblemCode, message: String) {
        self.flawed.push(key.to_owned());
        self.problems.push(Problem {
            code,
            message,
            target: Target::Field(shorten(key)),
            rule: None,
        });
    }

    /// `{t,f,...}`: which columns the body gives, as a PostgreSQL `boolean[]` literal.
    pub(crate) fn given_mask(&self) -> String {
        mask(self.given.iter().copied())
    }

    /// Which read-only fields the body repeats.
    pub(crate) fn read_only_mask(&self) -> String {
        mask(self.read_only.iter().map(Option::is_some))
    }

    /// The repeated read-only values as one JSON array, `null` where not given (the mask tells
    /// the two nulls apart).
    pub(crate) fn read_only_values(&self) -> String {
        let items: Vec<&str> = self
            .read_only
            .iter()
            .map(|value| value.as_deref().unwrap_or("null"))
            .collect();
        format!("[{}]", items.join(","))
    }
}

fn mask(flags: impl Iterator<Item = bool>) -> String {
    let items: Vec<&str> = flags.map(|flag| if flag { "t" } else { "f" }).collect();
    format!("{{{}}}", items.join(","))
}

/// Keys are echoed in messages and targets; a hostile key of a megabyte is cut.
fn shorten(key: &str) -> String {
    match key.char_indices().nth(100) {
        Some((at, _)) => format!("{}…", &key[..at]),
        None => key.to_owned(),
    }
}
