//! Scoped `<style>`: every selector of the screen's stylesheet is narrowed to the screen's own
//! elements by adding the scope class (`hfx-<hash>`) to each compound selector.
//!
//! `:global(sel)` opts a selector part out of scoping. `@media`, `@supports`, `@container` and
//! `@layer` blocks are scoped inside; other at-rules (`@keyframes`, `@font-face`) are copied as
//! they are. This is a small scanner, not a CSS parser: it tracks strings, comments and brackets
//! and never recurses deeper than the markup's own nesting of at-rules (bounded by the input).

/// Rewrites `css` so that its rules only match elements carrying `scope` as a class.
pub(crate) fn scope_css(css: &str, scope: &str) -> String {
    let mut out = String::with_capacity(css.len() + 64);
    let mut i = 0;
    let bytes = css.as_bytes();
    // Depth of at-rule blocks whose content is scoped; other blocks are copied verbatim.
    let mut scoped_blocks = 0usize;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_whitespace() {
            out.push(c as char);
            i += 1;
            continue;
        }
        if css[i..].starts_with("/*") {
            let end = css[i + 2..].find("*/").map_or(css.len(), |p| i + 2 + p + 2);
            out.push_str(&css[i..end]);
            i = end;
            continue;
        }
        if c == b'}' {
            scoped_blocks = scoped_blocks.saturating_sub(1);
            out.push('}');
            i += 1;
            continue;
        }
        // A prelude runs to `{` or `;` at bracket depth 0.
        let prelude_end = find_outside(css, i, |b| b == b'{' || b == b';').unwrap_or(css.len());
        let prelude = &css[i..prelude_end];
        if prelude_end >= css.len() {
            out.push_str(prelude);
            break;
        }
        if bytes[prelude_end] == b';' {
            out.push_str(&css[i..=prelude_end]);
            i = prelude_end + 1;
            continue;
        }
        let at_rule = prelude.trim_start().starts_with('@');
        let nested = at_rule && {
            let name = prelude.trim_start()[1..]
                .split(|ch: char| !ch.is_ascii_alphanumeric() && ch != '-')
                .next()
                .unwrap_or("");
            matches!(
                name,
                "media" | "supports" | "container" | "layer" | "document"
            )
        };
        if nested {
            out.push_str(prelude);
            out.push('{');
            scoped_blocks += 1;
            i = prelude_end + 1;
            continue;
        }
        if at_rule {
            // Copy the whole block verbatim.
            let end = block_end(css, prelude_end).unwrap_or(css.len());
            out.push_str(&css[i..end]);
            i = end;
            continue;
        }
        scope_selector_list(prelude, scope, &mut out);
        let end = block_end(css, prelude_end).unwrap_or(css.len());
        out.push_str(&css[prelude_end..end]);
        i = end;
    }
    let _ = scoped_blocks;
    out
}

/// Index just after the `}` matching the `{` at `open`.
fn block_end(css: &str, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = open;
    let bytes = css.as_bytes();
    while i < bytes.len() {
        match bytes[i] {
            b'"' | b'\'' => i = skip_string(css, i),
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i = css[i + 2..].find("*/").map_or(css.len(), |p| i + 2 + p + 2);
            }
            b'{' => {
                depth += 1;
                i += 1;
            }
            b'}' => {
                depth -= 1;
                i += 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => i += 1,
        }
    }
    None
}

fn skip_string(css: &str, start: usize) -> usize {
    let bytes = css.as_bytes();
    let quote = bytes[start];
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            c if c == quote => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

/// First byte from `from` outside strings, comments and brackets for which `want` holds.
fn find_outside(css: &str, from: usize, want: impl Fn(u8) -> bool) -> Option<usize> {
    let bytes = css.as_bytes();
    let mut depth = 0usize;
    let mut i = from;
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b'"' | b'\'' => {
                i = skip_string(css, i);
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i = css[i + 2..].find("*/").map_or(css.len(), |p| i + 2 + p + 2);
                continue;
            }
            b'(' | b'[' => depth += 1,
            b')' | b']' => depth = depth.saturating_sub(1),
            _ if depth == 0 && want(c) => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

/// Writes each selector of a comma-separated list with the scope added.
fn scope_selector_list(list: &str, scope: &str, out: &mut String) {
    let mut start = 0;
    while let Some(comma) = find_outside(list, start, |b| b == b',') {
        scope_selector(&list[start..comma], scope, out);
        out.push(',');
        start = comma + 1;
    }
    scope_selector(&list[start..], scope, out);
}

/// Adds `.scope` to every compound selector of one complex selector.
fn scope_selector(selector: &str, scope: &str, out: &mut String) {
    let bytes = selector.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        // Copy combinators and whitespace.
        if bytes[i].is_ascii_whitespace() || matches!(bytes[i], b'>' | b'+' | b'~') {
            out.push(bytes[i] as char);
            i += 1;
            continue;
        }
        let end = find_outside(selector, i, |b| {
            b.is_ascii_whitespace() || matches!(b, b'>' | b'+' | b'~')
        })
        .unwrap_or(selector.len());
        let compound = &selector[i..end];
        if let Some(inner) = compound
            .strip_prefix(":global(")
            .and_then(|r| r.strip_suffix(')'))
        {
            out.push_str(inner);
        } else {
            // Insert before the first pseudo-class or pseudo-element.
            let pseudo = find_outside(compound, 0, |b| b == b':').unwrap_or(compound.len());
            out.push_str(&compound[..pseudo]);
            out.push('.');
            out.push_str(scope);
            out.push_str(&compound[pseudo..]);
        }
        i = end;
    }
}
