//! The HTTP surface: routes, the error envelope, OpenAPI.
