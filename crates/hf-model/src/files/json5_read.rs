//! Reading one JSON5 metadata file, with size and depth bounded before the parser runs.
//!
//! The `json5` crate (1.x, a hand-written streaming parser with exact error positions) parses
//! recursively and has no depth limit, so a file of a million `[` would exhaust the stack. [`parse`] therefore checks the size first, then scans the text once,
//! tracking strings and comments exactly as JSON5 defines them, and refuses nesting deeper than
//! [`MAX_DEPTH`] before handing the text to the parser. On valid JSON5 the scan's count is exact;
//! on invalid JSON5 the parser stops at the first error, before any deeper nesting.

use serde::de::DeserializeOwned;

use crate::error::Error;

/// The largest metadata file, in bytes.
pub const MAX_FILE_BYTES: usize = 4 * 1024 * 1024;

/// The deepest nesting of objects and arrays in a metadata file.
pub const MAX_DEPTH: usize = 64;

/// Parses one file's bytes as JSON5 into `T`, naming `file` in every error.
pub(crate) fn parse<T: DeserializeOwned>(file: &str, bytes: &[u8]) -> Result<T, Error> {
    if bytes.len() > MAX_FILE_BYTES {
        return Err(Error::TooLarge {
            file: file.to_owned(),
            size: bytes.len(),
            limit: MAX_FILE_BYTES,
        });
    }
    let text = std::str::from_utf8(bytes).map_err(|_| Error::NotUtf8 {
        file: file.to_owned(),
    })?;
    check_depth(file, text)?;
    // The parser is third-party code; a panic in it must not take the service down.
    let parsed = std::panic::catch_unwind(|| json5_v1::from_str::<T>(text));
    match parsed {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => {
            // Positions are 0-based; ours are 1-based like the error's own text.
            let position = error.position();
            Err(Error::Syntax {
                file: file.to_owned(),
                line: position.map(|p| p.line + 1),
                column: position.map(|p| p.column + 1),
                message: short_message(&error.to_string()),
            })
        }
        Err(_) => Err(Error::Syntax {
            file: file.to_owned(),
            line: None,
            column: None,
            message: "the JSON5 parser failed on this file".to_owned(),
        }),
    }
}

/// The parser's message without its ` at line L column C` suffix, which [`Error::Syntax`] shows.
fn short_message(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(index) => message[..index].to_owned(),
        None => message.to_owned(),
    }
}

/// Where the scanner is: in code, in a string (with its quote), or in a comment.
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Code,
    String(char),
    LineComment,
    BlockComment,
}

/// Refuses nesting deeper than [`MAX_DEPTH`], naming the line where it is crossed.
pub(crate) fn check_depth(file: &str, text: &str) -> Result<(), Error> {
    let mut state = State::Code;
    let mut depth = 0usize;
    let mut line = 1usize;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\n' {
            line += 1;
        }
        match state {
            State::Code => match c {
                '{' | '[' => {
                    depth += 1;
                    if depth > MAX_DEPTH {
                        return Err(Error::TooDeep {
                            file: file.to_owned(),
                            line,
                            limit: MAX_DEPTH,
                        });
                    }
                }
                '}' | ']' => depth = depth.saturating_sub(1),
                '"' | '\'' => state = State::String(c),
                '/' => match chars.peek() {
                    Some('/') => {
                        chars.next();
                        state = State::LineComment;
                    }
                    Some('*') => {
                        chars.next();
                        state = State::BlockComment;
                    }
                    _ => {}
                },
                _ => {}
            },
            State::String(quote) => match c {
                '\\' => {
                    // An escape takes the next character; `\` CR LF is one line continuation.
                    match chars.next() {
                        Some('\n') => line += 1,
                        Some('\r') => {
                            if chars.peek() == Some(&'\n') {
                                chars.next();
                            }
                            line += 1;
                        }
                        _ => {}
                    }
                }
                '\n' | '\r' | '\u{2028}' | '\u{2029}' => state = State::Code,
                _ if c == quote => state = State::Code,
                _ => {}
            },
            State::LineComment => {
                if matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}') {
                    state = State::Code;
                }
            }
            State::BlockComment => {
                if c == '*' && chars.peek() == Some(&'/') {
                    chars.next();
                    state = State::Code;
                }
            }
        }
    }
    Ok(())
}
