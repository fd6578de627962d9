//! One integration-test binary for the whole service, one module per area of the contract.
//! Every test starts the real server on a free port with its own fresh database.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

mod auth;
mod body;
mod conformance;
mod console;
mod deploy;
mod dry_run;
mod errors;
mod faults;
mod hfx;
mod http;
mod iam;
mod isolation;
mod limits;
mod metadata;
mod openapi;
mod picklists;
mod query;
mod query_apps;
mod records;
mod rules;
mod schema;
mod support;
mod system;
mod targets;
mod vendor;
