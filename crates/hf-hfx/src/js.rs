//! Everything the compiler asks of oxc: parsing the script, the sidecar and each `{expression}`
//! (with errors mapped back to source positions), finding which state each piece of code reads
//! and assigns (oxc_semantic), and the final TypeScript strip and print of the generated module.
//!
//! Positions handed out by this module are byte offsets into the HFX source (or the sidecar), so
//! the code generator can splice text without knowing about oxc.

use std::collections::BTreeSet;
use std::path::Path;

use oxc::allocator::Allocator;
use oxc::ast::ast::{
    Declaration, Expression, ImportDeclarationSpecifier, ImportOrExportKind, Program, Statement,
    VariableDeclarationKind,
};
use oxc::ast::AstKind;
use oxc::codegen::{Codegen, CodegenOptions};
use oxc::diagnostics::OxcDiagnostic;
use oxc::parser::Parser;
use oxc::semantic::{Semantic, SemanticBuilder};
use oxc::span::{GetSpan, SourceType, Span as OxcSpan};
use oxc::syntax::reference::Reference;
use oxc::transformer::{TransformOptions, Transformer};
// Maps keyed by names and positions use FxHash: the keys are short, SipHash costs several times
// more per key, and oxc's own scope analysis hashes the same names with a hash of that kind.
use rustc_hash::{FxHashMap, FxHashSet};
use smallvec::SmallVec;

use crate::diagnostics::{DiagnosticCode as Code, Sink};
use crate::imports::{self, Specifier, Urls};
use crate::markup::Span;
use crate::scan;
use crate::slots::SlotSet;

/// A text insertion or replacement in the source, applied by [`apply_edits`].
#[derive(Debug, Clone)]
pub(crate) struct Edit {
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) text: String,
    /// Orders edits at the same offset: closing wraps (inner first), then opening wraps (outer
    /// first), then replacements.
    pub(crate) rank: (u8, i64),
}

impl Edit {
    /// Wraps `span` as `$$.u(<code>, slots...)` so assigning state schedules a DOM update.
    pub(crate) fn wrap(span: Span, slots: &SlotSet) -> [Edit; 2] {
        let len = i64::try_from(span.end - span.start).unwrap_or(i64::MAX);
        let list: Vec<String> = slots.iter().map(ToString::to_string).collect();
        [
            Edit {
                start: span.start,
                end: span.start,
                text: "$$.u(".into(),
                rank: (1, -len),
            },
            Edit {
                start: span.end,
                end: span.end,
                text: format!(", {})", list.join(", ")),
                rank: (0, len),
            },
        ]
    }

    pub(crate) fn replace(start: usize, end: usize, text: impl Into<String>) -> Edit {
        Edit {
            start,
            end,
            text: text.into(),
            rank: (2, 0),
        }
    }
}

/// Copies `src[range]` with `edits` applied (edits outside the range are ignored).
pub(crate) fn apply_edits(src: &str, range: Span, edits: &[Edit]) -> String {
    let mut sorted: Vec<&Edit> = edits
        .iter()
        .filter(|e| e.start >= range.start && e.end <= range.end)
        .collect();
    sorted.sort_by_key(|e| (e.start, e.rank));
    let mut out = String::with_capacity(range.end - range.start + 16 * sorted.len());
    let mut cursor = range.start;
    for e in sorted {
        if e.start >= cursor {
            out.push_str(&src[cursor..e.start]);
            cursor = e.start;
        }
        out.push_str(&e.text);
        cursor = cursor.max(e.end);
    }
    out.push_str(&src[cursor..range.end]);
    out
}

/// One import of the screen script.
#[derive(Debug)]
pub(crate) struct Import<'a> {
    /// The whole statement.
    pub(crate) span: Span,
    pub(crate) specifier: Specifier,
    /// The specifier as written, and the offset of its opening quote in the screen source.
    pub(crate) written: (String, usize),
    /// The default import's local name (`import X from ...`).
    pub(crate) default_name: Option<&'a str>,
    /// Every local name the statement binds.
    pub(crate) locals: Vec<&'a str>,
    pub(crate) type_only: bool,
}

/// What the code generator needs to know about the screen's `<script>`. Its names live in the
/// compile's arena: a `String` each would cost an allocation and a free on every compile.
#[derive(Debug, Default)]
pub(crate) struct ScriptInfo<'a> {
    pub(crate) imports: Vec<Import<'a>>,
    /// Reactive state (top-level `let`/`var`, props included), in declaration order; the index is
    /// the state's slot number.
    pub(crate) state: Vec<&'a str>,
    /// Props: `(name, slot, end of the declaring statement)`.
    pub(crate) props: Vec<(&'a str, usize, usize)>,
    /// Props declared Svelte's way, `let { key: local = default } = $props();`:
    /// `(key, local, slot, end of the declaring statement)`.
    pub(crate) destructured: Vec<(&'a str, &'a str, usize, usize)>,
    /// `...rest` in that pattern: `(local, slot)`; it holds every prop the pattern does not name.
    pub(crate) rest: Option<(&'a str, usize)>,
    /// `export function name` and `export const name`: the component instance's API, which a
    /// parent's `bind:this` receives.
    pub(crate) exports: Vec<&'a str>,
    /// Top-level functions and the state slots they read, directly or through other top-level
    /// functions, so that `{total()}` updates when what `total` reads changes.
    pub(crate) functions: FxHashMap<&'a str, SlotSet>,
    /// Every other top-level name (const, class, import, enum).
    pub(crate) others: BTreeSet<&'a str>,
    /// Instrumentation and `export` removals, in source offsets.
    pub(crate) edits: Vec<Edit>,
    /// The same instrumentation as AST positions of the analysed program: each assignment to
    /// state and the slot it changes (the one-pass compiler wraps these nodes directly).
    pub(crate) wraps: Vec<(OxcSpan, usize)>,
    /// The runes of the script (`$state`, `$derived`, `$effect`), in AST positions.
    pub(crate) runes: Vec<Rune<'a>>,
    /// Slots declared with `$state(…)`: deeply reactive, so values assigned to them are wrapped
    /// in the runtime's proxy.
    pub(crate) deep: SlotSet,
}

/// What a rune becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RuneKind {
    /// `$state(value)`: `$$.deep(value, slot)`.
    State,
    /// `$state.raw(value)`: the value itself.
    StateRaw,
    /// `$derived(expression)`: `$$.derived(() => expression, slot, [deps], set)`.
    Derived,
    /// `$derived.by(function)`: `$$.derived(function, slot, [deps], set)`.
    DerivedBy,
    /// `$effect(function)` (and `$effect.pre`): `$$.effect(function, [deps])`.
    Effect,
    /// `$props()` in `let { … } = $props();`: the props object, `$$.props`.
    Props,
    /// `$bindable(default)` in a `$props()` pattern: the default itself.
    Bindable,
}

/// One rune call of the script.
#[derive(Debug, Clone)]
pub(crate) struct Rune<'a> {
    pub(crate) kind: RuneKind,
    /// The whole call.
    pub(crate) call: OxcSpan,
    /// Its argument, if any.
    pub(crate) arg: Option<OxcSpan>,
    /// The declared variable (state and derived runes).
    pub(crate) name: &'a str,
    pub(crate) slot: usize,
    /// What a derived value or an effect reads (directly or through top-level functions).
    pub(crate) deps: SlotSet,
    /// The `const` keyword of the declaration, which becomes `let` (a derived value changes).
    pub(crate) const_at: Option<u32>,
}

impl ScriptInfo<'_> {
    pub(crate) fn slot_of(&self, name: &str) -> Option<usize> {
        self.state.iter().position(|s| *s == name)
    }
}

/// Free names an `{expression}` reads and the assignments it makes to them.
#[derive(Debug, Default)]
pub(crate) struct ExprInfo<'a> {
    /// The names, sorted, each once (see [`ExprInfo::read`]), in the compile's arena: a `String`
    /// each would cost an allocation and a free for every name every piece of code reads.
    pub(crate) reads: SmallVec<[&'a str; 4]>,
    /// `(root name, span of the assignment or update expression)`.
    pub(crate) writes: Vec<(&'a str, Span)>,
}

impl<'a> ExprInfo<'a> {
    /// Notes that the expression reads `name`. A piece of code reads a few names, so a sorted
    /// array in place costs less than a set: no allocation for up to four.
    pub(crate) fn read(&mut self, name: &'a str) {
        if let Err(at) = self.reads.binary_search(&name) {
            self.reads.insert(at, name);
        }
    }
}

/// Reports oxc diagnostics, shifting their offsets by `shift` and clamping them into `clamp`.
fn report(sink: &mut Sink<'_>, errors: &[OxcDiagnostic], shift: isize, clamp: Span) {
    for error in errors {
        let offset = error.labels.first().map_or(0, |l| l.offset() as usize);
        let mapped = offset
            .saturating_add_signed(shift)
            .clamp(clamp.start, clamp.end);
        sink.error(Code::JsSyntax, mapped, error.message.to_string());
    }
}

/// Refuses text nested so deeply that oxc's recursive passes could overflow the stack.
pub(crate) fn nesting_ok(sink: &mut Sink<'_>, text: &str, at: usize) -> bool {
    let depth = scan::js_nesting_estimate(text);
    if depth > scan::MAX_JS_NESTING {
        sink.error(
            Code::NestingTooDeep,
            at,
            format!(
                "code is nested too deeply (about {depth} levels; the limit is {})",
                scan::MAX_JS_NESTING
            ),
        );
        return false;
    }
    true
}

pub(crate) fn ts_module() -> SourceType {
    SourceType::ts().with_module(true)
}

/// Parses and analyses the screen's `<script>` (`span` of the HFX source).
pub(crate) fn analyze_script<'a>(
    alloc: &'a Allocator,
    sink: &mut Sink<'_>,
    span: Span,
) -> ScriptInfo<'a> {
    let text = &sink.source[span.start..span.end];
    if !nesting_ok(sink, text, span.start) {
        return ScriptInfo::default();
    }
    let parsed = Parser::new(alloc, text, ts_module()).parse();
    let shift = isize::try_from(span.start).unwrap_or(0);
    if !parsed.diagnostics.is_empty() || parsed.panicked {
        report(sink, &parsed.diagnostics, shift, span);
        return ScriptInfo::default();
    }
    let program = parsed.program;
    let built = SemanticBuilder::new()
        .with_build_nodes(true)
        .with_check_syntax_error(true)
        .build(&program);
    if !built.diagnostics.is_empty() {
        report(sink, &built.diagnostics, shift, span);
        return ScriptInfo::default();
    }
    analyze_program(
        alloc,
        sink,
        &program,
        &built.semantic,
        span.start,
        text.len(),
        true,
    )
}

/// Analyses the script part of an analysed program: the statements and references in its first
/// `script_len` bytes, which are the script's text moved back by `base` bytes of the HFX source.
/// (The one-pass compiler's program continues with the markup's expressions; their references
/// to the script's names are not the script's business.) `text_edits` asks for the state
/// instrumentation as [`ScriptInfo::edits`] too, which only the piece-by-piece compiler applies
/// (the one-pass compiler wraps the AST, see [`ScriptInfo::wraps`]).
pub(crate) fn analyze_program<'a>(
    alloc: &'a Allocator,
    sink: &mut Sink<'_>,
    program: &Program<'_>,
    semantic: &Semantic<'_>,
    base: usize,
    script_len: usize,
    text_edits: bool,
) -> ScriptInfo<'a> {
    // The script's names, copied into the arena.
    let name = |text: &str| -> &'a str { alloc.alloc_str(text) };
    let mut info = ScriptInfo::default();
    let in_script = |s: OxcSpan| (s.start as usize) < script_len;
    let abs = |s: OxcSpan| Span {
        start: base + s.start as usize,
        end: base + s.end as usize,
    };

    // Imports and exports.
    for stmt in program.body.iter().filter(|s| in_script(s.span())) {
        match stmt {
            Statement::ImportDeclaration(decl) => {
                let spec_text = decl.source.value.as_str();
                if spec_text == "svelte" || spec_text.starts_with("svelte/") {
                    sink.error(
                        Code::InvalidImport,
                        base + decl.source.span.start as usize,
                        format!("`{spec_text}`: HFX is not Svelte; `onMount`, `onDestroy` and `tick` come from \"hfx\""),
                    );
                    continue;
                }
                let specifier = match imports::classify(spec_text) {
                    Ok(s) => s,
                    Err(why) => {
                        sink.error(
                            Code::InvalidImport,
                            base + decl.source.span.start as usize,
                            why,
                        );
                        continue;
                    }
                };
                let mut default_name = None;
                let mut locals = Vec::new();
                for s in decl.specifiers.iter().flatten() {
                    let local = match s {
                        ImportDeclarationSpecifier::ImportSpecifier(s) => s.local.name.as_str(),
                        ImportDeclarationSpecifier::ImportDefaultSpecifier(s) => {
                            default_name = Some(name(s.local.name.as_str()));
                            s.local.name.as_str()
                        }
                        ImportDeclarationSpecifier::ImportNamespaceSpecifier(s) => {
                            s.local.name.as_str()
                        }
                    };
                    locals.push(name(local));
                }
                let type_only = decl.import_kind == ImportOrExportKind::Type;
                if matches!(specifier, Specifier::Screen { .. })
                    && !type_only
                    && (default_name.is_none() || locals.len() != 1)
                {
                    sink.error(
                        Code::InvalidImport,
                        base + decl.span.start as usize,
                        "a screen import takes exactly one default name: `import Card from \"screen:crm/card\"`",
                    );
                    continue;
                }
                info.imports.push(Import {
                    span: abs(decl.span),
                    specifier,
                    written: (
                        spec_text.to_owned(),
                        base + decl.source.span.start as usize,
                    ),
                    default_name,
                    locals,
                    type_only,
                });
            }
            Statement::LabeledStatement(label) if label.label.name == "$" => sink.error(
                Code::SvelteSyntax,
                base + label.span.start as usize,
                "`$:` reactive statements are Svelte 4: write `let b = $derived(a * 2);`, or a function for a value computed from state",
            ),
            Statement::ExportDeclaration(export) => match &export.declaration {
                Declaration::VariableDeclaration(var)
                    if var.kind == VariableDeclarationKind::Let =>
                {
                    let decl_start = base + var.span.start as usize;
                    info.edits.push(Edit::replace(
                        base + export.span.start as usize,
                        decl_start,
                        "",
                    ));
                    for d in &var.declarations {
                        match d.id.get_binding_identifier() {
                            Some(id) => info.props.push((
                                name(id.name.as_str()),
                                0,
                                base + export.span.end as usize,
                            )),
                            None => sink.error(
                                Code::InvalidExport,
                                base + d.span.start as usize,
                                "a prop is a plain name: `export let name = default;`",
                            ),
                        }
                    }
                }
                Declaration::VariableDeclaration(var)
                    if var.kind == VariableDeclarationKind::Const =>
                {
                    info.edits.push(Edit::replace(
                        base + export.span.start as usize,
                        base + var.span.start as usize,
                        "",
                    ));
                    for d in &var.declarations {
                        match d.id.get_binding_identifier() {
                            Some(id) => info.exports.push(name(id.name.as_str())),
                            None => sink.error(
                                Code::InvalidExport,
                                base + d.span.start as usize,
                                "an export is a plain name: `export const name = value;`",
                            ),
                        }
                    }
                }
                Declaration::FunctionDeclaration(function) if function.id.is_some() => {
                    info.edits.push(Edit::replace(
                        base + export.span.start as usize,
                        base + function.span.start as usize,
                        "",
                    ));
                    if let Some(id) = &function.id {
                        info.exports.push(name(id.name.as_str()));
                    }
                }
                Declaration::TSTypeAliasDeclaration(_) | Declaration::TSInterfaceDeclaration(_) => {
                    let decl_start = base + export.declaration.span().start as usize;
                    info.edits.push(Edit::replace(
                        base + export.span.start as usize,
                        decl_start,
                        "",
                    ));
                }
                _ => sink.error(
                    Code::InvalidExport,
                    base + export.span.start as usize,
                    "a screen script exports props (`export let name = default;`) and its instance's functions and constants (`export function name() {}`, `export const name = value;`)",
                ),
            },
            Statement::ExportAllDeclaration(_)
            | Statement::ExportDefaultDeclaration(_)
            | Statement::ExportNamedDeclaration(_)
            | Statement::ExportFromDeclaration(_)
            | Statement::TSExportAssignment(_)
            | Statement::TSNamespaceExportDeclaration(_) => sink.error(
                Code::InvalidExport,
                base + stmt.span().start as usize,
                "a screen script exports props (`export let name = default;`) and its instance's functions and constants (`export function name() {}`, `export const name = value;`)",
            ),
            _ => {}
        }
    }

    let scoping = semantic.scoping();
    let nodes = semantic.nodes();

    for node in nodes.iter() {
        // The kind first: most nodes are neither, and a node's span costs a dispatch.
        let is_await = match node.kind() {
            AstKind::AwaitExpression(_) => true,
            AstKind::ForOfStatement(f) => f.r#await,
            _ => false,
        };
        if is_await
            && in_script(node.kind().span())
            && !nodes.ancestor_kinds(node.id()).any(|k| {
                matches!(
                    k,
                    AstKind::Function(_)
                        | AstKind::ArrowFunctionExpression(_)
                        | AstKind::StaticBlock(_)
                )
            })
        {
            sink.error(
                Code::TopLevelAwait,
                base + node.kind().span().start as usize,
                "`await` at the top level of a screen script is not allowed; await inside a function",
            );
        }
    }

    // Runes: `let x = $state(…)`/`$derived(…)` declarations and `$effect(…)` statements at the
    // top level. Anywhere else a rune would be a call of an undefined function in the browser.
    let mut rune_callees = BTreeSet::new();
    for stmt in program.body.iter().filter(|s| in_script(s.span())) {
        match stmt {
            Statement::VariableDeclaration(var) => {
                for d in &var.declarations {
                    let Some(Expression::CallExpression(call)) = &d.init else {
                        continue;
                    };
                    if rune_name(&call.callee) == Some("$props") {
                        rune_callees.insert(call.callee.span().start);
                        props_pattern(
                            alloc,
                            sink,
                            base,
                            var,
                            d,
                            call,
                            &mut info,
                            &mut rune_callees,
                        );
                        continue;
                    }
                    let kind = match rune_name(&call.callee) {
                        Some("$state") => RuneKind::State,
                        Some("$state.raw") => RuneKind::StateRaw,
                        Some("$derived") => RuneKind::Derived,
                        Some("$derived.by") => RuneKind::DerivedBy,
                        _ => continue,
                    };
                    rune_callees.insert(call.callee.span().start);
                    let Some(id) = d.id.get_binding_identifier() else {
                        sink.error(
                            Code::SvelteSyntax,
                            base + d.span.start as usize,
                            "a rune declares one name: `let name = $state(value);`",
                        );
                        continue;
                    };
                    let arg = match call.arguments.as_slice() {
                        [] if matches!(kind, RuneKind::State | RuneKind::StateRaw) => None,
                        [one] if !one.is_spread() => Some(one.span()),
                        _ => {
                            sink.error(
                                Code::SvelteSyntax,
                                base + call.span.start as usize,
                                "a rune takes one argument",
                            );
                            continue;
                        }
                    };
                    info.runes.push(Rune {
                        kind,
                        call: call.span,
                        arg,
                        name: name(id.name.as_str()),
                        slot: 0,
                        deps: SlotSet::new(),
                        const_at: (var.kind == VariableDeclarationKind::Const)
                            .then_some(var.span.start),
                    });
                }
            }
            Statement::ExpressionStatement(e) => {
                let Expression::CallExpression(call) = &e.expression else {
                    continue;
                };
                if !matches!(rune_name(&call.callee), Some("$effect" | "$effect.pre")) {
                    continue;
                }
                rune_callees.insert(call.callee.span().start);
                match call.arguments.as_slice() {
                    [one] if !one.is_spread() => info.runes.push(Rune {
                        kind: RuneKind::Effect,
                        call: call.span,
                        arg: Some(one.span()),
                        name: "",
                        slot: 0,
                        deps: SlotSet::new(),
                        const_at: None,
                    }),
                    _ => sink.error(
                        Code::SvelteSyntax,
                        base + call.span.start as usize,
                        "`$effect` takes one function: `$effect(() => { …; return cleanup; })`",
                    ),
                }
            }
            _ => {}
        }
    }
    for (name, ids) in scoping.root_unresolved_references() {
        let hint = match name.as_str() {
            "$props" | "$bindable" => {
                "props are declared at the top level of the script: `let { title, count = $bindable(0) } = $props();` (or `export let title;`)"
            }
            "$state" | "$derived" | "$effect" => {
                "a rune is used at the top level of the script: `let name = $state(value);`, `let name = $derived(expression);`, `$effect(() => { … });`"
            }
            other => match missing_rune(other) {
                Some(hint) => hint,
                None => continue,
            },
        };
        for id in ids {
            let node = nodes.kind(scoping.get_reference(*id).node_id()).span();
            if in_script(node) && !rune_callees.contains(&node.start) {
                sink.error(Code::SvelteSyntax, base + node.start as usize, hint);
            }
        }
    }
    let rune_names: BTreeSet<&str> = info
        .runes
        .iter()
        .filter(|r| r.kind != RuneKind::Effect)
        .map(|r| r.name)
        .collect();

    // Top-level symbols in declaration order (the binding map's order is not stable).
    let root = scoping.root_scope_id();
    let mut symbols: Vec<_> = scoping.iter_bindings_in(root).collect();
    symbols.sort_by_key(|s| scoping.symbol_span(*s).start);
    // A derived value's expression and an effect's function read state like a function does;
    // below they go by these names.
    let rune_functions: Vec<(Span, String)> = info
        .runes
        .iter()
        .enumerate()
        .filter_map(|(i, rune)| match (rune.kind, rune.arg) {
            (RuneKind::Derived | RuneKind::DerivedBy | RuneKind::Effect, Some(arg)) => {
                Some((abs(arg), format!("$rune{i}")))
            }
            _ => None,
        })
        .collect();
    // Names are borrowed from the analysis until the end: most are only looked at.
    // Sized for every symbol, so that none of these grows while it is filled.
    let mut function_spans: Vec<(Span, &str)> =
        Vec::with_capacity(symbols.len() + rune_functions.len());
    let mut state_symbols = Vec::with_capacity(symbols.len());
    let mut function_symbols = Vec::with_capacity(symbols.len());
    info.state.reserve(symbols.len());
    for symbol in symbols {
        let name = scoping.symbol_name(symbol);
        let flags = scoping.symbol_flags(symbol);
        if name.starts_with("$$") {
            sink.error(
                Code::ReservedName,
                base + scoping.symbol_span(symbol).start as usize,
                format!("`{name}`: names starting with `$$` are reserved for the compiler"),
            );
            continue;
        }
        let decl = scoping.symbol_declaration(symbol);
        let function_span = match nodes.kind(decl) {
            AstKind::Function(f) => Some(f.span),
            AstKind::VariableDeclarator(d) if flags.is_const_variable() => match &d.init {
                Some(Expression::ArrowFunctionExpression(a)) => Some(a.span),
                Some(Expression::FunctionExpression(f)) => Some(f.span),
                _ => None,
            },
            _ => None,
        };
        if let Some(fs) = function_span {
            function_spans.push((abs(fs), name));
            function_symbols.push((symbol, name));
        } else if flags.is_variable() && (!flags.is_const_variable() || rune_names.contains(name)) {
            state_symbols.push(symbol);
            info.state.push(alloc.alloc_str(name));
        } else if flags.is_value() || flags.is_import() {
            info.others.insert(alloc.alloc_str(name));
        }
    }
    for prop in &mut info.props {
        prop.1 = info.state.iter().position(|s| *s == prop.0).unwrap_or(0);
    }
    for prop in &mut info.destructured {
        prop.2 = info.state.iter().position(|s| *s == prop.1).unwrap_or(0);
    }
    if let Some(rest) = &mut info.rest {
        rest.1 = info.state.iter().position(|s| *s == rest.0).unwrap_or(0);
    }
    function_spans.extend(
        rune_functions
            .iter()
            .map(|(span, name)| (*span, name.as_str())),
    );
    function_spans.sort_by_key(|(s, _)| s.start);
    let enclosing_function = |pos: usize| -> Option<&str> {
        let i = function_spans.partition_point(|(s, _)| s.start <= pos);
        let (s, name) = function_spans.get(i.checked_sub(1)?)?;
        (pos < s.end).then_some(*name)
    };

    // State reads and writes.
    let deep_names: BTreeSet<&str> = info
        .runes
        .iter()
        .filter(|r| r.kind == RuneKind::State)
        .map(|r| r.name)
        .collect();
    let mut reads_in: FxHashMap<&str, SlotSet> = FxHashMap::default();
    for (slot, symbol) in state_symbols.iter().enumerate() {
        let deep = deep_names.contains(info.state[slot]);
        for reference in scoping.get_resolved_references(*symbol) {
            let node_span = nodes.kind(reference.node_id()).span();
            if !in_script(node_span) {
                continue;
            }
            // Only reads make a dependency: an effect that assigns state must not re-run
            // because of its own assignment.
            if let Some(f) =
                enclosing_function(abs(node_span).start).filter(|_| reference.is_read())
            {
                reads_in.entry(f).or_default().insert(slot);
            }
            if let Some(target) = assignment_around(semantic, reference) {
                if text_edits {
                    let slots = SlotSet::from([slot]);
                    info.edits.extend(Edit::wrap(abs(target), &slots));
                }
                info.wraps.push((target, slot));
            }
            let deep_value = (deep && text_edits)
                .then(|| assigned_value(semantic, reference))
                .flatten();
            if let Some(right) = deep_value {
                // Ranked like a wrap of the value's own span (see `Edit::rank`).
                let (start, end) = (abs(right).start, abs(right).end);
                let len = i64::try_from(end - start).unwrap_or(i64::MAX);
                info.edits.push(Edit {
                    start,
                    end: start,
                    text: "$$.deep(".into(),
                    rank: (1, -len),
                });
                info.edits.push(Edit {
                    start: end,
                    end,
                    text: format!(", {slot})"),
                    rank: (0, len),
                });
            }
        }
    }
    // Calls between top-level functions, then the transitive closure of what they read.
    let mut calls: FxHashMap<&str, BTreeSet<&str>> = FxHashMap::default();
    for (symbol, callee) in &function_symbols {
        for reference in scoping.get_resolved_references(*symbol) {
            let node_span = nodes.kind(reference.node_id()).span();
            if !in_script(node_span) {
                continue;
            }
            if let Some(caller) = enclosing_function(abs(node_span).start) {
                calls.entry(caller).or_default().insert(*callee);
            }
        }
    }
    // One set and one list for all the functions, emptied for each.
    let mut seen: FxHashSet<&str> = FxHashSet::default();
    let mut todo = Vec::new();
    info.functions.reserve(function_spans.len());
    for &(_, name) in &function_spans {
        seen.clear();
        seen.insert(name);
        todo.push(name);
        let mut slots = SlotSet::new();
        while let Some(f) = todo.pop() {
            if let Some(reads) = reads_in.get(f) {
                slots.union(reads);
            }
            for callee in calls.get(f).into_iter().flatten() {
                if seen.insert(callee) {
                    todo.push(callee);
                }
            }
        }
        info.functions.insert(alloc.alloc_str(name), slots);
    }
    for i in 0..info.runes.len() {
        let deps = info
            .functions
            .remove(format!("$rune{i}").as_str())
            .unwrap_or_default();
        let slot = info.slot_of(info.runes[i].name).unwrap_or(0);
        let rune = &mut info.runes[i];
        rune.deps = deps;
        rune.slot = slot;
        if rune.kind == RuneKind::State {
            info.deep.insert(slot);
        }
    }
    if text_edits {
        rune_edits(&mut info, base);
    }
    info
}

/// `let { key: local = default, … } = $props();`: each property is a prop. Defaults may be
/// `$bindable(value)` (every prop can be bound; the value is the default).
#[allow(clippy::too_many_arguments)]
fn props_pattern<'a>(
    alloc: &'a Allocator,
    sink: &mut Sink<'_>,
    base: usize,
    var: &oxc::ast::ast::VariableDeclaration<'_>,
    d: &oxc::ast::ast::VariableDeclarator<'_>,
    call: &oxc::ast::ast::CallExpression<'_>,
    info: &mut ScriptInfo<'a>,
    rune_callees: &mut BTreeSet<u32>,
) {
    use oxc::ast::ast::{BindingPattern, PropertyKey};
    let end = base + var.span.end as usize;
    let BindingPattern::ObjectPattern(pattern) = &d.id else {
        sink.error(
            Code::SvelteSyntax,
            base + d.span.start as usize,
            "`$props()` is destructured: `let { title, count = 0 } = $props();`",
        );
        return;
    };
    if !call.arguments.is_empty() {
        sink.error(
            Code::SvelteSyntax,
            base + d.span.start as usize,
            "`$props()` takes no argument",
        );
        return;
    }
    if let Some(rest) = &pattern.rest {
        match &rest.argument {
            BindingPattern::BindingIdentifier(id) => {
                info.rest = Some((alloc.alloc_str(id.name.as_str()), 0));
            }
            _ => sink.error(
                Code::SvelteSyntax,
                base + rest.span.start as usize,
                "the rest of the props is one name: `let { title, ...rest } = $props();`",
            ),
        }
    }
    for property in &pattern.properties {
        let key = match &property.key {
            PropertyKey::StaticIdentifier(id) => Some(alloc.alloc_str(id.name.as_str())),
            PropertyKey::StringLiteral(s) => Some(alloc.alloc_str(s.value.as_str())),
            _ => None,
        };
        let (local, default) = match &property.value {
            BindingPattern::BindingIdentifier(id) => (Some(id.name.as_str()), None),
            BindingPattern::AssignmentPattern(a) => match &a.left {
                BindingPattern::BindingIdentifier(id) => (Some(id.name.as_str()), Some(&a.right)),
                _ => (None, None),
            },
            _ => (None, None),
        };
        let (Some(key), Some(local)) = (key, local) else {
            sink.error(
                Code::SvelteSyntax,
                base + property.span.start as usize,
                "a prop is `name`, `name = default` or `key: name`",
            );
            continue;
        };
        if let Some(Expression::CallExpression(bindable)) = default {
            if rune_name(&bindable.callee) == Some("$bindable") {
                rune_callees.insert(bindable.callee.span().start);
                info.runes.push(Rune {
                    kind: RuneKind::Bindable,
                    call: bindable.span,
                    arg: bindable.arguments.first().map(GetSpan::span),
                    name: "",
                    slot: 0,
                    deps: SlotSet::new(),
                    const_at: None,
                });
            }
        }
        info.destructured
            .push((key, alloc.alloc_str(local), 0, end));
    }
    info.runes.push(Rune {
        kind: RuneKind::Props,
        call: call.span,
        arg: None,
        name: "",
        slot: 0,
        deps: SlotSet::new(),
        const_at: (var.kind == VariableDeclarationKind::Const).then_some(var.span.start),
    });
}

/// Every rune a screen script may call, as written. [`rune_name`] recognises exactly these, and
/// the fixture tests check that each has a screen that compiles and one that is refused.
pub(crate) const RUNES: &[&str] = &[
    "$state",
    "$state.raw",
    "$derived",
    "$derived.by",
    "$effect",
    "$effect.pre",
    "$props",
    "$bindable",
];

/// The rune `callee` names (one of [`RUNES`]), if it names one.
fn rune_name(callee: &Expression<'_>) -> Option<&'static str> {
    let (object, property) = match callee {
        Expression::Identifier(id) => (id.name.as_str(), None),
        Expression::StaticMemberExpression(m) => match &m.object {
            Expression::Identifier(object) => {
                (object.name.as_str(), Some(m.property.name.as_str()))
            }
            _ => return None,
        },
        _ => return None,
    };
    RUNES.iter().copied().find(|rune| match property {
        None => *rune == object,
        Some(property) => rune.split_once('.') == Some((object, property)),
    })
}

/// The text edits that compile the runes for the piece-by-piece compiler (the one-pass compiler
/// rewrites the AST instead, see `program.rs`).
fn rune_edits(info: &mut ScriptInfo<'_>, base: usize) {
    let at = |offset: u32| base + offset as usize;
    for rune in &info.runes {
        if let Some(start) = rune.const_at {
            info.edits
                .push(Edit::replace(at(start), at(start) + "const".len(), "let"));
        }
        let (call_start, call_end) = (at(rune.call.start), at(rune.call.end));
        let deps = slot_list(&rune.deps);
        let (open, close) = match rune.kind {
            RuneKind::State => ("$$.deep(".to_string(), format!(", {})", rune.slot)),
            RuneKind::StateRaw => ("(".to_string(), ")".to_string()),
            RuneKind::Derived => (
                "$$.derived(() => (".to_string(),
                format!(
                    "), {}, {deps}, ($$v) => {{ {} = $$v; }})",
                    rune.slot, rune.name
                ),
            ),
            RuneKind::DerivedBy => (
                "$$.derived(".to_string(),
                format!(
                    ", {}, {deps}, ($$v) => {{ {} = $$v; }})",
                    rune.slot, rune.name
                ),
            ),
            RuneKind::Effect => ("$$.effect(".to_string(), format!(", {deps})")),
            RuneKind::Props => {
                info.edits
                    .push(Edit::replace(call_start, call_end, "$$.props"));
                continue;
            }
            RuneKind::Bindable => ("(".to_string(), ")".to_string()),
        };
        match rune.arg {
            Some(arg) => {
                info.edits
                    .push(Edit::replace(call_start, at(arg.start), open));
                info.edits.push(Edit::replace(at(arg.end), call_end, close));
            }
            None => info.edits.push(Edit::replace(
                call_start,
                call_end,
                format!("{open}undefined{close}"),
            )),
        }
    }
}

/// `[1, 2]`: a list of slots as JavaScript.
pub(crate) fn slot_list(slots: &SlotSet) -> String {
    let list: Vec<String> = slots.iter().map(ToString::to_string).collect();
    format!("[{}]", list.join(", "))
}

/// The message for a Svelte rune HFX does not have, or `None` when `name` is no such rune.
pub(crate) fn missing_rune(name: &str) -> Option<&'static str> {
    Some(match name {
        "$inspect" => "`$inspect` is not supported: use `console.log` in a function or `$effect`",
        "$host" => "`$host()` is not supported: HFX components are not custom elements",
        _ => return None,
    })
}

/// The value of `name = value` when `reference` is that `name`: a deeply reactive variable keeps
/// its proxy when a new value is assigned.
fn assigned_value(semantic: &Semantic<'_>, reference: &Reference) -> Option<OxcSpan> {
    let nodes = semantic.nodes();
    let ref_span = nodes.kind(reference.node_id()).span();
    nodes
        .ancestor_kinds(reference.node_id())
        .take(3)
        .find_map(|kind| match kind {
            AstKind::AssignmentExpression(a)
                if a.operator == oxc::syntax::operator::AssignmentOperator::Assign
                    && a.left.span() == ref_span =>
            {
                Some(a.right.span())
            }
            _ => None,
        })
}

/// If `reference` is assigned (`x = 1`, `x += 1`, `x++`, `[x, y] = ...`) or is the root object of
/// an assigned member (`x.done = true`, `x[i]++`), returns the span of that assignment.
pub(crate) fn assignment_around(semantic: &Semantic<'_>, reference: &Reference) -> Option<OxcSpan> {
    let nodes = semantic.nodes();
    let ref_span = nodes.kind(reference.node_id()).span();
    for kind in nodes.ancestor_kinds(reference.node_id()).take(64) {
        match kind {
            AstKind::AssignmentExpression(a) => {
                let left = a.left.span();
                let inside = left.start <= ref_span.start && ref_span.end <= left.end;
                let is_root = left.start == ref_span.start;
                return (inside && (reference.is_write() || is_root)).then_some(a.span);
            }
            AstKind::UpdateExpression(u) => {
                let arg = u.argument.span();
                return (arg.start == ref_span.start).then_some(u.span);
            }
            AstKind::Function(_)
            | AstKind::ArrowFunctionExpression(_)
            | AstKind::ExpressionStatement(_)
            | AstKind::CallExpression(_)
            | AstKind::VariableDeclarator(_) => return None,
            _ => {}
        }
    }
    None
}

/// Parses one `{expression}` (`span` of the HFX source) and lists the free names it reads and
/// assigns. Returns `None` (with diagnostics) when it is not a single valid expression.
pub(crate) fn analyze_expression<'a>(
    alloc: &'a Allocator,
    sink: &mut Sink<'_>,
    span: Span,
) -> Option<ExprInfo<'a>> {
    let text = &sink.source[span.start..span.end];
    if !nesting_ok(sink, text, span.start) {
        return None;
    }
    // The newline keeps a trailing `// comment` from swallowing the closing parenthesis.
    let wrapped = format!("({text}\n)");
    let wrapped = alloc.alloc_str(&wrapped);
    let parsed = Parser::new(alloc, wrapped, ts_module()).parse();
    let shift = isize::try_from(span.start).unwrap_or(0) - 1;
    if !parsed.diagnostics.is_empty() || parsed.panicked {
        report(sink, &parsed.diagnostics, shift, span);
        return None;
    }
    let program = parsed.program;
    if !is_single_parenthesized(&program, wrapped.len()) {
        sink.error(
            Code::InvalidExpression,
            span.start,
            "expected a single expression",
        );
        return None;
    }
    let built = SemanticBuilder::new()
        .with_build_nodes(true)
        .build(&program);
    let semantic = built.semantic;
    let scoping = semantic.scoping();
    let mut info = ExprInfo::default();
    let to_src = |s: OxcSpan| Span {
        start: (s.start as usize + span.start)
            .saturating_sub(1)
            .clamp(span.start, span.end),
        end: (s.end as usize + span.start)
            .saturating_sub(1)
            .clamp(span.start, span.end),
    };
    for (name, ids) in scoping.root_unresolved_references() {
        let name: &'a str = alloc.alloc_str(name.as_str());
        for id in ids {
            let reference = scoping.get_reference(*id);
            if let Some(target) = assignment_around(&semantic, reference) {
                info.writes.push((name, to_src(target)));
            }
        }
        info.read(name);
    }
    info.writes.sort_by_key(|(_, s)| (s.start, s.end));
    Some(info)
}

fn is_single_parenthesized(program: &Program<'_>, len: usize) -> bool {
    match program.body.as_slice() {
        [Statement::ExpressionStatement(e)] => {
            matches!(&e.expression, Expression::ParenthesizedExpression(p) if p.span.start == 0 && p.span.end as usize == len)
        }
        _ => false,
    }
}

/// Parses an `{#each}` pattern (`item`, `{ id, name }`, `[a, b]`) and returns the names it binds.
pub(crate) fn pattern_names(
    alloc: &Allocator,
    sink: &mut Sink<'_>,
    span: Span,
) -> Option<Vec<String>> {
    let text = &sink.source[span.start..span.end];
    if !nesting_ok(sink, text, span.start) {
        return None;
    }
    let wrapped = alloc.alloc_str(&format!("let {text}\n= $$v;"));
    let parsed = Parser::new(alloc, wrapped, ts_module()).parse();
    let shift = isize::try_from(span.start).unwrap_or(0) - 4;
    if !parsed.diagnostics.is_empty() || parsed.panicked {
        report(sink, &parsed.diagnostics, shift, span);
        return None;
    }
    let names = match parsed.program.body.as_slice() {
        [Statement::VariableDeclaration(v)]
            if v.declarations.len() == 1 && v.declarations[0].type_annotation.is_none() =>
        {
            v.declarations[0]
                .id
                .get_binding_identifiers()
                .iter()
                .map(|id| id.name.as_str().to_string())
                .collect::<Vec<_>>()
        }
        _ => {
            sink.error(
                Code::InvalidBlock,
                span.start,
                "expected a name or a destructuring pattern",
            );
            return None;
        }
    };
    if let Some(bad) = names.iter().find(|n| n.starts_with("$$")) {
        sink.error(
            Code::ReservedName,
            span.start,
            format!("`{bad}`: names starting with `$$` are reserved"),
        );
        return None;
    }
    Some(names)
}

/// Parses a `{#snippet}` parameter list (`item, index`, `{ id, name }: Row`) and returns the
/// names it binds.
pub(crate) fn param_names(
    alloc: &Allocator,
    sink: &mut Sink<'_>,
    span: Span,
) -> Option<Vec<String>> {
    let text = &sink.source[span.start..span.end];
    if !nesting_ok(sink, text, span.start) {
        return None;
    }
    let wrapped = alloc.alloc_str(&format!("(({text}\n) => 0);"));
    let parsed = Parser::new(alloc, wrapped, ts_module()).parse();
    let shift = isize::try_from(span.start).unwrap_or(0) - 2;
    if !parsed.diagnostics.is_empty() || parsed.panicked {
        report(sink, &parsed.diagnostics, shift, span);
        return None;
    }
    let arrow = match parsed.program.body.as_slice() {
        [Statement::ExpressionStatement(e)] => match &e.expression {
            Expression::ParenthesizedExpression(p) => match &p.expression {
                Expression::ArrowFunctionExpression(a)
                    if p.span.end as usize == wrapped.len() - 1 =>
                {
                    Some(a)
                }
                _ => None,
            },
            _ => None,
        },
        _ => None,
    };
    let Some(arrow) = arrow else {
        sink.error(
            Code::InvalidBlock,
            span.start,
            "expected snippet parameters: names or destructuring patterns",
        );
        return None;
    };
    let names: Vec<String> = arrow
        .params
        .iter_bindings()
        .flat_map(|p| p.get_binding_identifiers())
        .map(|id| id.name.as_str().to_string())
        .collect();
    if let Some(bad) = names.iter().find(|n| n.starts_with("$$")) {
        sink.error(
            Code::ReservedName,
            span.start,
            format!("`{bad}`: names starting with `$$` are reserved"),
        );
        return None;
    }
    Some(names)
}

/// Rewrites every import and re-export specifier of `program` to its browser URL.
pub(crate) fn rewrite_specifiers<'a>(
    alloc: &'a Allocator,
    program: &mut Program<'a>,
    urls: Urls<'_>,
) {
    for stmt in program.body.iter_mut() {
        let source = match stmt {
            Statement::ImportDeclaration(d) => &mut d.source,
            Statement::ExportAllDeclaration(d) => &mut d.source,
            Statement::ExportFromDeclaration(d) => &mut d.source,
            _ => continue,
        };
        let spec = source.value.as_str();
        let url = match imports::classify(spec) {
            Ok(Specifier::Vendor(url)) => urls.vendor(spec, url),
            Ok(Specifier::Sidecar) => match urls.sidecar {
                Some(url) => url.to_string(),
                None => continue,
            },
            _ => continue,
        };
        source.value = alloc.alloc_str(&url).into();
        source.raw = None;
    }
}

/// Strips TypeScript from a parsed program, rewrites import specifiers and prints it with oxc
/// codegen. Returns oxc's errors when semantic checks or the transform fail.
fn strip_and_print<'a>(
    alloc: &'a Allocator,
    mut program: Program<'a>,
    path: &str,
    urls: Urls<'_>,
) -> Result<String, Vec<OxcDiagnostic>> {
    // The transformer panics on `enum` unless enum members were constant-evaluated.
    let built = SemanticBuilder::new()
        .with_check_syntax_error(true)
        .with_enum_eval(true)
        .build(&program);
    if !built.diagnostics.is_empty() {
        return Err(built.diagnostics.to_vec());
    }
    let scoping = built.semantic.into_scoping();
    let options = TransformOptions::default();
    let result = Transformer::new(alloc, Path::new(path), &options)
        .build_with_scoping(scoping, &mut program);
    if !result.diagnostics.is_empty() {
        return Err(result.diagnostics.to_vec());
    }
    rewrite_specifiers(alloc, &mut program, urls);
    Ok(Codegen::new()
        .with_options(CodegenOptions::default())
        .build(&program)
        .code)
}

/// The last step for a screen: the generated module (TypeScript allowed) to plain JavaScript.
pub(crate) fn finish_module(
    alloc: &Allocator,
    sink: &mut Sink<'_>,
    module: &str,
    urls: Urls<'_>,
) -> Option<String> {
    let parsed = Parser::new(alloc, module, ts_module()).parse();
    let result = if parsed.diagnostics.is_empty() && !parsed.panicked {
        strip_and_print(alloc, parsed.program, "screen.ts", urls)
    } else {
        Err(parsed.diagnostics.to_vec())
    };
    match result {
        Ok(code) => Some(code),
        Err(errors) => {
            let what = errors
                .first()
                .map_or_else(String::new, |e| e.message.to_string());
            sink.error(
                Code::Internal,
                0,
                format!("internal compiler error: the generated module does not parse ({what})"),
            );
            None
        }
    }
}

/// Compiles the TypeScript sidecar to JavaScript; problems go to `sink` (the sidecar's own).
/// Compiles a sidecar: its bare imports become `<vendor_base><specifier>` when the host knows
/// where the screen's module serves its vendored files (like the screen's own imports), and are
/// added to `vendored` with their offsets so the host can check that the files exist.
pub(crate) fn compile_sidecar(
    alloc: &Allocator,
    sink: &mut Sink<'_>,
    vendor_base: Option<&str>,
    vendored: &mut Vec<crate::VendorImport>,
) -> Option<String> {
    let text = sink.source;
    let whole = Span {
        start: 0,
        end: text.len(),
    };
    if !nesting_ok(sink, text, 0) {
        return None;
    }
    // Check specifiers before printing, with positions.
    let parsed = Parser::new(alloc, text, ts_module()).parse();
    if !parsed.diagnostics.is_empty() || parsed.panicked {
        report(sink, &parsed.diagnostics, 0, whole);
        return None;
    }
    for stmt in &parsed.program.body {
        let source = match stmt {
            Statement::ImportDeclaration(d) => &d.source,
            Statement::ExportAllDeclaration(d) => &d.source,
            Statement::ExportFromDeclaration(d) => &d.source,
            _ => continue,
        };
        let spec = source.value.as_str();
        match imports::classify_sidecar(spec) {
            Err(why) => sink.error(Code::InvalidImport, source.span.start as usize, why),
            Ok(Specifier::Vendor(_)) if imports::is_vendored_module(spec) => {
                vendored.push(crate::VendorImport {
                    specifier: spec.to_owned(),
                    file: crate::SourceFile::Sidecar,
                    offset: source.span.start as usize,
                });
            }
            Ok(_) => {}
        }
    }
    if sink.has_errors() {
        vendored.clear();
        return None;
    }
    // The sidecar's own `./sidecar` (if it wrote one) is not the screen's: only vendored
    // specifiers are rewritten.
    let urls = Urls {
        sidecar: None,
        vendor_base,
    };
    match strip_and_print(alloc, parsed.program, "sidecar.ts", urls) {
        Ok(code) => Some(code),
        Err(errors) => {
            report(sink, &errors, 0, whole);
            None
        }
    }
}

/// Whether a `bind:` target (`name`, `obj.field`, `list[i].x`) can be assigned to.
pub(crate) fn is_assignable(alloc: &Allocator, sink: &mut Sink<'_>, span: Span) -> bool {
    let text = &sink.source[span.start..span.end];
    if !nesting_ok(sink, text, span.start) {
        return false;
    }
    let wrapped = alloc.alloc_str(&format!("({text}\n) = 0;"));
    let parsed = Parser::new(alloc, wrapped, ts_module()).parse();
    let ok = parsed.diagnostics.is_empty()
        && !parsed.panicked
        && matches!(
            parsed.program.body.as_slice(),
            [Statement::ExpressionStatement(_)]
        )
        && text.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_' || c == '$');
    if !ok {
        sink.error(
            Code::InvalidDirective,
            span.start,
            "a binding needs a variable or a property (`name`, `obj.field`)",
        );
    }
    ok
}
