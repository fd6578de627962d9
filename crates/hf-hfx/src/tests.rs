//! Unit tests of the compiler's internals: every valid fixture screen must take the one-pass
//! path (`program.rs`), since falling back to piece-by-piece compiling is correct but slow and
//! would go unnoticed otherwise.

use oxc::allocator::Allocator;

use crate::diagnostics::{Sink, SourceFile};
use crate::{compile, compile_in_one_pass, css, markup};

fn fixtures() -> Vec<(String, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/hfx/ok");
    let mut found: Vec<(String, String)> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|entry| {
            let path = entry.unwrap().path();
            (path.extension()? == "hfx").then(|| {
                (
                    path.display().to_string(),
                    std::fs::read_to_string(&path).unwrap(),
                )
            })
        })
        .collect();
    found.sort();
    assert!(found.len() > 10);
    found
}

#[test]
fn valid_screens_compile_in_one_pass() {
    for (name, source) in fixtures() {
        let alloc = Allocator::default();
        let mut sink = Sink::new(&source, SourceFile::Screen);
        let doc = markup::parse(&alloc, &mut sink);
        assert!(!sink.has_errors(), "{name}");
        let hash = crate::content_hash(&source);
        let scope = doc.style.map(|_| format!("hfx-{}", &hash[..8]));
        let styles = match (doc.style, &scope) {
            (Some(span), Some(scope)) => css::scope_css(&source[span.start..span.end], scope),
            _ => String::new(),
        };
        let js = compile_in_one_pass(
            &alloc,
            &source,
            &doc,
            scope.as_deref(),
            &styles,
            crate::imports::Urls::default(),
        );
        let (js, _) = js.unwrap_or_else(|| panic!("{name} fell back to compiling piece by piece"));
        assert_eq!(js, compile(&source, None).js, "{name}");
    }
}

#[test]
fn a_piece_that_is_not_one_expression_is_refused() {
    // The markup scanner balances brackets, so this cannot come from a screen today; should a
    // piece ever read `a), (b`, the one program would parse (as `(a), (b)`) with the wrong shape.
    let source = "a), (b";
    let alloc = Allocator::default();
    // A document of one `{expression}` over `source[..end]`.
    let expression = |end: usize| {
        let mut doc = markup::Document::new(&alloc);
        doc.nodes
            .push(markup::Node::Expr(markup::Span { start: 0, end }));
        doc
    };
    let doc = expression(6);
    assert!(
        crate::program::Unit::build(&alloc, source, &doc, crate::imports::Urls::default())
            .is_none()
    );
    let fine = expression(1);
    assert!(
        crate::program::Unit::build(&alloc, source, &fine, crate::imports::Urls::default())
            .is_some()
    );
}

/// The sources of the fixtures in `fixtures/hfx/<kind>`.
fn fixture_sources(kind: &str) -> Vec<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/hfx")
        .join(kind);
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "hfx"))
        .map(|path| std::fs::read_to_string(path).unwrap())
        .collect()
}

/// Every tag in `markup::TAGS` is one the parser recognises, and the same keywords behind
/// another sigil are not: the list and the parser's dispatch say the same thing.
#[test]
fn the_tag_list_is_the_tags_the_parser_knows() {
    let unknown = |source: &str| {
        compile(source, None)
            .diagnostics
            .iter()
            .any(|d| d.message.starts_with("unknown tag"))
    };
    for tag in markup::TAGS {
        assert!(!unknown(&format!("{tag} x}}")), "{tag} is known");
        let keyword = &tag[2..];
        for sigil in ["{#", "{:", "{/", "{@"] {
            let spelled = format!("{sigil}{keyword}");
            if !markup::TAGS.contains(&spelled.as_str()) {
                assert!(unknown(&format!("{spelled} x}}")), "{spelled} is unknown");
            }
        }
    }
    let output = compile("{#eahc items as item}{/each}", None);
    assert!(
        output.diagnostics[0]
            .message
            .contains("did you mean `{#each`?"),
        "{:?}",
        output.diagnostics
    );
}

/// Every tag and every rune has a fixture that compiles and one that is refused (`{@html` is
/// always refused), so a new construct cannot arrive without both.
#[test]
fn every_tag_and_rune_has_an_ok_and_an_err_fixture() {
    let ok = fixture_sources("ok");
    let err = fixture_sources("err");
    let in_some = |sources: &[String], needle: &str| sources.iter().any(|s| s.contains(needle));
    let mut missing = Vec::new();
    for tag in markup::TAGS {
        if *tag != "{@html" && !in_some(&ok, tag) {
            missing.push(format!("ok fixture with {tag}"));
        }
        if !in_some(&err, tag) {
            missing.push(format!("err fixture with {tag}"));
        }
    }
    for rune in crate::js::RUNES {
        let call = format!("{rune}(");
        if !in_some(&ok, &call) {
            missing.push(format!("ok fixture calling {rune}"));
        }
        if !in_some(&err, &call) {
            missing.push(format!("err fixture calling {rune}"));
        }
    }
    assert!(missing.is_empty(), "missing: {missing:?}");
}

#[test]
fn the_typescript_strip_runs_where_it_changes_the_program() {
    let js = |source: &str| {
        let out = compile(source, None);
        assert!(
            out.diagnostics.is_empty(),
            "{source}: {:?}",
            out.diagnostics
        );
        out.js.unwrap_or_default()
    };
    // Plain JavaScript but for an import nothing reads, which the strip removes.
    let unread =
        js("<script>import { used, unread } from './sidecar'; let n = 0;</script><p>{used(n)}</p>");
    assert!(
        unread.contains("used") && !unread.contains("unread"),
        "{unread}"
    );
    // TypeScript that is a node, in the script and in the markup, and TypeScript that is a flag.
    let typed = js(
        "<script>let n: number = 0; let later!: string; function f(x?) { return x; }</script>\
         <p>{n as unknown}</p><p>{f(n)}</p>",
    );
    for ts in [": number", "unknown", "!:", "x?"] {
        assert!(!typed.contains(ts), "{ts} in {typed}");
    }
    // Plain JavaScript skips the strip and prints the same.
    let plain = js("<script>let n = 0; const double = (x) => x * 2;</script><p>{double(n)}</p>");
    assert!(plain.contains("const double = (x) => x * 2;"), "{plain}");
}

#[test]
fn layout_whitespace_is_whitespace_with_a_line_break() {
    use crate::markup::is_layout_whitespace;
    // The indentation between tags, with any whitespace on its lines.
    assert!(is_layout_whitespace("\n    "));
    assert!(is_layout_whitespace(" \t\r\n\x0c "));
    assert!(is_layout_whitespace("\u{a0}\n\u{2003}"));
    assert!(is_layout_whitespace("\n\u{2003}"));
    assert!(!is_layout_whitespace("\u{2003}"));
    assert!(!is_layout_whitespace("\n\u{e9}"));
    // Whitespace on one line separates words and stays; anything else is text.
    assert!(!is_layout_whitespace(" "));
    assert!(!is_layout_whitespace(""));
    assert!(!is_layout_whitespace("\n a\n"));
    assert!(!is_layout_whitespace("&nbsp;\n"));
}
