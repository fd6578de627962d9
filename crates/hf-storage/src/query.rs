//! Running a compiled HOQS query as the caller.
//!
//! The statement (from `hf_hoqs::compile_query`) returns one JSON object per record as text, in
//! order, so the rows are handed on as they are: nothing is decoded or re-encoded here.

use hf_hoqs::CompiledQuery;

use crate::run_as::{run_as, Caller, Step};
use crate::{Pool, Result};

/// Runs `query` as `caller` (a reader: read-only, with the read timeout, and the principal's
/// id set as `hf.caller_id` as record reads set it, so a connection serving both keeps its
/// session); returns each record's JSON object as text, in the query's order.
///
/// A missing privilege (or a row-level security refusal) is an error of kind
/// [`crate::ErrorKind::Forbidden`], a query over its time [`crate::ErrorKind::Timeout`], and a
/// value PostgreSQL refuses while computing (an overflow, a bad date) [`crate::ErrorKind::InvalidValue`].
pub async fn query_records(
    pool: &Pool,
    caller: &Caller<'_>,
    query: &CompiledQuery,
) -> Result<Vec<String>> {
    let steps = [Step {
        sql: &query.sql,
        params: &query.params,
        fixed: &[],
    }];
    let rows = run_as(pool, caller, &steps).await?.into_rows()?;
    let mut records = Vec::new();
    for row in rows.into_iter().flatten() {
        records.push(row.try_get::<_, String>(0)?);
    }
    Ok(records)
}

/// One page of a paged query (`CompiledQuery::page_size` is set): the records, and the sort
/// values of the last one when another page follows (the statement returns one record more
/// than the page size to tell).
pub async fn query_page(
    pool: &Pool,
    caller: &Caller<'_>,
    query: &CompiledQuery,
) -> Result<(Vec<String>, Option<String>)> {
    let steps = [Step {
        sql: &query.sql,
        params: &query.params,
        fixed: &[],
    }];
    let rows = run_as(pool, caller, &steps).await?.into_rows()?;
    let rows: Vec<_> = rows.into_iter().flatten().collect();
    let size = usize::try_from(query.page_size.unwrap_or(u64::MAX)).unwrap_or(usize::MAX);
    let mut records = Vec::with_capacity(rows.len().min(size));
    let mut last_keys = None;
    for row in rows.iter().take(size) {
        records.push(row.try_get::<_, String>(0)?);
        last_keys = Some(row.try_get::<_, String>(1)?);
    }
    let more = rows.len() > size;
    Ok((records, last_keys.filter(|_| more)))
}

/// PostgreSQL's plan of a compiled query (`EXPLAIN (FORMAT JSON)`, which runs nothing), as the
/// caller would run it.
pub async fn explain(
    pool: &Pool,
    caller: &Caller<'_>,
    query: &CompiledQuery,
) -> Result<serde_json::Value> {
    let sql = format!("EXPLAIN (FORMAT JSON) {}", query.sql);
    let steps = [Step {
        sql: &sql,
        params: &query.params,
        fixed: &[],
    }];
    let rows = run_as(pool, caller, &steps).await?.into_rows()?;
    let plan = rows
        .into_iter()
        .flatten()
        .next()
        .map(|row| row.try_get::<_, serde_json::Value>(0))
        .transpose()?;
    Ok(plan.unwrap_or(serde_json::Value::Null))
}

/// Joins record texts into the body `{"records":[...]}` of `POST /data/query`. The texts are
/// JSON objects built by PostgreSQL, so the result is valid JSON without a parse.
pub fn records_body(records: &[String]) -> String {
    let length: usize = records.iter().map(|record| record.len() + 1).sum();
    let mut body = String::with_capacity(length + 16);
    body.push_str("{\"records\":[");
    for (index, record) in records.iter().enumerate() {
        if index > 0 {
            body.push(',');
        }
        body.push_str(record);
    }
    body.push_str("]}");
    body
}

#[cfg(test)]
mod tests {
    use super::records_body;

    #[test]
    fn joins_records_into_the_body() {
        assert_eq!(records_body(&[]), "{\"records\":[]}");
        let body = records_body(&["{\"a\":1}".to_owned(), "{\"a\":\"x\"}".to_owned()]);
        let parsed: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            parsed,
            serde_json::json!({"records": [{"a": 1}, {"a": "x"}]})
        );
    }
}
