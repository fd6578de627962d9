//! `hf query '<HOQS>'`: runs a HOQS query against the live metadata and prints the records as a
//! table (or as the JSON `POST /data/query` answers).
//!
//! Like the other tools it talks to the database and the metadata repository directly, with the
//! same flags and environment as `hf serve`. The query runs exactly as over HTTP, through the
//! same use case (`hf_app::query`): compiled against the live metadata with the principal as
//! `$User`, and run as the principal's role, so its grants and row-level security apply.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use hf_app::{App, QueryAnswer, QueryInput};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::DatabaseArgs;

/// The widest a table cell is printed, in characters; longer values end in `…`.
const MAX_CELL_CHARS: usize = 60;

/// `hf query '<HOQS>' [--as PRINCIPAL] [--param name=value]... [--json]`.
#[derive(Debug, Args)]
pub struct QueryArgs {
    /// The HOQS query, e.g. `SELECT name, amount FROM crm.opportunity ORDER BY amount DESC`.
    query: String,
    /// The principal whose database role runs the query (its grants and row-level security
    /// apply); default: the administrator of `hf serve` (HF_ADMIN_NAME).
    #[arg(long = "as", env = "HF_ADMIN_NAME", default_value = "admin")]
    principal: String,
    /// A value for a `:name` parameter, as `name=value`; the value is read as JSON when it is
    /// JSON (`5`, `true`, `"text"`), else as text.
    #[arg(long = "param", value_name = "NAME=VALUE")]
    params: Vec<String>,
    /// Print `{"records":[...]}` as `POST /data/query` answers instead of a table.
    #[arg(long)]
    json: bool,
    /// This machine's cache of the metadata objects; default `<data dir>/metadata`.
    #[arg(long, env = "HF_METADATA_PATH")]
    metadata_path: Option<PathBuf>,
    /// The branch the database reflects.
    #[arg(long, env = "HF_LIVE_BRANCH", default_value = "main")]
    live_branch: String,
    #[command(flatten)]
    database: DatabaseArgs,
}

/// Runs `hf query`.
pub fn run(args: QueryArgs) -> anyhow::Result<()> {
    let params = parse_params(&args.params)?;
    let cache = args
        .metadata_path
        .clone()
        .unwrap_or_else(|| args.database.data_dir.join("metadata"));
    crate::principal::with_database_url(&args.database, |pool, url| async move {
        let store = crate::plan::open_store(&pool, &url, &cache, &args.live_branch).await?;
        let principals = hf_storage::auth::list_principals(&pool).await?;
        let Some(principal) = principals.into_iter().find(|p| p.name == args.principal) else {
            anyhow::bail!(
                "there is no principal `{}`; name one with --as (see `hf principal list`)",
                args.principal
            );
        };
        let app = App::new(pool, store);
        let input = QueryInput {
            query: &args.query,
            params: &params,
            time_zone: None,
            cursor: None,
            explain: false,
        };
        let (keys, records) = match app.query(&principal, input).await {
            Ok(QueryAnswer::Records { keys, records }) => (keys, records),
            Ok(_) => anyhow::bail!("the query answered something other than records"),
            Err(hf_app::Error::Hoqs { text, diagnostics }) => {
                for diagnostic in &diagnostics {
                    eprintln!("{}", diagnostic.render(&text));
                }
                anyhow::bail!("the query has {} problem(s)", diagnostics.len());
            }
            Err(error) => {
                return Err(anyhow::Error::new(error)
                    .context(format!("running the query as `{}`", args.principal)))
            }
        };
        if args.json {
            println!("{}", hf_storage::query::records_body(&records));
        } else {
            print!("{}", table(&keys, &records)?);
        }
        Ok(())
    })
}

fn parse_params(pairs: &[String]) -> anyhow::Result<hf_hoqs::RequestParams> {
    let mut params = hf_hoqs::RequestParams::new();
    for pair in pairs {
        let Some((name, value)) = pair.split_once('=') else {
            anyhow::bail!("--param takes name=value, got `{pair}`");
        };
        // A value that is JSON is taken as its exact text (numbers keep every digit); anything
        // else is a string.
        let raw = match serde_json::from_str::<Box<RawValue>>(value) {
            Ok(raw) => raw,
            Err(_) => serde_json::value::to_raw_value(value).context("encoding a parameter")?,
        };
        params.insert(name.trim_start_matches(':').to_owned(), raw);
    }
    Ok(params)
}

/// The records as an aligned text table with a header, then the number of records.
fn table(keys: &[String], records: &[String]) -> anyhow::Result<String> {
    let mut rows = Vec::with_capacity(records.len());
    for record in records {
        let object: Map<String, Value> =
            serde_json::from_str(record).context("reading a record")?;
        rows.push(
            keys.iter()
                .map(|key| cell(object.get(key).unwrap_or(&Value::Null)))
                .collect::<Vec<_>>(),
        );
    }
    let mut widths: Vec<usize> = keys.iter().map(|key| key.chars().count()).collect();
    for row in &rows {
        for (width, value) in widths.iter_mut().zip(row) {
            *width = (*width).max(value.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell}{}", " ".repeat(width - cell.chars().count())))
            .collect();
        format!("{}\n", padded.join(" | ").trim_end())
    };
    let mut text = line(keys);
    let rule: Vec<String> = widths.iter().map(|width| "-".repeat(*width)).collect();
    text.push_str(&format!("{}\n", rule.join("-+-")));
    for row in &rows {
        text.push_str(&line(row));
    }
    let plural = if rows.len() == 1 { "" } else { "s" };
    text.push_str(&format!("({} record{plural})\n", rows.len()));
    Ok(text)
}

/// One value as a cell: text without quotes, NULL as `NULL`, anything else as JSON; control
/// characters escaped and long values shortened so the table stays one line per record.
fn cell(value: &Value) -> String {
    let text = match value {
        Value::Null => "NULL".to_owned(),
        Value::String(text) => text.escape_debug().to_string(),
        other => other.to_string(),
    };
    if text.chars().count() > MAX_CELL_CHARS {
        let mut short: String = text.chars().take(MAX_CELL_CHARS - 1).collect();
        short.push('…');
        short
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_an_aligned_table() {
        let keys = vec!["name".to_owned(), "amount".to_owned(), "deals".to_owned()];
        let records = vec![
            r#"{"name":"Acme","amount":"12.50","deals":[{"n":1}]}"#.to_owned(),
            r#"{"name":"Initech Corporation","amount":null,"deals":[]}"#.to_owned(),
        ];
        assert_eq!(
            table(&keys, &records).unwrap(),
            "name                | amount | deals\n\
             --------------------+--------+----------\n\
             Acme                | 12.50  | [{\"n\":1}]\n\
             Initech Corporation | NULL   | []\n\
             (2 records)\n"
        );
    }

    #[test]
    fn reads_params_as_json_or_text() {
        let pairs = vec![
            "min=5".to_owned(),
            ":stage=won".to_owned(),
            "x=\"5\"".to_owned(),
        ];
        let params = parse_params(&pairs).unwrap();
        assert_eq!(params["min"].get(), "5");
        assert_eq!(params["stage"].get(), "\"won\"");
        assert_eq!(params["x"].get(), "\"5\"");
        assert!(parse_params(&["nope".to_owned()]).is_err());
    }
}
