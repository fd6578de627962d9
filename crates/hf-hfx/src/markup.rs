//! The hand-written HFX markup parser: source text to a tree of elements, text, `{expressions}`
//! and blocks, with exact byte positions.
//!
//! It is iterative (an explicit stack of open elements and blocks), so hostile nesting cannot
//! overflow the stack, and it refuses nesting deeper than [`MAX_DEPTH`] so that the later passes
//! may recurse. The first structural error (unclosed or mismatched tag, unterminated construct)
//! stops parsing: what follows it would only produce confusing follow-up errors.

use std::borrow::Cow;

use oxc::allocator::{Allocator, Box as ArenaBox, Vec as ArenaVec};

use crate::diagnostics::{DiagnosticCode as Code, Sink};
use crate::scan;

/// Every `{#…}`, `{:…}`, `{/…}` and `{@…}` tag the parser knows, as a source writes its start.
/// The parser's dispatch below recognises exactly these (a unit test holds the two together);
/// an unknown tag is reported with the closest of them, and the fixture tests check that each
/// has a fixture that compiles and one that is refused.
pub(crate) const TAGS: &[&str] = &[
    "{#if",
    "{:else",
    "{/if",
    "{#each",
    "{/each",
    "{#query",
    "{/query",
    "{#form",
    "{/form",
    "{#await",
    "{:then",
    "{:catch",
    "{/await",
    "{#key",
    "{/key",
    "{#snippet",
    "{/snippet",
    "{@render",
    "{@const",
    "{@html",
];

/// The known tag closest to an unknown one (`{#eahc` → `{#each`): same sigil, at most two
/// letters changed, added or removed.
fn closest_tag(unknown: &str) -> Option<&'static str> {
    let sigil = unknown.get(..2)?;
    TAGS.iter()
        .copied()
        .filter(|tag| tag.starts_with(sigil))
        .map(|tag| (strsim::levenshtein(&tag[2..], &unknown[2..]), tag))
        .filter(|(distance, _)| *distance <= 2)
        .min()
        .map(|(_, tag)| tag)
}

/// The name of a spread attribute (`{...object}`), which no real attribute can have.
pub(crate) const SPREAD: &str = "...";

/// The deepest nesting of elements and blocks a screen may have.
pub(crate) const MAX_DEPTH: usize = 256;

/// A byte range of the HFX source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) start: usize,
    pub(crate) end: usize,
}

/// A parsed HFX source. The tree lives in the compile's arena: it is built and dropped on every
/// compile, and a heap allocation for each list of children and attributes (and a walk to free
/// them all) cost more than the parsing itself.
#[derive(Debug)]
pub(crate) struct Document<'s> {
    pub(crate) script: Option<Span>,
    pub(crate) style: Option<Span>,
    pub(crate) nodes: ArenaVec<'s, Node<'s>>,
    /// Every `{#query}` block's query and parameters, in document order: noted as the blocks
    /// are parsed, which costs less than walking the finished tree for the few there are.
    pub(crate) queries: Vec<(Span, Option<Span>)>,
}

impl<'s> Document<'s> {
    /// An empty document whose tree will live in `alloc`.
    pub(crate) fn new(alloc: &'s Allocator) -> Document<'s> {
        Document {
            script: None,
            style: None,
            nodes: ArenaVec::new_in(&alloc),
            queries: Vec::new(),
        }
    }
}

#[derive(Debug)]
pub(crate) enum Node<'s> {
    /// Literal text, entities already decoded (borrowed from the source when it has none, else in
    /// the arena).
    Text(&'s str),
    /// `{expression}`: text content, always escaped.
    Expr(Span),
    Element(Element<'s>),
    If(IfBlock<'s>),
    // The larger blocks are boxed so that a node, which is moved several times while the tree is
    // built, stays the size of an element.
    Each(ArenaBox<'s, EachBlock<'s>>),
    /// `{@const name = expression}`.
    Const {
        name: Span,
        value: Span,
    },
    Query(ArenaBox<'s, QueryBlock<'s>>),
    Form(ArenaBox<'s, FormBlock<'s>>),
    /// `{#snippet name(params)}…{/snippet}`.
    Snippet(SnippetBlock<'s>),
    /// `{@render expression}`: the expression calls a snippet (`name(args)`).
    Render(Span),
    /// `{#await promise}…{:then value}…{:catch error}…{/await}`.
    Await(ArenaBox<'s, AwaitBlock<'s>>),
    /// `{#key expression}…{/key}`: the content is made anew when the value changes.
    Key {
        value: Span,
        body: ArenaVec<'s, Node<'s>>,
    },
}

/// The tree borrows its names and texts from the source: a compile builds it and drops it, and
/// a `String` per name and text made both cost more than the parsing itself.
#[derive(Debug)]
pub(crate) struct Element<'s> {
    pub(crate) name: &'s str,
    pub(crate) start: usize,
    pub(crate) attrs: ArenaVec<'s, Attr<'s>>,
    pub(crate) children: ArenaVec<'s, Node<'s>>,
}

#[derive(Debug)]
pub(crate) struct Attr<'s> {
    pub(crate) name: &'s str,
    pub(crate) start: usize,
    pub(crate) value: AttrValue<'s>,
}

#[derive(Debug)]
pub(crate) enum AttrValue<'s> {
    /// `disabled`: no value.
    Bare,
    /// `name="text"` (decoded).
    Text(&'s str),
    /// `name={expression}`.
    Expr(Span),
    /// `name="text {expression} text"`.
    Mixed(ArenaVec<'s, Part<'s>>),
}

#[derive(Debug)]
pub(crate) enum Part<'s> {
    Text(&'s str),
    Expr(Span),
}

#[derive(Debug)]
pub(crate) struct IfBlock<'s> {
    /// `(condition, body)`; the final `{:else}` branch has no condition.
    pub(crate) branches: ArenaVec<'s, (Option<Span>, ArenaVec<'s, Node<'s>>)>,
}

#[derive(Debug)]
pub(crate) struct EachBlock<'s> {
    pub(crate) list: Span,
    pub(crate) pattern: Span,
    pub(crate) index: Option<Span>,
    pub(crate) key: Option<Span>,
    pub(crate) body: ArenaVec<'s, Node<'s>>,
    pub(crate) else_body: Option<ArenaVec<'s, Node<'s>>>,
}

#[derive(Debug)]
pub(crate) struct QueryBlock<'s> {
    pub(crate) query: Span,
    pub(crate) params: Option<Span>,
    /// `{ debounce: ms, count: "HOQS" }`.
    pub(crate) options: Option<Span>,
    pub(crate) name: Span,
    pub(crate) body: ArenaVec<'s, Node<'s>>,
}

#[derive(Debug)]
pub(crate) struct AwaitBlock<'s> {
    pub(crate) promise: Span,
    pub(crate) pending: ArenaVec<'s, Node<'s>>,
    /// `{:then pattern}` (the pattern may be empty) and its content.
    pub(crate) then: Option<(Option<Span>, ArenaVec<'s, Node<'s>>)>,
    /// `{:catch pattern}` and its content.
    pub(crate) catch: Option<(Option<Span>, ArenaVec<'s, Node<'s>>)>,
}

/// Which part of an `{#await}` is being parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AwaitPart {
    Pending,
    Then,
    Catch,
}

#[derive(Debug)]
pub(crate) struct SnippetBlock<'s> {
    pub(crate) name: Span,
    /// The text between the parentheses (may be empty).
    pub(crate) params: Span,
    pub(crate) body: ArenaVec<'s, Node<'s>>,
}

#[derive(Debug)]
pub(crate) struct FormBlock<'s> {
    pub(crate) module: &'s str,
    pub(crate) object: &'s str,
    pub(crate) id: Option<Span>,
    /// `{ validate, attributes }`.
    pub(crate) options: Option<Span>,
    pub(crate) name: Span,
    pub(crate) body: ArenaVec<'s, Node<'s>>,
}

/// Whether a text is layout whitespace, which a screen does not show and the output leaves out
/// (outside `<pre>` and `<textarea>`): whitespace only, with a line break, as the indentation
/// between tags is. Whitespace without a line break (`<b>a</b> <i>b</i>`) separates words and
/// is kept. The one rule for the parser and the generator.
///
/// Byte by byte while the text is ASCII (nearly always: it runs on most text nodes of every
/// compile), by characters from the first byte that is not.
pub(crate) fn is_layout_whitespace(text: &str) -> bool {
    let mut line_break = false;
    for (at, byte) in text.bytes().enumerate() {
        match byte {
            b'\n' => line_break = true,
            b' ' | b'\t' | b'\r' | b'\x0b' | b'\x0c' => {}
            // Every byte before is ASCII, so `at` starts a character.
            0x80.. => {
                let rest = &text[at..];
                return rest.chars().all(char::is_whitespace)
                    && (line_break || rest.contains('\n'));
            }
            _ => return false,
        }
    }
    line_break
}

/// Elements that have no content and no closing tag.
pub(crate) fn is_void(name: &str) -> bool {
    const VOID: &[&str] = &[
        "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
        "source", "track", "wbr",
    ];
    // Compared without lowercasing a copy: this runs for every tag.
    VOID.iter().any(|void| void.eq_ignore_ascii_case(name))
}

/// An open element or block while parsing.
enum Frame<'s> {
    Element(Element<'s>),
    If {
        start: usize,
        block: IfBlock<'s>,
        current: Option<Span>,
        body: ArenaVec<'s, Node<'s>>,
        closed_else: bool,
    },
    Each {
        start: usize,
        block: EachBlock<'s>,
        in_else: bool,
    },
    Query {
        start: usize,
        block: QueryBlock<'s>,
    },
    Form {
        start: usize,
        block: FormBlock<'s>,
    },
    Snippet {
        start: usize,
        block: SnippetBlock<'s>,
    },
    Await {
        start: usize,
        block: AwaitBlock<'s>,
        part: AwaitPart,
    },
    Key {
        start: usize,
        value: Span,
        body: ArenaVec<'s, Node<'s>>,
    },
}

impl<'s> Frame<'s> {
    fn start(&self) -> usize {
        match self {
            Frame::Element(e) => e.start,
            Frame::If { start, .. }
            | Frame::Each { start, .. }
            | Frame::Query { start, .. }
            | Frame::Form { start, .. }
            | Frame::Snippet { start, .. }
            | Frame::Await { start, .. }
            | Frame::Key { start, .. } => *start,
        }
    }

    /// How the frame is named in messages and matched by closing tags.
    fn label(&self) -> String {
        match self {
            Frame::Element(e) => format!("<{}>", e.name),
            Frame::If { .. } => "{#if}".into(),
            Frame::Each { .. } => "{#each}".into(),
            Frame::Query { .. } => "{#query}".into(),
            Frame::Form { .. } => "{#form}".into(),
            Frame::Snippet { .. } => "{#snippet}".into(),
            Frame::Await { .. } => "{#await}".into(),
            Frame::Key { .. } => "{#key}".into(),
        }
    }

    fn closer(&self) -> String {
        match self {
            Frame::Element(e) => format!("</{}>", e.name),
            Frame::If { .. } => "{/if}".into(),
            Frame::Each { .. } => "{/each}".into(),
            Frame::Query { .. } => "{/query}".into(),
            Frame::Form { .. } => "{/form}".into(),
            Frame::Snippet { .. } => "{/snippet}".into(),
            Frame::Await { .. } => "{/await}".into(),
            Frame::Key { .. } => "{/key}".into(),
        }
    }

    fn children(&mut self, alloc: &'s Allocator) -> &mut ArenaVec<'s, Node<'s>> {
        match self {
            Frame::Element(e) => &mut e.children,
            Frame::If { body, .. } => body,
            Frame::Each { block, in_else, .. } => {
                if *in_else {
                    block
                        .else_body
                        .get_or_insert_with(|| ArenaVec::new_in(&alloc))
                } else {
                    &mut block.body
                }
            }
            Frame::Query { block, .. } => &mut block.body,
            Frame::Form { block, .. } => &mut block.body,
            Frame::Snippet { block, .. } => &mut block.body,
            Frame::Await { block, part, .. } => match part {
                AwaitPart::Pending => &mut block.pending,
                AwaitPart::Then => {
                    &mut block
                        .then
                        .get_or_insert_with(|| (None, ArenaVec::new_in(&alloc)))
                        .1
                }
                AwaitPart::Catch => {
                    &mut block
                        .catch
                        .get_or_insert_with(|| (None, ArenaVec::new_in(&alloc)))
                        .1
                }
            },
            Frame::Key { body, .. } => body,
        }
    }

    fn into_node(self, alloc: &'s Allocator) -> Node<'s> {
        match self {
            Frame::Element(e) => Node::Element(e),
            Frame::If {
                mut block,
                current,
                body,
                closed_else,
                ..
            } => {
                block.branches.push((current, body));
                let _ = closed_else;
                Node::If(block)
            }
            Frame::Each { block, .. } => Node::Each(ArenaBox::new_in(block, &alloc)),
            Frame::Query { block, .. } => Node::Query(ArenaBox::new_in(block, &alloc)),
            Frame::Form { block, .. } => Node::Form(ArenaBox::new_in(block, &alloc)),
            Frame::Snippet { block, .. } => Node::Snippet(block),
            Frame::Await { block, .. } => Node::Await(ArenaBox::new_in(block, &alloc)),
            Frame::Key { value, body, .. } => Node::Key { value, body },
        }
    }
}

/// What a closing tag or block end refers to.
#[derive(PartialEq)]
enum Closer<'n> {
    Element(&'n str),
    Block(&'n str),
}

impl Closer<'_> {
    /// The closer as written (`</div>`, `{/if}`), for messages: made only for one, since every
    /// element and block closes.
    fn shown(&self) -> String {
        match self {
            Closer::Element(name) => format!("</{name}>"),
            Closer::Block(keyword) => format!("{{/{keyword}}}"),
        }
    }
}

struct Parser<'s, 'd> {
    alloc: &'s Allocator,
    src: &'s str,
    bytes: &'s [u8],
    pos: usize,
    stack: Vec<Frame<'s>>,
    doc: Document<'s>,
    sink: &'d mut Sink<'s>,
}

/// Parses HFX markup; problems go to `sink`. The document is partial when the sink has errors.
pub(crate) fn parse<'s>(alloc: &'s Allocator, sink: &mut Sink<'s>) -> Document<'s> {
    let src = sink.source;
    let mut p = Parser {
        alloc,
        src,
        bytes: src.as_bytes(),
        pos: 0,
        // Deep enough for most screens, so that the stack of large frames rarely grows.
        stack: Vec::with_capacity(16),
        doc: Document::new(alloc),
        sink,
    };
    if p.run().is_none() {
        return p.doc;
    }
    // Anything still open at the end is unclosed; report the innermost.
    if let Some(frame) = p.stack.last() {
        let (code, what) = match frame {
            Frame::Element(_) => (Code::UnclosedTag, "element"),
            _ => (Code::UnclosedBlock, "block"),
        };
        let msg = format!(
            "{} {} is never closed (expected {})",
            what,
            frame.label(),
            frame.closer()
        );
        p.sink.error(code, frame.start(), msg);
    }
    p.doc
}

impl<'s> Parser<'s, '_> {
    fn push_node(&mut self, node: Node<'s>) {
        match self.stack.last_mut() {
            Some(frame) => frame.children(self.alloc).push(node),
            None => self.doc.nodes.push(node),
        }
    }

    fn fail<T>(&mut self, code: Code, at: usize, msg: impl Into<String>) -> Option<T> {
        self.sink.error(code, at, msg);
        None
    }

    fn open(&mut self, frame: Frame<'s>) -> Option<()> {
        if self.stack.len() >= MAX_DEPTH {
            let at = frame.start();
            return self.fail(
                Code::NestingTooDeep,
                at,
                format!("markup is nested more than {MAX_DEPTH} levels deep"),
            );
        }
        self.stack.push(frame);
        Some(())
    }

    /// The main loop; returns `None` after a structural error.
    fn run(&mut self) -> Option<()> {
        let mut text_start = self.pos;
        // Text runs to the next tag or `{` (found with `memchr`, many bytes at a time).
        while let Some(found) =
            (self.bytes.get(self.pos..)).and_then(|rest| memchr::memchr2(b'<', b'{', rest))
        {
            self.pos += found;
            self.flush_text(text_start);
            if self.bytes[self.pos] == b'<' {
                self.tag()?;
            } else {
                self.mustache()?;
            }
            text_start = self.pos;
        }
        self.pos = self.bytes.len();
        self.flush_text(text_start);
        Some(())
    }

    /// `raw` with its entities decoded: borrowed from the source when it has none, else in the
    /// arena.
    fn decoded(&self, raw: &'s str) -> &'s str {
        match decode_entities(raw) {
            Cow::Borrowed(text) => text,
            Cow::Owned(text) => self.alloc.alloc_str(&text),
        }
    }

    fn flush_text(&mut self, start: usize) {
        if start < self.pos {
            let raw = &self.src[start..self.pos];
            if self.is_dropped_whitespace(raw) {
                return;
            }
            let text = self.decoded(raw);
            self.push_node(Node::Text(text));
        }
    }

    /// Whether `raw` is layout whitespace ([`is_layout_whitespace`]) that the tree can leave
    /// out: it is kept inside `<pre>` and `<textarea>`, where it shows, and in `{#await}`
    /// blocks, whose branches are left out when they are empty. Leaving it out here spares the
    /// generator most of a screen's text nodes (the indentation between tags).
    fn is_dropped_whitespace(&self, raw: &str) -> bool {
        is_layout_whitespace(raw)
            && !self.stack.iter().any(|frame| match frame {
                Frame::Element(e) => matches!(e.name, "pre" | "textarea"),
                Frame::Await { .. } => true,
                _ => false,
            })
    }

    fn starts_with(&self, s: &str) -> bool {
        self.bytes[self.pos..].starts_with(s.as_bytes())
    }

    fn skip_ws(&mut self) {
        while self.pos < self.bytes.len() && self.bytes[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }

    fn tag(&mut self) -> Option<()> {
        let start = self.pos;
        if self.starts_with("<!--") {
            return match self.src[start + 4..].find("-->") {
                Some(i) => {
                    self.pos = start + 4 + i + 3;
                    Some(())
                }
                None => self.fail(
                    Code::Unterminated,
                    start,
                    "comment is never closed (expected `-->`)",
                ),
            };
        }
        if self.starts_with("<!") {
            return match self.src[start..].find('>') {
                Some(i) => {
                    self.pos = start + i + 1;
                    Some(())
                }
                None => self.fail(
                    Code::Unterminated,
                    start,
                    "`<!` is never closed (expected `>`)",
                ),
            };
        }
        if self.starts_with("</") {
            return self.closing_tag();
        }
        self.pos += 1;
        let name = self.tag_name();
        if name.is_empty() {
            return self.fail(
                Code::InvalidName,
                start,
                "expected a tag name after `<` (write `&lt;` for a literal `<`)",
            );
        }
        for raw in ["script", "style"] {
            if name.eq_ignore_ascii_case(raw) {
                return self.raw_block(start, raw);
            }
        }
        let mut el = Element {
            name,
            start,
            attrs: ArenaVec::new_in(&self.alloc),
            children: ArenaVec::new_in(&self.alloc),
        };
        let self_closing = self.attributes(&mut el)?;
        if self_closing || is_void(el.name) {
            self.push_node(Node::Element(el));
            Some(())
        } else {
            self.open(Frame::Element(el))
        }
    }

    fn tag_name(&mut self) -> &'s str {
        let start = self.pos;
        if self.pos < self.bytes.len() && self.bytes[self.pos].is_ascii_alphabetic() {
            self.pos += 1;
            while self.pos < self.bytes.len()
                && (self.bytes[self.pos].is_ascii_alphanumeric() || self.bytes[self.pos] == b'-')
            {
                self.pos += 1;
            }
        }
        &self.src[start..self.pos]
    }

    fn raw_block(&mut self, start: usize, lower: &'static str) -> Option<()> {
        let mut probe = Element {
            name: lower,
            start,
            attrs: ArenaVec::new_in(&self.alloc),
            children: ArenaVec::new_in(&self.alloc),
        };
        let self_closing = self.attributes(&mut probe)?;
        if !self.stack.is_empty() {
            return self.fail(
                Code::MisplacedBlock,
                start,
                format!("<{lower}> must be at the top level of the screen"),
            );
        }
        let already = if lower == "script" {
            self.doc.script.is_some()
        } else {
            self.doc.style.is_some()
        };
        if already {
            return self.fail(
                Code::MisplacedBlock,
                start,
                format!("a screen has at most one <{lower}>"),
            );
        }
        for attr in &probe.attrs {
            let allowed = matches!(attr.name, "lang" | "type");
            if !allowed {
                return self.fail(
                    Code::InvalidName,
                    attr.start,
                    format!("<{lower}> does not take the attribute `{}`", attr.name),
                );
            }
        }
        let content_start = self.pos;
        let content = if self_closing {
            Span {
                start: content_start,
                end: content_start,
            }
        } else {
            let close = format!("</{lower}");
            let Some(i) = find_ascii_ci(&self.src[content_start..], &close) else {
                return self.fail(
                    Code::UnclosedTag,
                    start,
                    format!("<{lower}> is never closed (expected </{lower}>)"),
                );
            };
            let end = content_start + i;
            self.pos = end + close.len();
            self.skip_ws();
            if self.bytes.get(self.pos) != Some(&b'>') {
                return self.fail(
                    Code::Unterminated,
                    end,
                    format!("expected `>` to end </{lower}>"),
                );
            }
            self.pos += 1;
            Span {
                start: content_start,
                end,
            }
        };
        if lower == "script" {
            self.doc.script = Some(content);
        } else {
            self.doc.style = Some(content);
        }
        Some(())
    }

    /// Parses attributes up to and including `>` or `/>`; returns whether the tag self-closed.
    fn attributes(&mut self, el: &mut Element<'s>) -> Option<bool> {
        loop {
            self.skip_ws();
            let at = self.pos;
            match self.bytes.get(self.pos) {
                None => {
                    return self.fail(
                        Code::Unterminated,
                        el.start,
                        format!("tag <{}> is never ended with `>`", el.name),
                    );
                }
                Some(b'>') => {
                    self.pos += 1;
                    return Some(false);
                }
                Some(b'/') if self.bytes.get(self.pos + 1) == Some(&b'>') => {
                    self.pos += 2;
                    return Some(true);
                }
                Some(b'{') => {
                    // Shorthand `{name}` = `name={name}`.
                    let Some(end) = scan::find_expression_end(self.src, at + 1) else {
                        return self.fail(
                            Code::Unterminated,
                            at,
                            "`{` is never closed (expected `}`)",
                        );
                    };
                    let inner = self.src[at + 1..end].trim();
                    if inner.starts_with("...") {
                        let raw = &self.src[at + 1..end];
                        let dots = at + 1 + (raw.len() - raw.trim_start().len());
                        let value = trimmed(self.src, dots + 3, end);
                        if value.start == value.end {
                            return self.fail(
                                Code::InvalidExpression,
                                at,
                                "expected `{...expression}`",
                            );
                        }
                        el.attrs.push(Attr {
                            name: SPREAD,
                            start: at,
                            value: AttrValue::Expr(value),
                        });
                        self.pos = end + 1;
                        continue;
                    }
                    if !is_identifier(inner) {
                        return self.fail(
                            Code::InvalidName,
                            at,
                            "expected `{name}` (shorthand for `name={name}`) or `{...object}`",
                        );
                    }
                    let span = trimmed(self.src, at + 1, end);
                    self.add_attr(
                        el,
                        Attr {
                            name: inner,
                            start: at,
                            value: AttrValue::Expr(span),
                        },
                    )?;
                    self.pos = end + 1;
                }
                Some(_) => {
                    let name_start = self.pos;
                    while self.pos < self.bytes.len() {
                        let b = self.bytes[self.pos];
                        if b.is_ascii_whitespace()
                            || matches!(b, b'=' | b'>' | b'"' | b'\'' | b'{' | b'}' | b'<')
                            || (b == b'/' && self.bytes.get(self.pos + 1) == Some(&b'>'))
                        {
                            break;
                        }
                        self.pos += 1;
                    }
                    let name = &self.src[name_start..self.pos];
                    if name.is_empty() {
                        return self.fail(
                            Code::InvalidName,
                            name_start,
                            format!(
                                "unexpected `{}` in tag <{}>",
                                self.bytes[name_start] as char, el.name
                            ),
                        );
                    }
                    self.skip_ws();
                    let value = if self.bytes.get(self.pos) == Some(&b'=') {
                        self.pos += 1;
                        self.skip_ws();
                        self.attr_value(name_start)?
                    } else {
                        AttrValue::Bare
                    };
                    self.add_attr(
                        el,
                        Attr {
                            name,
                            start: name_start,
                            value,
                        },
                    )?;
                }
            }
        }
    }

    fn add_attr(&mut self, el: &mut Element<'s>, attr: Attr<'s>) -> Option<()> {
        if el.attrs.iter().any(|a| a.name == attr.name) {
            return self.fail(
                Code::DuplicateAttribute,
                attr.start,
                format!("attribute `{}` appears twice", attr.name),
            );
        }
        el.attrs.push(attr);
        Some(())
    }

    fn attr_value(&mut self, name_start: usize) -> Option<AttrValue<'s>> {
        let at = self.pos;
        match self.bytes.get(self.pos) {
            None => self.fail(Code::Unterminated, name_start, "attribute value is missing"),
            Some(b'{') => {
                let Some(end) = scan::find_expression_end(self.src, at + 1) else {
                    return self.fail(Code::Unterminated, at, "`{` is never closed (expected `}`)");
                };
                self.pos = end + 1;
                Some(AttrValue::Expr(trimmed(self.src, at + 1, end)))
            }
            Some(&q @ (b'"' | b'\'')) => {
                self.pos += 1;
                let mut parts = ArenaVec::new_in(&self.alloc);
                let mut text_start = self.pos;
                loop {
                    match self.bytes.get(self.pos) {
                        None => {
                            return self.fail(
                                Code::Unterminated,
                                at,
                                "quoted attribute value is never closed",
                            )
                        }
                        Some(&c) if c == q => {
                            if text_start < self.pos {
                                parts.push(Part::Text(
                                    self.decoded(&self.src[text_start..self.pos]),
                                ));
                            }
                            self.pos += 1;
                            break;
                        }
                        Some(b'{') => {
                            if text_start < self.pos {
                                parts.push(Part::Text(
                                    self.decoded(&self.src[text_start..self.pos]),
                                ));
                            }
                            let open = self.pos;
                            let Some(end) = scan::find_expression_end(self.src, open + 1) else {
                                return self.fail(
                                    Code::Unterminated,
                                    open,
                                    "`{` is never closed (expected `}`)",
                                );
                            };
                            parts.push(Part::Expr(trimmed(self.src, open + 1, end)));
                            self.pos = end + 1;
                            text_start = self.pos;
                        }
                        Some(_) => self.pos += 1,
                    }
                }
                Some(match parts.len() {
                    0 => AttrValue::Text(""),
                    1 if matches!(parts[0], Part::Text(_)) => match parts.pop() {
                        Some(Part::Text(t)) => AttrValue::Text(t),
                        _ => AttrValue::Text(""),
                    },
                    _ => AttrValue::Mixed(parts),
                })
            }
            Some(_) => {
                while self.pos < self.bytes.len() && !self.ends_unquoted_value() {
                    self.pos += 1;
                }
                if self.pos == at {
                    return self.fail(Code::InvalidName, at, "expected an attribute value");
                }
                Some(AttrValue::Text(self.decoded(&self.src[at..self.pos])))
            }
        }
    }

    /// Whether the byte at `pos` ends an unquoted attribute value.
    fn ends_unquoted_value(&self) -> bool {
        let b = self.bytes[self.pos];
        b.is_ascii_whitespace()
            || matches!(b, b'>' | b'"' | b'\'' | b'<' | b'=' | b'`' | b'{' | b'}')
            || (b == b'/' && self.bytes.get(self.pos + 1) == Some(&b'>'))
    }

    fn closing_tag(&mut self) -> Option<()> {
        let start = self.pos;
        self.pos += 2;
        let name = self.tag_name();
        self.skip_ws();
        if self.bytes.get(self.pos) != Some(&b'>') {
            if name.is_empty() {
                return self.fail(Code::InvalidName, start, "expected a tag name after `</`");
            }
            return self.fail(
                Code::Unterminated,
                start,
                format!("closing tag </{name}> is never ended with `>`"),
            );
        }
        self.pos += 1;
        if is_void(name) {
            return self.fail(
                Code::UnexpectedClosingTag,
                start,
                format!("<{name}> is a void element and takes no closing tag"),
            );
        }
        self.close(Closer::Element(name), start)
    }

    /// Closes the innermost frame if `closer` matches it; otherwise reports the error at the
    /// unclosed frame (when the closer matches something further out) or at the closer.
    fn close(&mut self, closer: Closer<'_>, at: usize) -> Option<()> {
        let matches = |frame: &Frame| match (&closer, frame) {
            (Closer::Element(n), Frame::Element(e)) => e.name == *n,
            (Closer::Block(b), Frame::If { .. }) => *b == "if",
            (Closer::Block(b), Frame::Each { .. }) => *b == "each",
            (Closer::Block(b), Frame::Query { .. }) => *b == "query",
            (Closer::Block(b), Frame::Form { .. }) => *b == "form",
            (Closer::Block(b), Frame::Snippet { .. }) => *b == "snippet",
            (Closer::Block(b), Frame::Await { .. }) => *b == "await",
            (Closer::Block(b), Frame::Key { .. }) => *b == "key",
            _ => false,
        };
        match self.stack.last() {
            Some(top) if matches(top) => {
                if let Some(frame) = self.stack.pop() {
                    let node = frame.into_node(self.alloc);
                    self.push_node(node);
                }
                Some(())
            }
            Some(top) if self.stack.iter().any(matches) => {
                let shown = closer.shown();
                let (code, msg) = match top {
                    Frame::Element(_) => (
                        Code::UnclosedTag,
                        format!(
                            "{} is not closed before {shown} (expected {})",
                            top.label(),
                            top.closer()
                        ),
                    ),
                    _ => (
                        Code::UnclosedBlock,
                        format!(
                            "{} is not closed before {shown} (expected {})",
                            top.label(),
                            top.closer()
                        ),
                    ),
                };
                let start = top.start();
                self.fail(code, start, msg)
            }
            Some(top) => {
                let msg = format!(
                    "{} does not match {} (expected {})",
                    closer.shown(),
                    top.label(),
                    top.closer()
                );
                self.fail(Code::MismatchedTag, at, msg)
            }
            None => {
                let shown = closer.shown();
                let msg = if shown == "</script>" || shown == "</style>" {
                    format!("{shown} closes nothing (a `{shown}` inside a string ends the block early; write `<\\/` in strings)")
                } else {
                    format!("{shown} closes nothing")
                };
                self.fail(Code::UnexpectedClosingTag, at, msg)
            }
        }
    }

    /// `{expression}`, `{#block ...}`, `{:branch ...}`, `{/block}` or `{@tag ...}`.
    fn mustache(&mut self) -> Option<()> {
        let start = self.pos;
        let Some(end) = scan::find_expression_end(self.src, start + 1) else {
            return self.fail(
                Code::Unterminated,
                start,
                "`{` is never closed (expected `}`)",
            );
        };
        self.pos = end + 1;
        let sigil = self.bytes.get(start + 1).copied();
        if !matches!(sigil, Some(b'#' | b':' | b'/' | b'@')) {
            let span = trimmed(self.src, start + 1, end);
            if span.start == span.end {
                return self.fail(Code::InvalidExpression, start, "empty expression `{}`");
            }
            self.push_node(Node::Expr(span));
            return Some(());
        }
        let kw_start = start + 2;
        let mut kw_end = kw_start;
        while kw_end < end && self.bytes[kw_end].is_ascii_alphabetic() {
            kw_end += 1;
        }
        let keyword = &self.src[kw_start..kw_end];
        let rest = trimmed(self.src, kw_end, end);
        let has_rest = rest.start < rest.end;
        match (sigil, keyword) {
            (Some(b'#'), "if") => {
                if !has_rest {
                    return self.fail(Code::InvalidBlock, start, "{#if} needs a condition");
                }
                let frame = Frame::If {
                    start,
                    block: IfBlock {
                        branches: ArenaVec::new_in(&self.alloc),
                    },
                    current: Some(rest),
                    body: ArenaVec::new_in(&self.alloc),
                    closed_else: false,
                };
                self.open(frame)
            }
            (Some(b'#'), "each") => {
                let block = self.each_header(start, rest)?;
                self.open(Frame::Each {
                    start,
                    block,
                    in_else: false,
                })
            }
            (Some(b'#'), "query") => {
                let block = self.query_header(start, rest)?;
                self.doc.queries.push((block.query, block.params));
                self.open(Frame::Query { start, block })
            }
            (Some(b'#'), "form") => {
                let block = self.form_header(start, rest)?;
                self.open(Frame::Form { start, block })
            }
            (Some(b'#'), "await") => {
                if !has_rest {
                    return self.fail(Code::InvalidBlock, start, "{#await} needs a promise");
                }
                let (block, part) = self.await_header(rest);
                self.open(Frame::Await { start, block, part })
            }
            (Some(b'#'), "key") => {
                if !has_rest {
                    return self.fail(Code::InvalidBlock, start, "{#key} needs a value");
                }
                self.open(Frame::Key {
                    start,
                    value: rest,
                    body: ArenaVec::new_in(&self.alloc),
                })
            }
            (Some(b':'), kw @ ("then" | "catch")) => self.await_branch(start, kw, rest),
            (Some(b'#'), "snippet") => {
                let block = self.snippet_header(start, rest)?;
                self.open(Frame::Snippet { start, block })
            }
            (Some(b'@'), "render") => {
                if !has_rest {
                    return self.fail(
                        Code::InvalidBlock,
                        start,
                        "expected `{@render name(arguments)}`",
                    );
                }
                self.push_node(Node::Render(rest));
                Some(())
            }
            (Some(b':'), "else") => self.else_branch(start, kw_end, end),
            (Some(b'/'), kw @ ("if" | "each" | "query" | "form" | "snippet" | "await" | "key")) => {
                if has_rest {
                    return self.fail(
                        Code::InvalidBlock,
                        start,
                        format!("{{/{kw}}} takes nothing after its name"),
                    );
                }
                self.close(Closer::Block(kw), start)
            }
            (Some(b'@'), "const") => {
                let text = &self.src[rest.start..rest.end];
                let name_len = text.bytes().take_while(|b| is_ident_byte(*b)).count();
                let after = text[name_len..].trim_start();
                let ok = name_len > 0
                    && is_identifier(&text[..name_len])
                    && after.starts_with('=')
                    && !after.starts_with("==");
                if !ok {
                    return self.fail(
                        Code::InvalidBlock,
                        start,
                        "expected `{@const name = expression}`",
                    );
                }
                let eq = rest.start + name_len + (text[name_len..].len() - after.len());
                let value = trimmed(self.src, eq + 1, rest.end);
                if value.start == value.end {
                    return self.fail(
                        Code::InvalidBlock,
                        start,
                        "{@const} needs a value after `=`",
                    );
                }
                let name = Span {
                    start: rest.start,
                    end: rest.start + name_len,
                };
                self.push_node(Node::Const { name, value });
                Some(())
            }
            (Some(b'@'), "html") => self.fail(
                Code::RawHtml,
                start,
                "{@html} is not supported: HFX never renders raw HTML (interpolate with `{value}`)",
            ),
            _ => {
                let shown = &self.src[start..kw_end];
                let message = match closest_tag(shown) {
                    Some(tag) => format!("unknown tag `{shown}`; did you mean `{tag}`?"),
                    None => format!("unknown tag `{shown}`"),
                };
                self.fail(Code::InvalidBlock, start, message)
            }
        }
    }

    fn else_branch(&mut self, start: usize, kw_end: usize, end: usize) -> Option<()> {
        let after = trimmed(self.src, kw_end, end);
        let cond = if after.start < after.end {
            let text = &self.src[after.start..after.end];
            let is_else_if =
                text.starts_with("if") && text[2..].starts_with(|c: char| c.is_ascii_whitespace());
            if !is_else_if {
                return self.fail(
                    Code::InvalidBlock,
                    start,
                    "expected `{:else}` or `{:else if condition}`",
                );
            }
            Some(trimmed(self.src, after.start + 2, after.end))
        } else {
            None
        };
        match self.stack.last_mut() {
            Some(Frame::If {
                block,
                current,
                body,
                closed_else,
                ..
            }) => {
                if *closed_else {
                    return self.fail(
                        Code::InvalidBlock,
                        start,
                        "{:else} after the final {:else} of this {#if}",
                    );
                }
                let finished = std::mem::replace(body, ArenaVec::new_in(&self.alloc));
                block.branches.push((current.take(), finished));
                *current = cond;
                *closed_else = cond.is_none();
                Some(())
            }
            Some(Frame::Each { in_else, .. }) if cond.is_none() && !*in_else => {
                *in_else = true;
                Some(())
            }
            Some(top @ Frame::Element(_)) => {
                let msg = format!(
                    "{} is not closed before {{:else}} (expected {})",
                    top.label(),
                    top.closer()
                );
                let at = top.start();
                self.fail(Code::UnclosedTag, at, msg)
            }
            _ => self.fail(
                Code::InvalidBlock,
                start,
                "{:else} outside of {#if} or {#each}",
            ),
        }
    }

    fn each_header(&mut self, start: usize, rest: Span) -> Option<EachBlock<'s>> {
        let text = &self.src[rest.start..rest.end];
        let Some(as_at) = scan::last_top_level_as(text) else {
            return self.fail(Code::InvalidBlock, start, "expected `{#each list as item}`");
        };
        let list = trimmed(self.src, rest.start, rest.start + as_at);
        let tail_start = rest.start + as_at + 2;
        let tail = &self.src[tail_start..rest.end];
        let cut = scan::first_top_level(tail, |c| c == b',' || c == b'(').unwrap_or(tail.len());
        let pattern = trimmed(self.src, tail_start, tail_start + cut);
        let mut index = None;
        let mut key = None;
        let mut pos = tail_start + cut;
        if self.bytes.get(pos) == Some(&b',') {
            let after = &self.src[pos + 1..rest.end];
            let lead = after.len() - after.trim_start().len();
            let name_len = after
                .trim_start()
                .bytes()
                .take_while(|b| is_ident_byte(*b))
                .count();
            let name = Span {
                start: pos + 1 + lead,
                end: pos + 1 + lead + name_len,
            };
            if !is_identifier(&self.src[name.start..name.end]) {
                return self.fail(
                    Code::InvalidBlock,
                    pos + 1 + lead,
                    "expected an index name after `,`",
                );
            }
            index = Some(name);
            pos = name.end;
        }
        let remaining = trimmed(self.src, pos, rest.end);
        if remaining.start < remaining.end {
            let r = &self.src[remaining.start..remaining.end];
            if !(r.starts_with('(') && r.ends_with(')')) {
                return self.fail(
                    Code::InvalidBlock,
                    remaining.start,
                    "expected `(key)` at the end of {#each}",
                );
            }
            let k = trimmed(self.src, remaining.start + 1, remaining.end - 1);
            if k.start == k.end {
                return self.fail(
                    Code::InvalidBlock,
                    remaining.start,
                    "empty key `()` in {#each}",
                );
            }
            key = Some(k);
        }
        if list.start == list.end || pattern.start == pattern.end {
            return self.fail(Code::InvalidBlock, start, "expected `{#each list as item}`");
        }
        Some(EachBlock {
            list,
            pattern,
            index,
            key,
            body: ArenaVec::new_in(&self.alloc),
            else_body: None,
        })
    }

    /// Splits `head as name` and checks that `name` is an identifier.
    fn split_as(&mut self, start: usize, rest: Span, usage: &str) -> Option<(Span, Span)> {
        let text = &self.src[rest.start..rest.end];
        let Some(as_at) = scan::last_top_level_as(text) else {
            return self.fail(Code::InvalidBlock, start, format!("expected `{usage}`"));
        };
        let head = trimmed(self.src, rest.start, rest.start + as_at);
        let name = trimmed(self.src, rest.start + as_at + 2, rest.end);
        if head.start == head.end || !is_identifier(&self.src[name.start..name.end]) {
            return self.fail(Code::InvalidBlock, start, format!("expected `{usage}`"));
        }
        Some((head, name))
    }

    fn query_header(&mut self, start: usize, rest: Span) -> Option<QueryBlock<'s>> {
        let (head, name) = self.split_as(start, rest, "{#query \"HOQS\", params as name}")?;
        let text = &self.src[head.start..head.end];
        let (query, params) = match scan::first_top_level(text, |c| c == b',') {
            Some(comma) => (
                trimmed(self.src, head.start, head.start + comma),
                Some(trimmed(self.src, head.start + comma + 1, head.end)),
            ),
            None => (head, None),
        };
        let (params, options) = match params {
            Some(p) => match scan::first_top_level(&self.src[p.start..p.end], |c| c == b',') {
                Some(comma) => (
                    Some(trimmed(self.src, p.start, p.start + comma)),
                    Some(trimmed(self.src, p.start + comma + 1, p.end)),
                ),
                None => (Some(p), None),
            },
            None => (None, None),
        };
        let empty = |s: Option<Span>| s.is_some_and(|s| s.start == s.end);
        if query.start == query.end || empty(params) || empty(options) {
            return self.fail(
                Code::InvalidBlock,
                start,
                "expected `{#query \"HOQS\", params, options as name}`",
            );
        }
        Some(QueryBlock {
            query,
            params,
            options,
            name,
            body: ArenaVec::new_in(&self.alloc),
        })
    }

    /// `promise`, or the short forms `promise then value` / `promise catch error` (no pending
    /// content).
    fn await_header(&self, rest: Span) -> (AwaitBlock<'s>, AwaitPart) {
        let text = &self.src[rest.start..rest.end];
        for (word, part) in [(" then", AwaitPart::Then), (" catch", AwaitPart::Catch)] {
            if let Some(at) = scan::last_top_level_word(text, word) {
                let promise = trimmed(self.src, rest.start, rest.start + at);
                let pattern = trimmed(self.src, rest.start + at + word.len(), rest.end);
                let pattern = (pattern.start < pattern.end).then_some(pattern);
                let mut block = AwaitBlock {
                    promise,
                    pending: ArenaVec::new_in(&self.alloc),
                    then: None,
                    catch: None,
                };
                match part {
                    AwaitPart::Then => block.then = Some((pattern, ArenaVec::new_in(&self.alloc))),
                    _ => block.catch = Some((pattern, ArenaVec::new_in(&self.alloc))),
                }
                if promise.start < promise.end {
                    return (block, part);
                }
            }
        }
        let block = AwaitBlock {
            promise: rest,
            pending: ArenaVec::new_in(&self.alloc),
            then: None,
            catch: None,
        };
        (block, AwaitPart::Pending)
    }

    /// `{:then value}` or `{:catch error}` inside `{#await}`.
    fn await_branch(&mut self, start: usize, kw: &str, rest: Span) -> Option<()> {
        let pattern = (rest.start < rest.end).then_some(rest);
        match self.stack.last_mut() {
            Some(Frame::Await { block, part, .. }) => {
                let next = if kw == "then" {
                    AwaitPart::Then
                } else {
                    AwaitPart::Catch
                };
                let taken = match next {
                    AwaitPart::Then => block.then.is_some() || *part == AwaitPart::Catch,
                    _ => block.catch.is_some(),
                };
                if taken {
                    return self.fail(
                        Code::InvalidBlock,
                        start,
                        format!("{{:{kw}}} comes at most once, and {{:then}} before {{:catch}}"),
                    );
                }
                match next {
                    AwaitPart::Then => block.then = Some((pattern, ArenaVec::new_in(&self.alloc))),
                    _ => block.catch = Some((pattern, ArenaVec::new_in(&self.alloc))),
                }
                *part = next;
                Some(())
            }
            Some(top @ Frame::Element(_)) => {
                let msg = format!(
                    "{} is not closed before {{:{kw}}} (expected {})",
                    top.label(),
                    top.closer()
                );
                let at = top.start();
                self.fail(Code::UnclosedTag, at, msg)
            }
            _ => self.fail(
                Code::InvalidBlock,
                start,
                format!("{{:{kw}}} outside of {{#await}}"),
            ),
        }
    }

    /// `name(params)`: an identifier, then the parameter list in parentheses.
    fn snippet_header(&mut self, start: usize, rest: Span) -> Option<SnippetBlock<'s>> {
        let text = &self.src[rest.start..rest.end];
        let name_len = text.bytes().take_while(|b| is_ident_byte(*b)).count();
        let after = text[name_len..].trim_start();
        let open = rest.start + (text.len() - after.len());
        if name_len == 0
            || !is_identifier(&text[..name_len])
            || !after.starts_with('(')
            || !after.ends_with(')')
            || after.len() < 2
        {
            return self.fail(
                Code::InvalidBlock,
                start,
                "expected `{#snippet name(parameters)}`",
            );
        }
        if text[..name_len].starts_with("$$") {
            return self.fail(
                Code::ReservedName,
                rest.start,
                "names starting with `$$` are reserved",
            );
        }
        Some(SnippetBlock {
            name: Span {
                start: rest.start,
                end: rest.start + name_len,
            },
            params: trimmed(self.src, open + 1, rest.end - 1),
            body: ArenaVec::new_in(&self.alloc),
        })
    }

    fn form_header(&mut self, start: usize, rest: Span) -> Option<FormBlock<'s>> {
        let (head, name) = self.split_as(start, rest, "{#form module.object, id as name}")?;
        let text = &self.src[head.start..head.end];
        let (target, id) = match scan::first_top_level(text, |c| c == b',') {
            Some(comma) => (
                trimmed(self.src, head.start, head.start + comma),
                Some(trimmed(self.src, head.start + comma + 1, head.end)),
            ),
            None => (head, None),
        };
        let target_text = &self.src[target.start..target.end];
        let Some((module, object)) = target_text
            .split_once('.')
            .filter(|(m, o)| is_key(m) && is_key(o))
        else {
            return self.fail(
                Code::InvalidFormTarget,
                target.start,
                format!(
                    "`{target_text}` is not `module.object` (lower-case keys, e.g. `crm.account`)"
                ),
            );
        };
        let (id, options) = match id {
            Some(i) => match scan::first_top_level(&self.src[i.start..i.end], |c| c == b',') {
                Some(comma) => (
                    Some(trimmed(self.src, i.start, i.start + comma)),
                    Some(trimmed(self.src, i.start + comma + 1, i.end)),
                ),
                None => (Some(i), None),
            },
            None => (None, None),
        };
        if id.is_some_and(|i| i.start == i.end) || options.is_some_and(|o| o.start == o.end) {
            return self.fail(
                Code::InvalidBlock,
                start,
                "expected `{#form module.object, id, options as name}` (write `null` for a new record)",
            );
        }
        Some(FormBlock {
            module,
            object,
            id,
            options,
            name,
            body: ArenaVec::new_in(&self.alloc),
        })
    }
}

/// The HOQS texts of the `{#query}` blocks written as plain string literals (no escapes, no
/// `${}`), with the offset of each text's first character and the span of the block's parameters
/// (when it has any), in document order.
pub(crate) fn query_texts(src: &str, doc: &Document, out: &mut Vec<(String, usize, Option<Span>)>) {
    for &(query, params) in &doc.queries {
        let literal = &src[query.start..query.end];
        let quote = literal
            .chars()
            .next()
            .filter(|c| matches!(c, '"' | '\'' | '`'));
        if let Some(quote) = quote {
            let inner = &literal[1..];
            let plain = literal.len() >= 2
                && inner.ends_with(quote)
                && !inner[..inner.len() - 1].contains([quote, '\\'])
                && !(quote == '`' && inner.contains("${"));
            if plain {
                out.push((
                    inner[..inner.len() - 1].to_string(),
                    query.start + 1,
                    params,
                ));
            }
        }
    }
}

/// The span of `src[start..end]` without surrounding whitespace.
fn trimmed(src: &str, start: usize, end: usize) -> Span {
    let text = &src[start..end];
    let lead = text.len() - text.trim_start().len();
    let trail = text.len() - text.trim_end().len();
    if lead == text.len() {
        return Span { start, end: start };
    }
    Span {
        start: start + lead,
        end: end - trail,
    }
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$'
}

/// A plain ASCII JavaScript identifier (what HFX accepts for names it binds).
pub(crate) fn is_identifier(s: &str) -> bool {
    let mut bytes = s.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_' || b == b'$')
        && bytes.all(is_ident_byte)
}

/// A module or object key (`^[a-z][a-z0-9_]{0,62}$`).
fn is_key(s: &str) -> bool {
    let mut bytes = s.bytes();
    s.len() <= 63
        && matches!(bytes.next(), Some(b'a'..=b'z'))
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

fn find_ascii_ci(haystack: &str, needle: &str) -> Option<usize> {
    let h = haystack.as_bytes();
    let n = needle.as_bytes();
    let first = n.first()?.to_ascii_lowercase();
    if first.is_ascii() && !first.is_ascii_alphabetic() {
        // `</script`, `</style`: a byte with no case, found with `memchr`.
        let mut from = 0;
        while let Some(found) = memchr::memchr(first, h.get(from..)?) {
            let at = from + found;
            if h.get(at..at + n.len())?.eq_ignore_ascii_case(n) {
                return Some(at);
            }
            from = at + 1;
        }
        return None;
    }
    let mut from = 0;
    // Candidates start with the needle's first byte; only those are compared in full.
    while let Some(found) = h[from..]
        .iter()
        .position(|b| b.to_ascii_lowercase() == first)
    {
        let at = from + found;
        let candidate = h.get(at..at + n.len())?;
        if candidate.eq_ignore_ascii_case(n) {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// Decodes the common named entities and numeric references; unknown ones stay as written.
pub(crate) fn decode_entities(text: &str) -> Cow<'_, str> {
    if !text.contains('&') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let semi = rest.bytes().take(12).position(|b| b == b';');
        let decoded = semi.and_then(|semi| {
            let name = &rest[1..semi];
            let c = match name {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                "nbsp" => Some('\u{a0}'),
                "copy" => Some('©'),
                "reg" => Some('®'),
                "mdash" => Some('—'),
                "ndash" => Some('–'),
                "hellip" => Some('…'),
                "lbrace" => Some('{'),
                "rbrace" => Some('}'),
                _ => {
                    let num = name.strip_prefix('#')?;
                    let code = match num.strip_prefix(['x', 'X']) {
                        Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                        None => num.parse::<u32>().ok()?,
                    };
                    char::from_u32(code)
                }
            }?;
            Some((c, semi))
        });
        match decoded {
            Some((c, semi)) => {
                out.push(c);
                rest = &rest[semi + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}
