//! The route handlers, one module per operation group of the contract. Handlers are thin:
//! extract, call one domain function, map the result.

pub mod auth;
pub mod data;
pub mod hfx;
pub mod iam;
pub mod metadata;
pub mod query;
pub mod schema;
pub mod system;
pub mod vendor;
