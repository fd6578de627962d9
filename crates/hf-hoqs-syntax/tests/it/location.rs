//! Offsets to line, UTF-16 column and frame, as the contract's `location` reports them.

use hf_hoqs_syntax::ast::Span;
use hf_hoqs_syntax::location::{code_frame, locate, Location};
use hf_hoqs_syntax::parse_query;

fn at(line: usize, column: usize, frame: &str) -> Location {
    Location {
        line,
        column,
        frame: frame.to_string(),
    }
}

#[test]
fn columns_count_utf16_units() {
    let source = "SELECT a\n-- 🎉 é\nFROM";
    // 🎉 is 4 bytes and 2 UTF-16 units; é is 2 bytes and 1 unit.
    let from = source.find("FROM").unwrap();
    assert_eq!(locate(source, from), at(3, 1, "FROM"));
    let e_acute = source.find('é').unwrap();
    assert_eq!(locate(source, e_acute), at(2, 7, "-- 🎉 é"));
}

#[test]
fn line_breaks_of_every_kind_count_once() {
    let source = "a\r\nb\rc\nd";
    assert_eq!(locate(source, 3), at(2, 1, "b"));
    assert_eq!(locate(source, 5), at(3, 1, "c"));
    assert_eq!(locate(source, 7), at(4, 1, "d"));
}

#[test]
fn odd_offsets_are_clamped() {
    let source = "é🎉";
    assert_eq!(locate(source, 1), at(1, 1, "é🎉"));
    assert_eq!(locate(source, 3), at(1, 2, "é🎉"));
    assert_eq!(locate(source, 999), at(1, 4, "é🎉"));
    assert_eq!(locate("", 5), at(1, 1, ""));
    assert_eq!(code_frame("", Span::new(3, 9)), "1 | \n  | ^");
}

#[test]
fn diagnostics_after_an_emoji_report_utf16_columns() {
    let source = "SELECT name, '🎉🎉' AS party\nFROM crm.account WHERE 🎉 = 1";
    let diagnostic = &parse_query(source).diagnostics[0];
    let location = diagnostic.location(source);
    assert_eq!((location.line, location.column), (2, 24));
    assert_eq!(location.frame, "FROM crm.account WHERE 🎉 = 1");
}
