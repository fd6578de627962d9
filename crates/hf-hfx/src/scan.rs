//! A tiny JavaScript-aware byte scanner used to find where an `{expression}` ends and to split
//! block headers (`{#each list as item, i (key)}`) at their top-level keywords.
//!
//! It knows just enough JavaScript to skip string literals, template literals (with nested
//! `${...}`), and comments, and to track bracket depth. Everything else is left to oxc, which
//! parses the pieces we cut out. Regular-expression literals are not recognised, so a `}` inside
//! one ends an expression early (oxc then reports the broken expression). It never recurses, so
//! hostile input cannot overflow the stack.

/// Iterates over the "code" bytes of JavaScript text (bytes outside strings and comments).
pub(crate) struct JsScan<'a> {
    s: &'a [u8],
    i: usize,
    /// Open brackets; `$` marks an open template substitution `${`.
    stack: Vec<u8>,
    /// Set when a string, template or comment runs to the end of the text.
    pub(crate) unterminated: bool,
}

impl<'a> JsScan<'a> {
    pub(crate) fn new(text: &'a str, start: usize) -> Self {
        JsScan {
            s: text.as_bytes(),
            i: start,
            stack: Vec::new(),
            unterminated: false,
        }
    }

    /// Returns the next code byte, its offset, and the bracket depth in front of it.
    pub(crate) fn next_code(&mut self) -> Option<(usize, u8, usize)> {
        loop {
            let c = *self.s.get(self.i)?;
            match c {
                b'\'' | b'"' => {
                    if !self.skip_string(c) {
                        return None;
                    }
                    continue;
                }
                b'`' => {
                    self.i += 1;
                    if !self.template_body() {
                        return None;
                    }
                    continue;
                }
                b'/' if self.s.get(self.i + 1) == Some(&b'/') => {
                    self.i = line_comment_end(self.s, self.i + 2);
                    continue;
                }
                b'/' if self.s.get(self.i + 1) == Some(&b'*') => {
                    match find(self.s, self.i + 2, b"*/") {
                        Some(end) => self.i = end + 2,
                        None => {
                            self.unterminated = true;
                            self.i = self.s.len();
                            return None;
                        }
                    }
                    continue;
                }
                _ => {}
            }
            let depth = self.stack.len();
            let pos = self.i;
            self.i += 1;
            match c {
                b'(' | b'[' | b'{' => self.stack.push(c),
                b')' | b']' => {
                    self.stack.pop();
                }
                b'}' if depth > 0 && self.stack.pop() == Some(b'$') => {
                    // The end of a `${...}` substitution: back inside the template text.
                    if !self.template_body() {
                        return None;
                    }
                    continue;
                }
                _ => {}
            }
            return Some((pos, c, depth));
        }
    }

    /// Skips a quoted string starting at `self.i`. A raw line feed or carriage return ends it,
    /// as in JavaScript (oxc reports the unterminated string); only the end of the text makes
    /// the scan fail.
    fn skip_string(&mut self, quote: u8) -> bool {
        let mut j = self.i + 1;
        while j < self.s.len() {
            match self.s[j] {
                b'\\' => j += 2,
                b'\n' | b'\r' => break,
                c if c == quote => break,
                _ => j += 1,
            }
        }
        if j >= self.s.len() {
            self.unterminated = true;
            self.i = self.s.len();
            return false;
        }
        self.i = j + 1;
        true
    }

    /// Skips template text up to the closing backtick or the next `${`.
    fn template_body(&mut self) -> bool {
        loop {
            match self.s.get(self.i) {
                None => {
                    self.unterminated = true;
                    return false;
                }
                Some(b'\\') => self.i += 2,
                Some(b'`') => {
                    self.i += 1;
                    return true;
                }
                Some(b'$') if self.s.get(self.i + 1) == Some(&b'{') => {
                    self.i += 2;
                    self.stack.push(b'$');
                    return true;
                }
                Some(_) => self.i += 1,
            }
        }
    }
}

fn find(s: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    if from >= s.len() {
        return None;
    }
    s[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

/// Finds the `}` that closes an expression whose text starts at `start` (just after its `{`).
pub(crate) fn find_expression_end(text: &str, start: usize) -> Option<usize> {
    let mut scan = JsScan::new(text, start);
    loop {
        // Only brackets matter here, and only the bytes in `SCAN_STATE` change the scan: the
        // rest is skipped a run at a time (this runs over every expression of the markup).
        while scan
            .s
            .get(scan.i)
            .is_some_and(|&b| !SCAN_STATE[usize::from(b)])
        {
            scan.i += 1;
        }
        let (pos, c, depth) = scan.next_code()?;
        if c == b'}' && depth == 0 {
            return Some(pos);
        }
    }
}

/// The bytes that change [`JsScan`]'s state: quotes, backticks, the `/` of a comment, brackets.
const SCAN_STATE: [bool; 256] = {
    let mut table = [false; 256];
    let special = b"'\"`/()[]{}";
    let mut i = 0;
    while i < special.len() {
        table[special[i] as usize] = true;
        i += 1;
    }
    table
};

/// Offset (relative to `text`) of the last top-level `as` keyword, as in `list as item`.
pub(crate) fn last_top_level_as(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut scan = JsScan::new(text, 0);
    let mut found = None;
    while let Some((pos, c, depth)) = scan.next_code() {
        if depth == 0
            && c == b'a'
            && bytes.get(pos + 1) == Some(&b's')
            && pos > 0
            && bytes[pos - 1].is_ascii_whitespace()
            && bytes.get(pos + 2).is_some_and(u8::is_ascii_whitespace)
        {
            found = Some(pos);
        }
    }
    found
}

/// Offset of the whitespace before the last top-level occurrence of `word` (written with one
/// leading space, like `" then"`) as a whole word, outside strings and brackets.
pub(crate) fn last_top_level_word(text: &str, word: &str) -> Option<usize> {
    let keyword = word.trim_start().as_bytes();
    let first = *keyword.first()?;
    let bytes = text.as_bytes();
    let mut scan = JsScan::new(text, 0);
    let mut found = None;
    while let Some((pos, c, depth)) = scan.next_code() {
        if depth == 0
            && c == first
            && pos > 0
            && bytes[pos - 1].is_ascii_whitespace()
            && bytes[pos..].starts_with(keyword)
            && bytes
                .get(pos + keyword.len())
                .is_none_or(u8::is_ascii_whitespace)
        {
            found = Some(pos - 1);
        }
    }
    found
}

/// Offset of the first top-level byte for which `want` holds.
pub(crate) fn first_top_level(text: &str, want: impl Fn(u8) -> bool) -> Option<usize> {
    let mut scan = JsScan::new(text, 0);
    while let Some((pos, c, depth)) = scan.next_code() {
        if depth == 0 && want(c) {
            return Some(pos);
        }
    }
    None
}

/// A rough upper bound of how deeply oxc will recurse on `text`.
///
/// oxc's parser, semantic analysis, transformer and printer are recursive, so an expression
/// nested a hundred thousand levels deep would overflow the stack. This counts open brackets plus
/// the operators and keywords that build nested syntax trees (operator chains, unary chains,
/// `else if` chains) since the last `;` or `,` of each bracket level. Real code stays far below
/// [`MAX_JS_NESTING`]; hostile input is rejected before oxc sees it.
///
/// It skips strings, template text and comments the way [`JsScan`] does, in one tight loop over
/// the bytes (it runs over every script, sidecar and expression, so it must cost little next to
/// parsing): identifiers and whitespace are skipped a run at a time.
pub(crate) fn js_nesting_estimate(text: &str) -> usize {
    let s = text.as_bytes();
    // Operators counted at each open bracket level; the bracket itself (`$` for `${`).
    let mut levels: Vec<(usize, u8)> = vec![(0, b' ')];
    let mut total = 0usize;
    let mut worst = 0usize;
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        if IDENT[c as usize] {
            // A whole identifier (or number) at once; only a word can be a keyword.
            let start = i;
            i += 1;
            while i < s.len() && IDENT[s[i] as usize] {
                i += 1;
            }
            let word = &s[start..i];
            if c.is_ascii_lowercase() && is_nesting_keyword(word) {
                if let Some(level) = levels.last_mut() {
                    level.0 += 1;
                    total += 1;
                    worst = worst.max(total);
                }
            }
            continue;
        }
        match c {
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b'\'' | b'"' => {
                // To the closing quote; a raw newline ends the string as in JavaScript.
                i += 1;
                loop {
                    match s.get(i) {
                        None => return worst,
                        Some(b'\\') => i += 2,
                        Some(&b) if b == c || b == b'\n' || b == b'\r' => {
                            i += 1;
                            break;
                        }
                        Some(_) => i += 1,
                    }
                }
            }
            b'`' => {
                i += 1;
                match template_text(s, i, &mut levels) {
                    Some(next) => i = next,
                    None => return worst,
                }
            }
            b'/' if s.get(i + 1) == Some(&b'/') => i = line_comment_end(s, i + 2),
            b'/' if s.get(i + 1) == Some(&b'*') => match find(s, i + 2, b"*/") {
                Some(end) => i = end + 2,
                None => return worst,
            },
            b'(' | b'[' | b'{' => {
                levels.push((0, c));
                total += 1;
                worst = worst.max(total);
                i += 1;
            }
            b')' | b']' | b'}' => {
                i += 1;
                if levels.len() > 1 {
                    let (ops, open) = levels.pop().unwrap_or((0, b' '));
                    if open == b'$' {
                        // The end of a `${...}` substitution (not counted as a bracket): back
                        // inside the template text.
                        total = total.saturating_sub(ops);
                        match template_text(s, i, &mut levels) {
                            Some(next) => i = next,
                            None => return worst,
                        }
                    } else {
                        total = total.saturating_sub(ops + 1);
                    }
                }
            }
            b';' | b',' => {
                if let Some(level) = levels.last_mut() {
                    total -= level.0;
                    level.0 = 0;
                }
                i += 1;
            }
            b'+' | b'-' | b'*' | b'/' | b'%' | b'<' | b'>' | b'=' | b'&' | b'|' | b'^' | b'!'
            | b'~' | b'?' | b':' | b'.' => {
                // Every operator character counts (`===` three times): generous to real code,
                // and a chain like `!!!!x` or `+-+-x` cannot slip through as one "run".
                if let Some(level) = levels.last_mut() {
                    level.0 += 1;
                    total += 1;
                    worst = worst.max(total);
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    worst
}

/// Bytes of identifiers and numbers (`is_ident_byte` as a table, for the hot loop above).
const IDENT: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = is_ident_byte(b as u8);
        b += 1;
    }
    table
};

/// Skips template text from `i` to the closing backtick (returns the offset after it) or to a
/// `${` (pushes a `$` level, which the next `}` closes, and returns the offset after it); `None`
/// at the end of the text.
fn template_text(s: &[u8], mut i: usize, levels: &mut Vec<(usize, u8)>) -> Option<usize> {
    loop {
        match s.get(i)? {
            b'\\' => i += 2,
            b'`' => return Some(i + 1),
            b'$' if s.get(i + 1) == Some(&b'{') => {
                levels.push((0, b'$'));
                return Some(i + 2);
            }
            _ => i += 1,
        }
    }
}

/// Keywords that nest syntax trees like operators do. Dispatches on the length first, so the
/// common case (an ordinary identifier) costs one or two comparisons.
fn is_nesting_keyword(word: &[u8]) -> bool {
    match word.len() {
        2 => matches!(word, b"if" | b"do" | b"in"),
        3 => matches!(word, b"new" | b"for"),
        4 => matches!(word, b"void" | b"else" | b"with"),
        5 => matches!(word, b"await" | b"yield" | b"while"),
        6 => matches!(word, b"typeof" | b"delete"),
        7 => word == b"extends",
        10 => word == b"instanceof",
        _ => false,
    }
}

const fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

/// Where a `//` comment whose text starts at `i` ends: at the next line terminator of
/// JavaScript (line feed, carriage return, U+2028 or U+2029), or the end of the text. A scanner
/// that ended it at line feeds only would take the code after a lone carriage return for
/// comment, where oxc parses it: the nesting estimate was bypassed so (found by fuzzing).
fn line_comment_end(s: &[u8], mut i: usize) -> usize {
    while i < s.len() {
        match s[i] {
            b'\n' | b'\r' => break,
            // U+2028 and U+2029 in UTF-8.
            0xE2 if s.get(i + 1) == Some(&0x80) && matches!(s.get(i + 2), Some(0xA8 | 0xA9)) => {
                break
            }
            _ => i += 1,
        }
    }
    i
}

/// The deepest [`js_nesting_estimate`] handed to oxc.
///
/// It also bounds the parser's time: oxc parses TypeScript's `f<T>(x)` by trying type
/// arguments at every `<` after a name and starting again when that fails, and inside unclosed
/// brackets those attempts nest. A 1 KB sidecar of unclosed `[`, `(` and `name<` found by
/// fuzzing the compiler (estimate 580) took 14.5 s to refuse in a release build, its first 800
/// bytes (445) 3.8 s, its first 600 (330) 0.33 s: the time grows much faster than the depth.
/// Its first 400 bytes (218) take 10 ms. Screens written by people nest a few dozen levels.
pub(crate) const MAX_JS_NESTING: usize = 256;
