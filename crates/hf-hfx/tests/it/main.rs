//! The hf-hfx integration tests: one binary, one module per feature.

mod browser;
mod fixtures;
mod hostile;
