//! Deterministic names for the constraints and indexes the planner creates.
//!
//! The names follow PostgreSQL's own conventions (`<table>_pkey`, `<table>_<columns>_key`,
//! `<table>_<columns>_fkey`, `<table>_<columns>_idx`) so that they look familiar in `psql`.
//! PostgreSQL would silently truncate a name longer than 63 bytes, which can make two names
//! collide, so a name that does not fit is cut and given a hash suffix of the full name instead.

use hf_sql::MAX_IDENTIFIER_BYTES;

/// The primary key constraint name of a table.
pub fn primary_key_name(table: &str) -> String {
    fit(&[table], "pkey")
}

/// The unique constraint name for these columns.
pub fn unique_name(table: &str, columns: &[&str]) -> String {
    fit(&parts(table, columns), "key")
}

/// The foreign key constraint name for these columns.
pub fn foreign_key_name(table: &str, columns: &[&str]) -> String {
    fit(&parts(table, columns), "fkey")
}

/// The CHECK constraint name of a picklist column.
pub fn check_name(table: &str, column: &str) -> String {
    fit(&[table, column], "check")
}

/// The plain index name for these columns.
pub fn index_name(table: &str, columns: &[&str]) -> String {
    fit(&parts(table, columns), "idx")
}

/// Makes a name unique by replacing it with its hashed form, for the rare case where two
/// different constraints of one schema would get the same readable name (`a_b` + `c` and `a` +
/// `b_c` both give `a_b_c_key`). The hash covers the parts separately, so the two differ.
pub fn hashed(table: &str, columns: &[&str], suffix: &str) -> String {
    let parts = parts(table, columns);
    let hash = fnv1a(&parts.join("\u{0}"));
    truncated_with_hash(&parts.join("_"), hash, suffix)
}

fn parts<'a>(table: &'a str, columns: &[&'a str]) -> Vec<&'a str> {
    let mut parts = Vec::with_capacity(columns.len() + 1);
    parts.push(table);
    parts.extend_from_slice(columns);
    parts
}

/// `<parts joined by _>_<suffix>` when it fits in 63 bytes, otherwise the hashed form.
fn fit(parts: &[&str], suffix: &str) -> String {
    let base = parts.join("_");
    if base.len() + 1 + suffix.len() <= MAX_IDENTIFIER_BYTES {
        return format!("{base}_{suffix}");
    }
    truncated_with_hash(&base, fnv1a(&parts.join("\u{0}")), suffix)
}

/// `<base cut to fit>_<8 hex digits>_<suffix>`, exactly 63 bytes or less, cut on a character
/// boundary.
fn truncated_with_hash(base: &str, hash: u64, suffix: &str) -> String {
    let tail = format!("_{:08x}_{suffix}", hash & 0xffff_ffff);
    let room = MAX_IDENTIFIER_BYTES.saturating_sub(tail.len());
    let mut cut = room.min(base.len());
    while !base.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{tail}", &base[..cut])
}

/// FNV-1a, 64 bits: tiny, stable across Rust versions and platforms (unlike `DefaultHasher`),
/// and good enough to keep generated names apart.
fn fnv1a(text: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_follow_postgres_conventions() {
        assert_eq!(primary_key_name("account"), "account_pkey");
        assert_eq!(unique_name("account", &["email"]), "account_email_key");
        assert_eq!(foreign_key_name("order", &["user"]), "order_user_fkey");
        assert_eq!(index_name("order", &["placed_at"]), "order_placed_at_idx");
    }

    #[test]
    fn long_names_fit_and_stay_distinct() {
        let table = "t".repeat(40);
        let a = unique_name(&table, &["a".repeat(40).as_str()]);
        let b = unique_name(&table, &["a".repeat(41).as_str()]);
        assert!(a.len() <= 63 && b.len() <= 63, "{a} {b}");
        assert_ne!(a, b);
        assert!(a.ends_with("_key"));
        assert_eq!(a, unique_name(&table, &["a".repeat(40).as_str()]));
    }

    #[test]
    fn exactly_63_bytes_is_kept() {
        let table = "x".repeat(58);
        assert_eq!(primary_key_name(&table).len(), 63);
        assert!(!primary_key_name(&table).contains("_0"));
    }

    #[test]
    fn multibyte_names_are_cut_on_character_boundaries() {
        let name = index_name(&"é".repeat(40), &["ü"]);
        assert!(name.len() <= 63);
    }

    #[test]
    fn hashed_names_separate_ambiguous_joins() {
        assert_ne!(hashed("a_b", &["c"], "key"), hashed("a", &["b_c"], "key"));
    }
}
