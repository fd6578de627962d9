//! Test support: a fresh database per test and the real server on a free port.
