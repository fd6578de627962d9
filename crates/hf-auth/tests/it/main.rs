//! The integration tests of `hf-auth`: one module per feature, each rule with a test that would
//! catch its violation. The SSH and Node tests run the real `ssh-keygen` and `node`.

// Helpers outside `#[test]` functions unwrap too: a failing helper should fail its test loudly.
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers fail the test"
)]

mod common;
mod keys;
mod names;
mod node;
mod passwords;
mod secrets;
mod ssh;
mod tokens;
