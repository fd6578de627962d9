//! The lexer: source text to tokens with byte spans.
//!
//! Tokens carry only a kind and a span; the parser reads their text from the source. Keywords
//! are plain words here (the parser compares them case-insensitively), so a word is a keyword
//! only where the grammar expects one. The lexer never panics: every byte is either part of a
//! token, skipped as whitespace or comment, or reported as a diagnostic.

use crate::ast::Span;
use crate::diagnostics::{self as diag, Diagnostic};

/// What a token is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TokenKind {
    /// A bare word: a name or a keyword (`[A-Za-z_][A-Za-z0-9_]*`).
    Word,
    /// A `"double-quoted"` name, for names that are keywords or not plain words.
    QuotedName,
    /// A `'single-quoted'` text literal.
    String,
    /// Digits.
    Integer,
    /// Digits, `.`, digits.
    Decimal,
    /// `YYYY-MM-DD`.
    Date,
    /// `YYYY-MM-DDTHH:MM:SS[.ffffff](Z|+HH:MM|-HH:MM)`.
    DateTime,
    /// `:name`.
    Param,
    /// A relative date literal with a count, `LAST_N_DAYS:30` (the name is one of
    /// [`crate::ast::DATE_N_LITERALS`]).
    DateRange,
    /// `$name`: a global such as `$User`.
    Global,
    Plus,
    Minus,
    Star,
    Slash,
    /// `||`
    Concat,
    Eq,
    /// `!=` or `<>`
    NotEq,
    Lt,
    LtEq,
    Gt,
    GtEq,
    LParen,
    RParen,
    Comma,
    Dot,
    /// The end of the source; always the last token.
    Eof,
}

/// A token: its kind and where it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Token {
    pub(crate) kind: TokenKind,
    pub(crate) span: Span,
}

/// The lexer stops after this many problems; later ones are usually consequences.
const MAX_LEX_ERRORS: usize = 20;

/// Splits `src` into tokens (ending with [`TokenKind::Eof`]) and the problems found.
pub(crate) fn lex(src: &str) -> (Vec<Token>, Vec<Diagnostic>) {
    let mut lexer = Lexer {
        src,
        bytes: src.as_bytes(),
        pos: 0,
        tokens: Vec::new(),
        errors: Vec::new(),
    };
    while lexer.pos < lexer.bytes.len() && lexer.errors.len() < MAX_LEX_ERRORS {
        lexer.next_token();
    }
    // The end is reported right after the last token, not after trailing blank lines, so
    // "found the end of the query" points at the line where something is missing.
    let end = lexer.tokens.last().map_or(0, |token| token.span.end);
    lexer.tokens.push(Token {
        kind: TokenKind::Eof,
        span: Span::new(end, end),
    });
    (lexer.tokens, lexer.errors)
}

/// The result key text of an expression item: the tokens of `text` concatenated without
/// whitespace or comments (one space only between two words), lower-cased except inside
/// text literals and quoted names.
pub(crate) fn compact_text(text: &str) -> String {
    let (tokens, _) = lex(text);
    let mut out = String::with_capacity(text.len());
    let mut previous_is_wordlike = false;
    for token in tokens {
        let piece = text.get(token.span.start..token.span.end).unwrap_or("");
        // One space is kept where two words would otherwise fuse (`count(distinct x)`).
        let wordlike = matches!(
            token.kind,
            TokenKind::Word | TokenKind::Integer | TokenKind::Decimal | TokenKind::Param
        );
        if wordlike && previous_is_wordlike {
            out.push(' ');
        }
        previous_is_wordlike = wordlike;
        match token.kind {
            TokenKind::String | TokenKind::QuotedName => out.push_str(piece),
            _ => out.push_str(&piece.to_ascii_lowercase()),
        }
    }
    out
}

/// True for the bytes that may start a bare word.
pub(crate) fn is_word_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

/// True for the bytes that may continue a bare word.
pub(crate) fn is_word_continue(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

struct Lexer<'a> {
    src: &'a str,
    bytes: &'a [u8],
    pos: usize,
    tokens: Vec<Token>,
    errors: Vec<Diagnostic>,
}

impl Lexer<'_> {
    /// The byte at `at`, or 0 past the end (0 never starts or continues a token).
    fn byte(&self, at: usize) -> u8 {
        self.bytes.get(at).copied().unwrap_or(0)
    }

    fn push(&mut self, kind: TokenKind, start: usize, end: usize) {
        self.tokens.push(Token {
            kind,
            span: Span::new(start, end),
        });
        self.pos = end;
    }

    fn error(&mut self, diagnostic: Diagnostic, resume_at: usize) {
        self.errors.push(diagnostic);
        self.pos = resume_at.max(self.pos + 1).min(self.bytes.len());
    }

    fn text(&self, start: usize, end: usize) -> &str {
        self.src.get(start..end).unwrap_or("")
    }

    fn next_token(&mut self) {
        let start = self.pos;
        let b = self.byte(start);
        let next = self.byte(start + 1);
        match b {
            b' ' | b'\t' | b'\n' | b'\r' | 0x0c => self.pos += 1,
            b'-' if next == b'-' => self.line_comment(),
            b'/' if next == b'*' => self.block_comment(),
            b'\'' => self.quoted(b'\'', TokenKind::String),
            b'"' => self.quoted(b'"', TokenKind::QuotedName),
            b'0'..=b'9' => self.number_or_date(),
            b':' => self.param(),
            _ if is_word_start(b) => {
                let end = self.scan_while(start, is_word_continue);
                let word = self.text(start, end);
                let counted = self.byte(end) == b':'
                    && self.byte(end + 1).is_ascii_digit()
                    && crate::ast::DATE_N_LITERALS
                        .iter()
                        .any(|name| name.eq_ignore_ascii_case(word));
                if counted {
                    let digits_end = self.scan_while(end + 1, |b| b.is_ascii_digit());
                    self.push(TokenKind::DateRange, start, digits_end);
                } else {
                    self.push(TokenKind::Word, start, end);
                }
            }
            b'$' if is_word_start(next) => {
                let end = self.scan_while(start + 1, is_word_continue);
                self.push(TokenKind::Global, start, end);
            }
            b'+' => self.push(TokenKind::Plus, start, start + 1),
            b'-' => self.push(TokenKind::Minus, start, start + 1),
            b'*' => self.push(TokenKind::Star, start, start + 1),
            b'/' => self.push(TokenKind::Slash, start, start + 1),
            b'(' => self.push(TokenKind::LParen, start, start + 1),
            b')' => self.push(TokenKind::RParen, start, start + 1),
            b',' => self.push(TokenKind::Comma, start, start + 1),
            b'.' => self.push(TokenKind::Dot, start, start + 1),
            b'|' if next == b'|' => self.push(TokenKind::Concat, start, start + 2),
            b'|' => self.error(diag::single_pipe(Span::new(start, start + 1)), start + 1),
            b'=' if next == b'=' => {
                self.error(diag::double_equals(Span::new(start, start + 2)), start + 2)
            }
            b'=' => self.push(TokenKind::Eq, start, start + 1),
            b'!' if next == b'=' => self.push(TokenKind::NotEq, start, start + 2),
            b'!' => self.error(diag::bang(Span::new(start, start + 1)), start + 1),
            b'<' if next == b'=' => self.push(TokenKind::LtEq, start, start + 2),
            b'<' if next == b'>' => self.push(TokenKind::NotEq, start, start + 2),
            b'<' => self.push(TokenKind::Lt, start, start + 1),
            b'>' if next == b'=' => self.push(TokenKind::GtEq, start, start + 2),
            b'>' => self.push(TokenKind::Gt, start, start + 1),
            b'&' if next == b'&' => self.error(
                diag::double_ampersand(Span::new(start, start + 2)),
                start + 2,
            ),
            b'&' => self.error(diag::ampersand(Span::new(start, start + 1)), start + 1),
            b';' => self.error(diag::semicolon(Span::new(start, start + 1)), start + 1),
            _ => {
                // Any other character, possibly multi-byte: report it whole.
                let ch = self
                    .src
                    .get(start..)
                    .and_then(|rest| rest.chars().next())
                    .unwrap_or('\u{FFFD}');
                let end = start + ch.len_utf8();
                self.error(diag::unexpected_char(ch, Span::new(start, end)), end);
            }
        }
    }

    /// The first offset from `from` whose byte does not satisfy `pred`.
    fn scan_while(&self, from: usize, pred: fn(u8) -> bool) -> usize {
        let mut at = from;
        while at < self.bytes.len() && pred(self.byte(at)) {
            at += 1;
        }
        at
    }

    fn line_comment(&mut self) {
        let rest = self.text(self.pos, self.bytes.len());
        self.pos = match rest.find('\n') {
            Some(at) => self.pos + at + 1,
            None => self.bytes.len(),
        };
    }

    fn block_comment(&mut self) {
        let start = self.pos;
        let rest = self.text(start + 2, self.bytes.len());
        match rest.find("*/") {
            Some(at) => self.pos = start + 2 + at + 2,
            None => {
                let len = self.bytes.len();
                self.error(diag::unterminated_comment(Span::new(start, start + 2)), len);
            }
        }
    }

    /// A `'text'` literal or a `"quoted name"`; the quote is doubled to include it.
    fn quoted(&mut self, quote: u8, kind: TokenKind) {
        let start = self.pos;
        let mut at = start + 1;
        loop {
            match self.bytes.get(at) {
                None => {
                    let len = self.bytes.len();
                    let span = Span::new(start, len);
                    let diagnostic = if kind == TokenKind::String {
                        diag::unterminated_string(span)
                    } else {
                        diag::unterminated_quoted_name(span)
                    };
                    self.error(diagnostic, len);
                    return;
                }
                Some(&b) if b == quote => {
                    if self.byte(at + 1) == quote {
                        at += 2;
                    } else {
                        break;
                    }
                }
                Some(_) => at += 1,
            }
        }
        let end = at + 1;
        if let Some(nul) = self.text(start, end).find('\0') {
            let nul = start + nul;
            self.error(diag::nul_in_text(Span::new(nul, nul + 1)), end);
            return;
        }
        if kind == TokenKind::QuotedName && end == start + 2 {
            self.error(diag::empty_quoted_name(Span::new(start, end)), end);
            return;
        }
        self.push(kind, start, end);
    }

    fn param(&mut self) {
        let start = self.pos;
        if is_word_start(self.byte(start + 1)) {
            let end = self.scan_while(start + 1, is_word_continue);
            self.push(TokenKind::Param, start, end);
        } else {
            self.error(
                diag::missing_param_name(Span::new(start, start + 1)),
                start + 1,
            );
        }
    }

    fn number_or_date(&mut self) {
        let start = self.pos;
        let digits_end = self.scan_while(start, |b| b.is_ascii_digit());
        if digits_end - start == 4 && self.looks_like_date(start) {
            self.date(start);
            return;
        }
        let mut end = digits_end;
        let mut kind = TokenKind::Integer;
        if self.byte(end) == b'.' {
            if self.byte(end + 1).is_ascii_digit() {
                end = self.scan_while(end + 1, |b| b.is_ascii_digit());
                kind = TokenKind::Decimal;
            } else {
                let text = self.text(start, end + 1).to_string();
                self.error(
                    diag::missing_decimals(&text, Span::new(start, end + 1)),
                    end + 1,
                );
                return;
            }
        }
        if is_word_continue(self.byte(end)) {
            let bad_end = self.scan_while(end, is_word_continue);
            let text = self.text(start, bad_end).to_string();
            self.error(
                diag::invalid_number(&text, Span::new(start, bad_end)),
                bad_end,
            );
            return;
        }
        self.push(kind, start, end);
    }

    /// `DDDD-DD-DD` at `start` (the caller checked the first four digits).
    fn looks_like_date(&self, start: usize) -> bool {
        let digit = |at: usize| self.byte(at).is_ascii_digit();
        self.byte(start + 4) == b'-'
            && digit(start + 5)
            && digit(start + 6)
            && self.byte(start + 7) == b'-'
            && digit(start + 8)
            && digit(start + 9)
    }

    fn date(&mut self, start: usize) {
        let date_end = start + 10;
        let date_text = self.text(start, date_end).to_string();
        if self.byte(date_end) == b'T' {
            self.datetime(start, &date_text);
            return;
        }
        if is_word_continue(self.byte(date_end)) {
            let bad_end = self.scan_while(date_end, is_word_continue);
            let text = self.text(start, bad_end).to_string();
            self.error(
                diag::invalid_date(
                    &text,
                    "a date is written `YYYY-MM-DD` and a datetime `YYYY-MM-DDTHH:MM:SSZ`",
                    Span::new(start, bad_end),
                ),
                bad_end,
            );
            return;
        }
        match check_date(&date_text) {
            Ok(()) => self.push(TokenKind::Date, start, date_end),
            Err(reason) => self.error(
                diag::invalid_date(&date_text, &reason, Span::new(start, date_end)),
                date_end,
            ),
        }
    }

    fn datetime(&mut self, start: usize, date_text: &str) {
        let end = self.scan_datetime_tail(start + 10);
        let valid = end.is_some_and(|end| !is_word_continue(self.byte(end)));
        match end {
            Some(end) if valid => match check_date(date_text) {
                Ok(()) => self.push(TokenKind::DateTime, start, end),
                Err(reason) => {
                    let text = self.text(start, end).to_string();
                    self.error(
                        diag::invalid_date(&text, &reason, Span::new(start, end)),
                        end,
                    )
                }
            },
            _ => {
                // Report the whole run of characters that could belong to a datetime.
                let bad_end = self.scan_while(start, |b| {
                    is_word_continue(b) || matches!(b, b':' | b'.' | b'-' | b'+')
                });
                let text = self.text(start, bad_end).to_string();
                self.error(
                    diag::invalid_datetime(&text, Span::new(start, bad_end)),
                    bad_end,
                );
            }
        }
    }

    /// Checks `THH:MM:SS[.f{1,6}](Z|±HH:MM)` at `at`; returns its end if well formed.
    fn scan_datetime_tail(&self, at: usize) -> Option<usize> {
        let two = |at: usize, max: u32| -> Option<usize> {
            let tens = self.byte(at);
            let ones = self.byte(at + 1);
            if !tens.is_ascii_digit() || !ones.is_ascii_digit() {
                return None;
            }
            let value = u32::from(tens - b'0') * 10 + u32::from(ones - b'0');
            (value <= max).then_some(at + 2)
        };
        let expect = |at: usize, b: u8| (self.byte(at) == b).then_some(at + 1);
        let mut at = expect(at, b'T')?;
        at = two(at, 23)?;
        at = expect(at, b':')?;
        at = two(at, 59)?;
        at = expect(at, b':')?;
        at = two(at, 59)?;
        if self.byte(at) == b'.' {
            let frac_end = self.scan_while(at + 1, |b| b.is_ascii_digit());
            let digits = frac_end - (at + 1);
            if digits == 0 || digits > 6 {
                return None;
            }
            at = frac_end;
        }
        match self.byte(at) {
            b'Z' => Some(at + 1),
            b'+' | b'-' => {
                at = two(at + 1, 23)?;
                at = expect(at, b':')?;
                two(at, 59)
            }
            _ => None,
        }
    }
}

/// Checks that `YYYY-MM-DD` (shape already checked) is a real calendar day.
fn check_date(text: &str) -> Result<(), String> {
    let number = |range: std::ops::Range<usize>| -> u32 {
        text.get(range)
            .and_then(|digits| digits.parse().ok())
            .unwrap_or(0)
    };
    let year = number(0..4);
    let month = number(5..7);
    let day = number(8..10);
    if year == 0 {
        return Err("year 0000 does not exist".to_string());
    }
    if !(1..=12).contains(&month) {
        return Err(format!("month {month:02} does not exist"));
    }
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days_in_month = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    if day == 0 || day > days_in_month {
        return Err(format!(
            "month {month:02} of {year:04} has {days_in_month} days"
        ));
    }
    Ok(())
}
