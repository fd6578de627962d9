//! The finishing pass over the generated OpenAPI document: what route annotations cannot say.
//!
//! Routes are registered once (`app::register`) and utoipa documents each from its annotation;
//! this pass turns that into the document a client generator or a fuzzer can trust:
//! - the metadata routes, served on `/{branchRoot}/…` behind a guard that admits only
//!   `metadata` and `metadata@<branch>`, are listed under their literal paths: reads on
//!   `/metadata/…` and on `/metadata@{branch}/…`, writes only on `/metadata@{branch}/…`;
//! - key and branch path parameters carry the grammar's patterns;
//! - every error response is the envelope with its `code`s enumerated: the codes the
//!   annotation's description names, plus those every operation of its kind can answer (a JSON
//!   body can be malformed, a protected route unauthenticated, …), each filed under the status
//!   the one error table gives it;
//! - objects without declared properties (records) say they hold any;
//! - `/hfx/modules/…` accepts the `hf_runtime` cookie;
//! - the main request bodies carry examples.
//!
//! The pass works on the document's JSON, where adding a keyword is one line.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::error::Code;

/// The key grammar of the contract (`moduleKey`, `objectKey`, `fieldKey`, `screenKey`).
pub const KEY_PATTERN: &str = "^[a-z][a-z0-9_]{0,62}$";

/// The branch id grammar of the contract (git's ref-name rules narrow it further).
pub const BRANCH_PATTERN: &str = "^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$";

/// Parameters, in a path or a query, that hold a key.
const KEY_PARAMETERS: [&str; 4] = ["moduleKey", "objectKey", "fieldKey", "screenKey"];

const METHODS: [&str; 5] = ["get", "put", "post", "delete", "patch"];

/// Operations that answer without the database.
const WITHOUT_DATABASE: [&str; 3] = ["health", "openapi", "vendor"];

/// What a metadata write can answer besides the codes its annotation names and the model's
/// validation diagnostics ([`crate::error::model_diagnostic_codes`]): the live branch's apply
/// and concurrent writers.
const METADATA_WRITE_CODES: &[Code] = &[
    Code::Forbidden,
    Code::InUse,
    Code::InvalidMetadata,
    Code::MetadataUnreadable,
    Code::MetadataConflict,
    Code::DestructiveChange,
    Code::ApplyFailed,
    Code::StorageUnavailable,
    Code::MetadataLocked,
    Code::CommitOutcomeUnknown,
];

/// What an operation of `method` can answer because it writes: a write whose connection broke
/// while it committed does not know whether it took effect.
fn write_codes(method: &str) -> &'static [Code] {
    if method == "get" {
        &[]
    } else {
        &[Code::CommitOutcomeUnknown]
    }
}

/// The finished document of the generated one.
pub fn finish(generated: &utoipa::openapi::OpenApi) -> Value {
    let mut doc = serde_json::to_value(generated).unwrap_or(Value::Null);
    let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) else {
        return doc;
    };
    let mut finished = Map::new();
    for (path, item) in std::mem::take(paths) {
        match path.strip_prefix("/{branchRoot}") {
            Some(rest) => {
                let (live, branch) = metadata_items(&item);
                if let Some(live) = live {
                    finished.insert(format!("/metadata{rest}"), live);
                }
                finished.insert(format!("/metadata@{{branch}}{rest}"), branch);
            }
            None => {
                let mut item = item;
                for_each_operation(&mut item, |method, operation| {
                    error_responses(operation, write_codes(method));
                });
                finished.insert(path, item);
            }
        }
    }
    for item in finished.values_mut() {
        for_each_operation(item, |_, operation| key_patterns(operation));
    }
    if let Some(operation) = finished
        .get_mut("/hfx/modules/{file}")
        .and_then(|item| item.get_mut("get"))
    {
        operation["security"] = json!([{"hf_runtime": []}, {"bearer": []}]);
    }
    *paths = finished;
    open_objects(&mut doc);
    cookie_scheme(&mut doc);
    examples(&mut doc);
    doc
}

fn for_each_operation(item: &mut Value, mut visit: impl FnMut(&str, &mut Value)) {
    for method in METHODS {
        if let Some(operation) = item.get_mut(method) {
            visit(method, operation);
        }
    }
}

/// The live item (reads only; none when the path has no read) and the branch item of one
/// `/{branchRoot}/…` route.
fn metadata_items(item: &Value) -> (Option<Value>, Value) {
    let live = item.get("get").map(|get| {
        let mut get = get.clone();
        remove_parameter(&mut get, "branchRoot");
        error_responses(&mut get, &[]);
        json!({ "get": get })
    });
    let mut branch = Map::new();
    for method in METHODS {
        let Some(operation) = item.get(method) else {
            continue;
        };
        let mut operation = operation.clone();
        remove_parameter(&mut operation, "branchRoot");
        let parameters = operation
            .as_object_mut()
            .map(|o| o.entry("parameters").or_insert_with(|| json!([])));
        if let Some(Value::Array(parameters)) = parameters {
            parameters.insert(
                0,
                json!({
                    "name": "branch",
                    "in": "path",
                    "required": true,
                    "description": "The branch id; a write to a branch that does not exist yet forks it from the live branch.",
                    "schema": {"type": "string", "pattern": BRANCH_PATTERN},
                    "example": "main",
                }),
            );
        }
        if method == "get" {
            // The live read keeps the handler's operation id; the branch read needs its own.
            if let Some(Value::String(id)) = operation.get_mut("operationId") {
                id.push_str("_on_branch");
            }
            error_responses(&mut operation, &[Code::InvalidBranch, Code::BranchNotFound]);
        } else {
            let mut extra = vec![Code::InvalidBranch];
            extra.extend_from_slice(METADATA_WRITE_CODES);
            extra.extend(crate::error::model_diagnostic_codes());
            error_responses(&mut operation, &extra);
        }
        branch.insert(method.to_owned(), operation);
    }
    (live, Value::Object(branch))
}

fn remove_parameter(operation: &mut Value, name: &str) {
    if let Some(Value::Array(parameters)) = operation.get_mut("parameters") {
        parameters.retain(|parameter| parameter["name"] != name);
    }
}

/// Key path parameters carry the key grammar. Query filters do not: a filter that is not a key
/// matches nothing, which is an answer, not an error.
fn key_patterns(operation: &mut Value) {
    let Some(Value::Array(parameters)) = operation.get_mut("parameters") else {
        return;
    };
    for parameter in parameters {
        let is_key = parameter["in"] == "path"
            && parameter["name"]
                .as_str()
                .is_some_and(|name| KEY_PARAMETERS.contains(&name));
        if is_key {
            if let Some(schema) = parameter.get_mut("schema").and_then(Value::as_object_mut) {
                schema.insert("pattern".to_owned(), json!(KEY_PATTERN));
            }
        }
    }
}

/// Whether a response is the error envelope (or utoipa's generic `4XX`), which this pass owns.
fn is_envelope_response(status: &str, response: &Value) -> bool {
    let schema = &response["content"]["application/json"]["schema"];
    status.ends_with("XX") || schema["$ref"] == "#/components/schemas/ErrorBody"
}

/// The codes a description names.
pub fn named_codes(description: &str) -> Vec<Code> {
    description
        .split(|c: char| !(c.is_ascii_uppercase() || c == '_'))
        .filter_map(|word| Code::ALL.iter().copied().find(|code| code.as_str() == word))
        .collect()
}

/// Replaces an operation's error responses by one envelope response per status, each listing
/// its codes: those the annotation names, `extra`, and those the operation's shape implies.
fn error_responses(operation: &mut Value, extra: &[Code]) {
    let id = operation["operationId"].as_str().unwrap_or("").to_owned();
    let has_json_body = operation["requestBody"]["content"]
        .get("application/json")
        .is_some();
    let has_query = parameters_in(operation, "query");
    let has_key = operation["parameters"].as_array().is_some_and(|list| {
        list.iter().any(|p| {
            p["in"] == "path"
                && p["name"]
                    .as_str()
                    .is_some_and(|name| KEY_PARAMETERS.contains(&name))
        })
    });
    let bearer = operation["security"]
        .as_array()
        .is_some_and(|list| list.iter().any(|s| s.get("bearer").is_some()));
    let Some(responses) = operation
        .get_mut("responses")
        .and_then(Value::as_object_mut)
    else {
        return;
    };

    let mut codes: Vec<Code> = Vec::new();
    let mut descriptions: BTreeMap<u16, String> = BTreeMap::new();
    responses.retain(|status, response| {
        if !is_envelope_response(status, response) {
            return true;
        }
        let description = response["description"].as_str().unwrap_or("");
        if let Ok(status) = status.parse::<u16>() {
            if !description.is_empty() {
                descriptions.insert(status, description.to_owned());
            }
        }
        codes.extend(named_codes(description));
        false
    });
    codes.extend_from_slice(extra);
    // Every request may meet the limits on its URL and headers.
    codes.extend([Code::Internal, Code::UriTooLong, Code::HeadersTooLarge]);
    if bearer {
        codes.push(Code::Unauthenticated);
    }
    if has_json_body {
        codes.extend([
            Code::MalformedJson,
            Code::InvalidBody,
            Code::PayloadTooLarge,
            Code::UnsupportedMediaType,
            Code::RequestTimeout,
        ]);
    }
    if has_query {
        codes.push(Code::InvalidQuery);
    }
    if has_key {
        codes.push(Code::InvalidKey);
    }
    // Every statement is bounded: a caller's by its statement timeout, the service's own by
    // their lock wait and statement timeout. Any statement may find the database's disk full
    // (a read too, when it sorts through temporary files).
    if !WITHOUT_DATABASE.contains(&id.as_str()) && !responses.contains_key("503") {
        codes.extend([
            Code::DatabaseUnavailable,
            Code::PoolBusy,
            Code::StorageUnavailable,
            Code::Timeout,
        ]);
    }

    let mut by_status: BTreeMap<u16, Vec<&'static str>> = BTreeMap::new();
    for code in &codes {
        by_status
            .entry(code.status().as_u16())
            .or_default()
            .push(code.as_str());
    }
    // A response whose problems have different statuses is 422 (every problem of a write at
    // once), so a 422 may carry the operation's 400 and 409 codes too.
    if let Some(mut mixed) = by_status.get(&422).cloned() {
        for status in [400, 409] {
            mixed.extend(by_status.get(&status).into_iter().flatten());
        }
        by_status.insert(422, mixed);
    }
    for (status, mut list) in by_status {
        list.sort_unstable();
        list.dedup();
        let description = descriptions
            .remove(&status)
            .unwrap_or_else(|| list.join(", "));
        responses.insert(
            status.to_string(),
            json!({
                "description": description,
                "content": {"application/json": {"schema": envelope_schema(&list)}},
            }),
        );
    }
}

fn parameters_in(operation: &Value, place: &str) -> bool {
    operation["parameters"]
        .as_array()
        .is_some_and(|list| list.iter().any(|p| p["in"] == place))
}

/// The error envelope whose entries carry one of `codes`: the shared `ErrorBody`, narrowed.
fn envelope_schema(codes: &[&str]) -> Value {
    json!({
        "allOf": [{"$ref": "#/components/schemas/ErrorBody"}],
        "properties": {"errors": {"items": {"properties": {"code": {"enum": codes}}}}},
    })
}

/// An object schema that names no properties (a record, a query's parameters) holds any
/// properties; saying so explicitly (`additionalProperties: true`) keeps generators from reading
/// it as an object that must stay empty.
fn open_objects(node: &mut Value) {
    match node {
        Value::Object(map) => {
            let is_object = match map.get("type") {
                Some(Value::String(kind)) => kind == "object",
                Some(Value::Array(kinds)) => kinds.iter().any(|kind| kind == "object"),
                _ => false,
            };
            let constrained = [
                "properties",
                "additionalProperties",
                "$ref",
                "allOf",
                "oneOf",
                "anyOf",
            ]
            .iter()
            .any(|key| map.contains_key(*key));
            if is_object && !constrained {
                map.insert("additionalProperties".to_owned(), Value::Bool(true));
            }
            map.values_mut().for_each(open_objects);
        }
        Value::Array(items) => items.iter_mut().for_each(open_objects),
        _ => {}
    }
}

/// The `hf_runtime` cookie that `GET /auth/session/exchange` sets for `/hfx/modules/…`.
fn cookie_scheme(doc: &mut Value) {
    let schemes = &mut doc["components"]["securitySchemes"];
    if schemes.is_null() {
        *schemes = json!({});
    }
    schemes["hf_runtime"] = json!({
        "type": "apiKey",
        "in": "cookie",
        "name": "hf_runtime",
        "description": "The session token that `GET /auth/session/exchange` sets (Path=/hfx/modules; HttpOnly; SameSite=Strict).",
    });
}

/// Examples of the main request bodies, as the quick start sends them.
fn examples(doc: &mut Value) {
    let examples = [
        (
            "LoginRequest",
            json!({"username": "admin", "password": "correct horse battery staple"}),
        ),
        (
            "SetPasswordRequest",
            json!({"setupToken": "…", "password": "correct horse battery staple"}),
        ),
        (
            "ModuleBody",
            json!({"label": "CRM", "identity": {"color": "blue", "icon": "briefcase"}}),
        ),
        (
            "ObjectBody",
            json!({"label": "Account", "rules": {"name_not_blank": {"assert": "name <> ''", "message": "A name is required.", "field": "name"}}}),
        ),
        (
            "ScreenBody",
            json!({"hfxSource": "<script>let count = 0;</script>\n<button on:click={() => count += 1}>{count}</button>\n", "label": "Counter"}),
        ),
        (
            "QueryRequest",
            json!({"query": "SELECT name FROM crm.account WHERE name LIKE :prefix ORDER BY name LIMIT 10", "params": {"prefix": "A%"}}),
        ),
    ];
    let schemas = &mut doc["components"]["schemas"];
    for (name, example) in examples {
        if let Some(schema) = schemas.get_mut(name).and_then(Value::as_object_mut) {
            schema.insert("example".to_owned(), example);
        }
    }
}

#[cfg(test)]
mod tests;
