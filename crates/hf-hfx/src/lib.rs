//! The HFX screen compiler: HFX source (plus an optional TypeScript sidecar) to one ES module whose
//! default export is the component, and the browser runtime that module imports.
//!
//! # Contract
//! - [`compile`] never fails on user input: problems come back as [`Diagnostic`]s with a 1-based
//!   line, a UTF-16 column and the offending source line, and `js` is then `None`.
//! - Output is deterministic: the same source gives byte-identical output.
//! - The crate knows nothing of HTTP and depends on no other hf crate, so other projects can
//!   embed it. [`vendor_file`] hands the server the runtime to serve at `/hfx/vendor/…`.
//!
//! The language is described in `docs/hfx.md`; `examples/compile.rs` shows embedding:
//!
//! ```
//! let out = hf_hfx::compile("<script>let n = 0;</script><button on:click={() => n++}>{n}</button>", None);
//! assert!(out.diagnostics.is_empty());
//! assert!(out.js.unwrap().contains("/hfx/vendor/hfx-runtime.js"));
//! ```

mod css;
mod diagnostics;
mod generate;
mod imports;
mod js;
mod markup;
mod program;
mod query_params;
mod scan;
mod slots;

use oxc::allocator::Allocator;
use sha2::{Digest, Sha256};

pub use diagnostics::{Diagnostic, DiagnosticCode, SourceFile};
pub use imports::RUNTIME_URL;

use diagnostics::Sink;
use generate::{emit, Emit, JsStr};
use js::Edit;

/// The runtime module's source, embedded so the server needs no files on disk; what is served is
/// [`runtime_js`].
pub const RUNTIME_JS: &str = include_str!("../runtime/hfx-runtime.js");

/// The runtime as served: [`RUNTIME_JS`] printed by oxc without its comments and whitespace
/// (they are for readers of the source, not for every browser that loads it; gzipped it is
/// about three quarters of the size). Printed once per process.
pub fn runtime_js() -> &'static str {
    static SERVED: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SERVED.get_or_init(|| {
        let alloc = Allocator::default();
        let parsed =
            oxc::parser::Parser::new(&alloc, RUNTIME_JS, oxc::span::SourceType::mjs()).parse();
        if !parsed.diagnostics.is_empty() || parsed.panicked {
            return RUNTIME_JS.to_string();
        }
        oxc::codegen::Codegen::new()
            .with_options(oxc::codegen::CodegenOptions::minify())
            .build(&parsed.program)
            .code
    })
}

/// Errors of the crate's fallible operations. Compiling never fails (see [`compile`]); this
/// exists for embedders that run the compiler on a thread of their own.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The compiler thread could not be started (the operating system refused a thread).
    #[error("could not start the compiler thread: {0}")]
    Thread(#[source] std::io::Error),
    /// The compiler thread panicked: a compiler bug, reported instead of crashing the host.
    #[error("the compiler panicked: {message}")]
    Panicked {
        /// The panic message, when it was a string.
        message: String,
    },
}

/// The result of compiling one screen.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct CompileOutput {
    /// The ES module (`compiledJs`); `None` when there are diagnostics.
    pub js: Option<String>,
    /// The sidecar compiled to JavaScript (`compiledSidecar`); `None` without a sidecar or when
    /// there are diagnostics.
    pub sidecar_js: Option<String>,
    /// First 16 hex characters of the SHA-256 of the HFX source (`contentHash`).
    pub content_hash: String,
    /// Every problem found; empty on success.
    pub diagnostics: Vec<Diagnostic>,
    /// The `{#query}` blocks whose HOQS text is written as a plain string literal, so that a
    /// host can type-check them against its model when the screen is written.
    pub queries: Vec<QueryText>,
    /// The other screens the screen imports (`screen:<module>/<screen>`), so that a host can
    /// check that they exist when the screen is written.
    pub screen_imports: Vec<ScreenImport>,
    /// The vendored modules the screen's script and its sidecar import (bare specifiers other
    /// than `hfx`), so that a host can check that the files exist when the screen is written.
    pub vendor_imports: Vec<VendorImport>,
}

/// One `import … from "<path>"` (or `export … from`) of a vendored module in a screen's script or
/// in its sidecar.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct VendorImport {
    /// The specifier as written (`chart.js`).
    pub specifier: String,
    /// The input the import is written in: the screen or its sidecar.
    pub file: SourceFile,
    /// Byte offset of the specifier (its opening quote) in that input.
    pub offset: usize,
}

impl VendorImport {
    /// A diagnostic located at the specifier, in the screen source or the sidecar (whichever
    /// holds the import), for a host that refuses the import.
    pub fn diagnostic(
        &self,
        code: DiagnosticCode,
        message: impl Into<String>,
        screen: &str,
        sidecar: Option<&str>,
    ) -> Diagnostic {
        let text = match self.file {
            SourceFile::Screen => screen,
            SourceFile::Sidecar => sidecar.unwrap_or_default(),
        };
        Diagnostic::at(code, message, self.file, text, self.offset)
    }
}

/// One `import X from "screen:<module>/<screen>"` of a screen.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ScreenImport {
    /// The module key.
    pub module: String,
    /// The screen key.
    pub screen: String,
    /// Byte offset of the specifier (its opening quote) in the screen source.
    pub offset: usize,
}

/// The HOQS text of one `{#query}` block, as written in the screen.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct QueryText {
    /// The query (the literal's content; literals with escapes or `${}` are not reported).
    pub text: String,
    /// Byte offset of the text's first character in the screen source: offset `i` of the
    /// query is offset `offset + i` of the screen (see [`Diagnostic::at`] for a location).
    pub offset: usize,
    /// The `:name` parameters the block gives a literal value (`{ stage: "won", limit: 10 }`),
    /// which a host can type-check with the query; other parameters' values are known only
    /// when the query runs.
    pub params: Vec<QueryParam>,
}

/// A `{#query}` parameter whose value is written as a literal in the block's parameter object,
/// so it is the same on every run.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct QueryParam {
    /// The parameter's name (`:name` in the query).
    pub name: String,
    /// Its value as JSON text (`"won"`, `10`, `true`, `null`), as the query API receives it.
    pub json: String,
    /// Byte offset of the value in the screen source.
    pub offset: usize,
}

/// Settings for [`compile_with`]; the defaults are what the HTTP contract describes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct CompileOptions {
    /// What `import ... from "./sidecar"` becomes in the compiled module. `None` keeps
    /// `./sidecar`; a server that serves every screen's modules from one directory sets a
    /// per-screen name such as `./<commit>-<module>-<screen>.sidecar.js`.
    pub sidecar_url: Option<String>,
    /// The URL prefix of the screen's vendored modules: `import … from "x"` becomes
    /// `<vendor_base>x`. `None` keeps the fixed rule (`/hfx/vendor/x.js`), for a compile that
    /// knows no module.
    pub vendor_base: Option<String>,
}

impl CompileOptions {
    fn urls(&self) -> imports::Urls<'_> {
        imports::Urls {
            sidecar: self.sidecar_url.as_deref(),
            vendor_base: self.vendor_base.as_deref(),
        }
    }
}

/// The content hash of an HFX source: the first 16 hex characters of its SHA-256.
pub fn content_hash(source: &str) -> String {
    let digest = Sha256::digest(source.as_bytes());
    hex::encode(digest)[..16].to_string()
}

/// A key under which a compile result may be cached: 64 hex characters of a SHA-256 over every
/// input the output depends on (source, sidecar, options) and the compiler's version, so equal
/// keys mean byte-identical output.
pub fn cache_key(source: &str, sidecar: Option<&str>, options: &CompileOptions) -> String {
    let mut hasher = Sha256::new();
    // Length prefixes keep the parts apart: no two different inputs hash the same bytes.
    let mut part = |bytes: Option<&[u8]>| match bytes {
        Some(bytes) => {
            hasher.update((bytes.len() as u64).to_le_bytes());
            hasher.update(bytes);
        }
        None => hasher.update(u64::MAX.to_le_bytes()),
    };
    part(Some(env!("CARGO_PKG_VERSION").as_bytes()));
    part(Some(source.as_bytes()));
    part(sidecar.map(str::as_bytes));
    part(options.sidecar_url.as_deref().map(str::as_bytes));
    part(options.vendor_base.as_deref().map(str::as_bytes));
    hex::encode(hasher.finalize())
}

/// Compiles an HFX screen and its optional TypeScript sidecar.
///
/// The compiler is iterative where input controls depth and refuses code nested deeper than it
/// can handle, so it runs on an ordinary thread; [`compile_on_thread`] adds a safety net.
pub fn compile(source: &str, sidecar: Option<&str>) -> CompileOutput {
    compile_with(source, sidecar, &CompileOptions::default())
}

/// [`compile`] with [`CompileOptions`].
pub fn compile_with(
    source: &str,
    sidecar: Option<&str>,
    options: &CompileOptions,
) -> CompileOutput {
    with_allocator(|alloc| compile_in(alloc, source, sidecar, options))
}

fn compile_in(
    alloc: &Allocator,
    source: &str,
    sidecar: Option<&str>,
    options: &CompileOptions,
) -> CompileOutput {
    let content_hash = content_hash(source);
    let mut diagnostics = Vec::new();

    let mut sidecar_imports = Vec::new();
    let sidecar_js = sidecar.and_then(|text| {
        let mut sink = Sink::new(text, SourceFile::Sidecar);
        let js = js::compile_sidecar(
            alloc,
            &mut sink,
            options.vendor_base.as_deref(),
            &mut sidecar_imports,
        );
        diagnostics.append(&mut sink.list);
        js
    });

    let mut sink = Sink::new(source, SourceFile::Screen);
    let (js, queries, imports) = compile_screen(alloc, &mut sink, &content_hash, options.urls());
    diagnostics.append(&mut sink.list);

    if diagnostics.is_empty() {
        let (screen_imports, mut vendor_imports) = imports;
        vendor_imports.append(&mut sidecar_imports);
        CompileOutput {
            js,
            sidecar_js,
            content_hash,
            diagnostics,
            queries,
            screen_imports,
            vendor_imports,
        }
    } else {
        CompileOutput {
            js: None,
            sidecar_js: None,
            content_hash,
            diagnostics,
            queries: Vec::new(),
            screen_imports: Vec::new(),
            vendor_imports: Vec::new(),
        }
    }
}

/// Compiles a TypeScript sidecar on its own (what `compile` does with its `sidecar` argument):
/// the JavaScript, or the diagnostics (located in [`SourceFile::Sidecar`]).
pub fn compile_sidecar(sidecar: &str) -> Result<String, Vec<Diagnostic>> {
    with_allocator(|alloc| {
        let mut sink = Sink::new(sidecar, SourceFile::Sidecar);
        match js::compile_sidecar(alloc, &mut sink, None, &mut Vec::new()) {
            Some(js) if sink.list.is_empty() => Ok(js),
            _ => Err(sink.list),
        }
    })
}

/// Arenas kept for the next compile: a fresh arena grows chunk by chunk, a reused one is already
/// large enough, which saves a good part of a compile's time.
static ALLOCATORS: std::sync::Mutex<Vec<Allocator>> = std::sync::Mutex::new(Vec::new());
/// How many arenas are kept (about the number of compiles running at once).
const POOLED_ALLOCATORS: usize = 8;
/// Arenas a huge input grew beyond this are dropped rather than kept.
const POOLED_CAPACITY: usize = 16 << 20;

/// Runs `work` with an arena from the pool (or a new one), then resets it and gives it back.
fn with_allocator<T>(work: impl FnOnce(&Allocator) -> T) -> T {
    let pooled = ALLOCATORS.lock().ok().and_then(|mut pool| pool.pop());
    let mut alloc = pooled.unwrap_or_default();
    let out = work(&alloc);
    alloc.reset();
    if alloc.capacity() <= POOLED_CAPACITY {
        if let Ok(mut pool) = ALLOCATORS.lock() {
            if pool.len() < POOLED_ALLOCATORS {
                pool.push(alloc);
            }
        }
    }
    out
}

/// Runs [`compile`] on a fresh thread with a generous stack and turns a panic (a compiler bug)
/// into an [`Error`], so a server can call it from any worker thread.
pub fn compile_on_thread(source: &str, sidecar: Option<&str>) -> Result<CompileOutput, Error> {
    compile_on_thread_with(source, sidecar, &CompileOptions::default())
}

/// [`compile_on_thread`] with [`CompileOptions`] (a server sets the per-screen sidecar URL).
pub fn compile_on_thread_with(
    source: &str,
    sidecar: Option<&str>,
    options: &CompileOptions,
) -> Result<CompileOutput, Error> {
    let source = source.to_string();
    let sidecar = sidecar.map(str::to_string);
    let options = options.clone();
    let handle = std::thread::Builder::new()
        .name("hfx-compile".into())
        .stack_size(64 << 20)
        .spawn(move || compile_with(&source, sidecar.as_deref(), &options))
        .map_err(Error::Thread)?;
    handle.join().map_err(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        Error::Panicked { message }
    })
}

/// The `screen:` imports and the vendored-module imports of a screen's script.
type ReportedImports = (Vec<ScreenImport>, Vec<VendorImport>);

/// The imports a host checks (see [`CompileOutput::screen_imports`] and
/// [`CompileOutput::vendor_imports`]), from the script's analysis.
fn reported_imports(script: &js::ScriptInfo) -> ReportedImports {
    let (mut screens, mut vendored) = (Vec::new(), Vec::new());
    for import in &script.imports {
        let (spec, offset) = &import.written;
        match &import.specifier {
            imports::Specifier::Screen { module, screen } => screens.push(ScreenImport {
                module: module.clone(),
                screen: screen.clone(),
                offset: *offset,
            }),
            imports::Specifier::Vendor(_) if imports::is_vendored_module(spec) => {
                vendored.push(VendorImport {
                    specifier: spec.clone(),
                    file: SourceFile::Screen,
                    offset: *offset,
                })
            }
            _ => {}
        }
    }
    (screens, vendored)
}

/// The screen's module, the query texts it holds (see [`QueryText`]) and its imports.
fn compile_screen<'s>(
    alloc: &'s Allocator,
    sink: &mut Sink<'s>,
    hash: &str,
    urls: imports::Urls<'_>,
) -> (Option<String>, Vec<QueryText>, ReportedImports) {
    let doc = markup::parse(alloc, sink);
    if sink.has_errors() {
        return (None, Vec::new(), ReportedImports::default());
    }
    let mut queries = Vec::new();
    markup::query_texts(sink.source, &doc, &mut queries);
    let queries = queries
        .into_iter()
        .map(|(text, offset, params)| QueryText {
            text,
            offset,
            params: params.map_or_else(Vec::new, |span| {
                query_params::literal_params(alloc, sink.source, span)
            }),
        })
        .collect();
    let (js, imports) = compile_markup(alloc, sink, &doc, hash, urls);
    (js, queries, imports)
}

fn compile_markup(
    alloc: &Allocator,
    sink: &mut Sink<'_>,
    doc: &markup::Document,
    hash: &str,
    urls: imports::Urls<'_>,
) -> (Option<String>, ReportedImports) {
    let source = sink.source;
    let scope = doc.style.map(|_| format!("hfx-{}", &hash[..8]));
    let css = match (doc.style, &scope) {
        (Some(span), Some(scope)) => css::scope_css(&source[span.start..span.end], scope),
        _ => String::new(),
    };
    if let Some(compiled) = compile_in_one_pass(alloc, source, doc, scope.as_deref(), &css, urls) {
        return compiled;
    }

    // Piece by piece: slower, and it locates every problem.
    let script = match doc.script {
        Some(span) => js::analyze_script(alloc, sink, span),
        None => js::ScriptInfo::default(),
    };

    let mut generator = generate::Generator::new(sink, alloc, &script, scope.clone());
    generator.root(&doc.nodes);
    let render = std::mem::take(&mut generator.out);
    if sink.has_errors() {
        return (None, ReportedImports::default());
    }

    let mut module = String::with_capacity(source.len() * 3 + 256);
    module.push_str("import * as $$rt from \"/hfx/vendor/hfx-runtime.js\";\n");
    let mut edits: Vec<Edit> = script.edits.clone();
    for import in &script.imports {
        edits.push(Edit::replace(import.span.start, import.span.end, ""));
        if let imports::Specifier::Screen {
            module: m,
            screen: s,
        } = &import.specifier
        {
            if let (Some(name), false) = (&import.default_name, import.type_only) {
                module.push_str(&format!(
                    "const {name} = await $$rt.screen(import.meta.url, {}, {});\n",
                    generate::quote(m),
                    generate::quote(s)
                ));
            }
        } else {
            module.push_str(&source[import.span.start..import.span.end]);
            module.push('\n');
        }
    }
    for (name, slot, end) in &script.props {
        edits.push(Edit {
            start: *end,
            end: *end,
            text: format!(
                "\n{name} = $$.prop(\"{name}\", {name}, {slot}, ($$v) => {{ {name} = $$v; }}, () => {name});"
            ),
            rank: (3, 0),
        });
    }
    for (key, local, slot, end) in &script.destructured {
        edits.push(Edit {
            start: *end,
            end: *end,
            text: format!(
                "\n$$.setter({}, {slot}, ($$v) => {{ {local} = $$v; }}, () => {local});",
                generate::quote(key)
            ),
            rank: (3, 0),
        });
    }
    module.push_str("export default $$rt.component(function ($$, $$props) {\n");
    if let Some(span) = doc.script {
        module.push_str(&js::apply_edits(source, span, &edits));
        module.push('\n');
    }
    module.push_str(&instance_and_rest(&script));
    module.push_str("return ($$b, $$t) => {\n");
    module.push_str(&render);
    module.push_str("};\n}, ");
    module.push_str(&generate::quote(scope.as_deref().unwrap_or("")));
    module.push_str(", ");
    module.push_str(&generate::quote(&css));
    module.push_str(");\n");

    let js = js::finish_module(alloc, sink, &module, urls);
    (js, reported_imports(&script))
}

/// Compiles a screen whose code is analysed in one oxc pass (see `program.rs`); `None` when the
/// screen has any problem, which the piece-by-piece compiler then reports.
fn compile_in_one_pass(
    alloc: &Allocator,
    source: &str,
    doc: &markup::Document,
    scope: Option<&str>,
    css: &str,
    urls: imports::Urls<'_>,
) -> Option<(Option<String>, ReportedImports)> {
    let mut unit = program::Unit::build(alloc, source, doc, urls)?;
    let script = std::mem::take(&mut unit.script);
    let mut scratch = Sink::new(source, SourceFile::Screen);
    let mut generator =
        generate::Generator::new(&mut scratch, alloc, &script, scope.map(str::to_string));
    generator.fast = Some(&mut unit);
    generator.root(&doc.nodes);
    let render = std::mem::take(&mut generator.out);
    drop(generator);
    if scratch.has_errors() {
        return None;
    }
    let render = unit.fill(&render)?;

    let script_code = unit.print_script();
    let imports_code = unit.print_imports();
    // Room for all of it, so that the module is never copied to grow: the stylesheet's quoted
    // form may be longer (escapes), and each prop adds a setter line.
    let capacity = render.len()
        + script_code.len()
        + imports_code.len()
        + css.len() * 2
        + 100 * (script.props.len() + script.destructured.len())
        + 512;
    let mut module = String::with_capacity(capacity);
    module.push_str("import * as $$rt from \"/hfx/vendor/hfx-runtime.js\";\n");
    module.push_str(&imports_code);
    for import in &script.imports {
        if let (
            imports::Specifier::Screen {
                module: m,
                screen: s,
            },
            Some(name),
            false,
        ) = (&import.specifier, &import.default_name, import.type_only)
        {
            module.push_str(&format!(
                "const {name} = await $$rt.screen(import.meta.url, {}, {});\n",
                generate::quote(m),
                generate::quote(s)
            ));
        }
    }
    module.push_str("export default $$rt.component(function($$, $$props) {\n");
    module.push_str(&script_code);
    // `$$.setter("key", slot, ($$v) => { local = $$v; }, () => local);` for each prop.
    let props = script
        .props
        .iter()
        .map(|(name, slot, _)| (name, name, slot));
    let destructured = (script.destructured.iter()).map(|(key, local, slot, _)| (key, local, slot));
    for (key, local, slot) in props.chain(destructured) {
        emit!(
            module,
            "\t$$.setter(",
            JsStr(key),
            ", ",
            slot,
            ", ($$v) => { ",
            local,
            " = $$v; }, () => ",
            local,
            ");\n"
        );
    }
    module.push_str(&instance_and_rest(&script));
    module.push_str("\treturn ($$b, $$t) => {\n");
    module.push_str(&render);
    module.push_str("\t};\n}, ");
    emit!(module, JsStr(scope.unwrap_or("")), ", ", JsStr(css));
    module.push_str(");\n");
    Some((Some(module), reported_imports(&script)))
}

/// What follows the script: the instance's API ([`instance_api`]), and for
/// `let { a, ...rest } = $props();` the call that keeps `rest` holding every prop the pattern does
/// not name (the caller's new props included), without the compiler's own entries.
fn instance_and_rest(script: &js::ScriptInfo) -> String {
    let mut out = instance_api(script);
    let Some((local, slot)) = &script.rest else {
        return out;
    };
    let named: Vec<String> = script
        .destructured
        .iter()
        .map(|(key, ..)| generate::quote(key))
        .collect();
    out.push_str(&format!(
        "\t$$.rest({slot}, ($$v) => {{ {local} = $$v; }}, [{}]);\n",
        named.join(", ")
    ));
    out
}

/// `export function f` and `export const c`: the instance a parent's `bind:this` gets, reading
/// the current values.
fn instance_api(script: &js::ScriptInfo) -> String {
    if script.exports.is_empty() {
        return String::new();
    }
    let getters: Vec<String> = script
        .exports
        .iter()
        .map(|name| format!("get {name}() {{ return {name}; }}"))
        .collect();
    format!("\t$$.expose({{ {} }});\n", getters.join(", "))
}

/// The files served at `/hfx/vendor/{path}`; anything else is `None` (the server answers 404).
pub fn vendor_file(path: &str) -> Option<&'static str> {
    match path {
        "hfx-runtime.js" => Some(runtime_js()),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
