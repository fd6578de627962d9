//! The hf-hfx integration tests: one binary, one module per feature.

#![expect(clippy::unwrap_used, reason = "test setup fails loudly")]

mod browser;
mod fixtures;
mod hostile;
