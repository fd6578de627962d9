//! The parser: tokens to a [`Query`] or an [`Expr`], stopping at the first syntax error.
//!
//! Expressions use precedence climbing over the levels documented in docs/formulas.md.
//! Two counters keep every input safe: `nesting` bounds the parser's own recursion, and each
//! parsed node's depth bounds the tree handed to later stages (left-deep chains such as
//! `a OR b OR ...` are built by a loop, so they need the second check). Both stop at
//! [`MAX_DEPTH`] with a diagnostic, never a stack overflow.

use crate::ast::{
    is_date_literal, BinaryOp, CallArgs, CaseBranch, Direction, Expr, ExprKind, Ident, Literal,
    NullsOrder, OrderItem, Path, Query, RowCount, RowCountValue, SelectItem, SelectValue, Span,
    UnaryOp, DATE_N_LITERALS,
};
use crate::diagnostics::{self as diag, quote, Diagnostic};
use crate::lexer::{Token, TokenKind};
use crate::location::locate;

/// The deepest nesting (of parentheses, operators, calls and subqueries) accepted.
pub const MAX_DEPTH: usize = 128;

/// Words that cannot start a bare name, because the grammar gives them a meaning there.
/// Quote them (`"order"`) to use them as names; after a `.` any word is a name.
pub const RESERVED_WORDS: &[&str] = &[
    "AND", "AS", "BY", "DISTINCT", "FALSE", "FROM", "GROUP", "HAVING", "ILIKE", "IN", "IS", "LIKE",
    "LIMIT", "NOT", "NULL", "OFFSET", "OR", "ORDER", "SELECT", "TRUE", "WHERE",
];

/// True if `word` is reserved (case-insensitively).
pub fn is_reserved(word: &str) -> bool {
    RESERVED_WORDS
        .iter()
        .any(|reserved| reserved.eq_ignore_ascii_case(word))
}

/// Binding levels, loosest first; an operator binds its operands at a higher level.
const LEVEL_OR: u8 = 1;
const LEVEL_AND: u8 = 2;
const LEVEL_NOT: u8 = 3;
const LEVEL_COMPARE: u8 = 4;
const LEVEL_CONCAT: u8 = 5;
const LEVEL_ADD: u8 = 6;
const LEVEL_MUL: u8 = 7;
const LEVEL_UNARY: u8 = 8;

/// The clauses after FROM, declared in the order they must appear (so `<` means "before").
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Clause {
    Where,
    GroupBy,
    Having,
    OrderBy,
    Limit,
    Offset,
}

impl Clause {
    const ALL: [Clause; 6] = [
        Clause::Where,
        Clause::GroupBy,
        Clause::Having,
        Clause::OrderBy,
        Clause::Limit,
        Clause::Offset,
    ];

    /// The keyword that starts the clause.
    fn keyword(self) -> &'static str {
        match self {
            Clause::Where => "WHERE",
            Clause::GroupBy => "GROUP",
            Clause::Having => "HAVING",
            Clause::OrderBy => "ORDER",
            Clause::Limit => "LIMIT",
            Clause::Offset => "OFFSET",
        }
    }

    /// The clause's name in messages.
    fn name(self) -> &'static str {
        match self {
            Clause::GroupBy => "GROUP BY",
            Clause::OrderBy => "ORDER BY",
            other => other.keyword(),
        }
    }
}

type PResult<T> = Result<T, Diagnostic>;

/// An expression with the depth of its tree (a leaf has depth 1).
struct Node {
    expr: Expr,
    depth: usize,
}

/// An infix operator found after an operand.
enum Infix {
    Binary(BinaryOp),
    Is,
    In {
        negated: bool,
    },
    Like {
        negated: bool,
        case_insensitive: bool,
    },
    Includes {
        negated: bool,
    },
}

pub(crate) struct Parser<'a> {
    src: &'a str,
    tokens: Vec<Token>,
    pos: usize,
    nesting: usize,
    /// "the end of the query" or "the end of the expression", for messages.
    end_name: &'static str,
    /// Whether `IN (SELECT ...)` may appear: in queries, not in formulas, rules and filters.
    in_query: bool,
}

impl<'a> Parser<'a> {
    pub(crate) fn new(src: &'a str, tokens: Vec<Token>, end_name: &'static str) -> Parser<'a> {
        Parser {
            src,
            tokens,
            pos: 0,
            nesting: 0,
            end_name,
            in_query: false,
        }
    }

    // -- token access ---------------------------------------------------------------------

    fn peek(&self) -> Token {
        self.peek_at(0)
    }

    fn peek_at(&self, ahead: usize) -> Token {
        let last = self.tokens.len().saturating_sub(1);
        self.tokens
            .get((self.pos + ahead).min(last))
            .copied()
            .unwrap_or(Token {
                kind: TokenKind::Eof,
                span: Span::new(self.src.len(), self.src.len()),
            })
    }

    fn bump(&mut self) -> Token {
        let token = self.peek();
        if token.kind != TokenKind::Eof {
            self.pos += 1;
        }
        token
    }

    /// The end of the last consumed token.
    fn prev_end(&self) -> usize {
        match self.pos.checked_sub(1).and_then(|at| self.tokens.get(at)) {
            Some(token) => token.span.end,
            None => 0,
        }
    }

    fn text(&self, token: Token) -> &'a str {
        self.src.get(token.span.start..token.span.end).unwrap_or("")
    }

    fn is_kw(&self, token: Token, keyword: &str) -> bool {
        token.kind == TokenKind::Word && self.text(token).eq_ignore_ascii_case(keyword)
    }

    fn at_kw(&self, keyword: &str) -> bool {
        self.is_kw(self.peek(), keyword)
    }

    fn eat_kw(&mut self, keyword: &str) -> bool {
        let found = self.at_kw(keyword);
        if found {
            self.bump();
        }
        found
    }

    fn eat(&mut self, kind: TokenKind) -> Option<Token> {
        (self.peek().kind == kind).then(|| self.bump())
    }

    /// Describes a token for "found ..." in messages.
    fn describe(&self, token: Token) -> String {
        match token.kind {
            TokenKind::Eof => self.end_name.to_string(),
            _ => quote(self.text(token)),
        }
    }

    fn describe_next(&self) -> String {
        self.describe(self.peek())
    }

    // -- limits ---------------------------------------------------------------------------

    fn enter(&mut self) -> PResult<()> {
        self.nesting += 1;
        if self.nesting > MAX_DEPTH {
            return Err(diag::too_deep(MAX_DEPTH, self.peek().span));
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.nesting = self.nesting.saturating_sub(1);
    }

    fn node(&self, kind: ExprKind, span: Span, depth: usize) -> PResult<Node> {
        if depth > MAX_DEPTH {
            return Err(diag::too_deep(MAX_DEPTH, span));
        }
        Ok(Node {
            expr: Expr { kind, span },
            depth,
        })
    }

    // -- entry points ---------------------------------------------------------------------

    pub(crate) fn parse_query_to_end(&mut self) -> PResult<Query> {
        // `query` itself checks that nothing follows the last clause.
        self.in_query = true;
        self.query(false)
    }

    pub(crate) fn parse_expression_to_end(&mut self) -> PResult<Expr> {
        let node = self.expr(0)?;
        let next = self.peek();
        if next.kind != TokenKind::Eof {
            return Err(diag::expected_end_of_expression(
                &self.describe(next),
                next.span,
            ));
        }
        Ok(node.expr)
    }

    // -- queries --------------------------------------------------------------------------

    /// `SELECT ... FROM ... [clauses]`; a subquery stops before its closing `)`.
    fn query(&mut self, subquery: bool) -> PResult<Query> {
        self.enter()?;
        let select = self.peek();
        if !self.eat_kw("SELECT") {
            return Err(diag::expected_select(&self.describe_next(), select.span));
        }
        let distinct = self.eat_kw("DISTINCT");
        let mut items = vec![self.select_item()?];
        while self.eat(TokenKind::Comma).is_some() {
            items.push(self.select_item()?);
        }
        if !self.eat_kw("FROM") {
            let next = self.peek();
            let found = self.describe(next);
            return Err(if self.starts_operand(next) {
                diag::expected_comma_or_from(&found, next.span)
            } else {
                diag::expected_from(&found, next.span)
            });
        }
        let from = self.object_ref(subquery)?;

        let mut query = Query {
            distinct,
            select: items,
            from,
            where_clause: None,
            group_by: Vec::new(),
            having: None,
            order_by: Vec::new(),
            limit: None,
            offset: None,
            span: Span::new(select.span.start, select.span.end),
        };
        // Clauses must come in declaration order of `Clause`, each at most once.
        let mut last: Option<Clause> = None;
        while let Some(clause) = self.clause_at_cursor() {
            let token = self.bump();
            if let Some(last) = last.filter(|last| clause <= *last) {
                return Err(if clause == last {
                    diag::duplicate_clause(clause.name(), token.span)
                } else {
                    diag::clause_out_of_order(clause.name(), last.name(), token.span)
                });
            }
            last = Some(clause);
            match clause {
                Clause::Where => query.where_clause = Some(self.expr(0)?.expr),
                Clause::GroupBy => {
                    self.expect_by("GROUP")?;
                    query.group_by.push(self.expr(0)?.expr);
                    while self.eat(TokenKind::Comma).is_some() {
                        query.group_by.push(self.expr(0)?.expr);
                    }
                }
                Clause::Having => query.having = Some(self.expr(0)?.expr),
                Clause::OrderBy => {
                    self.expect_by("ORDER")?;
                    query.order_by.push(self.order_item()?);
                    while self.eat(TokenKind::Comma).is_some() {
                        query.order_by.push(self.order_item()?);
                    }
                }
                Clause::Limit => query.limit = Some(self.row_count(clause)?),
                Clause::Offset => query.offset = Some(self.row_count(clause)?),
            }
        }

        let next = self.peek();
        let finished = if subquery {
            next.kind == TokenKind::RParen
        } else {
            next.kind == TokenKind::Eof
        };
        if !finished {
            return Err(self.unexpected_after_clauses(last, subquery, next));
        }
        query.span = Span::new(select.span.start, self.prev_end().max(select.span.end));
        self.leave();
        Ok(query)
    }

    /// True if `token` could start an operand, which after a complete select item means a
    /// `,` is probably missing.
    fn starts_operand(&self, token: Token) -> bool {
        match token.kind {
            TokenKind::Word => !is_reserved(self.text(token)),
            TokenKind::QuotedName
            | TokenKind::String
            | TokenKind::Integer
            | TokenKind::Decimal
            | TokenKind::Date
            | TokenKind::DateTime
            | TokenKind::Param
            | TokenKind::DateRange
            | TokenKind::Global
            | TokenKind::LParen => true,
            _ => false,
        }
    }

    /// The clause whose keyword is at the cursor, if any.
    fn clause_at_cursor(&self) -> Option<Clause> {
        let next = self.peek();
        Clause::ALL
            .into_iter()
            .find(|clause| self.is_kw(next, clause.keyword()))
    }

    /// The error for a token that is neither a clause still allowed nor the end.
    fn unexpected_after_clauses(
        &self,
        last: Option<Clause>,
        subquery: bool,
        next: Token,
    ) -> Diagnostic {
        let allowed: Vec<&str> = Clause::ALL
            .into_iter()
            .filter(|clause| last.is_none_or(|last| *clause > last))
            .map(Clause::name)
            .collect();
        let end = if subquery {
            "`)` to end the subquery"
        } else {
            "the end of the query"
        };
        let found = self.describe(next);
        diag::expected_clause(&allowed.join(", "), end, &found, next.span)
    }

    fn expect_by(&mut self, keyword: &str) -> PResult<()> {
        if self.eat_kw("BY") {
            Ok(())
        } else {
            let next = self.peek();
            Err(diag::expected_by(keyword, &self.describe(next), next.span))
        }
    }

    fn select_item(&mut self) -> PResult<SelectItem> {
        let first = self.peek();
        let value = if first.kind == TokenKind::LParen && self.is_kw(self.peek_at(1), "SELECT") {
            let open = self.bump();
            let mut subquery = self.query(true)?;
            let close = self.expect_close(open)?;
            subquery.span = Span::new(open.span.start, close.span.end);
            SelectValue::Subquery(Box::new(subquery))
        } else if first.kind == TokenKind::Star {
            return Err(diag::select_star(first.span));
        } else if first.kind == TokenKind::Eof || self.is_kw(first, "FROM") {
            return Err(diag::expected_expression(
                Some("SELECT"),
                &self.describe(first),
                first.span,
            ));
        } else {
            SelectValue::Expr(self.expr(0)?.expr)
        };
        let value_end = self.prev_end();
        let text = self
            .src
            .get(first.span.start..value_end)
            .unwrap_or("")
            .to_string();
        let alias = if self.eat_kw("AS") {
            Some(self.alias()?)
        } else {
            None
        };
        Ok(SelectItem {
            value,
            alias,
            text,
            span: Span::new(first.span.start, self.prev_end()),
        })
    }

    fn alias(&mut self) -> PResult<Ident> {
        let token = self.peek();
        match token.kind {
            TokenKind::Word if !is_reserved(self.text(token)) => {
                self.bump();
                Ok(self.ident(token))
            }
            TokenKind::QuotedName => {
                self.bump();
                Ok(self.ident(token))
            }
            _ => Err(diag::expected_alias(&self.describe(token), token.span)),
        }
    }

    /// The FROM target; a top-level query needs `<module>.<object>`, a subquery two or three
    /// segments.
    fn object_ref(&mut self, subquery: bool) -> PResult<Path> {
        let token = self.peek();
        let starts_name = match token.kind {
            TokenKind::Word => !is_reserved(self.text(token)),
            TokenKind::QuotedName => true,
            _ => false,
        };
        if !starts_name {
            return Err(diag::expected_object(&self.describe(token), token.span));
        }
        let path = self.path()?;
        let segments = path.segments.len();
        let written = self.src.get(path.span.start..path.span.end).unwrap_or("");
        if subquery && !(2..=3).contains(&segments) {
            return Err(diag::relationship_shape(written, path.span));
        }
        if !subquery && segments != 2 {
            return Err(diag::object_shape(written, path.span));
        }
        Ok(path)
    }

    fn order_item(&mut self) -> PResult<OrderItem> {
        let expr = self.expr(0)?.expr;
        let direction = if self.eat_kw("ASC") {
            Some(Direction::Asc)
        } else if self.eat_kw("DESC") {
            Some(Direction::Desc)
        } else {
            None
        };
        let nulls = if self.eat_kw("NULLS") {
            if self.eat_kw("FIRST") {
                Some(NullsOrder::First)
            } else if self.eat_kw("LAST") {
                Some(NullsOrder::Last)
            } else {
                let next = self.peek();
                return Err(diag::expected_nulls_order(&self.describe(next), next.span));
            }
        } else {
            None
        };
        let span = Span::new(expr.span.start, self.prev_end());
        Ok(OrderItem {
            expr,
            direction,
            nulls,
            span,
        })
    }

    fn row_count(&mut self, clause: Clause) -> PResult<RowCount> {
        let token = self.peek();
        let value = match token.kind {
            TokenKind::Integer => RowCountValue::Integer(self.text(token).to_string()),
            TokenKind::Param => RowCountValue::Param(param_name(self.text(token))),
            _ => {
                return Err(diag::expected_row_count(
                    clause.name(),
                    &self.describe(token),
                    token.span,
                ))
            }
        };
        self.bump();
        Ok(RowCount {
            value,
            span: token.span,
        })
    }

    // -- expressions ----------------------------------------------------------------------

    /// Parses an expression whose operators all bind at `min_level` or tighter.
    fn expr(&mut self, min_level: u8) -> PResult<Node> {
        self.enter()?;
        let mut left = self.prefix()?;
        // Comparisons do not chain: `a = b = c` is reported instead of guessed.
        let mut compared = false;
        while let Some((infix, level, width)) = self.peek_infix() {
            if level < min_level {
                break;
            }
            let op_token = self.peek();
            if level == LEVEL_COMPARE {
                if compared {
                    return Err(diag::chained_comparison(op_token.span));
                }
                compared = true;
            } else {
                compared = false;
            }
            for _ in 0..width {
                self.bump();
            }
            left = self.infix(left, infix, level)?;
        }
        self.leave();
        Ok(left)
    }

    /// The infix operator at the cursor: (operator, level, tokens it spans).
    fn peek_infix(&self) -> Option<(Infix, u8, usize)> {
        let token = self.peek();
        let binary = |op: BinaryOp, level: u8| Some((Infix::Binary(op), level, 1));
        match token.kind {
            TokenKind::Plus => binary(BinaryOp::Add, LEVEL_ADD),
            TokenKind::Minus => binary(BinaryOp::Sub, LEVEL_ADD),
            TokenKind::Star => binary(BinaryOp::Mul, LEVEL_MUL),
            TokenKind::Slash => binary(BinaryOp::Div, LEVEL_MUL),
            TokenKind::Concat => binary(BinaryOp::Concat, LEVEL_CONCAT),
            TokenKind::Eq => binary(BinaryOp::Eq, LEVEL_COMPARE),
            TokenKind::NotEq => binary(BinaryOp::NotEq, LEVEL_COMPARE),
            TokenKind::Lt => binary(BinaryOp::Lt, LEVEL_COMPARE),
            TokenKind::LtEq => binary(BinaryOp::LtEq, LEVEL_COMPARE),
            TokenKind::Gt => binary(BinaryOp::Gt, LEVEL_COMPARE),
            TokenKind::GtEq => binary(BinaryOp::GtEq, LEVEL_COMPARE),
            TokenKind::Word => {
                let word = self.text(token);
                let is = |keyword: &str| word.eq_ignore_ascii_case(keyword);
                if is("OR") {
                    binary(BinaryOp::Or, LEVEL_OR)
                } else if is("AND") {
                    binary(BinaryOp::And, LEVEL_AND)
                } else if is("IS") {
                    Some((Infix::Is, LEVEL_COMPARE, 1))
                } else if is("IN") {
                    Some((Infix::In { negated: false }, LEVEL_COMPARE, 1))
                } else if is("LIKE") || is("ILIKE") {
                    let case_insensitive = is("ILIKE");
                    let like = Infix::Like {
                        negated: false,
                        case_insensitive,
                    };
                    Some((like, LEVEL_COMPARE, 1))
                } else if is("INCLUDES") || is("EXCLUDES") {
                    let negated = is("EXCLUDES");
                    Some((Infix::Includes { negated }, LEVEL_COMPARE, 1))
                } else if is("NOT") {
                    let after = self.peek_at(1);
                    if self.is_kw(after, "IN") {
                        Some((Infix::In { negated: true }, LEVEL_COMPARE, 2))
                    } else if self.is_kw(after, "LIKE") || self.is_kw(after, "ILIKE") {
                        let like = Infix::Like {
                            negated: true,
                            case_insensitive: self.is_kw(after, "ILIKE"),
                        };
                        Some((like, LEVEL_COMPARE, 2))
                    } else {
                        None
                    }
                } else {
                    None
                }
            }
            _ => None,
        }
    }

    /// Builds the node for `left <infix> ...`; the operator tokens are already consumed.
    fn infix(&mut self, left: Node, infix: Infix, level: u8) -> PResult<Node> {
        let start = left.expr.span.start;
        match infix {
            Infix::Binary(op) => {
                // Left-associative: the right operand binds one level tighter. Comparisons
                // use the same rule and are kept from chaining by the caller.
                let right = self.expr(level + 1)?;
                let span = Span::new(start, right.expr.span.end);
                let depth = 1 + left.depth.max(right.depth);
                let kind = ExprKind::Binary {
                    op,
                    left: Box::new(left.expr),
                    right: Box::new(right.expr),
                };
                self.node(kind, span, depth)
            }
            Infix::Is => {
                let negated = self.eat_kw("NOT");
                let null = self.peek();
                if !self.eat_kw("NULL") {
                    return Err(diag::expected_null_after_is(
                        &self.describe(null),
                        null.span,
                    ));
                }
                let span = Span::new(start, null.span.end);
                let kind = ExprKind::IsNull {
                    operand: Box::new(left.expr),
                    negated,
                };
                self.node(kind, span, left.depth + 1)
            }
            Infix::In { negated } => {
                if self.peek().kind == TokenKind::Param {
                    let array = self.prefix()?;
                    let span = Span::new(start, array.expr.span.end);
                    let kind = ExprKind::InArray {
                        operand: Box::new(left.expr),
                        array: Box::new(array.expr),
                        negated,
                    };
                    return self.node(kind, span, left.depth + 1);
                }
                let Some(open) = self.eat(TokenKind::LParen) else {
                    let next = self.peek();
                    return Err(diag::expected_in_list(&self.describe(next), next.span));
                };
                if let Some(close) = self.eat(TokenKind::RParen) {
                    return Err(diag::empty_in_list(open.span.to(close.span)));
                }
                if self.at_kw("SELECT") {
                    if !self.in_query {
                        return Err(diag::subquery_not_allowed(open.span.to(self.peek().span)));
                    }
                    let mut query = self.query(true)?;
                    let close = self.expect_close(open)?;
                    query.span = Span::new(open.span.start, close.span.end);
                    let span = Span::new(start, close.span.end);
                    let kind = ExprKind::InSubquery {
                        operand: Box::new(left.expr),
                        query: Box::new(query),
                        negated,
                    };
                    return self.node(kind, span, left.depth + 1);
                }
                let mut items = Vec::new();
                let mut depth = left.depth;
                loop {
                    let item = self.expr(0)?;
                    depth = depth.max(item.depth);
                    items.push(item.expr);
                    if self.eat(TokenKind::Comma).is_some() {
                        continue;
                    }
                    if self.peek().kind == TokenKind::RParen {
                        break;
                    }
                    let next = self.peek();
                    return Err(diag::expected_in_separator(&self.describe(next), next.span));
                }
                let close = self.bump();
                let span = Span::new(start, close.span.end);
                let kind = ExprKind::InList {
                    operand: Box::new(left.expr),
                    items,
                    negated,
                };
                self.node(kind, span, depth + 1)
            }
            Infix::Like {
                negated,
                case_insensitive,
            } => {
                let pattern = self.expr(LEVEL_COMPARE + 1)?;
                let mut span = Span::new(start, pattern.expr.span.end);
                let mut depth = 1 + left.depth.max(pattern.depth);
                let escape = if self.eat_kw("ESCAPE") {
                    let escape = self.expr(LEVEL_COMPARE + 1)?;
                    span.end = escape.expr.span.end;
                    depth = depth.max(1 + escape.depth);
                    Some(Box::new(escape.expr))
                } else {
                    None
                };
                let kind = ExprKind::Like {
                    operand: Box::new(left.expr),
                    pattern: Box::new(pattern.expr),
                    case_insensitive,
                    negated,
                    escape,
                };
                self.node(kind, span, depth)
            }
            Infix::Includes { negated } => {
                let Some(open) = self.eat(TokenKind::LParen) else {
                    let next = self.peek();
                    return Err(diag::expected_in_list(&self.describe(next), next.span));
                };
                if let Some(close) = self.eat(TokenKind::RParen) {
                    return Err(diag::empty_in_list(open.span.to(close.span)));
                }
                let mut items = Vec::new();
                let mut depth = left.depth;
                loop {
                    let item = self.expr(0)?;
                    depth = depth.max(item.depth);
                    items.push(item.expr);
                    if self.eat(TokenKind::Comma).is_none() {
                        break;
                    }
                }
                let close = self.expect_close(open)?;
                let span = Span::new(start, close.span.end);
                let kind = ExprKind::Includes {
                    operand: Box::new(left.expr),
                    items,
                    negated,
                };
                self.node(kind, span, depth + 1)
            }
        }
    }

    /// An operand: a literal, parameter, path, call, parenthesised expression, or a prefix
    /// operator applied to an operand.
    fn prefix(&mut self) -> PResult<Node> {
        let token = self.peek();
        let leaf = |kind: ExprKind| Node {
            expr: Expr {
                kind,
                span: token.span,
            },
            depth: 1,
        };
        match token.kind {
            TokenKind::String => {
                self.bump();
                Ok(leaf(ExprKind::Literal(Literal::String(unquote(
                    self.text(token),
                    '\'',
                )))))
            }
            TokenKind::Integer => {
                self.bump();
                Ok(leaf(ExprKind::Literal(Literal::Integer(
                    self.text(token).to_string(),
                ))))
            }
            TokenKind::Decimal => {
                self.bump();
                Ok(leaf(ExprKind::Literal(Literal::Decimal(
                    self.text(token).to_string(),
                ))))
            }
            TokenKind::Date => {
                self.bump();
                Ok(leaf(ExprKind::Literal(Literal::Date(
                    self.text(token).to_string(),
                ))))
            }
            TokenKind::DateTime => {
                self.bump();
                Ok(leaf(ExprKind::Literal(Literal::DateTime(
                    self.text(token).to_string(),
                ))))
            }
            TokenKind::Param => {
                self.bump();
                Ok(leaf(ExprKind::Param(param_name(self.text(token)))))
            }
            TokenKind::DateRange => {
                self.bump();
                let (name, n) = self.text(token).split_once(':').unwrap_or_default();
                Ok(leaf(ExprKind::Literal(Literal::DateRange {
                    name: name.to_ascii_uppercase(),
                    n: Some(n.to_owned()),
                })))
            }
            TokenKind::Global => self.global(),
            TokenKind::Minus => {
                self.bump();
                self.unary(UnaryOp::Neg, token, LEVEL_UNARY)
            }
            TokenKind::LParen => self.parenthesised(),
            TokenKind::QuotedName => self.path_expr(),
            TokenKind::Word => {
                let word = self.text(token);
                if word.eq_ignore_ascii_case("NOT") {
                    self.bump();
                    // NOT's operand is everything that binds tighter, comparisons included.
                    return self.unary(UnaryOp::Not, token, LEVEL_NOT + 1);
                }
                if word.eq_ignore_ascii_case("NULL") {
                    self.bump();
                    return Ok(leaf(ExprKind::Literal(Literal::Null)));
                }
                if word.eq_ignore_ascii_case("TRUE") || word.eq_ignore_ascii_case("FALSE") {
                    self.bump();
                    let value = word.eq_ignore_ascii_case("TRUE");
                    return Ok(leaf(ExprKind::Literal(Literal::Boolean(value))));
                }
                if is_reserved(word) {
                    return Err(self.expected_expression_error(token));
                }
                let next = self.peek_at(1);
                if next.kind == TokenKind::LParen {
                    return self.call();
                }
                if word.eq_ignore_ascii_case("CASE") && self.is_kw(next, "WHEN") {
                    return self.case();
                }
                if is_date_literal(word) && next.kind != TokenKind::Dot {
                    if DATE_N_LITERALS.iter().any(|n| n.eq_ignore_ascii_case(word)) {
                        return Err(diag::date_literal_needs_count(word, token.span));
                    }
                    self.bump();
                    return Ok(leaf(ExprKind::Literal(Literal::DateRange {
                        name: word.to_ascii_uppercase(),
                        n: None,
                    })));
                }
                self.path_expr()
            }
            _ => Err(self.expected_expression_error(token)),
        }
    }

    fn expected_expression_error(&self, token: Token) -> Diagnostic {
        let after = self
            .pos
            .checked_sub(1)
            .and_then(|at| self.tokens.get(at))
            .map(|prev| self.describe(*prev));
        let mut found = self.describe(token);
        let next = self.peek_at(1).kind;
        let used_as_name = matches!(
            next,
            TokenKind::Dot
                | TokenKind::Eq
                | TokenKind::NotEq
                | TokenKind::Lt
                | TokenKind::LtEq
                | TokenKind::Gt
                | TokenKind::GtEq
        );
        if token.kind == TokenKind::Word && used_as_name {
            found.push_str(&diag::keyword_as_name_hint(self.text(token)));
        }
        diag::expected_expression(after.as_deref(), &found, token.span)
    }

    fn unary(&mut self, op: UnaryOp, token: Token, operand_level: u8) -> PResult<Node> {
        let operand = self.expr(operand_level)?;
        let span = Span::new(token.span.start, operand.expr.span.end);
        let depth = operand.depth + 1;
        let kind = ExprKind::Unary {
            op,
            operand: Box::new(operand.expr),
        };
        self.node(kind, span, depth)
    }

    fn parenthesised(&mut self) -> PResult<Node> {
        let open = self.bump();
        if self.at_kw("SELECT") {
            return Err(diag::subquery_not_allowed(open.span.to(self.peek().span)));
        }
        let mut inner = self.expr(0)?;
        let close = self.expect_close(open)?;
        inner.expr.span = Span::new(open.span.start, close.span.end);
        Ok(inner)
    }

    fn expect_close(&mut self, open: Token) -> PResult<Token> {
        if let Some(close) = self.eat(TokenKind::RParen) {
            return Ok(close);
        }
        let next = self.peek();
        let opened_at = locate(self.src, open.span.start);
        Err(diag::unclosed_paren(
            &opened_at,
            &self.describe(next),
            next.span,
        ))
    }

    fn call(&mut self) -> PResult<Node> {
        let name_token = self.bump();
        let name = self.ident(name_token);
        // The `(`; the caller checked it is there.
        self.bump();
        self.enter()?;
        let mut depth = 1;
        let args = if self.eat(TokenKind::Star).is_some() {
            if self.peek().kind != TokenKind::RParen {
                let next = self.peek();
                return Err(diag::expected_close_after_star(
                    &self.describe(next),
                    next.span,
                ));
            }
            CallArgs::Star
        } else if self.peek().kind == TokenKind::RParen {
            CallArgs::List {
                distinct: false,
                items: Vec::new(),
            }
        } else {
            let distinct = self.eat_kw("DISTINCT");
            let mut items = Vec::new();
            loop {
                let item = self.expr(0)?;
                depth = depth.max(item.depth + 1);
                items.push(item.expr);
                if self.eat(TokenKind::Comma).is_none() {
                    break;
                }
            }
            if self.peek().kind != TokenKind::RParen {
                let next = self.peek();
                return Err(diag::expected_call_separator(
                    &self.describe(next),
                    next.span,
                ));
            }
            CallArgs::List { distinct, items }
        };
        let close = self.bump();
        self.leave();
        let span = Span::new(name.span.start, close.span.end);
        self.node(ExprKind::Call { name, args }, span, depth)
    }

    /// `CASE WHEN c THEN v [WHEN ...] [ELSE e] END`; the cursor is at `CASE`, followed by WHEN.
    fn case(&mut self) -> PResult<Node> {
        let case = self.bump();
        self.enter()?;
        let mut depth = 1;
        let mut branches = Vec::new();
        while self.eat_kw("WHEN") {
            let condition = self.expr(0)?;
            let then = self.peek();
            if !self.eat_kw("THEN") {
                return Err(diag::expected_case_word(
                    "THEN",
                    &self.describe(then),
                    then.span,
                ));
            }
            let value = self.expr(0)?;
            depth = depth.max(1 + condition.depth.max(value.depth));
            branches.push(CaseBranch {
                condition: condition.expr,
                value: value.expr,
            });
        }
        let otherwise = if self.eat_kw("ELSE") {
            let value = self.expr(0)?;
            depth = depth.max(1 + value.depth);
            Some(Box::new(value.expr))
        } else {
            None
        };
        let end = self.peek();
        if !self.eat_kw("END") {
            let expected = if otherwise.is_some() {
                "END"
            } else {
                "WHEN, ELSE or END"
            };
            return Err(diag::expected_case_word(
                expected,
                &self.describe(end),
                end.span,
            ));
        }
        self.leave();
        let span = Span::new(case.span.start, end.span.end);
        self.node(
            ExprKind::Case {
                branches,
                otherwise,
            },
            span,
            depth,
        )
    }

    /// `$User.id` or `$User.name`; the cursor is at the `$word` token.
    fn global(&mut self) -> PResult<Node> {
        let global = self.bump();
        let name = self.text(global);
        if !name.eq_ignore_ascii_case("$User") {
            return Err(diag::unknown_global(name, global.span));
        }
        if self.eat(TokenKind::Dot).is_none() {
            let next = self.peek();
            return Err(diag::expected_name_after_dot(
                &self.describe(next),
                next.span,
            ));
        }
        let field = self.peek();
        if field.kind != TokenKind::Word {
            return Err(diag::expected_name_after_dot(
                &self.describe(field),
                field.span,
            ));
        }
        self.bump();
        let span = Span::new(global.span.start, field.span.end);
        self.node(ExprKind::User(self.ident(field)), span, 1)
    }

    fn path_expr(&mut self) -> PResult<Node> {
        let path = self.path()?;
        let span = path.span;
        Ok(Node {
            expr: Expr {
                kind: ExprKind::Path(path),
                span,
            },
            depth: 1,
        })
    }

    /// A dotted name; the caller checked that the first token can start one.
    fn path(&mut self) -> PResult<Path> {
        let first = self.bump();
        let mut segments = vec![self.ident(first)];
        while self.eat(TokenKind::Dot).is_some() {
            let token = self.peek();
            match token.kind {
                TokenKind::Word | TokenKind::QuotedName => {
                    self.bump();
                    segments.push(self.ident(token));
                }
                _ => {
                    return Err(diag::expected_name_after_dot(
                        &self.describe(token),
                        token.span,
                    ))
                }
            }
        }
        let span = Span::new(first.span.start, self.prev_end());
        Ok(Path { segments, span })
    }

    /// A name from a word or quoted-name token.
    fn ident(&self, token: Token) -> Ident {
        let text = self.text(token);
        let name = match token.kind {
            TokenKind::QuotedName => unquote(text, '"'),
            _ => text.to_string(),
        };
        Ident {
            name,
            span: token.span,
        }
    }
}

/// Strips the surrounding quotes and undoubles inner ones (`'it''s'` → `it's`).
fn unquote(text: &str, quote: char) -> String {
    let inner = text
        .strip_prefix(quote)
        .and_then(|rest| rest.strip_suffix(quote))
        .unwrap_or(text);
    let mut buffer = [0; 4];
    let quote: &str = quote.encode_utf8(&mut buffer);
    if !inner.contains(quote) {
        return inner.to_owned();
    }
    inner.replace(&[quote, quote].concat(), quote)
}

/// The name of a `:name` token.
fn param_name(text: &str) -> String {
    text.strip_prefix(':').unwrap_or(text).to_string()
}
