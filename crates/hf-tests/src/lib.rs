//! End-to-end tests live in `tests/it`; this crate has no library code.
