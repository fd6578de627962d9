//! Code generation: the markup tree to the body of the component's render function.
//!
//! The output is JavaScript/TypeScript text that calls the runtime (`$$rt.*`). Every dynamic
//! piece registers an updater with the state slots it depends on (`$$b.u([0, 2], fn)`), so that
//! when a handler assigns state slot 2 exactly those updaters run. Expressions are copied from the
//! source, with assignments to state wrapped as `$$.u(assignment, slot)`. The generated text is
//! parsed once more by oxc, stripped of TypeScript and printed (see `js::finish_module`).
//!
//! Recursion here follows the markup tree, whose depth the parser caps at `markup::MAX_DEPTH`.

use oxc::allocator::Allocator;

use crate::diagnostics::{DiagnosticCode as Code, Sink};
use crate::js::{self, Edit, ScriptInfo};
use crate::markup::{self, Attr, AttrValue, Element, Node, Part, Span};
use crate::slots::SlotSet;

/// A name bound by the markup (`{#each}` item, `{@const}`, `{#query}`/`{#form}` name).
struct Local {
    name: String,
    /// Slots an expression using this name depends on.
    deps: SlotSet,
    /// Slots to invalidate when code assigns through this name.
    writes: SlotSet,
}

/// Options that flow down the tree.
#[derive(Clone, Copy, Default)]
struct Ctx {
    /// Inside `<pre>` or `<textarea>`: keep whitespace.
    pre: bool,
    /// Inside `<svg>`: create elements in the SVG namespace.
    svg: bool,
}

pub(crate) struct Generator<'s, 'k, 'a> {
    pub(crate) sink: &'k mut Sink<'s>,
    pub(crate) alloc: &'a Allocator,
    pub(crate) script: &'k ScriptInfo<'a>,
    /// The scope class when the screen has a `<style>`.
    pub(crate) scope: Option<String>,
    pub(crate) out: String,
    next_var: usize,
    /// Where [`Generator::var`] writes a name before copying it into the arena.
    var_text: String,
    /// Where [`Generator::text`] writes a text with its whitespace collapsed.
    text_buffer: String,
    /// Next free slot for `{#query}` and `{#form}` state (after the script's state).
    next_slot: usize,
    /// One frame per generated JavaScript function (render function, branch, item).
    frames: Vec<Vec<Local>>,
    /// The enclosing `{#form}`: its name and slot.
    form: Option<(String, usize)>,
    /// The screen's code analysed in one pass (`program::Unit`); without it each piece of code
    /// is parsed and analysed on its own here.
    pub(crate) fast: Option<&'k mut crate::program::Unit<'a>>,
}

/// A piece of generated code that [`emit!`] appends to the output. `write!` would do the same
/// through the formatting machinery, which costs more than the copying itself for pieces this
/// short, and the render function is written a few bytes at a time.
pub(crate) trait Emit {
    fn emit(&self, out: &mut String);
}

impl Emit for str {
    fn emit(&self, out: &mut String) {
        out.push_str(self);
    }
}

impl Emit for String {
    fn emit(&self, out: &mut String) {
        out.push_str(self);
    }
}

/// Code for the output: most of it is the compile's arena (printed pieces) or static text, and
/// the rest made for the occasion; a `String` for every piece would cost an allocation each.
pub(crate) type JsCode<'a> = std::borrow::Cow<'a, str>;

impl Emit for JsCode<'_> {
    fn emit(&self, out: &mut String) {
        out.push_str(self);
    }
}

impl<T: Emit + ?Sized> Emit for &T {
    fn emit(&self, out: &mut String) {
        (**self).emit(out);
    }
}

impl Emit for usize {
    fn emit(&self, out: &mut String) {
        if *self < 10 {
            // Most slots and variable numbers have one digit.
            out.push(char::from(b'0' + *self as u8));
            return;
        }
        // Digits from the last; a usize has at most 20.
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        let mut n = *self;
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        for &digit in &digits[at..] {
            out.push(char::from(digit));
        }
    }
}

/// Appends each piece to the output in turn: `emit!(out, "const ", v, " = ", code, ";\n")`.
macro_rules! emit {
    ($out:expr, $($piece:expr),+ $(,)?) => {{
        let out: &mut String = &mut $out;
        $( Emit::emit(&$piece, out); )+
    }};
}
pub(crate) use emit;

/// A string written as a JavaScript string literal (`"…"`, escaped so that it can also sit in an
/// inline `<script>`), straight into the output without building a `String`.
pub(crate) struct JsStr<'s>(pub(crate) &'s str);

impl Emit for JsStr<'_> {
    fn emit(&self, out: &mut String) {
        out.push('"');
        // Runs of characters that need no escape are written in one piece. Bytes, not chars:
        // every character to escape is ASCII but U+2028 and U+2029 (`E2 80 A8`, `E2 80 A9`), so
        // a cut is always at a character boundary.
        let bytes = self.0.as_bytes();
        let mut plain = 0;
        let mut at = 0;
        while at < bytes.len() {
            let byte = bytes[at];
            if !MAY_ESCAPE[usize::from(byte)] {
                at += 1;
                continue;
            }
            let (escape, len): (Option<&str>, usize) = match byte {
                b'"' => (Some("\\\""), 1),
                b'\\' => (Some("\\\\"), 1),
                b'\n' => (Some("\\n"), 1),
                b'\r' => (Some("\\r"), 1),
                b'\t' => (Some("\\t"), 1),
                b'<' => (Some("\\x3C"), 1),
                0xE2 if bytes.get(at + 1) == Some(&0x80) => match bytes.get(at + 2) {
                    Some(0xA8) => (Some("\\u2028"), 3),
                    Some(0xA9) => (Some("\\u2029"), 3),
                    _ => {
                        at += 1;
                        continue;
                    }
                },
                byte if byte < 0x20 => (None, 1),
                _ => {
                    at += 1;
                    continue;
                }
            };
            out.push_str(&self.0[plain..at]);
            match escape {
                Some(text) => out.push_str(text),
                None => {
                    const HEX: &[u8; 16] = b"0123456789ABCDEF";
                    out.push_str("\\x");
                    out.push(char::from(HEX[usize::from(byte >> 4)]));
                    out.push(char::from(HEX[usize::from(byte & 15)]));
                }
            }
            at += len;
            plain = at;
        }
        out.push_str(&self.0[plain..]);
        out.push('"');
    }
}

/// The bytes [`JsStr`] must look at: those it escapes, and the first byte of U+2028/U+2029.
const MAY_ESCAPE: [bool; 256] = {
    let mut table = [false; 256];
    let mut byte = 0;
    while byte < 0x20 {
        table[byte] = true;
        byte += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table[b'<' as usize] = true;
    table[0xE2] = true;
    table
};

fn js_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    JsStr(s).emit(&mut out);
    out
}

/// Quotes a string as a JavaScript string literal (also used for the CSS and scope names).
pub(crate) fn quote(s: &str) -> String {
    js_string(s)
}

/// A slot list as JavaScript (`[0, 2]`), written straight into the output without building a
/// `String` (every dynamic piece of markup writes one).
struct Slots<'s>(&'s SlotSet);

impl Emit for Slots<'_> {
    fn emit(&self, out: &mut String) {
        out.push('[');
        for (i, slot) in self.0.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            slot.emit(out);
        }
        out.push(']');
    }
}

fn slots(set: &SlotSet) -> Slots<'_> {
    Slots(set)
}

const EVENT_MODIFIERS: &[&str] = &[
    "preventDefault",
    "stopPropagation",
    "once",
    "capture",
    "self",
    "passive",
];

/// Attributes set as DOM properties rather than HTML attributes when dynamic.
const PROPERTIES: &[&str] = &["value", "checked", "selected", "indeterminate", "muted"];

impl<'s, 'k, 'a> Generator<'s, 'k, 'a> {
    pub(crate) fn new(
        sink: &'k mut Sink<'s>,
        alloc: &'a Allocator,
        script: &'k ScriptInfo<'a>,
        scope: Option<String>,
    ) -> Self {
        // About what the render function takes for ordinary markup, so that it rarely grows
        // (each growth copies everything written so far).
        let out_capacity = sink.source.len() * 3;
        Generator {
            sink,
            alloc,
            script,
            scope,
            out: String::with_capacity(out_capacity),
            next_var: 0,
            var_text: String::new(),
            text_buffer: String::new(),
            next_slot: script.state.len(),
            frames: Vec::new(),
            form: None,
            fast: None,
        }
    }

    /// Whether `name` can be used as a component: an import or a top-level constant.
    fn is_component(&self, name: &str) -> bool {
        self.script.others.contains(name)
            || self
                .script
                .imports
                .iter()
                .any(|import| import.locals.contains(&name))
    }

    fn src(&self) -> &'s str {
        self.sink.source
    }

    /// A fresh variable name (`$$e3`), in the compile's arena: every element and expression gets
    /// one, and a `String` each would cost an allocation and a free.
    fn var(&mut self, prefix: &str) -> &'a str {
        self.var_text.clear();
        emit!(self.var_text, "$$", prefix, self.next_var);
        self.next_var += 1;
        self.alloc.alloc_str(&self.var_text)
    }

    /// Generates the render function body for the top-level nodes.
    pub(crate) fn root(&mut self, nodes: &[Node]) {
        self.frames.push(Vec::new());
        self.nodes(nodes, "$$t", Ctx::default());
        self.frames.pop();
    }

    /// Adds the dependencies of a free name to `deps` (what [`Generator::resolve`] gives first,
    /// without building sets: this runs for every name every expression reads).
    fn add_deps(&self, name: &str, deps: &mut SlotSet) {
        for frame in self.frames.iter().rev() {
            if let Some(local) = frame.iter().rev().find(|l| l.name == name) {
                deps.union(&local.deps);
                return;
            }
        }
        if let Some(slot) = self.script.slot_of(name) {
            deps.insert(slot);
        } else if let Some(reads) = self.script.functions.get(name) {
            deps.union(reads);
        }
    }

    /// The dependencies and write slots of a free name, innermost binding first.
    fn resolve(&self, name: &str) -> (SlotSet, SlotSet) {
        for frame in self.frames.iter().rev() {
            if let Some(local) = frame.iter().rev().find(|l| l.name == name) {
                return (local.deps.clone(), local.writes.clone());
            }
        }
        if let Some(slot) = self.script.slot_of(name) {
            return (SlotSet::from([slot]), SlotSet::from([slot]));
        }
        if let Some(reads) = self.script.functions.get(name) {
            return (reads.clone(), SlotSet::new());
        }
        (SlotSet::new(), SlotSet::new())
    }

    /// The code of an `{expression}` (parenthesised, assignments instrumented) and its slots.
    fn expr(&mut self, span: Span) -> (JsCode<'a>, SlotSet) {
        if let Some(unit) = self.fast.take() {
            let result = self.fast_expr(unit, span);
            self.fast = Some(unit);
            return result;
        }
        let Some(info) = js::analyze_expression(self.alloc, self.sink, span) else {
            return ("undefined".into(), SlotSet::new());
        };
        let mut deps = SlotSet::new();
        for name in &info.reads {
            if name.starts_with("$$") {
                self.sink.error(
                    Code::ReservedName,
                    span.start,
                    format!("`{name}`: names starting with `$$` are reserved"),
                );
            }
            let hint = match *name {
                "$state" | "$derived" | "$effect" => {
                    Some("runes belong at the top level of the script: `let name = $state(value);`")
                }
                other => js::missing_rune(other),
            };
            if let Some(hint) = hint {
                self.sink.error(Code::SvelteSyntax, span.start, hint);
            }
            self.add_deps(name, &mut deps);
        }
        let mut edits = Vec::new();
        for (name, target) in &info.writes {
            let writes = self.resolve(name).1;
            if !writes.is_empty() {
                edits.extend(Edit::wrap(*target, &writes));
            }
            // `name = value` to deeply reactive state keeps the proxy, as in the script.
            let text = &self.src()[target.start..target.end];
            let after = text
                .strip_prefix(*name)
                .map(str::trim_start)
                .filter(|rest| rest.starts_with('=') && !rest.starts_with("=="));
            if let (Some(rest), [slot]) = (after, writes.as_slice()) {
                if self.script.deep.contains(slot) {
                    let start = target.end - rest.len() + 1;
                    let len = i64::try_from(target.end - start).unwrap_or(i64::MAX);
                    edits.push(Edit {
                        start,
                        end: start,
                        text: "$$.deep(".into(),
                        rank: (1, -len),
                    });
                    edits.push(Edit {
                        start: target.end,
                        end: target.end,
                        text: format!(", {slot})"),
                        rank: (0, len),
                    });
                }
            }
        }
        let code = js::apply_edits(self.src(), span, &edits);
        (format!("({code}\n)").into(), deps)
    }

    /// [`Generator::expr`] with the one-pass analysis: the same checks, the code printed by oxc.
    fn fast_expr(
        &mut self,
        unit: &mut crate::program::Unit<'a>,
        span: Span,
    ) -> (JsCode<'a>, SlotSet) {
        let Some(info) = unit.info(span) else {
            self.sink.error(
                Code::Internal,
                span.start,
                "internal compiler error: unknown expression",
            );
            return ("undefined".into(), SlotSet::new());
        };
        let mut deps = SlotSet::new();
        let mut wraps = Vec::new();
        for name in &info.reads {
            if name.starts_with("$$") {
                self.sink.error(
                    Code::ReservedName,
                    span.start,
                    format!("`{name}`: names starting with `$$` are reserved"),
                );
            }
            let hint = match *name {
                "$state" | "$derived" | "$effect" => {
                    Some("runes belong at the top level of the script: `let name = $state(value);`")
                }
                other => js::missing_rune(other),
            };
            if let Some(hint) = hint {
                self.sink.error(Code::SvelteSyntax, span.start, hint);
            }
            self.add_deps(name, &mut deps);
        }
        for (name, target) in &info.writes {
            let writes = self.resolve(name).1;
            if !writes.is_empty() {
                wraps.push((*target, writes));
            }
        }
        match unit.print(span, &wraps) {
            Some(code) => (code.into(), deps),
            None => {
                self.sink.error(
                    Code::Internal,
                    span.start,
                    "internal compiler error: expression printed twice",
                );
                ("undefined".into(), deps)
            }
        }
    }

    fn nodes(&mut self, nodes: &[Node], parent: &str, ctx: Ctx) {
        // Snippets are declared first, so that markup before a snippet may render it.
        let mut snippets = rustc_hash::FxHashSet::default();
        for node in nodes {
            if let Node::Snippet(block) = node {
                let name = self.src()[block.name.start..block.name.end].to_string();
                if !snippets.insert(name.clone()) {
                    self.sink.error(
                        Code::InvalidBlock,
                        block.name.start,
                        format!("`{name}` is already declared here"),
                    );
                    continue;
                }
                // A snippet depends on nothing, as an unknown name does; it is a local only
                // where it hides a name of the script (a long list of locals would make every
                // lookup slow).
                let hides = self.script.slot_of(&name).is_some()
                    || self.script.functions.contains_key(name.as_str());
                if let (true, Some(frame)) = (hides, self.frames.last_mut()) {
                    frame.push(Local {
                        name: name.clone(),
                        deps: SlotSet::new(),
                        writes: SlotSet::new(),
                    });
                }
                self.snippet(&name, block.params, &block.body, ctx);
            }
        }
        for node in nodes {
            match node {
                Node::Text(text) => self.text(text, parent, ctx),
                Node::Expr(span) => {
                    let (code, deps) = self.expr(*span);
                    let v = self.var("x");
                    emit!(self.out, "const ", v, " = $$rt.text(", parent, ", \"\");\n");
                    emit!(
                        self.out,
                        "$$b.u(",
                        slots(&deps),
                        ", () => $$rt.set_text(",
                        v,
                        ", ",
                        code,
                        "));\n"
                    );
                }
                Node::Element(el) => self.element(el, parent, ctx),
                Node::If(block) => self.if_block(block, parent, ctx),
                Node::Each(block) => self.each_block(block, parent, ctx),
                Node::Const { name, value } => self.const_tag(*name, *value),
                Node::Query(block) => self.query_block(block, parent, ctx),
                Node::Form(block) => self.form_block(block, parent, ctx),
                Node::Snippet(_) => {}
                Node::Render(span) => self.render_tag(*span, parent),
                Node::Await(block) => self.await_block(block, parent, ctx),
                Node::Key { value, body } => {
                    let (code, deps) = self.expr(*value);
                    emit!(
                        self.out,
                        "$$rt.key_block($$b, ",
                        parent,
                        ", () => ",
                        code,
                        ", ",
                        slots(&deps),
                        ", ($$b, $$t) => {\n"
                    );
                    self.frames.push(Vec::new());
                    self.nodes(body, "$$t", ctx);
                    self.frames.pop();
                    self.out.push_str("});\n");
                }
            }
        }
    }

    fn text(&mut self, text: &str, parent: &str, ctx: Ctx) {
        if ctx.pre {
            emit!(self.out, "$$rt.text(", parent, ", ", JsStr(text), ");\n");
            return;
        }
        if markup::is_layout_whitespace(text) {
            return;
        }
        // Runs of whitespace become one space, written in a buffer kept for every text.
        let collapsed = &mut self.text_buffer;
        collapsed.clear();
        let mut in_space = false;
        for c in text.chars() {
            if c.is_ascii_whitespace() {
                if !in_space {
                    collapsed.push(' ');
                }
                in_space = true;
            } else {
                collapsed.push(c);
                in_space = false;
            }
        }
        emit!(
            self.out,
            "$$rt.text(",
            parent,
            ", ",
            JsStr(collapsed),
            ");\n"
        );
    }

    fn element(&mut self, el: &Element, parent: &str, ctx: Ctx) {
        if el.name.starts_with(|c: char| c.is_ascii_uppercase()) {
            self.component(el, parent);
            return;
        }
        if el.name == "slot" {
            self.sink.error(
                Code::SvelteSyntax,
                el.start,
                "`<slot>` is Svelte 4: a component shows its content with `{@render children()}`",
            );
            return;
        }
        let imported = self.script.imports.iter().any(|i| {
            i.default_name == Some(el.name)
                || matches!(i.specifier, crate::imports::Specifier::Screen { .. })
                    && i.locals.contains(&el.name)
        });
        if imported {
            self.sink.error(
                Code::UnknownComponent,
                el.start,
                format!(
                    "<{}> is an HTML tag: a component's name starts with a capital letter (`import {} from …`)",
                    el.name,
                    capitalised(el.name)
                ),
            );
            return;
        }
        let svg = ctx.svg || el.name == "svg";
        let v = self.var("e");
        let ns = if svg { ", true" } else { "" };
        emit!(
            self.out,
            "const ",
            v,
            " = $$rt.el(",
            parent,
            ", ",
            JsStr(el.name),
            ns,
            ");\n"
        );
        let child_ctx = Ctx {
            pre: ctx.pre || matches!(el.name, "pre" | "textarea"),
            svg: svg && el.name != "foreignObject",
        };
        self.nodes(&el.children, v, child_ctx);
        self.attributes(el, v);
        if let Some((form, slot)) = self.form.clone() {
            if matches!(el.name, "input" | "select" | "textarea") {
                if let Some(key) = self.field_key(el, &form) {
                    emit!(
                        self.out,
                        "$$rt.field_error($$b, ",
                        v,
                        ", ",
                        form,
                        ", ",
                        JsStr(&key),
                        ", [",
                        slot,
                        "]);\n"
                    );
                }
            }
        }
    }

    /// The record field an input inside `{#form ... as f}` edits: `bind:value={f.values.key}` or
    /// a static `name="key"`.
    fn field_key(&self, el: &Element, form: &str) -> Option<String> {
        for attr in &el.attrs {
            if let ("bind:value" | "bind:checked", AttrValue::Expr(span)) = (attr.name, &attr.value)
            {
                let text: String = self.src()[span.start..span.end]
                    .chars()
                    .filter(|c| !c.is_whitespace())
                    .collect();
                let rest = text.strip_prefix(form)?.strip_prefix(".values")?;
                let key = rest
                    .strip_prefix('.')
                    .or_else(|| rest.strip_prefix("[\"").and_then(|r| r.strip_suffix("\"]")))
                    .or_else(|| rest.strip_prefix("['").and_then(|r| r.strip_suffix("']")))?;
                return is_field_key(key).then(|| key.to_string());
            }
        }
        el.attrs.iter().find_map(|a| match (a.name, &a.value) {
            ("name", AttrValue::Text(t)) if is_field_key(t) => Some(t.to_string()),
            _ => None,
        })
    }

    fn attr_code(&mut self, attr: &Attr) -> (JsCode<'a>, SlotSet) {
        match &attr.value {
            AttrValue::Bare => ("true".into(), SlotSet::new()),
            AttrValue::Text(t) => (js_string(t).into(), SlotSet::new()),
            AttrValue::Expr(span) => self.expr(*span),
            AttrValue::Mixed(parts) => {
                let mut deps = SlotSet::new();
                let mut joined = String::from("\"\"");
                for part in parts {
                    joined.push_str(" + ");
                    match part {
                        Part::Text(t) => JsStr(t).emit(&mut joined),
                        Part::Expr(span) => {
                            let (code, d) = self.expr(*span);
                            deps.union(&d);
                            emit!(joined, "$$rt.str(", code, ")");
                        }
                    }
                }
                (joined.into(), deps)
            }
        }
    }

    fn attributes(&mut self, el: &Element, v: &str) {
        let mut class_deps = SlotSet::new();
        let mut has_class = false;
        let mut has_spread = false;
        for attr in &el.attrs {
            let name = attr.name;
            if name == markup::SPREAD {
                // The runtime adds the scope class to whatever `class` the object holds.
                has_spread = true;
                let (code, deps) = self.attr_code(attr);
                class_deps.union(&deps);
                let scope = self.scope.as_deref().map_or("null".into(), js_string);
                let own_class = el.attrs.iter().any(|a| a.name == "class");
                emit!(
                    self.out,
                    "$$rt.spread($$b, ",
                    v,
                    ", () => ",
                    code,
                    ", ",
                    slots(&deps),
                    ", ",
                    scope,
                    if own_class {
                        ", true);\n"
                    } else {
                        ", false);\n"
                    }
                );
            } else if name.starts_with("on:")
                || (is_event_attr(name) && matches!(attr.value, AttrValue::Expr(_)))
            {
                self.event(attr, v);
            } else if name.len() > 2 && name.starts_with("on") && !name.contains(':') {
                self.sink.error(
                    Code::InvalidDirective,
                    attr.start,
                    format!("`{name}` needs a handler expression: `{name}={{handler}}` or `on:{}={{handler}}`", &name[2..]),
                );
            } else if name.starts_with("bind:") {
                // After the other attributes: see below.
            } else if let Some(action) = name.strip_prefix("use:") {
                self.action(attr, action, v);
            } else if name.starts_with("class:") {
                // After every other attribute: see below.
            } else if let Some(prop) = name.strip_prefix("style:") {
                let (code, deps) = self.directive_value(attr, prop);
                emit!(
                    self.out,
                    "$$b.u(",
                    slots(&deps),
                    ", () => $$rt.style(",
                    v,
                    ", ",
                    JsStr(prop),
                    ", ",
                    code,
                    "));\n"
                );
            } else if name.contains(':') && !name.starts_with("xlink:") && !name.starts_with("xml:")
            {
                self.sink.error(
                    Code::InvalidDirective,
                    attr.start,
                    format!("unknown directive `{name}`"),
                );
            } else if !is_attr_name(name) {
                self.sink.error(
                    Code::InvalidName,
                    attr.start,
                    format!("`{name}` is not a valid attribute name"),
                );
            } else {
                // A static value is written straight into the output; anything else is code.
                let text = match &attr.value {
                    AttrValue::Text(text) => Some(&**text),
                    _ => None,
                };
                let (code, deps) = match text {
                    Some(_) => (JsCode::Borrowed(""), SlotSet::new()),
                    None => self.attr_code(attr),
                };
                let mut scope = None;
                if name == "class" {
                    has_class = true;
                    class_deps.union(&deps);
                    scope = self.scope.as_deref();
                }
                let setter = if PROPERTIES.contains(&name)
                    && !matches!(attr.value, AttrValue::Text(_) | AttrValue::Bare)
                {
                    "prop"
                } else {
                    "attr"
                };
                // Set once, or again whenever one of its dependencies changes.
                if !deps.is_empty() {
                    emit!(self.out, "$$b.u(", slots(&deps), ", () => ");
                }
                emit!(self.out, "$$rt.", setter, "(", v, ", ", JsStr(name), ", ");
                if scope.is_some() {
                    self.out.push_str("$$rt.cls(");
                }
                match text {
                    Some(text) => JsStr(text).emit(&mut self.out),
                    None => self.out.push_str(&code),
                }
                if let Some(scope) = scope {
                    emit!(self.out, ", ", JsStr(scope), ")");
                }
                self.out.push(')');
                emit!(self.out, if deps.is_empty() { ";\n" } else { ");\n" });
            }
        }
        if !has_class && !has_spread {
            if let Some(scope) = &self.scope {
                emit!(
                    self.out,
                    "$$rt.attr(",
                    v,
                    ", \"class\", ",
                    JsStr(scope),
                    ");\n"
                );
            }
        }
        // Bindings read the element's `value` (a radio's in `bind:group`, a select's options),
        // so they come after the attributes that set it.
        for attr in &el.attrs {
            if let Some(kind) = attr.name.strip_prefix("bind:") {
                self.binding(el, attr, kind, v);
            }
        }
        // `class:name` toggles come after the `class` attribute and the scope class, wherever
        // they are written, because setting the attribute replaces every class; they re-run
        // whenever the attribute does.
        for attr in &el.attrs {
            if let Some(class) = attr.name.strip_prefix("class:") {
                let (code, mut deps) = self.directive_value(attr, class);
                deps.union(&class_deps);
                emit!(
                    self.out,
                    "$$b.u(",
                    slots(&deps),
                    ", () => $$rt.toggle_class(",
                    v,
                    ", ",
                    JsStr(class),
                    ", ",
                    code,
                    "));\n"
                );
            }
        }
    }

    /// `class:name={cond}` / `style:prop={value}`; a bare `class:name` means `{name}`.
    fn directive_value(&mut self, attr: &Attr, name: &str) -> (JsCode<'a>, SlotSet) {
        match &attr.value {
            AttrValue::Bare if markup::is_identifier(name) => {
                (name.to_string().into(), self.resolve(name).0)
            }
            AttrValue::Bare => {
                self.sink.error(
                    Code::InvalidDirective,
                    attr.start,
                    format!("`{}` needs a value", attr.name),
                );
                ("undefined".into(), SlotSet::new())
            }
            _ => self.attr_code(attr),
        }
    }

    fn event(&mut self, attr: &Attr, v: &str) {
        let spec = attr
            .name
            .strip_prefix("on:")
            .unwrap_or_else(|| &attr.name[2..]);
        let mut parts = spec.split('|');
        let event = parts.next().unwrap_or("");
        let modifiers: Vec<&str> = parts.collect();
        if event.is_empty()
            || !event
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            self.sink.error(
                Code::InvalidDirective,
                attr.start,
                format!("`{}`: invalid event name", attr.name),
            );
            return;
        }
        if let Some(bad) = modifiers.iter().find(|m| !EVENT_MODIFIERS.contains(m)) {
            self.sink.error(
                Code::InvalidDirective,
                attr.start,
                format!(
                    "unknown event modifier `{bad}` (known: {})",
                    EVENT_MODIFIERS.join(", ")
                ),
            );
            return;
        }
        let AttrValue::Expr(span) = &attr.value else {
            self.sink.error(
                Code::InvalidDirective,
                attr.start,
                format!(
                    "`{}` needs a handler: `{}={{handler}}`",
                    attr.name, attr.name
                ),
            );
            return;
        };
        let (code, _) = self.expr(*span);
        emit!(
            self.out,
            "$$rt.on(",
            v,
            ", ",
            JsStr(event),
            ", () => ",
            code,
            ", ",
            JsStr(&modifiers.join("|")),
            ");\n"
        );
    }

    /// `use:action={parameter}`: `action(element, parameter)` once the element is in the
    /// document; its `update(parameter)` when the parameter changes, its `destroy()` with the
    /// block.
    fn action(&mut self, attr: &Attr, action: &str, v: &str) {
        if !markup::is_identifier(action) || action.starts_with("$$") {
            self.sink.error(
                Code::InvalidDirective,
                attr.start,
                format!("`use:{action}`: an action is a function's name (`use:tooltip={{text}}`)"),
            );
            return;
        }
        let (param, deps) = match &attr.value {
            AttrValue::Bare => ("undefined".into(), SlotSet::new()),
            _ => self.attr_code(attr),
        };
        emit!(
            self.out,
            "$$rt.action($$, $$b, ",
            v,
            ", ",
            action,
            ", () => ",
            param,
            ", ",
            slots(&deps),
            ");\n"
        );
    }

    /// A binding's target: its code, the assignment `<target> = $$v` with the slots it changes
    /// marked, and the slots it reads.
    fn bind_assignment(&mut self, span: Span) -> (JsCode<'a>, String, SlotSet) {
        let text = &self.src()[span.start..span.end];
        // The name the target starts with (ASCII: a cut at the first other byte is a char
        // boundary).
        let root_len = text
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'$')
            .count();
        let root = &text[..root_len];
        let writes = self.resolve(root).1;
        let (code, deps) = self.expr(span);
        // A deeply reactive variable keeps its proxy (`bind:group` assigns arrays).
        let whole = root.len() == text.trim().len();
        let deep = match writes.as_slice() {
            [slot] if whole && self.script.deep.contains(slot) => Some(*slot),
            _ => None,
        };
        let mut assign = String::with_capacity(code.len() + 32);
        if !writes.is_empty() {
            assign.push_str("$$.u(");
        }
        emit!(assign, code, " = ");
        match deep {
            Some(slot) => emit!(assign, "$$.deep($$v, ", slot, ")"),
            None => assign.push_str("$$v"),
        }
        if !writes.is_empty() {
            for slot in &writes {
                emit!(assign, ", ", slot);
            }
            assign.push(')');
        }
        (code, assign, deps)
    }

    /// The expression a `bind:<name>` directive binds to, when it is one a binding can assign
    /// (a variable or a property); otherwise the problem is reported and the answer is `None`.
    /// The piece-by-piece compiler reports an unassignable target itself, located inside it.
    fn bound_target(&mut self, attr: &Attr, name: &str) -> Option<Span> {
        let AttrValue::Expr(span) = &attr.value else {
            self.sink.error(
                Code::InvalidDirective,
                attr.start,
                format!("`bind:{name}` needs a variable: `bind:{name}={{name}}`"),
            );
            return None;
        };
        let assignable = match self.fast.as_deref() {
            Some(unit) => unit.is_assignable(*span),
            None => js::is_assignable(self.alloc, self.sink, *span),
        };
        if !assignable {
            if self.fast.is_some() {
                self.sink.error(
                    Code::InvalidDirective,
                    span.start,
                    "a binding needs a variable or a property (`name`, `obj.field`)",
                );
            }
            return None;
        }
        Some(*span)
    }

    fn binding(&mut self, el: &Element, attr: &Attr, kind: &str, v: &str) {
        let fits = match kind {
            "value" => matches!(el.name, "input" | "textarea" | "select"),
            "checked" | "group" => el.name == "input",
            "this" => true,
            _ => false,
        };
        if !fits {
            self.sink.error(
                Code::InvalidDirective,
                attr.start,
                format!("`bind:{kind}` is not supported on <{}> (use bind:value, bind:checked, bind:group or bind:this)", el.name),
            );
            return;
        }
        let Some(span) = self.bound_target(attr, kind) else {
            return;
        };
        let (code, assign, deps) = self.bind_assignment(span);
        if kind == "this" {
            emit!(self.out, "(($$v) => { ", assign, "; })(", v, ");\n");
        } else {
            emit!(
                self.out,
                "$$rt.bind_",
                kind,
                "($$b, ",
                v,
                ", () => ",
                code,
                ", ($$v) => { ",
                assign,
                "; }, ",
                slots(&deps),
                ");\n"
            );
        }
    }

    fn component(&mut self, el: &Element, parent: &str) {
        if !self.is_component(el.name) {
            self.sink.error(
                Code::UnknownComponent,
                el.start,
                format!("<{}> is not a component: import it (`import {} from \"screen:module/screen\"`)", el.name, el.name),
            );
            return;
        }
        let mut props = Vec::new();
        let mut deps = SlotSet::new();
        // Snippets written between the tags are props of that name; the rest of the content is
        // the `children` snippet.
        for node in &el.children {
            if let Node::Snippet(block) = node {
                let name = self.src()[block.name.start..block.name.end].to_string();
                let var = self.var("s");
                self.snippet(var, block.params, &block.body, Ctx::default());
                props.push(entry(&name, var));
            }
        }
        let content: Vec<&Node> = el
            .children
            .iter()
            .filter(|n| !matches!(n, Node::Snippet(_)))
            .collect();
        let has_content = content
            .iter()
            .any(|n| !matches!(n, Node::Text(t) if t.trim().is_empty()));
        if has_content {
            let var = self.var("s");
            self.children_snippet(var, &el.children);
            props.push(format!("\"children\": {var}"));
        }
        let mut this = String::new();
        for attr in &el.attrs {
            if attr.name == markup::SPREAD {
                let (code, d) = self.attr_code(attr);
                deps.union(&d);
                props.push(format!("...{code}"));
                continue;
            }
            if attr.name == "bind:this" {
                // The component's instance (its exports), and null once it is destroyed.
                if let Some(span) = self.bound_target(attr, "this") {
                    let (_, assign, _) = self.bind_assignment(span);
                    this = format!(", ($$v) => {{ {assign}; }}");
                }
                continue;
            }
            if let Some(prop) = attr.name.strip_prefix("bind:") {
                self.component_binding(attr, prop, &mut props, &mut deps);
                continue;
            }
            let key = if let Some(event) = attr.name.strip_prefix("on:") {
                format!("on{event}")
            } else if attr.name.contains(':') {
                self.sink.error(
                    Code::InvalidDirective,
                    attr.start,
                    format!("`{}` is not supported on components", attr.name),
                );
                continue;
            } else {
                attr.name.to_string()
            };
            let (code, d) = self.attr_code(attr);
            deps.union(&d);
            props.push(entry(&key, &code));
        }
        emit!(
            self.out,
            "$$rt.child($$b, ",
            parent,
            ", ",
            el.name,
            ", () => ({ ",
            props.join(", "),
            " }), ",
            slots(&deps),
            this,
            ");\n"
        );
    }

    fn if_block(&mut self, block: &markup::IfBlock, parent: &str, ctx: Ctx) {
        let mut select = String::new();
        let mut deps = SlotSet::new();
        let mut has_else = false;
        for (i, (cond, _)) in block.branches.iter().enumerate() {
            match cond {
                Some(span) => {
                    let (code, d) = self.expr(*span);
                    deps.union(&d);
                    emit!(select, code, " ? ", i, " : ");
                }
                None => {
                    emit!(select, i);
                    has_else = true;
                }
            }
        }
        if !has_else {
            select.push_str("-1");
        }
        emit!(
            self.out,
            "$$rt.if_block($$b, ",
            parent,
            ", () => ",
            select,
            ", ",
            slots(&deps),
            ", [\n"
        );
        for (_, body) in &block.branches {
            self.out.push_str("($$b, $$t) => {\n");
            self.frames.push(Vec::new());
            self.nodes(body, "$$t", ctx);
            self.frames.pop();
            self.out.push_str("},\n");
        }
        self.out.push_str("]);\n");
    }

    /// `{#await}`: a branch each for pending, then and catch (`null` when absent).
    fn await_block(&mut self, block: &markup::AwaitBlock, parent: &str, ctx: Ctx) {
        let (promise, deps) = self.expr(block.promise);
        emit!(
            self.out,
            "$$rt.await_block($$b, ",
            parent,
            ", () => ",
            promise,
            ", ",
            slots(&deps),
            ", \n"
        );
        if block.pending.is_empty() {
            self.out.push_str("null,\n");
        } else {
            self.out.push_str("($$b, $$t) => {\n");
            self.frames.push(Vec::new());
            self.nodes(&block.pending, "$$t", ctx);
            self.frames.pop();
            self.out.push_str("},\n");
        }
        for (i, branch) in [&block.then, &block.catch].into_iter().enumerate() {
            let end = if i == 0 { ",\n" } else { ");\n" };
            let Some((pattern, body)) = branch else {
                self.out.push_str("null");
                self.out.push_str(end);
                continue;
            };
            self.out.push_str("($$b, $$t, $$v) => {\n");
            let mut frame = Vec::new();
            if let Some(span) = pattern {
                let (names, code) = self.pattern(*span);
                emit!(self.out, "let ", code, " = $$v;\n");
                frame.extend(names.into_iter().map(|name| Local {
                    name,
                    deps: SlotSet::new(),
                    writes: SlotSet::new(),
                }));
            }
            self.frames.push(frame);
            self.nodes(body, "$$t", ctx);
            self.frames.pop();
            self.out.push('}');
            self.out.push_str(end);
        }
    }

    /// A binding pattern (`item`, `{ id, name }`): the names it binds and its code.
    fn pattern(&mut self, span: Span) -> (Vec<String>, String) {
        match self.fast.as_deref_mut() {
            Some(unit) => match unit.pattern(span) {
                Some(found) => found,
                None => {
                    self.sink.error(
                        Code::Internal,
                        span.start,
                        "internal compiler error: pattern not analysed",
                    );
                    (Vec::new(), String::from("$$missing"))
                }
            },
            None => (
                js::pattern_names(self.alloc, self.sink, span).unwrap_or_default(),
                self.src()[span.start..span.end].to_string(),
            ),
        }
    }

    fn each_block(&mut self, block: &markup::EachBlock, parent: &str, ctx: Ctx) {
        let (list, list_deps) = self.expr(block.list);
        let (names, pattern) = match self.fast.as_deref_mut() {
            Some(unit) => match unit.pattern(block.pattern) {
                Some(found) => found,
                None => {
                    self.sink.error(
                        Code::Internal,
                        block.pattern.start,
                        "internal compiler error: pattern not analysed",
                    );
                    (Vec::new(), String::from("$$missing"))
                }
            },
            None => (
                js::pattern_names(self.alloc, self.sink, block.pattern).unwrap_or_default(),
                self.src()[block.pattern.start..block.pattern.end].to_string(),
            ),
        };
        let index = block.index.map(|s| self.src()[s.start..s.end].to_string());
        let mut frame: Vec<Local> = names
            .iter()
            .map(|n| Local {
                name: n.clone(),
                deps: list_deps.clone(),
                writes: list_deps.clone(),
            })
            .collect();
        if let Some(i) = &index {
            frame.push(Local {
                name: i.clone(),
                deps: list_deps.clone(),
                writes: SlotSet::new(),
            });
        }
        let mut declare = String::with_capacity(pattern.len() + 24);
        let mut reassign = String::with_capacity(pattern.len() + 24);
        match &index {
            Some(i) => {
                emit!(declare, "let ", pattern, " = $$v, ", i, " = $$i;");
                emit!(reassign, "(", pattern, " = $$v); ", i, " = $$i;");
            }
            None => {
                emit!(declare, "let ", pattern, " = $$v;");
                emit!(reassign, "(", pattern, " = $$v);");
            }
        }
        emit!(
            self.out,
            "$$rt.each($$b, ",
            parent,
            ", () => ",
            list,
            ", ",
            slots(&list_deps),
            ", \n"
        );
        self.frames.push(frame);
        match block.key {
            Some(key) => {
                let (code, _) = self.expr(key);
                emit!(
                    self.out,
                    "($$v, $$i) => { ",
                    declare,
                    " return ",
                    code,
                    "; },\n"
                );
            }
            None => self.out.push_str("null,\n"),
        }
        emit!(
            self.out,
            "($$b, $$t, $$v, $$i) => { ",
            declare,
            " $$b.set = ($$v, $$i) => { ",
            reassign,
            " };\n"
        );
        self.nodes(&block.body, "$$t", ctx);
        self.frames.pop();
        self.out.push_str("},\n");
        match &block.else_body {
            Some(body) => {
                self.out.push_str("($$b, $$t) => {\n");
                self.frames.push(Vec::new());
                self.nodes(body, "$$t", ctx);
                self.frames.pop();
                self.out.push_str("});\n");
            }
            None => self.out.push_str("null);\n"),
        }
    }

    /// `const <var> = $$rt.snippet(...)`: a function the markup renders with `{@render}`. Its
    /// parameters are locals that depend on a slot of their own, which the runtime marks when
    /// the snippet is rendered again with new arguments.
    fn snippet(&mut self, var: &str, params: Span, body: &[Node], ctx: Ctx) {
        let slot = self.next_slot;
        self.next_slot += 1;
        let (names, code) = match self.fast.as_deref_mut() {
            Some(unit) => match unit.params(params) {
                Some(found) => found,
                None => {
                    self.sink.error(
                        Code::Internal,
                        params.start,
                        "internal compiler error: snippet parameters not analysed",
                    );
                    (Vec::new(), String::new())
                }
            },
            None => (
                js::param_names(self.alloc, self.sink, params).unwrap_or_default(),
                self.src()[params.start..params.end].to_string(),
            ),
        };
        emit!(
            self.out,
            "const ",
            var,
            " = $$rt.snippet($$, ",
            slot,
            ", ($$b, $$t, $$a) => {\n"
        );
        if !names.is_empty() {
            let list = names.join(", ");
            let d = self.var("p");
            emit!(
                self.out,
                "const ",
                d,
                " = (",
                code,
                "\n) => [",
                list,
                "];\nlet [",
                list,
                "] = ",
                d,
                "(...$$a);\n$$b.set = ($$a) => { [",
                list,
                "] = ",
                d,
                "(...$$a); };\n"
            );
        }
        let slot_set = SlotSet::from([slot]);
        self.frames.push(
            names
                .into_iter()
                .map(|name| Local {
                    name,
                    deps: slot_set.clone(),
                    writes: SlotSet::new(),
                })
                .collect(),
        );
        self.nodes(body, "$$t", ctx);
        self.frames.pop();
        self.out.push_str("});\n");
    }

    /// `bind:prop={target}` on a component: the prop, and a callback the component calls when it
    /// assigns the prop itself (`"$$bind:prop"`).
    fn component_binding(
        &mut self,
        attr: &Attr,
        prop: &str,
        props: &mut Vec<String>,
        deps: &mut SlotSet,
    ) {
        if !markup::is_identifier(prop) {
            self.sink.error(
                Code::InvalidDirective,
                attr.start,
                format!("`bind:{prop}`: on a component, `bind:` takes the name of a prop"),
            );
            return;
        }
        let Some(span) = self.bound_target(attr, prop) else {
            return;
        };
        let (code, assign, d) = self.bind_assignment(span);
        deps.union(&d);
        props.push(entry(prop, &code));
        let mut callback = String::with_capacity(assign.len() + 32);
        emit!(
            callback,
            JsStr(&format!("$$bind:{prop}")),
            ": ($$v) => { ",
            assign,
            "; }"
        );
        props.push(callback);
    }

    /// The content between a component's tags (its snippets excepted) as a snippet without
    /// parameters.
    fn children_snippet(&mut self, var: &str, children: &[Node]) {
        let slot = self.next_slot;
        self.next_slot += 1;
        emit!(
            self.out,
            "const ",
            var,
            " = $$rt.snippet($$, ",
            slot,
            ", ($$b, $$t, $$a) => {\n"
        );
        self.frames.push(Vec::new());
        for node in children {
            if !matches!(node, Node::Snippet(_)) {
                self.nodes(std::slice::from_ref(node), "$$t", Ctx::default());
            }
        }
        self.frames.pop();
        self.out.push_str("});\n");
    }

    /// `{@render name(args)}`.
    fn render_tag(&mut self, span: Span, parent: &str) {
        if !self.src()[span.start..span.end].ends_with(')') {
            self.sink.error(
                Code::InvalidBlock,
                span.start,
                "expected `{@render name(arguments)}` (a snippet is called, even without arguments)",
            );
            return;
        }
        let (code, deps) = self.expr(span);
        emit!(
            self.out,
            "$$rt.render($$b, ",
            parent,
            ", () => ",
            code,
            ", ",
            slots(&deps),
            ");\n"
        );
    }

    fn const_tag(&mut self, name_span: Span, value: Span) {
        let name = self.src()[name_span.start..name_span.end].to_string();
        let declared = self
            .frames
            .last()
            .is_some_and(|f| f.iter().any(|l| l.name == name));
        if declared || name.starts_with("$$") {
            self.sink.error(
                Code::InvalidBlock,
                name_span.start,
                format!("`{name}` is already declared here"),
            );
            return;
        }
        let (code, deps) = self.expr(value);
        emit!(
            self.out,
            "let ",
            name,
            ";\n$$b.u(",
            slots(&deps),
            ", () => { ",
            name,
            " = ",
            code,
            "; });\n"
        );
        if let Some(frame) = self.frames.last_mut() {
            frame.push(Local {
                name,
                deps,
                writes: SlotSet::new(),
            });
        }
    }

    fn query_block(&mut self, block: &markup::QueryBlock, parent: &str, ctx: Ctx) {
        let slot = self.next_slot;
        self.next_slot += 1;
        let (query, mut deps) = self.expr(block.query);
        let params = match block.params {
            Some(span) => {
                let (code, d) = self.expr(span);
                deps.union(&d);
                code
            }
            None => "undefined".into(),
        };
        let options = match block.options {
            Some(span) => {
                let (code, d) = self.expr(span);
                deps.union(&d);
                code
            }
            None => "undefined".into(),
        };
        let name = self.src()[block.name.start..block.name.end].to_string();
        emit!(
            self.out,
            "$$rt.query($$, $$b, ",
            parent,
            ", ",
            slot,
            ", () => [",
            query,
            ", ",
            params,
            ", ",
            options,
            "], ",
            slots(&deps),
            ", ($$b, $$t, ",
            name,
            ") => {\n"
        );
        let slot_set = SlotSet::from([slot]);
        self.frames.push(vec![Local {
            name,
            deps: slot_set.clone(),
            writes: slot_set,
        }]);
        self.nodes(&block.body, "$$t", ctx);
        self.frames.pop();
        self.out.push_str("});\n");
    }

    fn form_block(&mut self, block: &markup::FormBlock, parent: &str, ctx: Ctx) {
        let slot = self.next_slot;
        self.next_slot += 1;
        let (id, deps) = match block.id {
            Some(span) => self.expr(span),
            None => ("null".into(), SlotSet::new()),
        };
        let options = match block.options {
            Some(span) => self.expr(span).0,
            None => "undefined".into(),
        };
        let name = self.src()[block.name.start..block.name.end].to_string();
        let scope = self.scope.clone().unwrap_or_default();
        emit!(
            self.out,
            "$$rt.form($$, $$b, ",
            parent,
            ", ",
            slot,
            ", ",
            JsStr(block.module),
            ", ",
            JsStr(block.object),
            ", () => ",
            id,
            ", ",
            slots(&deps),
            ", ",
            JsStr(&scope),
            ", () => ",
            options,
            ", ($$b, $$t, ",
            name,
            ") => {\n"
        );
        let slot_set = SlotSet::from([slot]);
        self.frames.push(vec![Local {
            name: name.clone(),
            deps: slot_set.clone(),
            writes: slot_set,
        }]);
        let outer = self.form.replace((name, slot));
        self.nodes(&block.body, "$$t", ctx);
        self.form = outer;
        self.frames.pop();
        self.out.push_str("});\n");
    }
}

/// `"key": value`, an entry of a component's props object.
fn entry(key: &str, value: &str) -> String {
    let mut entry = String::with_capacity(key.len() + value.len() + 4);
    emit!(entry, JsStr(key), ": ", value);
    entry
}

fn capitalised(name: &str) -> String {
    let mut chars = name.chars();
    chars.next().map_or_else(String::new, |c| {
        c.to_ascii_uppercase().to_string() + chars.as_str()
    })
}

fn is_event_attr(name: &str) -> bool {
    name.len() > 2 && name.starts_with("on") && name[2..].bytes().all(|b| b.is_ascii_lowercase())
}

fn is_attr_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'))
}

fn is_field_key(s: &str) -> bool {
    let mut bytes = s.bytes();
    matches!(bytes.next(), Some(b'a'..=b'z'))
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}
