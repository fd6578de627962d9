//! The one-pass compiler: the screen's `<script>` and every piece of code in its markup
//! (`{expressions}`, attribute values, block headers, `{#each}` patterns) parsed, analysed,
//! stripped of TypeScript and printed in a single oxc program.
//!
//! The pieces are laid out one after another in one source text: the script first, then each
//! piece as its own parenthesised expression statement (`(<expression>);`, `((<pattern>) => 0);`,
//! and `(<Component>);` for every component tag, so that an import used only as a component
//! counts as used). One parse, one semantic analysis and one TypeScript strip cover them all.
//! The script's assignments to state are wrapped in the AST (`$$.u(<assignment>, <slots>)`), and
//! so are the markup's when the code generator asks for a piece (it knows which slots a markup
//! local stands for); then the pieces are printed with oxc codegen and the generated glue is
//! written around them without being parsed again.
//!
//! This is an optimisation only. Whenever anything is wrong with the screen (a syntax error, a
//! piece that is not exactly one expression, any diagnostic), [`Unit::build`] or the code
//! generator gives up and the caller compiles the screen piece by piece instead (the original
//! pipeline), which locates every problem precisely. So valid screens take this path and
//! diagnostics are always those of the piece-by-piece compiler.

use std::collections::BTreeSet;
use std::path::Path;

use oxc::allocator::{Allocator, GetAllocator, StringBuilder, TakeIn};
use oxc::ast::ast::{
    Argument, BindingIdentifier, Declaration, Expression, IdentifierName,
    ImportDeclarationSpecifier, NumberBase, Program, Statement,
};
use oxc::ast::builder::AstBuilder;
use oxc::ast::AstKind;
use oxc::ast_visit::{walk_mut, VisitMut};
use oxc::codegen::{Codegen, CodegenOptions, Context, Gen};
use oxc::parser::Parser;
use oxc::semantic::{Semantic, SemanticBuilder};
use oxc::span::{GetSpan, Span as OxcSpan, SPAN};
use oxc::syntax::symbol::SymbolFlags;
use oxc::transformer::{TransformOptions, Transformer};
use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use crate::diagnostics::{Sink, SourceFile};
use crate::imports::Specifier;
use crate::js::{self, ExprInfo, ScriptInfo};
use crate::markup::{AttrValue, Document, Element, Node, Part, Span};
use crate::scan;
use crate::slots::SlotSet;

/// Between the script and the pieces (see [`Unit::build`]).
const SEPARATOR: &str = "\n0;\n";

/// Opens and closes a placeholder of [`Unit::print`].
const PLACEHOLDER: u8 = b'\0';

/// What a piece of markup code is, which decides how it is wrapped in the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// An expression: `(<text>\n);`.
    Expr,
    /// An `{#each}` pattern, as the only parameter of an arrow: `((<text>\n) => 0);`.
    Pattern,
    /// A name the glue uses (a component): `(<name>);`.
    Name,
    /// A `{#snippet}` parameter list, as an arrow's parameters: `((<text>\n) => 0);`.
    Params,
}

/// One piece of code from the markup.
struct Piece<'d> {
    kind: Kind,
    /// Where its text is in the HFX source (for a name, its element's start).
    source: Span,
    /// The text of a [`Kind::Name`].
    name: Option<&'d str>,
    /// Where its wrapper statement starts in the program text.
    start: usize,
}

impl<'d> Piece<'d> {
    fn new(kind: Kind, source: Span) -> Piece<'d> {
        Piece {
            kind,
            source,
            name: None,
            start: 0,
        }
    }

    fn text<'s>(&'s self, source: &'s str) -> &'s str {
        match self.name {
            Some(name) => name,
            None => &source[self.source.start..self.source.end],
        }
    }
}

/// What the compiler knows about one piece after the analysis.
#[derive(Debug, Default)]
pub(crate) struct PieceInfo<'a> {
    /// Free names read and assignments made (assignment spans in program positions).
    pub(crate) expr: ExprInfo<'a>,
    /// An `{#each}` pattern's bound names.
    names: Vec<String>,
    /// Whether the expression can be assigned to (a `bind:` target).
    assignable: bool,
}

/// The screen's code after the one pass: analysed, stripped of TypeScript, ready to print.
pub(crate) struct Unit<'a> {
    alloc: &'a Allocator,
    text: &'a str,
    /// Piece index by source span, sorted by span (a binary search is cheaper than hashing
    /// for the few lookups each piece gets).
    by_span: Vec<((usize, usize), usize)>,
    infos: Vec<PieceInfo<'a>>,
    /// Each piece's code (the expression inside its parentheses, or a pattern's arrow).
    exprs: Vec<Option<Expression<'a>>>,
    /// The pieces [`Unit::print`] handed out as placeholders, in the order it did, printed by
    /// [`Unit::fill`].
    deferred: Vec<Expression<'a>>,
    /// Where [`Unit::print`] writes a placeholder before copying it into the arena.
    placeholder: String,
    /// The script's statements after the strip, imports excepted; printed as one program.
    body: Program<'a>,
    /// The script's import statements (specifiers already rewritten), screen imports excepted.
    imports: Vec<Statement<'a>>,
    /// The script analysis (state, props, functions, imports) the generator needs.
    pub(crate) script: ScriptInfo<'a>,
    /// The deeply reactive slots (a copy: the generator takes `script`).
    deep: SlotSet,
}

impl<'a> Unit<'a> {
    /// Parses and analyses the script and every piece of the markup's code as one program. `None`
    /// when anything is not right: the caller then compiles piece by piece.
    pub(crate) fn build(
        alloc: &'a Allocator,
        source: &str,
        doc: &Document,
        urls: crate::imports::Urls<'_>,
    ) -> Option<Unit<'a>> {
        // A NUL byte in the screen could be copied into the output and be taken for a
        // placeholder (see `Unit::print`); no real screen has one. (`memchr` searches many bytes
        // at a time, the standard library's search a word.)
        if memchr::memchr(PLACEHOLDER, source.as_bytes()).is_some() {
            return None;
        }
        let mut pieces = Vec::new();
        collect(&doc.nodes, &mut pieces);

        // The program text: the script, a separating `0;` (a token no statement can continue, so
        // a script's last statement ends where the script ends), then one statement per piece.
        let script_text = doc.script.map_or("", |s| &source[s.start..s.end]);
        let mut text = String::with_capacity(script_text.len() + source.len() / 2 + 64);
        text.push_str(script_text);
        text.push_str(SEPARATOR);
        let pieces_start = text.len();
        for piece in &mut pieces {
            piece.start = text.len();
            let code = piece.text(source);
            match piece.kind {
                Kind::Expr => {
                    text.push('(');
                    text.push_str(code);
                    text.push_str("\n);\n");
                }
                Kind::Pattern | Kind::Params => {
                    text.push_str("((");
                    text.push_str(code);
                    text.push_str("\n) => 0);\n");
                }
                Kind::Name => {
                    text.push('(');
                    text.push_str(code);
                    text.push_str(");\n");
                }
            }
        }
        if scan::js_nesting_estimate(&text) > scan::MAX_JS_NESTING {
            return None;
        }
        let text: &'a str = alloc.alloc_str(&text);
        let parsed = Parser::new(alloc, text, js::ts_module()).parse();
        if !parsed.diagnostics.is_empty() || parsed.panicked {
            return None;
        }
        let mut program = parsed.program;
        let script_len = script_text.len();
        if !well_formed(&program, &pieces, script_len) {
            return None;
        }
        let built = SemanticBuilder::new()
            .with_build_nodes(true)
            .with_check_syntax_error(true)
            .with_enum_eval(true)
            .with_stats(capacity_estimate(text.len()))
            .build(&program);
        if !built.diagnostics.is_empty() {
            return None;
        }
        let semantic = built.semantic;
        let mut scratch = Sink::new(source, SourceFile::Screen);
        let base = doc.script.map_or(0, |s| s.start);
        let script = js::analyze_program(
            alloc,
            &mut scratch,
            &program,
            &semantic,
            base,
            script_len,
            false,
        );
        if scratch.has_errors() {
            return None;
        }
        let infos = analyze_pieces(alloc, &program, &semantic, &pieces, pieces_start)?;
        if needs_strip(&semantic) {
            let scoping = semantic.into_scoping();
            let options = TransformOptions::default();
            let transformed = Transformer::new(alloc, Path::new("screen.ts"), &options)
                .build_with_scoping(scoping, &mut program);
            if !transformed.diagnostics.is_empty() {
                return None;
            }
        } else {
            // What the strip would have done to a program it leaves unchanged.
            drop(semantic);
            program.source_type = program.source_type.with_javascript(true);
        }

        // Split the program: script statements, imports, and the pieces' code.
        let ast = AstBuilder::new(alloc);
        let mut exprs: Vec<Option<Expression<'a>>> = pieces.iter().map(|_| None).collect();
        let mut body = oxc::allocator::Vec::new_in(&ast);
        let mut imports = Vec::new();
        let screen_imports: BTreeSet<u32> = script
            .imports
            .iter()
            .filter(|i| matches!(i.specifier, Specifier::Screen { .. }))
            .map(|i| (i.span.start - base) as u32)
            .collect();
        for stmt in program.body.take_in(&ast) {
            let at = stmt.span().start as usize;
            if at >= pieces_start {
                let index = pieces.partition_point(|p| p.start <= at).checked_sub(1)?;
                let Statement::ExpressionStatement(statement) = stmt else {
                    return None;
                };
                exprs[index] = Some(unparenthesize(statement.unbox().expression));
            } else if at == script_len + 1 {
                // The separator.
            } else if let Statement::ImportDeclaration(_) = stmt {
                if !screen_imports.contains(&stmt.span().start) {
                    imports.push(stmt);
                }
            } else {
                body.push(stmt);
            }
        }
        program.body = body;
        let mut imports_program = Program::new(
            SPAN,
            program.source_type,
            text,
            oxc::allocator::Vec::new_in(&ast),
            None,
            oxc::allocator::Vec::new_in(&ast),
            oxc::allocator::Vec::from_iter_in(imports, &ast),
            &ast,
        );
        js::rewrite_specifiers(alloc, &mut imports_program, urls);
        let imports = imports_program.body.take_in(&ast).into_iter().collect();

        // The script's own changes: `export let` props read their value from the caller, and
        // assignments to state are wrapped.
        unwrap_props(&mut program, &ast)?;
        let mut targets: FxHashMap<(u32, u32), SlotSet> = FxHashMap::default();
        for (span, slot) in &script.wraps {
            targets
                .entry((span.start, span.end))
                .or_default()
                .insert(*slot);
        }
        if !targets.is_empty() {
            Wrapper {
                ast: &ast,
                starts: &target_starts(&targets),
                targets: &targets,
                deep: &script.deep,
            }
            .visit_program(&mut program);
        }
        if !script.runes.is_empty() {
            compile_runes(alloc, &ast, &mut program, &script.runes)?;
        }

        // Reversed, then stably sorted and deduplicated: of two pieces with one span, the last
        // is found.
        let mut by_span: Vec<((usize, usize), usize)> = pieces
            .iter()
            .enumerate()
            .rev()
            .filter(|(_, p)| p.kind != Kind::Name)
            .map(|(i, p)| ((p.source.start, p.source.end), i))
            .collect();
        by_span.sort_by_key(|(span, _)| *span);
        by_span.dedup_by_key(|(span, _)| *span);
        Some(Unit {
            alloc,
            text,
            by_span,
            infos,
            exprs,
            deferred: Vec::new(),
            placeholder: String::new(),
            body: program,
            imports,
            deep: script.deep.clone(),
            script,
        })
    }

    /// The index of the piece at `span`.
    fn index_of(&self, span: Span) -> Option<usize> {
        let key = (span.start, span.end);
        let at = self.by_span.binary_search_by_key(&key, |(s, _)| *s).ok()?;
        Some(self.by_span[at].1)
    }

    /// What the analysis found about the expression at `span`.
    pub(crate) fn info(&self, span: Span) -> Option<&ExprInfo<'a>> {
        let index = self.index_of(span)?;
        Some(&self.infos[index].expr)
    }

    /// The code of the expression at `span`, in parentheses, with the given assignments
    /// (program positions, as in [`ExprInfo::writes`]) wrapped to invalidate their slots. Each
    /// piece is asked for once.
    ///
    /// A name or a chain of property reads is written at once; any other expression is a
    /// placeholder (`\0<n>\0`) that [`Unit::fill`] replaces with its printed code, so that one
    /// printer prints them all (a printer costs about as much to make and take apart as printing
    /// a short expression). No screen text holds a NUL byte ([`Unit::build`] checks), so nothing
    /// else in the output can be taken for a placeholder.
    pub(crate) fn print(&mut self, span: Span, wraps: &[(Span, SlotSet)]) -> Option<&'a str> {
        let index = self.index_of(span)?;
        let mut expr = self.exprs.get_mut(index)?.take()?;
        if !wraps.is_empty() {
            let targets: FxHashMap<(u32, u32), SlotSet> = wraps
                .iter()
                .map(|(s, slots)| ((s.start as u32, s.end as u32), slots.clone()))
                .collect();
            let ast = AstBuilder::new(self.alloc);
            Wrapper {
                ast: &ast,
                starts: &target_starts(&targets),
                targets: &targets,
                deep: &self.deep,
            }
            .visit_expression(&mut expr);
        } else if let Some(code) = plain_reads(self.alloc, &expr) {
            return Some(code);
        }
        let placeholder = &mut self.placeholder;
        placeholder.clear();
        placeholder.push(char::from(PLACEHOLDER));
        crate::generate::Emit::emit(&self.deferred.len(), placeholder);
        placeholder.push(char::from(PLACEHOLDER));
        self.deferred.push(expr);
        Some(self.alloc.alloc_str(placeholder))
    }

    /// `render` with each placeholder of [`Unit::print`] replaced by its expression, printed in
    /// parentheses. `None` if a placeholder is not one `print` made.
    pub(crate) fn fill(&self, render: &str) -> Option<String> {
        let mut codegen = Codegen::new().with_source_text(self.text);
        let mut rest = render;
        while let Some(at) = memchr::memchr(PLACEHOLDER, rest.as_bytes()) {
            codegen.print_str(&rest[..at]);
            let after = &rest[at + 1..];
            let end = memchr::memchr(PLACEHOLDER, after.as_bytes())?;
            let expr = self.deferred.get(after[..end].parse::<usize>().ok()?)?;
            codegen.print_ascii_byte(b'(');
            codegen.print_expression(expr);
            codegen.print_ascii_byte(b')');
            rest = &after[end + 1..];
        }
        codegen.print_str(rest);
        Some(codegen.into_source_text())
    }

    /// An `{#each}` pattern's bound names and its code (types stripped), for `let <pattern> = …`.
    pub(crate) fn pattern(&mut self, span: Span) -> Option<(Vec<String>, String)> {
        let index = self.index_of(span)?;
        let mut expr = self.exprs.get_mut(index)?.take()?;
        if let Expression::ArrowFunctionExpression(arrow) = &mut expr {
            // The parser marks an arrow in parentheses as "possibly invoked"; printing it with
            // its parentheses would not fit the shape stripped below.
            arrow.pife = false;
        }
        let mut codegen = Codegen::new().with_source_text(self.text);
        codegen.print_expression(&expr);
        let printed = codegen.into_source_text();
        let code = printed.strip_prefix('(')?.strip_suffix(") => 0")?;
        Some((self.infos[index].names.clone(), code.to_string()))
    }

    /// A `{#snippet}` parameter list's bound names and its code (types stripped), for an arrow
    /// `(<params>) => [names]`.
    pub(crate) fn params(&mut self, span: Span) -> Option<(Vec<String>, String)> {
        let index = self.index_of(span)?;
        let mut expr = self.exprs.get_mut(index)?.take()?;
        if let Expression::ArrowFunctionExpression(arrow) = &mut expr {
            arrow.pife = false;
        }
        let mut codegen = Codegen::new().with_source_text(self.text);
        codegen.print_expression(&expr);
        let printed = codegen.into_source_text();
        let code = printed.strip_prefix('(')?.strip_suffix(") => 0")?;
        Some((self.infos[index].names.clone(), code.to_string()))
    }

    /// Whether the expression at `span` can be assigned to (a variable or a property).
    pub(crate) fn is_assignable(&self, span: Span) -> bool {
        self.index_of(span)
            .is_some_and(|i| self.infos[i].assignable)
    }

    /// The import statements to put at the top of the module, printed.
    pub(crate) fn print_imports(&self) -> String {
        let mut codegen = Codegen::new().with_source_text(self.text);
        for import in &self.imports {
            import.print(&mut codegen, Context::default());
        }
        codegen.into_source_text()
    }

    /// The script's statements, printed for the component's setup function (comments kept).
    pub(crate) fn print_script(&self) -> String {
        let options = CodegenOptions {
            initial_indent: 1,
            ..CodegenOptions::default()
        };
        Codegen::new().with_options(options).build(&self.body).code
    }
}

/// How many nodes, scopes, symbols and references the analysis of a program text of `len` bytes
/// makes room for. Without an estimate the analysis counts them exactly in a pass of its own over
/// the whole tree; a generous guess from the length costs nothing, and a low one only makes a
/// table grow. Screens measure about one node per 4 bytes, one reference per 20 and one scope or
/// symbol per 70.
fn capacity_estimate(len: usize) -> oxc::semantic::Stats {
    let len = u32::try_from(len).unwrap_or(u32::MAX);
    oxc::semantic::Stats::new(len / 2, len / 32, len / 32, len / 8)
}

/// A name or a chain of property reads (`row.owner.name`) in parentheses, written as the printer
/// writes it, or `None` for any other expression. Most pieces of markup are such reads, and a
/// printer costs more to make than to print one. The code is written in the compile's arena.
fn plain_reads<'a>(alloc: &'a Allocator, expr: &Expression<'_>) -> Option<&'a str> {
    let mut names: SmallVec<[&str; 4]> = SmallVec::new();
    let mut object = expr;
    let root = loop {
        match object {
            Expression::Identifier(id) => break id.name.as_str(),
            Expression::StaticMemberExpression(member) if !member.optional => {
                names.push(member.property.name.as_str());
                object = &member.object;
            }
            _ => return None,
        }
    };
    let len = 2 + root.len() + names.iter().map(|n| n.len() + 1).sum::<usize>();
    let mut code = StringBuilder::with_capacity_in(len, alloc);
    code.push('(');
    code.push_str(root);
    for name in names.iter().rev() {
        code.push('.');
        code.push_str(name);
    }
    code.push(')');
    Some(code.into_str())
}

/// Collects the markup's pieces of code in document order.
fn collect<'d>(nodes: &[Node<'d>], out: &mut Vec<Piece<'d>>) {
    let push = |kind: Kind, source: Span, out: &mut Vec<Piece>| out.push(Piece::new(kind, source));
    for node in nodes {
        match node {
            Node::Text(_) => {}
            Node::Expr(span) => push(Kind::Expr, *span, out),
            Node::Element(el) => {
                collect_element(el, out);
                collect(&el.children, out);
            }
            Node::If(block) => {
                for (cond, body) in &block.branches {
                    if let Some(span) = cond {
                        push(Kind::Expr, *span, out);
                    }
                    collect(body, out);
                }
            }
            Node::Each(block) => {
                push(Kind::Expr, block.list, out);
                push(Kind::Pattern, block.pattern, out);
                if let Some(key) = block.key {
                    push(Kind::Expr, key, out);
                }
                collect(&block.body, out);
                if let Some(body) = &block.else_body {
                    collect(body, out);
                }
            }
            Node::Const { value, .. } => push(Kind::Expr, *value, out),
            Node::Query(block) => {
                push(Kind::Expr, block.query, out);
                for span in block.params.iter().chain(&block.options) {
                    push(Kind::Expr, *span, out);
                }
                collect(&block.body, out);
            }
            Node::Form(block) => {
                for span in block.id.iter().chain(&block.options) {
                    push(Kind::Expr, *span, out);
                }
                collect(&block.body, out);
            }
            Node::Snippet(block) => {
                push(Kind::Params, block.params, out);
                collect(&block.body, out);
            }
            Node::Render(span) => push(Kind::Expr, *span, out),
            Node::Await(block) => {
                push(Kind::Expr, block.promise, out);
                collect(&block.pending, out);
                for (pattern, body) in block.then.iter().chain(&block.catch) {
                    if let Some(span) = pattern {
                        push(Kind::Pattern, *span, out);
                    }
                    collect(body, out);
                }
            }
            Node::Key { value, body } => {
                push(Kind::Expr, *value, out);
                collect(body, out);
            }
        }
    }
}

fn collect_element<'d>(el: &Element<'d>, out: &mut Vec<Piece<'d>>) {
    if el.name.starts_with(|c: char| c.is_ascii_uppercase())
        && crate::markup::is_identifier(el.name)
    {
        let mut piece = Piece::new(
            Kind::Name,
            Span {
                start: el.start,
                end: el.start,
            },
        );
        piece.name = Some(el.name);
        out.push(piece);
    }
    for attr in &el.attrs {
        // An action is a name the glue uses, like a component.
        if let Some(action) = attr.name.strip_prefix("use:") {
            if crate::markup::is_identifier(action) {
                let mut piece = Piece::new(
                    Kind::Name,
                    Span {
                        start: attr.start,
                        end: attr.start,
                    },
                );
                piece.name = Some(action);
                out.push(piece);
            }
        }
        match &attr.value {
            AttrValue::Expr(span) => out.push(Piece::new(Kind::Expr, *span)),
            AttrValue::Mixed(parts) => {
                for part in parts {
                    if let Part::Expr(span) = part {
                        out.push(Piece::new(Kind::Expr, *span));
                    }
                }
            }
            AttrValue::Bare | AttrValue::Text(_) => {}
        }
    }
}

/// Whether the parsed program has exactly the shape it was built with: the script's statements
/// inside the script, the separator, and one parenthesised statement per piece, each ending
/// where its wrapper ends. A piece that is not exactly one expression (`a); (b`) breaks it.
fn well_formed(program: &Program<'_>, pieces: &[Piece], script_len: usize) -> bool {
    let mut rest = program.body.iter().peekable();
    let mut script_statements = 0;
    while let Some(stmt) = rest.next_if(|s| (s.span().start as usize) < script_len) {
        if stmt.span().end as usize > script_len {
            return false;
        }
        script_statements += 1;
    }
    if program.body.len() != script_statements + 1 + pieces.len() {
        return false;
    }
    let separator = rest.next().is_some_and(|s| match s {
        Statement::ExpressionStatement(e) => {
            e.span.start as usize == script_len + 1
                && matches!(e.expression, Expression::NumericLiteral(_))
        }
        _ => false,
    });
    if !separator {
        return false;
    }
    let mut count = 0;
    for (stmt, piece) in rest.zip(pieces) {
        count += 1;
        let len = match &piece.name {
            Some(name) => name.len(),
            None => piece.source.end - piece.source.start,
        };
        let (wrapper_end, inner_ok): (usize, fn(&Expression<'_>) -> bool) = match piece.kind {
            Kind::Expr => (piece.start + len + 3, |_| true),
            Kind::Pattern => (piece.start + len + 10, |e| {
                matches!(e, Expression::ArrowFunctionExpression(a)
                    if a.body.as_expression().is_some() && !a.r#async && a.type_parameters.is_none()
                        && a.return_type.is_none() && a.params.rest.is_none()
                        && a.params.items.len() == 1
                        && a.params.items[0].type_annotation.is_none()
                        && a.params.items[0].initializer.is_none()
                        && !a.params.items[0].optional
                        && !a.params.items[0].has_modifier()
                        && a.params.items[0].decorators.is_empty())
            }),
            Kind::Name => (piece.start + len + 2, |e| {
                matches!(e, Expression::Identifier(_))
            }),
            Kind::Params => (piece.start + len + 10, |e| {
                matches!(e, Expression::ArrowFunctionExpression(a)
                    if a.body.as_expression().is_some() && !a.r#async && a.type_parameters.is_none()
                        && a.return_type.is_none()
                        && a.params.items.iter().all(|p| !p.has_modifier() && p.decorators.is_empty()))
            }),
        };
        let ok = match stmt {
            Statement::ExpressionStatement(s) => match &s.expression {
                Expression::ParenthesizedExpression(p) => {
                    p.span.start as usize == piece.start
                        && p.span.end as usize == wrapper_end
                        && inner_ok(&p.expression)
                }
                _ => false,
            },
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    count == pieces.len()
}

/// Analyses every piece: the free names each expression reads and the assignments it makes
/// (free names are those not declared inside the piece), each pattern's names, and which
/// expressions can be assigned to. `None` when a piece uses `await` outside a function.
fn analyze_pieces<'a>(
    alloc: &'a Allocator,
    program: &Program<'_>,
    semantic: &oxc::semantic::Semantic<'_>,
    pieces: &[Piece],
    pieces_start: usize,
) -> Option<Vec<PieceInfo<'a>>> {
    let mut infos: Vec<PieceInfo<'a>> = pieces.iter().map(|_| PieceInfo::default()).collect();
    let piece_at = |at: u32| -> Option<usize> {
        let at = at as usize;
        if at < pieces_start {
            return None;
        }
        pieces.partition_point(|p| p.start <= at).checked_sub(1)
    };
    let scoping = semantic.scoping();
    let nodes = semantic.nodes();
    let record =
        |name: &'a str, reference: &oxc::semantic::Reference, infos: &mut Vec<PieceInfo<'a>>| {
            let at = nodes.kind(reference.node_id()).span().start;
            if let Some(index) = piece_at(at) {
                let info = &mut infos[index].expr;
                if let Some(target) = js::assignment_around(semantic, reference) {
                    info.writes.push((
                        name,
                        Span {
                            start: target.start as usize,
                            end: target.end as usize,
                        },
                    ));
                }
                info.read(name);
            }
        };
    for (name, ids) in scoping.root_unresolved_references() {
        let name = alloc.alloc_str(name.as_str());
        for id in ids {
            record(name, scoping.get_reference(*id), &mut infos);
        }
    }
    for symbol in scoping.iter_bindings_in(scoping.root_scope_id()) {
        let name = alloc.alloc_str(scoping.symbol_name(symbol));
        for reference in scoping.get_resolved_references(symbol) {
            record(name, reference, &mut infos);
        }
    }
    for info in &mut infos {
        info.expr.writes.sort_by_key(|(_, s)| (s.start, s.end));
    }
    // `await` in markup code outside a function has nowhere to run.
    for node in nodes.iter() {
        let awaits = match node.kind() {
            oxc::ast::AstKind::AwaitExpression(a) => Some(a.span.start),
            _ => None,
        };
        if let Some(at) = awaits {
            if piece_at(at).is_some()
                && !nodes.ancestor_kinds(node.id()).any(|k| {
                    matches!(
                        k,
                        oxc::ast::AstKind::Function(_)
                            | oxc::ast::AstKind::ArrowFunctionExpression(_)
                    ) && k.span().start as usize >= pieces_start
                        && !is_pattern_wrapper(k, pieces)
                })
            {
                return None;
            }
        }
    }
    // Patterns and binding targets.
    let body = &program.body;
    let first_piece = body.len() - pieces.len();
    for (index, piece) in pieces.iter().enumerate() {
        let Some(Statement::ExpressionStatement(stmt)) = body.get(first_piece + index) else {
            return None;
        };
        let Expression::ParenthesizedExpression(paren) = &stmt.expression else {
            return None;
        };
        match (&paren.expression, piece.kind) {
            (Expression::ArrowFunctionExpression(arrow), Kind::Params) => {
                let names: Vec<String> = arrow
                    .params
                    .iter_bindings()
                    .flat_map(|p| p.get_binding_identifiers())
                    .map(|id| id.name.as_str().to_string())
                    .collect();
                if names.iter().any(|n| n.starts_with("$$")) {
                    return None;
                }
                infos[index].names = names;
            }
            (Expression::ArrowFunctionExpression(arrow), Kind::Pattern) => {
                let names: Vec<String> = arrow.params.items[0]
                    .pattern
                    .get_binding_identifiers()
                    .iter()
                    .map(|id| id.name.as_str().to_string())
                    .collect();
                if names.iter().any(|n| n.starts_with("$$")) {
                    return None;
                }
                infos[index].names = names;
            }
            (expr, Kind::Expr) => {
                infos[index].assignable = matches!(
                    expr,
                    Expression::Identifier(_)
                        | Expression::StaticMemberExpression(_)
                        | Expression::ComputedMemberExpression(_)
                );
            }
            _ => {}
        }
    }
    Some(infos)
}

/// Whether the TypeScript strip could change the program: it holds TypeScript syntax, a class
/// (whose members may carry TypeScript modifiers; classes are rare in screens, so they simply
/// count), or an import the strip removes because nothing reads it. A screen written in plain
/// JavaScript skips the strip, which is a full pass over the program.
fn needs_strip(semantic: &Semantic<'_>) -> bool {
    let scoping = semantic.scoping();
    // What the strip checks before it keeps an imported name: a read, and no value declared
    // under the same name.
    let unread = |local: &BindingIdentifier<'_>| {
        let symbol = local.symbol_id();
        (scoping.symbol_flags(symbol) - SymbolFlags::Import).is_value()
            || scoping.get_resolved_reference_ids(symbol).is_empty()
    };
    semantic.nodes().iter().any(|node| match node.kind() {
        // Every piece of TypeScript syntax is one of these or lies inside one of them (types
        // only occur in annotations, type parameters and type arguments).
        AstKind::TSTypeAnnotation(_)
        | AstKind::TSTypeParameterDeclaration(_)
        | AstKind::TSTypeParameterInstantiation(_)
        | AstKind::TSThisParameter(_)
        | AstKind::TSAsExpression(_)
        | AstKind::TSSatisfiesExpression(_)
        | AstKind::TSTypeAssertion(_)
        | AstKind::TSNonNullExpression(_)
        | AstKind::TSInstantiationExpression(_)
        | AstKind::TSEnumDeclaration(_)
        | AstKind::TSTypeAliasDeclaration(_)
        | AstKind::TSInterfaceDeclaration(_)
        | AstKind::TSExternalModuleDeclaration(_)
        | AstKind::TSNamespaceDeclaration(_)
        | AstKind::TSGlobalDeclaration(_)
        | AstKind::TSImportEqualsDeclaration(_)
        | AstKind::TSExportAssignment(_)
        | AstKind::TSNamespaceExportDeclaration(_)
        | AstKind::Class(_)
        | AstKind::Decorator(_)
        | AstKind::ExportNamedDeclaration(_)
        | AstKind::ExportFromDeclaration(_)
        | AstKind::ExportAllDeclaration(_)
        | AstKind::ExportDefaultDeclaration(_) => true,
        // The TypeScript that is a flag rather than a node.
        AstKind::Function(f) => f.declare || f.body.is_none(),
        AstKind::VariableDeclaration(v) => v.declare,
        AstKind::VariableDeclarator(d) => d.definite,
        AstKind::FormalParameter(p) => {
            p.accessibility.is_some() || p.readonly || p.r#override || p.optional
        }
        AstKind::ImportDeclaration(import) => {
            import.import_kind.is_type()
                || import.specifiers.as_ref().is_some_and(|specifiers| {
                    specifiers.is_empty()
                        || specifiers.iter().any(|specifier| match specifier {
                            ImportDeclarationSpecifier::ImportSpecifier(s) => {
                                s.import_kind.is_type() || unread(&s.local)
                            }
                            ImportDeclarationSpecifier::ImportDefaultSpecifier(s) => {
                                unread(&s.local)
                            }
                            ImportDeclarationSpecifier::ImportNamespaceSpecifier(s) => {
                                unread(&s.local)
                            }
                        })
                })
        }
        _ => false,
    })
}

/// Whether `kind` is the arrow a pattern piece is wrapped in (`((<pattern>) => 0)`), which is
/// no function of the user's.
fn is_pattern_wrapper(kind: oxc::ast::AstKind<'_>, pieces: &[Piece]) -> bool {
    let start = kind.span().start as usize;
    pieces
        .iter()
        .any(|p| matches!(p.kind, Kind::Pattern | Kind::Params) && p.start + 1 == start)
}

/// The expression inside a piece's wrapping parentheses.
fn unparenthesize<'a>(expr: Expression<'a>) -> Expression<'a> {
    match expr {
        Expression::ParenthesizedExpression(paren) => paren.unbox().expression,
        other => other,
    }
}

/// `export let name = value;` becomes `let name = $$.prop("name", value);`: the caller's value
/// wins over the default; `export function` and `export const` lose their `export`. `None` when
/// another export remains after the strip.
fn unwrap_props<'a>(program: &mut Program<'a>, ast: &AstBuilder<'a>) -> Option<()> {
    for stmt in program.body.iter_mut() {
        if matches!(
            stmt,
            Statement::ExportNamedDeclaration(_)
                | Statement::ExportDefaultDeclaration(_)
                | Statement::ExportAllDeclaration(_)
                | Statement::ExportFromDeclaration(_)
        ) {
            return None;
        }
        if !matches!(stmt, Statement::ExportDeclaration(_)) {
            continue;
        }
        let Statement::ExportDeclaration(export) = stmt.take_in(ast) else {
            return None;
        };
        // `export function` and `export const` are the instance's API (see `ScriptInfo::exports`):
        // plain declarations here.
        let mut var = match export.unbox().declaration {
            Declaration::FunctionDeclaration(function) => {
                *stmt = Statement::FunctionDeclaration(function);
                continue;
            }
            Declaration::VariableDeclaration(var)
                if var.kind == oxc::ast::ast::VariableDeclarationKind::Const =>
            {
                *stmt = Statement::VariableDeclaration(var);
                continue;
            }
            Declaration::VariableDeclaration(var) => var,
            _ => return None,
        };
        for declarator in var.declarations.iter_mut() {
            let name = declarator.id.get_binding_identifier()?.name.as_str();
            let name =
                Expression::new_string_literal(SPAN, ast.allocator().alloc_str(name), None, ast);
            let value = declarator
                .init
                .take()
                .unwrap_or_else(|| Expression::new_void_0(SPAN, ast));
            declarator.init = Some(call(ast, "prop", [name, value]));
        }
        *stmt = Statement::VariableDeclaration(var);
    }
    Some(())
}

/// `$$.<method>(<arguments>)`.
fn call<'a>(
    ast: &AstBuilder<'a>,
    method: &'static str,
    args: impl IntoIterator<Item = Expression<'a>>,
) -> Expression<'a> {
    let callee = Expression::new_static_member_expression(
        SPAN,
        Expression::new_identifier(SPAN, "$$", ast),
        IdentifierName::new(SPAN, method, ast),
        false,
        ast,
    );
    let arguments = oxc::allocator::Vec::from_iter_in(args.into_iter().map(Argument::from), ast);
    Expression::new_call_expression(SPAN, callee, None, arguments, false, ast)
}

/// Wraps the assignments at the target positions as `$$.u(<assignment>, <slots>)`, and the value
/// of `name = value` as `$$.deep(value, slot)` when `name` is deeply reactive state.
struct Wrapper<'a, 'w> {
    ast: &'w AstBuilder<'a>,
    /// Where the targets start, sorted: a statement with none inside is not walked (most of a
    /// script's statements assign no state).
    starts: &'w [u32],
    targets: &'w FxHashMap<(u32, u32), SlotSet>,
    deep: &'w SlotSet,
}

/// The sorted starts of the targets, for [`Wrapper::starts`].
fn target_starts(targets: &FxHashMap<(u32, u32), SlotSet>) -> Vec<u32> {
    let mut starts: Vec<u32> = targets.keys().map(|(start, _)| *start).collect();
    starts.sort_unstable();
    starts
}

impl<'a> VisitMut<'a> for Wrapper<'a, '_> {
    fn visit_statement(&mut self, stmt: &mut Statement<'a>) {
        let span = stmt.span();
        let first = self.starts.partition_point(|start| *start < span.start);
        if self
            .starts
            .get(first)
            .is_some_and(|start| *start < span.end)
        {
            walk_mut::walk_statement(self, stmt);
        }
    }

    fn visit_expression(&mut self, expr: &mut Expression<'a>) {
        walk_mut::walk_expression(self, expr);
        if !matches!(
            expr,
            Expression::AssignmentExpression(_) | Expression::UpdateExpression(_)
        ) {
            return;
        }
        let span: OxcSpan = expr.span();
        let Some(slots) = self.targets.get(&(span.start, span.end)) else {
            return;
        };
        if let (Expression::AssignmentExpression(assign), [slot]) = (&mut *expr, slots.as_slice()) {
            if self.deep.contains(slot)
                && assign.operator == oxc::syntax::operator::AssignmentOperator::Assign
                && matches!(
                    assign.left,
                    oxc::ast::ast::AssignmentTarget::AssignmentTargetIdentifier(_)
                )
            {
                let value = assign.right.take_in(self.ast);
                assign.right = call(self.ast, "deep", [value, number(self.ast, *slot)]);
            }
        }
        let inner = expr.take_in(self.ast);
        let slots = slots.iter().map(|slot| number(self.ast, *slot));
        *expr = call(self.ast, "u", std::iter::once(inner).chain(slots));
    }
}

fn number<'a>(ast: &AstBuilder<'a>, n: usize) -> Expression<'a> {
    Expression::new_numeric_literal(SPAN, n as f64, None, NumberBase::Decimal, ast)
}

/// Compiles the script's runes in the AST (the piece-by-piece compiler edits text instead, see
/// `js::rune_edits`, which shows the same shapes): each call becomes a call of the runtime with
/// its argument moved into a small parsed template. `None` if a template does not fit.
fn compile_runes<'a>(
    alloc: &'a Allocator,
    ast: &AstBuilder<'a>,
    program: &mut Program<'a>,
    runes: &[js::Rune<'_>],
) -> Option<()> {
    let consts: BTreeSet<u32> = runes.iter().filter_map(|r| r.const_at).collect();
    for stmt in program.body.iter_mut() {
        if let Statement::VariableDeclaration(var) = stmt {
            if consts.contains(&var.span.start) {
                var.kind = oxc::ast::ast::VariableDeclarationKind::Let;
            }
        }
    }
    let mut rewriter = Runes {
        alloc,
        ast,
        by_call: runes
            .iter()
            .map(|r| ((r.call.start, r.call.end), r))
            .collect(),
        failed: false,
    };
    rewriter.visit_program(program);
    (!rewriter.failed).then_some(())
}

struct Runes<'a, 'r> {
    alloc: &'a Allocator,
    ast: &'r AstBuilder<'a>,
    by_call: FxHashMap<(u32, u32), &'r js::Rune<'r>>,
    failed: bool,
}

impl<'a> Runes<'a, '_> {
    /// Parses `text` (an expression of the compiler's own) in the arena.
    fn template(&self, text: &str) -> Option<Expression<'a>> {
        let text = self.alloc.alloc_str(text);
        let parsed = Parser::new(self.alloc, text, oxc::span::SourceType::mjs()).parse();
        if !parsed.diagnostics.is_empty() {
            return None;
        }
        match parsed.program.body.into_iter().next()? {
            Statement::ExpressionStatement(e) => Some(e.unbox().expression),
            _ => None,
        }
    }

    fn compile(&self, rune: &js::Rune<'_>, argument: Expression<'a>) -> Option<Expression<'a>> {
        use js::RuneKind;
        let deps = js::slot_list(&rune.deps);
        let set = format!("($$v) => {{ {} = $$v; }}", rune.name);
        let (text, hole_in_arrow) = match rune.kind {
            RuneKind::StateRaw | RuneKind::Bindable => return Some(argument),
            RuneKind::Props => return self.template("$$.props"),
            RuneKind::State => (format!("$$.deep(0, {})", rune.slot), false),
            RuneKind::Derived => (
                format!("$$.derived(() => 0, {}, {deps}, {set})", rune.slot),
                true,
            ),
            RuneKind::DerivedBy => (
                format!("$$.derived(0, {}, {deps}, {set})", rune.slot),
                false,
            ),
            RuneKind::Effect => (format!("$$.effect(0, {deps})"), false),
        };
        let mut template = self.template(&text)?;
        let Expression::CallExpression(call) = &mut template else {
            return None;
        };
        let first = call.arguments.first_mut()?;
        if hole_in_arrow {
            let oxc::ast::ast::Argument::ArrowFunctionExpression(arrow) = first else {
                return None;
            };
            *arrow.body.as_expression_mut()? = argument;
        } else {
            *first = Argument::from(argument);
        }
        Some(template)
    }
}

impl<'a> VisitMut<'a> for Runes<'a, '_> {
    fn visit_expression(&mut self, expr: &mut Expression<'a>) {
        walk_mut::walk_expression(self, expr);
        let Expression::CallExpression(call) = expr else {
            return;
        };
        let Some(rune) = self.by_call.get(&(call.span.start, call.span.end)).copied() else {
            return;
        };
        let argument = match call.arguments.first_mut() {
            Some(arg) => match arg.as_expression_mut() {
                Some(e) => e.take_in(self.ast),
                None => {
                    self.failed = true;
                    return;
                }
            },
            None => Expression::new_void_0(SPAN, self.ast),
        };
        match self.compile(rune, argument) {
            Some(compiled) => *expr = compiled,
            None => self.failed = true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`plain_reads`] writes what the printer writes, or leaves the expression to it.
    #[test]
    fn plain_reads_print_as_the_printer_does() {
        let cases = [
            "x",
            "row.owner.name",
            "a . b",
            "a\n.\nb",
            "\\u0061.b",
            "ünï.cöde",
            "$$x.$y",
            "a.await",
            "a?.b",
            "a.b?.c",
            "(a).b",
            "a[0].b",
            "a.b()",
            "this.x",
            "a.#b",
        ];
        for case in cases {
            let alloc = Allocator::default();
            let text = alloc.alloc_str(&format!("({case}\n);"));
            let parsed = Parser::new(&alloc, text, js::ts_module()).parse();
            let Some(Statement::ExpressionStatement(stmt)) = parsed.program.body.first() else {
                continue;
            };
            let Expression::ParenthesizedExpression(paren) = &stmt.expression else {
                continue;
            };
            let mut codegen = Codegen::new().with_source_text(text);
            codegen.print_ascii_byte(b'(');
            codegen.print_expression(&paren.expression);
            codegen.print_ascii_byte(b')');
            let printed = codegen.into_source_text();
            if let Some(fast) = plain_reads(&alloc, &paren.expression) {
                assert_eq!(fast, printed, "{case}");
            }
        }
        let alloc = Allocator::default();
        let parsed = Parser::new(&alloc, "(row.owner.name\n);", js::ts_module()).parse();
        let Some(Statement::ExpressionStatement(stmt)) = parsed.program.body.first() else {
            panic!("no statement");
        };
        let Expression::ParenthesizedExpression(paren) = &stmt.expression else {
            panic!("no parentheses");
        };
        assert_eq!(
            plain_reads(&alloc, &paren.expression),
            Some("(row.owner.name)")
        );
    }
}
