//! Request and response shapes of the HTTP interface, converted from and to domain types. Domain
//! crates stay free of HTTP and OpenAPI concerns; the conversions live here.

pub mod metadata;
