//! Compile problems as data: every user-facing message of the compiler lives here.
//!
//! The compiler never returns `Err` for bad input; it returns diagnostics with a byte offset, which
//! [`Diagnostic::at`] turns into the 1-based line, the 1-based UTF-16 column and the source line
//! (the `location` of the HTTP error envelope).

use std::fmt;

/// Which input a diagnostic points into, because a screen is compiled together with its sidecar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum SourceFile {
    /// The HFX source of the screen.
    Screen,
    /// The TypeScript sidecar module (`./sidecar`).
    Sidecar,
}

/// Stable machine-readable kinds of compile problems, so callers and tests never match on text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub enum DiagnosticCode {
    /// A JavaScript or TypeScript syntax error reported by oxc (script, sidecar or `{expression}`).
    JsSyntax,
    /// An element was opened and never closed.
    UnclosedTag,
    /// A closing tag does not match the innermost open element or block.
    MismatchedTag,
    /// A closing tag or block end with nothing open to close.
    UnexpectedClosingTag,
    /// A tag (`<...>`), comment, `{...}` or quoted value runs to the end of the source.
    Unterminated,
    /// A tag or attribute name that HFX does not accept.
    InvalidName,
    /// The same attribute appears twice on one element.
    DuplicateAttribute,
    /// A directive (`on:`, `bind:`, `class:`, `style:`) that is malformed or misplaced.
    InvalidDirective,
    /// A `{#...}`, `{:...}` or `{@...}` tag that is unknown, malformed or misplaced.
    InvalidBlock,
    /// A block (`{#if}`, `{#each}`, ...) that is never closed.
    UnclosedBlock,
    /// Markup or code nested deeper than the compiler accepts.
    NestingTooDeep,
    /// `{}` with nothing inside, or an expression that is not a single expression.
    InvalidExpression,
    /// A second `<script>` or `<style>`, or one that is not at the top level.
    MisplacedBlock,
    /// An import the compiler cannot rewrite (relative paths other than `./sidecar`, URLs, ...).
    InvalidImport,
    /// An `export` other than `export let` (props) in a screen script.
    InvalidExport,
    /// A name reserved for the compiler (starting with `$$`).
    ReservedName,
    /// `{@html ...}`: raw HTML is never rendered.
    RawHtml,
    /// `await` at the top level of a screen script.
    TopLevelAwait,
    /// A capitalised tag that is not an imported component.
    UnknownComponent,
    /// A `{#form}` target that is not `module.object`.
    InvalidFormTarget,
    /// Svelte syntax that HFX spells differently or does not have (`$:`, `<slot>`, a rune HFX
    /// lacks), refused at compile time rather than failing in the browser.
    SvelteSyntax,
    /// A `{#query}` names an object or field the model does not have. The compiler does not know
    /// the model: a host that type-checks [`crate::QueryText`]s reports this.
    QueryUnknownName,
    /// A `{#query}` parameter written as a literal has a type the query does not accept there
    /// (`{ limit: "ten" }` for `LIMIT :limit`). Reported by a host, like
    /// [`DiagnosticCode::QueryUnknownName`], from [`crate::QueryText::params`].
    QueryTypeError,
    /// A bug in the compiler: the generated module did not parse.
    Internal,
}

impl DiagnosticCode {
    /// The stable SCREAMING_SNAKE_CASE name, as shown to users and in snapshots.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::JsSyntax => "JS_SYNTAX",
            Self::UnclosedTag => "UNCLOSED_TAG",
            Self::MismatchedTag => "MISMATCHED_TAG",
            Self::UnexpectedClosingTag => "UNEXPECTED_CLOSING_TAG",
            Self::Unterminated => "UNTERMINATED",
            Self::InvalidName => "INVALID_NAME",
            Self::DuplicateAttribute => "DUPLICATE_ATTRIBUTE",
            Self::InvalidDirective => "INVALID_DIRECTIVE",
            Self::InvalidBlock => "INVALID_BLOCK",
            Self::UnclosedBlock => "UNCLOSED_BLOCK",
            Self::NestingTooDeep => "NESTING_TOO_DEEP",
            Self::InvalidExpression => "INVALID_EXPRESSION",
            Self::MisplacedBlock => "MISPLACED_BLOCK",
            Self::InvalidImport => "INVALID_IMPORT",
            Self::InvalidExport => "INVALID_EXPORT",
            Self::ReservedName => "RESERVED_NAME",
            Self::RawHtml => "RAW_HTML",
            Self::TopLevelAwait => "TOP_LEVEL_AWAIT",
            Self::UnknownComponent => "UNKNOWN_COMPONENT",
            Self::InvalidFormTarget => "INVALID_FORM_TARGET",
            Self::SvelteSyntax => "SVELTE_SYNTAX",
            Self::QueryUnknownName => "QUERY_UNKNOWN_NAME",
            Self::QueryTypeError => "QUERY_TYPE_ERROR",
            Self::Internal => "INTERNAL",
        }
    }
}

impl fmt::Display for DiagnosticCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One compile problem with its position, ready for the error envelope's `location`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Diagnostic {
    /// What kind of problem this is.
    pub code: DiagnosticCode,
    /// English explanation; may change between versions.
    pub message: String,
    /// The input the position refers to.
    pub file: SourceFile,
    /// Byte offset into that input.
    pub offset: usize,
    /// 1-based line.
    pub line: u32,
    /// 1-based column, counted in UTF-16 code units of the line prefix (what browsers count).
    pub column: u32,
    /// The offending source line, without its line terminator.
    pub frame: String,
}

impl Diagnostic {
    /// Builds a diagnostic at `offset` of `source`, computing line, column and frame.
    pub fn at(
        code: DiagnosticCode,
        message: impl Into<String>,
        file: SourceFile,
        source: &str,
        offset: usize,
    ) -> Self {
        let offset = clamp_to_char_boundary(source, offset);
        let line_start = source[..offset].rfind('\n').map_or(0, |i| i + 1);
        let line_end = source[offset..]
            .find('\n')
            .map_or(source.len(), |i| offset + i);
        let frame = source[line_start..line_end].trim_end_matches('\r');
        let line = source[..offset].bytes().filter(|b| *b == b'\n').count() + 1;
        let column = source[line_start..offset].encode_utf16().count() + 1;
        Diagnostic {
            code,
            message: message.into(),
            file,
            offset,
            line: u32::try_from(line).unwrap_or(u32::MAX),
            column: u32::try_from(column).unwrap_or(u32::MAX),
            frame: frame.to_string(),
        }
    }

    /// Renders the diagnostic like a compiler does: `file:line:col: CODE message`, the source line
    /// and a caret under the column; `file` is `screen` or `sidecar`.
    pub fn render(&self) -> String {
        let file = match self.file {
            SourceFile::Screen => "screen",
            SourceFile::Sidecar => "sidecar",
        };
        self.render_as(file)
    }

    /// [`Diagnostic::render`] naming the input as `file` (a command line passes the path it read).
    pub fn render_as(&self, file: &str) -> String {
        // The caret is placed by terminal cells, not UTF-16 units: a tab stays a tab, wide
        // characters (emoji, CJK) take two cells.
        let caret_pad: String = self
            .frame
            .chars()
            .scan(0u32, |units, c| {
                *units += u32::try_from(c.len_utf16()).unwrap_or(1);
                Some((*units, c))
            })
            .take_while(|(units, _)| *units < self.column)
            .map(|(_, c)| match c {
                '\t' => "\t",
                c if is_wide(c) => "  ",
                _ => " ",
            })
            .collect();
        format!(
            "{file}:{}:{}: {} {}\n  | {}\n  | {}^",
            self.line, self.column, self.code, self.message, self.frame, caret_pad
        )
    }
}

/// Whether a terminal shows `c` two cells wide: astral-plane characters (emoji) and the main East
/// Asian wide ranges. An approximation of Unicode's East Asian Width, enough to place a caret.
fn is_wide(c: char) -> bool {
    matches!(c as u32,
        0x1100..=0x115F
        | 0x2E80..=0x303E
        | 0x3041..=0x33FF
        | 0x3400..=0x4DBF
        | 0x4E00..=0x9FFF
        | 0xA000..=0xA4CF
        | 0xAC00..=0xD7A3
        | 0xF900..=0xFAFF
        | 0xFE30..=0xFE4F
        | 0xFF00..=0xFF60
        | 0xFFE0..=0xFFE6
        | 0x1F000..)
}

/// Moves `offset` back onto a UTF-8 character boundary inside `source` (oxc and our scanner work
/// in bytes; a clamped offset must never split a character).
pub(crate) fn clamp_to_char_boundary(source: &str, offset: usize) -> usize {
    let mut offset = offset.min(source.len());
    while offset > 0 && !source.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

/// Collects diagnostics for one input while remembering which input it is.
pub(crate) struct Sink<'s> {
    pub(crate) source: &'s str,
    pub(crate) file: SourceFile,
    pub(crate) list: Vec<Diagnostic>,
}

impl<'s> Sink<'s> {
    pub(crate) fn new(source: &'s str, file: SourceFile) -> Self {
        Sink {
            source,
            file,
            list: Vec::new(),
        }
    }

    pub(crate) fn error(
        &mut self,
        code: DiagnosticCode,
        offset: usize,
        message: impl Into<String>,
    ) {
        self.list.push(Diagnostic::at(
            code,
            message,
            self.file,
            self.source,
            offset,
        ));
    }

    pub(crate) fn has_errors(&self) -> bool {
        !self.list.is_empty()
    }
}
