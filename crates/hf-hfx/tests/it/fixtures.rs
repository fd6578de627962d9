//! Data-driven fixtures: `fixtures/hfx/ok/*.hfx` (with an optional `<case>.ts` sidecar) must
//! compile without diagnostics and snapshot their output; `fixtures/hfx/err/*.hfx` must produce
//! diagnostics, snapshotted as rendered with line:column and a caret frame. The console's
//! screens (`crates/hf-server/console/*.hfx`) compile like the ok fixtures.

use std::path::Path;

use hf_hfx::{compile, CompileOutput};

fn check(path: &Path) -> CompileOutput {
    let source = std::fs::read_to_string(path).unwrap();
    let sidecar = std::fs::read_to_string(path.with_extension("ts")).ok();
    let out = compile(&source, sidecar.as_deref());
    // Whatever is printed is a valid ES module.
    for js in out.js.iter().chain(&out.sidecar_js) {
        let alloc = oxc::allocator::Allocator::default();
        let parsed = oxc::parser::Parser::new(&alloc, js, oxc::span::SourceType::mjs()).parse();
        assert!(
            parsed.diagnostics.is_empty() && !parsed.panicked,
            "{}: the output does not parse: {:?}\n{js}",
            path.display(),
            parsed.diagnostics.first()
        );
    }
    // Same input, same bytes.
    assert_eq!(
        out,
        compile(&source, sidecar.as_deref()),
        "{} compiles deterministically",
        path.display()
    );
    out
}

#[test]
fn ok_fixtures_compile() {
    insta::glob!("../../../../fixtures/hfx", "ok/*.hfx", |path| {
        let out = check(path);
        let rendered: Vec<String> = out.diagnostics.iter().map(|d| d.render()).collect();
        assert!(
            out.diagnostics.is_empty(),
            "{} has diagnostics:\n{}",
            path.display(),
            rendered.join("\n")
        );
        let mut snap = format!("// contentHash {}\n{}", out.content_hash, out.js.unwrap());
        if let Some(sidecar) = out.sidecar_js {
            snap.push_str("// ---- compiled sidecar\n");
            snap.push_str(&sidecar);
        }
        insta::assert_snapshot!(snap);
    });
}

/// The console served at `/` is the largest HFX application we have; its screens are fixtures
/// too, so a compiler change shows what it does to real code.
#[test]
fn console_screens_compile() {
    insta::glob!("../../../../crates/hf-server/console", "*.hfx", |path| {
        let out = check(path);
        let rendered: Vec<String> = out.diagnostics.iter().map(|d| d.render()).collect();
        assert!(
            out.diagnostics.is_empty(),
            "{} has diagnostics:\n{}",
            path.display(),
            rendered.join("\n")
        );
        let mut snap = format!("// contentHash {}\n{}", out.content_hash, out.js.unwrap());
        if let Some(sidecar) = out.sidecar_js {
            snap.push_str("// ---- compiled sidecar\n");
            snap.push_str(&sidecar);
        }
        insta::assert_snapshot!(snap);
    });
}

#[test]
fn err_fixtures_report_located_diagnostics() {
    insta::glob!("../../../../fixtures/hfx", "err/*.hfx", |path| {
        let out = check(path);
        assert!(
            !out.diagnostics.is_empty(),
            "{} compiled without diagnostics",
            path.display()
        );
        assert!(out.js.is_none() && out.sidecar_js.is_none());
        let rendered: Vec<String> = out.diagnostics.iter().map(|d| d.render()).collect();
        insta::assert_snapshot!(rendered.join("\n"));
    });
}

#[test]
fn literal_query_texts_are_reported_with_their_offsets() {
    let source = r#"<script>let p = '%'; function text() { return ''; }</script>
{#query "SELECT id, name FROM crm.account WHERE name ILIKE :p", { p } as a}
  {#each a.records as r}
    {#query 'SELECT id FROM crm.contact', {} as b}{r.id}{/query}
  {/each}
{/query}
{#query `SELECT ${p} FROM crm.account` as c}{/query}
{#query "SELECT \"x\" FROM crm.account" as d}{/query}
{#query text() as e}{/query}
"#;
    let out = compile(source, None);
    assert!(out.diagnostics.is_empty(), "{:?}", out.diagnostics.first());
    let found: Vec<(&str, &str)> = out
        .queries
        .iter()
        .map(|q| (q.text.as_str(), &source[q.offset..q.offset + q.text.len()]))
        .collect();
    let first = "SELECT id, name FROM crm.account WHERE name ILIKE :p";
    let second = "SELECT id FROM crm.contact";
    // Escapes, `${}` and computed texts are not reported.
    assert_eq!(found, [(first, first), (second, second)]);
    // `{ p }` is a variable, `{}` has nothing: no literal parameters.
    assert!(out.queries.iter().all(|q| q.params.is_empty()));
}

#[test]
fn literal_query_parameters_are_reported_with_their_json_values() {
    let source = "<script>let n = 5;</script>\n{#query \"SELECT id FROM crm.account WHERE name = :name AND arr > :min LIMIT :n\", { name: 'Acme', min: -2.5, n, open: true } as q}{/query}";
    let out = compile(source, None);
    assert!(out.diagnostics.is_empty(), "{:?}", out.diagnostics.first());
    let found: Vec<(&str, &str, &str)> = out.queries[0]
        .params
        .iter()
        .map(|p| {
            (
                p.name.as_str(),
                p.json.as_str(),
                &source[p.offset..p.offset + 4],
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            ("name", "\"Acme\"", "'Acm"),
            ("min", "-2.5", "-2.5"),
            ("open", "true", "true")
        ]
    );
}

#[test]
fn screen_imports_are_reported_with_their_offsets() {
    let source = "<script>\n  import Card from 'screen:crm/card';\n  import { tick } from 'hfx';\n</script>\n<Card />";
    let out = compile(source, None);
    assert!(out.diagnostics.is_empty(), "{:?}", out.diagnostics.first());
    let found: Vec<(&str, &str, &str)> = out
        .screen_imports
        .iter()
        .map(|i| {
            (
                i.module.as_str(),
                i.screen.as_str(),
                &source[i.offset..i.offset + 17],
            )
        })
        .collect();
    assert_eq!(found, [("crm", "card", "'screen:crm/card'")]);
}

#[test]
fn emoji_column_counts_utf16_units() {
    let out = compile("<p>👋</p><p>{1 +* 2}</p>", None);
    let d = &out.diagnostics[0];
    // `<p>👋</p><p>{1 +` is 16 UTF-16 units (the emoji counts two); the error is at `*`.
    assert_eq!((d.line, d.column), (1, 17), "{}", d.render());
    assert_eq!(d.frame, "<p>👋</p><p>{1 +* 2}</p>");
}

#[test]
fn content_hash_is_the_sha256_prefix() {
    let out = compile("<p>hi</p>", None);
    // printf '<p>hi</p>' | sha256sum
    assert_eq!(out.content_hash.len(), 16);
    assert_eq!(out.content_hash, hf_hfx::content_hash("<p>hi</p>"));
    assert!(out.content_hash.bytes().all(|b| b.is_ascii_hexdigit()));
}

#[test]
fn vendor_files_are_the_runtime_only() {
    let served = hf_hfx::vendor_file("hfx-runtime.js").unwrap();
    assert_eq!(served, hf_hfx::runtime_js());
    // The source printed without comments: still a module, with every export, and smaller.
    let alloc = oxc::allocator::Allocator::default();
    let parsed = oxc::parser::Parser::new(&alloc, served, oxc::span::SourceType::mjs()).parse();
    assert!(parsed.diagnostics.is_empty() && !parsed.panicked);
    assert!(served.len() < hf_hfx::RUNTIME_JS.len() * 3 / 4);
    for export in [
        "boot",
        "mount",
        "navigate",
        "onMount",
        "onDestroy",
        "tick",
        "configure",
    ] {
        assert!(served.contains(&format!("function {export}(")), "{export}");
    }
    for other in [
        "",
        "../Cargo.toml",
        "hfx-runtime.js/",
        "x.js",
        "/hfx-runtime.js",
    ] {
        assert_eq!(hf_hfx::vendor_file(other), None, "{other}");
    }
}

#[test]
fn compile_on_thread_matches_compile() {
    let source = "<script>let n = 1;</script><p>{n}</p>";
    assert_eq!(
        hf_hfx::compile_on_thread(source, None).unwrap(),
        compile(source, None)
    );
}

#[test]
fn sidecar_url_option_renames_the_sidecar_import() {
    let source = "<script>import { f } from './sidecar';</script><p>{f()}</p>";
    let options = hf_hfx::CompileOptions {
        sidecar_url: Some("./abc-crm-list.sidecar.js".into()),
        ..Default::default()
    };
    let js = hf_hfx::compile_with(source, Some("export const f = () => 1;"), &options)
        .js
        .unwrap();
    assert!(js.contains("from \"./abc-crm-list.sidecar.js\""), "{js}");
    assert!(hf_hfx::compile_sidecar("export const x: number = 1;")
        .unwrap()
        .contains("export const x = 1;"));
    let errors = hf_hfx::compile_sidecar("export const x = ;").unwrap_err();
    assert_eq!(errors[0].file, hf_hfx::SourceFile::Sidecar);
}

/// A host that knows where a module's vendored files are served passes `vendor_base`: a bare
/// import becomes that base plus the specifier, exactly; the compile reports each vendored import
/// with its offset so the host can check the file exists. Without it the fixed rule applies.
#[test]
fn vendor_base_option_addresses_vendored_imports() {
    let source = "<script>import { onMount } from 'hfx';\nimport { h } from 'tiny.js';\nimport x from 'lib/util.mjs';\n</script><p>{h(x)}</p>";
    let options = hf_hfx::CompileOptions {
        vendor_base: Some("/hfx/vendor/abc/crm/".into()),
        ..Default::default()
    };
    let out = hf_hfx::compile_with(source, None, &options);
    let js = out.js.unwrap();
    assert!(js.contains("from \"/hfx/vendor/abc/crm/tiny.js\""), "{js}");
    assert!(
        js.contains("from \"/hfx/vendor/abc/crm/lib/util.mjs\""),
        "{js}"
    );
    assert!(js.contains("from \"/hfx/vendor/hfx-runtime.js\""), "{js}");
    let imports: Vec<(&str, usize)> = out
        .vendor_imports
        .iter()
        .map(|i| (i.specifier.as_str(), i.offset))
        .collect();
    let at = |needle: &str| source.find(needle).unwrap();
    assert_eq!(
        imports,
        [
            ("tiny.js", at("'tiny.js'")),
            ("lib/util.mjs", at("'lib/util.mjs'"))
        ]
    );
    let plain = hf_hfx::compile(source, None).js.unwrap();
    assert!(plain.contains("from \"/hfx/vendor/tiny.js\""), "{plain}");
    assert!(
        plain.contains("from \"/hfx/vendor/lib/util.mjs\""),
        "{plain}"
    );
}

/// A sidecar's bare imports follow the screen's rule: with `vendor_base` they address the
/// module's vendored files and are reported (located in the sidecar) for the host to check;
/// relative imports stay as written; without it the fixed rule applies.
#[test]
fn sidecar_vendored_imports_are_addressed_and_reported() {
    let source = "<script>import { total } from './sidecar';</script><p>{total([1, 2])}</p>";
    let sidecar = "import { sum } from 'stats.js';\nimport { fmt } from './fmt.js';\nexport { mean } from 'lib/mean.mjs';\nexport const total = (xs: number[]) => fmt(sum(xs));\n";
    let options = hf_hfx::CompileOptions {
        vendor_base: Some("/hfx/vendor/abc/crm/".into()),
        ..Default::default()
    };
    let out = hf_hfx::compile_with(source, Some(sidecar), &options);
    assert!(out.diagnostics.is_empty(), "{:?}", out.diagnostics);
    let js = out.sidecar_js.unwrap();
    assert!(js.contains("from \"/hfx/vendor/abc/crm/stats.js\""), "{js}");
    assert!(
        js.contains("from \"/hfx/vendor/abc/crm/lib/mean.mjs\""),
        "{js}"
    );
    assert!(js.contains("from \"./fmt.js\""), "{js}");
    let at = |needle: &str| sidecar.find(needle).unwrap();
    let found: Vec<(&str, hf_hfx::SourceFile, usize)> = out
        .vendor_imports
        .iter()
        .map(|i| (i.specifier.as_str(), i.file, i.offset))
        .collect();
    assert_eq!(
        found,
        [
            ("stats.js", hf_hfx::SourceFile::Sidecar, at("'stats.js'")),
            (
                "lib/mean.mjs",
                hf_hfx::SourceFile::Sidecar,
                at("'lib/mean.mjs'")
            ),
        ]
    );
    let located = out.vendor_imports[0].diagnostic(
        hf_hfx::DiagnosticCode::InvalidImport,
        "missing",
        source,
        Some(sidecar),
    );
    assert_eq!(
        (located.file, located.line, located.column),
        (hf_hfx::SourceFile::Sidecar, 1, 21)
    );
    let plain = hf_hfx::compile(source, Some(sidecar)).sidecar_js.unwrap();
    assert!(plain.contains("from \"/hfx/vendor/stats.js\""), "{plain}");
}
