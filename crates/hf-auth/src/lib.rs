//! Tokens, keys, password hashes and SSH signatures; no database, no HTTP.
