//! Running a HOQS query as a principal: `POST /data/query` and `hf query` are this use case.
//!
//! The query is compiled against the live branch's model (`hf-hoqs`), with the caller for
//! `$User`, the request's time zone and, for keyset paging, the cursor it was given; the one
//! statement runs as the principal's role (`hf-storage`), with its id as `hf.caller_id`, so its
//! grants and row-level security decide what it sees. Records stay the JSON text PostgreSQL
//! built. Cursors are signed with a key every instance on the database shares
//! ([`crate::secrets`]): a cursor one instance gave works on another, also across a rotation of
//! the key during its grace period, and one edited, cut, forged, from another query or signed
//! with a retired key is [`Error::InvalidCursor`].

use hf_hoqs::RequestParams;
use hf_storage::auth::Principal;

use crate::{App, Error, Result};

/// The longest query text accepted, in bytes (8 KiB: far above any hand-written query, small
/// enough that parsing and checking stay cheap).
pub const MAX_QUERY_BYTES: usize = 8 * 1024;

/// One query as asked.
#[derive(Debug, Clone, Copy)]
pub struct QueryInput<'a> {
    /// The HOQS text.
    pub query: &'a str,
    /// The values of its `:name` parameters.
    pub params: &'a RequestParams,
    /// An IANA time zone name; UTC when absent.
    pub time_zone: Option<&'a str>,
    /// Keyset paging: `None` for all records, `Some(None)` for the first page, `Some(cursor)`
    /// for the page after the one that gave `cursor`.
    pub cursor: Option<Option<&'a str>>,
    /// Answer the SQL and PostgreSQL's plan instead of records (administrators only).
    pub explain: bool,
}

/// What a query answered.
#[derive(Debug, Clone)]
pub enum QueryAnswer {
    /// The records, each a JSON object's text, and their keys in select-list order.
    Records {
        /// The keys of each record.
        keys: Vec<String>,
        /// The records.
        records: Vec<String>,
    },
    /// One page of records and the cursor of the next page (`None` on the last one).
    Page {
        /// The records.
        records: Vec<String>,
        /// The cursor of the next page.
        next_cursor: Option<String>,
    },
    /// The statement and PostgreSQL's plan of it (`EXPLAIN (FORMAT JSON)`).
    Explain {
        /// The SQL text.
        sql: String,
        /// The plan.
        plan: serde_json::Value,
    },
}

impl App {
    /// Runs `input` as `caller` against the live branch.
    pub async fn query(&self, caller: &Principal, input: QueryInput<'_>) -> Result<QueryAnswer> {
        if input.query.len() > MAX_QUERY_BYTES {
            return Err(Error::QueryTooLarge {
                bytes: input.query.len(),
                limit: MAX_QUERY_BYTES,
            });
        }
        let snapshot = self.snapshot(self.live_branch()).await?;
        if input.explain && !caller.is_admin {
            return Err(Error::ExplainForbidden);
        }
        let time_zone = time_zone(input.time_zone)?;
        // Cursors are signed with the instances' shared key, so a client can neither forge one
        // nor move one to another query.
        let unsigned = hf_hoqs::paging::Binding::new(input.query, input.params, time_zone);
        let mut binding = self.cursor_secrets().await?.sign(unsigned.clone());
        let after = match input.cursor {
            Some(Some(cursor)) => match binding.decode(cursor) {
                Some(values) => Some(values),
                None => {
                    // Another instance may have signed it with a secret made since this one
                    // last read them: read them again before refusing it.
                    binding = self.reload_cursor_secrets(true).await?.sign(unsigned);
                    Some(binding.decode(cursor).ok_or(Error::InvalidCursor)?)
                }
            },
            _ => None,
        };
        let page = input.cursor.map(|_| after.as_deref());
        let hoqs_caller = hf_hoqs::Caller {
            id: caller.id.to_string(),
            name: caller.name.clone(),
        };
        let options = hf_hoqs::QueryOptions {
            params: input.params,
            time_zone: Some(time_zone),
            caller: Some(&hoqs_caller),
            page,
        };
        let output = hf_hoqs::compile_query_with(&snapshot.model, input.query, options).map_err(
            |error| match error {
                hf_hoqs::Error::InvalidCursor => Error::InvalidCursor,
                error => Error::Internal(format!(
                    "the live metadata cannot be compiled to SQL: {error}"
                )),
            },
        )?;
        let Some(compiled) = output.query else {
            return Err(Error::Hoqs {
                text: input.query.to_owned(),
                diagnostics: output.diagnostics,
            });
        };
        // The principal's id rides along as record reads send it, so `hf.caller_id` reads it
        // and a connection serving both keeps its session settings.
        let run_as = hf_storage::run_as::Caller::reader(&caller.name).for_principal(caller.id);
        crate::shed::refuse_if_data_pool_backed_up(self.pool())?;
        if input.explain {
            let plan = hf_storage::query::explain(self.pool(), &run_as, &compiled)
                .await
                .map_err(evaluation)?;
            return Ok(QueryAnswer::Explain {
                sql: compiled.sql,
                plan,
            });
        }
        if compiled.page_size.is_some() {
            let (records, last) = hf_storage::query::query_page(self.pool(), &run_as, &compiled)
                .await
                .map_err(evaluation)?;
            return Ok(QueryAnswer::Page {
                records,
                next_cursor: last.map(|keys| binding.encode(&keys)),
            });
        }
        let records = hf_storage::query::query_records(self.pool(), &run_as, &compiled)
            .await
            .map_err(evaluation)?;
        Ok(QueryAnswer::Records {
            keys: compiled.keys,
            records,
        })
    }
}

/// The canonical name of the time zone (`UTC` when absent); a name the IANA time zone database
/// does not know is [`Error::InvalidTimeZone`].
fn time_zone(name: Option<&str>) -> Result<&'static str> {
    let Some(name) = name else {
        return Ok("UTC");
    };
    match name.parse::<chrono_tz::Tz>() {
        Ok(zone) => Ok(zone.name()),
        Err(_) => Err(Error::InvalidTimeZone {
            name: name.chars().take(64).collect(),
        }),
    }
}

/// A failure while running: a value PostgreSQL refuses while computing (an overflow, a date
/// out of range) is the query's fault ([`Error::Evaluation`]); the rest passes as it is.
fn evaluation(error: hf_storage::Error) -> Error {
    if error.kind() == hf_storage::ErrorKind::InvalidValue {
        let detail = match &error {
            hf_storage::Error::Db(db) => db
                .as_db_error()
                .map(|db| db.message().to_owned())
                .unwrap_or_default(),
            _ => String::new(),
        };
        return Error::Evaluation { detail };
    }
    error.into()
}
