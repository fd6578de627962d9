//! Principal names, which become PostgreSQL role names, and the system role names.
//!
//! A principal's name is its login username and its database role (always quoted later by
//! `hf_sql::quote_ident`). The rules keep names from colliding with hf's own roles (which contain
//! a colon), with PostgreSQL's reserved `pg_` roles, and from being truncated at 63 bytes.
//! Quotes, spaces, and SQL-looking text are allowed: quoting makes them harmless, and refusing them
//! would only suggest that quoting cannot be trusted.

use crate::Error;

/// The group role every principal's role is a member of; object tables are granted to it.
pub const AUTHENTICATED_ROLE: &str = "hf:authenticated";
/// The group role of administrators.
pub const ADMIN_ROLE: &str = "hf:admin";
/// PostgreSQL keeps identifiers up to this many bytes and silently truncates longer ones.
pub const MAX_NAME_BYTES: usize = 63;
/// The prefix PostgreSQL reserves for its own roles.
pub const RESERVED_PREFIX: &str = "pg_";

/// Checks a new principal's name (contract: 400 `INVALID_NAME`).
///
/// Rules: 1 to 63 bytes of UTF-8; no colon; does not start with `pg_` in any letter case (so no
/// name looks like a PostgreSQL system role); no control character (Unicode category Cc: NUL,
/// newline, tab, escape, DEL, C1 controls).
pub fn validate_principal_name(name: &str) -> Result<(), Error> {
    if name.is_empty() {
        return Err(Error::NameEmpty);
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(Error::NameTooLong {
            bytes: name.len(),
            max: MAX_NAME_BYTES,
        });
    }
    if let Some((position, _)) = name.char_indices().find(|(_, c)| c.is_control()) {
        return Err(Error::NameControlCharacter { position });
    }
    if name.contains(':') {
        return Err(Error::NameContainsColon);
    }
    let prefix = name.as_bytes().get(..RESERVED_PREFIX.len());
    if prefix.is_some_and(|prefix| prefix.eq_ignore_ascii_case(RESERVED_PREFIX.as_bytes())) {
        return Err(Error::NameReservedPrefix);
    }
    Ok(())
}
