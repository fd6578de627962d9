//! The finished document's promises, checked on the document itself; `hf-tests` checks the
//! served routes against it over HTTP.

use std::collections::BTreeSet;

use serde_json::Value;

use super::named_codes;
use crate::error::Code;

fn operations(doc: &Value) -> Vec<(String, String, Value)> {
    let mut list = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            list.push((path.clone(), method.clone(), operation.clone()));
        }
    }
    list
}

#[test]
fn annotations_name_codes_under_their_statuses() {
    // The annotations describe error responses by naming codes; each must be filed under the
    // status the one error table gives that code.
    let generated = serde_json::to_value(crate::app::generated_openapi()).unwrap();
    for (path, method, operation) in operations(&generated) {
        for (status, response) in operation["responses"].as_object().unwrap() {
            let Ok(status) = status.parse::<u16>() else {
                continue;
            };
            let description = response["description"].as_str().unwrap_or("");
            for code in named_codes(description) {
                assert_eq!(
                    code.status().as_u16(),
                    status,
                    "{method} {path}: {} is not a {status}",
                    code.as_str()
                );
            }
        }
    }
}

#[test]
fn operations_that_use_the_database_list_its_failures() {
    // Every statement is bounded, the service's own included: a login can time out too.
    let doc = crate::app::openapi();
    for (path, method, operation) in operations(&doc) {
        // `/status` reports a failing database in its own body.
        let id = operation["operationId"].as_str().unwrap_or("");
        if ["health", "openapi", "vendor"].contains(&id) || path == "/status" {
            continue;
        }
        let listed = |status: &str| -> BTreeSet<String> {
            operation["responses"][status]["content"]["application/json"]["schema"]["properties"]
                ["errors"]["items"]["properties"]["code"]["enum"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|code| code.as_str().map(str::to_owned))
                .collect()
        };
        assert!(
            listed("504").contains("TIMEOUT"),
            "{method} {path} lacks 504 TIMEOUT"
        );
        for code in ["DATABASE_UNAVAILABLE", "STORAGE_UNAVAILABLE"] {
            assert!(
                listed("503").contains(code),
                "{method} {path} lacks 503 {code}"
            );
        }
    }
}

#[test]
fn metadata_routes_are_listed_under_their_literal_paths() {
    let doc = crate::app::openapi();
    let paths = doc["paths"].as_object().unwrap();
    assert!(paths.keys().all(|path| !path.contains("{branchRoot}")));
    for path in [
        "/metadata",
        "/metadata/objects",
        "/metadata/fields",
        "/metadata/{moduleKey}",
        "/metadata/{moduleKey}/objects",
        "/metadata/{moduleKey}/objects/{objectKey}",
        "/metadata/{moduleKey}/objects/{objectKey}/fields",
        "/metadata/{moduleKey}/objects/{objectKey}/fields/{fieldKey}",
        "/metadata/{moduleKey}/screens",
        "/metadata/{moduleKey}/screens/{screenKey}",
    ] {
        let live = &paths[path];
        assert!(live.get("get").is_some(), "GET {path}");
        assert_eq!(live.as_object().unwrap().len(), 1, "{path} is read-only");
        let on_branch = path.replacen("/metadata", "/metadata@{branch}", 1);
        assert!(paths[&on_branch].get("get").is_some(), "GET {on_branch}");
    }
    let write = &paths["/metadata@{branch}/{moduleKey}/objects/{objectKey}/fields/{fieldKey}"];
    for method in ["post", "put", "delete"] {
        let parameters = write[method]["parameters"].as_array().unwrap();
        let branch = parameters.iter().find(|p| p["name"] == "branch").unwrap();
        assert_eq!(branch["in"], "path");
        assert_eq!(branch["schema"]["pattern"], super::BRANCH_PATTERN);
        let field = parameters.iter().find(|p| p["name"] == "fieldKey").unwrap();
        assert_eq!(field["schema"]["pattern"], super::KEY_PATTERN);
    }
}

#[test]
fn operation_ids_are_unique() {
    let doc = crate::app::openapi();
    let mut seen = BTreeSet::new();
    for (path, method, operation) in operations(&doc) {
        let id = operation["operationId"].as_str().unwrap().to_owned();
        assert!(seen.insert(id.clone()), "{method} {path}: {id} twice");
    }
}

#[test]
fn every_error_response_enumerates_codes_of_its_status() {
    let doc = crate::app::openapi();
    for (path, method, operation) in operations(&doc) {
        let responses = operation["responses"].as_object().unwrap();
        assert!(
            responses.keys().all(|status| !status.ends_with("XX")),
            "{method} {path} has a generic status"
        );
        assert!(
            responses.contains_key("500"),
            "{method} {path} lacks its error responses"
        );
        for (status, response) in responses {
            let status: u16 = status.parse().unwrap();
            if status < 400 || (path == "/status" && status == 503) {
                continue;
            }
            let schema = &response["content"]["application/json"]["schema"];
            let codes = schema["properties"]["errors"]["items"]["properties"]["code"]["enum"]
                .as_array()
                .unwrap_or_else(|| panic!("{method} {path} {status}: no code enum"));
            assert!(!codes.is_empty());
            for code in codes {
                let code = Code::ALL
                    .iter()
                    .find(|c| c.as_str() == code)
                    .unwrap_or_else(|| panic!("{code} is not in the table"));
                let own = code.status().as_u16();
                assert!(
                    own == status || (status == 422 && matches!(own, 400 | 409)),
                    "{method} {path}: {} is {own}, listed under {status}",
                    code.as_str()
                );
            }
        }
    }
}

#[test]
fn field_bodies_are_satisfiable_objects_selected_by_field_kind() {
    let doc = crate::app::openapi();
    let schemas = &doc["components"]["schemas"];
    let variants = schemas["FieldBody"]["oneOf"].as_array().unwrap();
    assert_eq!(variants.len(), 4);
    let mut kinds = Vec::new();
    for variant in variants {
        let name = variant["$ref"]
            .as_str()
            .unwrap()
            .trim_start_matches("#/components/schemas/");
        let schema = &schemas[name];
        assert_eq!(schema["type"], "object", "{name}");
        let required = schema["required"].as_array().unwrap();
        assert!(required.contains(&Value::from("fieldKind")), "{name}");
        let kind = &schema["properties"]["fieldKind"];
        let kind = match kind.get("$ref") {
            Some(reference) => {
                &schemas[reference
                    .as_str()
                    .unwrap()
                    .trim_start_matches("#/components/schemas/")]
            }
            None => kind,
        };
        let values = kind["enum"].as_array().unwrap();
        assert_eq!(values.len(), 1, "{name}: {kind}");
        kinds.push(values[0].as_str().unwrap().to_owned());
    }
    kinds.sort();
    assert_eq!(kinds, ["formula", "lookup", "rollup", "scalar"]);
    let field_types = schemas["FieldType"]["enum"].as_array().unwrap();
    assert_eq!(field_types.len(), 11);
    assert!(field_types.contains(&Value::from("picklist")));
    assert!(field_types.contains(&Value::from("multipicklist")));
    assert_eq!(
        schemas["RollupFunctionName"]["enum"],
        serde_json::json!(["count", "sum", "min", "max", "avg"])
    );
}

#[test]
fn runtime_modules_take_the_cookie() {
    let doc = crate::app::openapi();
    let scheme = &doc["components"]["securitySchemes"]["hf_runtime"];
    assert_eq!(scheme["type"], "apiKey");
    assert_eq!(scheme["in"], "cookie");
    let security = &doc["paths"]["/hfx/modules/{file}"]["get"]["security"];
    assert!(security
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s.get("hf_runtime").is_some()));
}

#[test]
fn record_creates_document_their_idempotency_key() {
    let doc = crate::app::openapi();
    let create = &doc["paths"]["/data/{moduleKey}/{objectKey}"]["post"];
    let parameters = create["parameters"].as_array().unwrap();
    let key = parameters
        .iter()
        .find(|p| p["name"] == "Idempotency-Key")
        .unwrap();
    assert_eq!(key["in"], "header", "{key}");
    assert_ne!(key["required"], true, "{key}");
    assert_eq!(key["schema"]["pattern"], "^[!-~]+$", "{key}");
    assert_eq!(key["schema"]["maxLength"], 255, "{key}");
    let replayed = &create["responses"]["201"]["headers"]["Idempotent-Replayed"];
    assert!(replayed.is_object(), "{create}");
}

#[test]
fn a_required_query_parameter_is_documented_as_required() {
    let doc = crate::app::openapi();
    let parameters = doc["paths"]["/auth/session/exchange"]["get"]["parameters"]
        .as_array()
        .unwrap();
    let code = parameters.iter().find(|p| p["name"] == "code").unwrap();
    assert_eq!(code["required"], true, "{code}");
}

#[test]
fn scalar_field_bodies_document_picklist_choices() {
    let doc = crate::app::openapi();
    let scalar = &doc["components"]["schemas"]["ScalarBody"]["properties"];
    assert_eq!(
        scalar["values"]["type"],
        serde_json::json!(["array", "null"]),
        "{scalar}"
    );
    assert!(scalar.get("defaultValue").is_some(), "{scalar}");
}
