//! Byte offsets to the `location` of the HTTP contract, and caret frames for people.
//!
//! The contract reports a 1-based line, a 1-based column counted in UTF-16 code units of the
//! line prefix (what JavaScript editors count), and the offending source line. Every
//! compiler of the project (HOQS, formulas, HFX) reports through this one helper so the
//! numbers agree everywhere. Line breaks are `\n`, `\r\n` and a lone `\r`, as in editors.

use crate::ast::Span;

/// Where an offset is, in the terms of the contract's `location` object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    /// 1-based line number.
    pub line: usize,
    /// 1-based column: one plus the UTF-16 code units before the offset on its line.
    pub column: usize,
    /// The whole source line holding the offset, without its line break.
    pub frame: String,
}

/// Converts a byte offset into a [`Location`].
///
/// Never panics: an offset past the end is treated as the end, and an offset inside a
/// multi-byte character as the start of that character.
pub fn locate(source: &str, offset: usize) -> Location {
    let offset = floor_char_boundary(source, offset);
    let (line, line_start) = line_of(source, offset);
    let line_end = line_end(source, line_start);
    let prefix = source.get(line_start..offset).unwrap_or("");
    let column = 1 + prefix.chars().map(char::len_utf16).sum::<usize>();
    let frame = source.get(line_start..line_end).unwrap_or("").to_string();
    Location {
        line,
        column,
        frame,
    }
}

/// Renders the source line of `span.start` with carets under the span (clipped to that
/// line, at least one caret), prefixed by the line number; used by diagnostics' `render`.
///
/// Carets are placed by characters, not UTF-16 units, so they line up in a terminal for
/// most text.
pub fn code_frame(source: &str, span: Span) -> String {
    let start = floor_char_boundary(source, span.start);
    let end = floor_char_boundary(source, span.end.max(start));
    let location = locate(source, start);
    let (_, line_start) = line_of(source, start);
    let line_end = line_end(source, line_start);
    let before = source.get(line_start..start).unwrap_or("").chars().count();
    let covered = source
        .get(start..end.min(line_end).max(start))
        .unwrap_or("")
        .chars()
        .count()
        .max(1);
    let number = location.line.to_string();
    let gutter = " ".repeat(number.len());
    format!(
        "{number} | {}\n{gutter} | {}{}",
        visible(&location.frame),
        " ".repeat(before),
        "^".repeat(covered)
    )
}

/// The line with control characters shown as visible symbols (`␀` for NUL, a space for a
/// tab), one character each so the carets stay aligned.
fn visible(line: &str) -> String {
    line.chars()
        .map(|ch| match ch {
            '\t' => ' ',
            '\u{0}'..='\u{1f}' => char::from_u32(0x2400 + ch as u32).unwrap_or('?'),
            '\u{7f}' => '\u{2421}',
            _ => ch,
        })
        .collect()
}

/// The largest char boundary not after `offset` (and not past the end).
fn floor_char_boundary(source: &str, offset: usize) -> usize {
    let mut offset = offset.min(source.len());
    while offset > 0 && !source.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

/// The 1-based line number of `offset` and the byte where that line starts.
fn line_of(source: &str, offset: usize) -> (usize, usize) {
    let bytes = source.as_bytes();
    let mut line = 1;
    let mut line_start = 0;
    let mut i = 0;
    while i < offset {
        let is_break = match bytes.get(i) {
            Some(b'\n') => true,
            // `\r\n` counts once, at its `\n`; a lone `\r` is a break of its own.
            Some(b'\r') => bytes.get(i + 1) != Some(&b'\n'),
            _ => false,
        };
        if is_break {
            line += 1;
            line_start = i + 1;
        }
        i += 1;
    }
    (line, line_start)
}

/// The byte where the line starting at `line_start` ends (its break, or the end of text).
fn line_end(source: &str, line_start: usize) -> usize {
    let rest = source.get(line_start..).unwrap_or("");
    match rest.find(['\n', '\r']) {
        Some(at) => line_start + at,
        None => source.len(),
    }
}
