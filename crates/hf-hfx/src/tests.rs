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
        let doc = markup::parse(&mut sink);
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
    let doc = markup::Document {
        script: None,
        style: None,
        nodes: vec![markup::Node::Expr(markup::Span { start: 0, end: 6 })],
    };
    let alloc = Allocator::default();
    assert!(
        crate::program::Unit::build(&alloc, source, &doc, crate::imports::Urls::default())
            .is_none()
    );
    let fine = markup::Document {
        nodes: vec![markup::Node::Expr(markup::Span { start: 0, end: 1 })],
        ..markup::Document::default()
    };
    assert!(
        crate::program::Unit::build(&alloc, source, &fine, crate::imports::Urls::default())
            .is_some()
    );
}
