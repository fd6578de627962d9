//! The syntax tree of HOQS queries and of the expression language.
//!
//! Every node carries a byte [`Span`] into the source it was parsed from, so later stages
//! (name resolution, type checking, SQL compilation) can report problems at the right place.
//! The tree records only what was written: it knows nothing of objects, fields or types.

/// A half-open byte range `start..end` into the parsed source.
///
/// Byte offsets (not characters) keep slicing cheap; [`crate::location::locate`] turns an
/// offset into the line and UTF-16 column that the HTTP contract reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    /// The first byte of the node.
    pub start: usize,
    /// One past the last byte of the node.
    pub end: usize,
}

impl Span {
    /// Builds a span; kept as a function so call sites read `Span::new(a, b)`.
    pub fn new(start: usize, end: usize) -> Span {
        Span { start, end }
    }

    /// The smallest span covering both, used when a node is built from two children.
    pub fn to(self, other: Span) -> Span {
        Span::new(self.start.min(other.start), self.end.max(other.end))
    }
}

/// A name as written (field, lookup, module, object, alias or function name).
///
/// `name` holds the name without quotes: `"order"` in the source gives `order`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ident {
    /// The name, unquoted and with `""` turned back into `"`.
    pub name: String,
    /// Where the name (with its quotes, if any) was written.
    pub span: Span,
}

/// A dotted name: a field path through lookups (`account.owner.name`) or an object
/// reference in FROM (`crm.account`, `crm.opportunity.account`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Path {
    /// The segments in source order; never empty when produced by the parser.
    pub segments: Vec<Ident>,
    /// The whole path.
    pub span: Span,
}

impl Path {
    /// The segments joined with `.` and without quotes: the result key of a path item
    /// ("the path as written") and the form name resolution looks up.
    pub fn dotted(&self) -> String {
        let names: Vec<&str> = self.segments.iter().map(|s| s.name.as_str()).collect();
        names.join(".")
    }
}

/// An expression: a node kind and where it was written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expr {
    /// What the expression is.
    pub kind: ExprKind,
    /// The whole expression, including its parentheses when it was parenthesised.
    pub span: Span,
}

/// The expression forms of the language (see docs/formulas.md for the precedence table).
///
/// Parentheses leave no node of their own: the tree shape already says how operands group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExprKind {
    /// A constant written in the source.
    Literal(Literal),
    /// A `:name` parameter, bound from the request's `params`; holds the name without `:`.
    Param(String),
    /// A field path such as `amount` or `account.owner.name`.
    Path(Path),
    /// `-x` or `NOT x`.
    Unary {
        /// Which prefix operator.
        op: UnaryOp,
        /// The operand.
        operand: Box<Expr>,
    },
    /// An infix operator with two operands (arithmetic, `||`, comparison, AND, OR).
    Binary {
        /// Which operator.
        op: BinaryOp,
        /// The left operand.
        left: Box<Expr>,
        /// The right operand.
        right: Box<Expr>,
    },
    /// `x IS NULL` or `x IS NOT NULL`.
    IsNull {
        /// The tested value.
        operand: Box<Expr>,
        /// True for `IS NOT NULL`.
        negated: bool,
    },
    /// `x IN (a, b, ...)` or `x NOT IN (...)`; the list is never empty.
    InList {
        /// The tested value.
        operand: Box<Expr>,
        /// The candidate values.
        items: Vec<Expr>,
        /// True for `NOT IN`.
        negated: bool,
    },
    /// `x IN :param` or `x NOT IN :param`: the candidates are the elements of a parameter whose
    /// value is a JSON array (which, unlike a written list, may be empty). An extension of the
    /// core syntax.
    InArray {
        /// The tested value.
        operand: Box<Expr>,
        /// The parameter; always an [`ExprKind::Param`].
        array: Box<Expr>,
        /// True for `NOT IN`.
        negated: bool,
    },
    /// `x LIKE p`, `x ILIKE p`, optionally with NOT before the keyword.
    Like {
        /// The tested text.
        operand: Box<Expr>,
        /// The pattern (`%` and `_` wildcards, as in SQL).
        pattern: Box<Expr>,
        /// True for ILIKE (case-insensitive).
        case_insensitive: bool,
        /// True for `NOT LIKE` / `NOT ILIKE`.
        negated: bool,
        /// `ESCAPE <char>`: the character that makes the next `%` or `_` literal (SQL's default
        /// is `\\`).
        escape: Option<Box<Expr>>,
    },
    /// `operand [NOT] IN (SELECT ... FROM ...)`: a semi-join (an anti-join when negated).
    /// Only HOQS queries have it; expressions parsed alone refuse the subquery.
    InSubquery {
        /// The tested value.
        operand: Box<Expr>,
        /// The subquery; it selects one id or lookup field.
        query: Box<Query>,
        /// True for `NOT IN`.
        negated: bool,
    },
    /// `CASE WHEN c THEN v [WHEN ...] [ELSE e] END`.
    Case {
        /// The `WHEN ... THEN ...` pairs, in order (at least one).
        branches: Vec<CaseBranch>,
        /// The `ELSE` value; without it the value is NULL when no condition holds.
        otherwise: Option<Box<Expr>>,
    },
    /// `$User.<field>`: the caller (`id` or `name`).
    User(Ident),
    /// `operand INCLUDES (...)` or `EXCLUDES (...)` for multi-select picklists: each item is
    /// a text whose `;` joins keys that must all be present.
    Includes {
        /// The tested multi-select value.
        operand: Box<Expr>,
        /// The alternatives.
        items: Vec<Expr>,
        /// True for EXCLUDES.
        negated: bool,
    },
    /// A function or aggregate call `NAME(args)`; names are matched case-insensitively later.
    Call {
        /// The function name as written.
        name: Ident,
        /// The arguments.
        args: CallArgs,
    },
}

/// One `WHEN condition THEN value` of a CASE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaseBranch {
    /// The condition.
    pub condition: Expr,
    /// The value when the condition is TRUE (and no earlier one was).
    pub value: Expr,
}

/// The relative date literals (`THIS_MONTH`), in upper case; each stands for a range of days.
pub const DATE_LITERALS: &[&str] = &[
    "YESTERDAY",
    "TODAY",
    "TOMORROW",
    "LAST_WEEK",
    "THIS_WEEK",
    "NEXT_WEEK",
    "LAST_MONTH",
    "THIS_MONTH",
    "NEXT_MONTH",
    "LAST_QUARTER",
    "THIS_QUARTER",
    "NEXT_QUARTER",
    "LAST_YEAR",
    "THIS_YEAR",
    "NEXT_YEAR",
];

/// The relative date literals that take a count (`LAST_N_DAYS:30`), in upper case.
pub const DATE_N_LITERALS: &[&str] = &[
    "LAST_N_DAYS",
    "NEXT_N_DAYS",
    "N_DAYS_AGO",
    "LAST_N_WEEKS",
    "NEXT_N_WEEKS",
    "LAST_N_MONTHS",
    "NEXT_N_MONTHS",
    "LAST_N_QUARTERS",
    "LAST_N_YEARS",
];

/// Whether a bare word is a relative date literal, with or without a count (case-insensitive).
pub fn is_date_literal(word: &str) -> bool {
    // Every name starts with one of these letters, which rules out most field names at once
    // (this runs for every name in an expression).
    let first = word.as_bytes().first().map(u8::to_ascii_uppercase);
    matches!(first, Some(b'L' | b'N' | b'T' | b'Y'))
        && DATE_LITERALS
            .iter()
            .chain(DATE_N_LITERALS)
            .any(|name| name.eq_ignore_ascii_case(word))
}

/// The argument list of a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallArgs {
    /// `(*)`, as in `COUNT(*)`.
    Star,
    /// `(a, b)`, `()` or `(DISTINCT a)`.
    List {
        /// True when the list started with DISTINCT (`COUNT(DISTINCT x)`); never true for `()`.
        distinct: bool,
        /// The arguments in order.
        items: Vec<Expr>,
    },
}

/// A literal constant.
///
/// Numbers, dates and datetimes keep their exact text so nothing is lost or overflows
/// before the type checker decides what they are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Literal {
    /// `'text'`; holds the text with `''` turned back into `'`.
    String(String),
    /// Digits only, as written (`42`, `007`, or a number with 400 digits).
    Integer(String),
    /// Digits, a point and digits, as written (`12.50`).
    Decimal(String),
    /// `TRUE` or `FALSE`.
    Boolean(bool),
    /// `NULL`.
    Null,
    /// A date `2024-01-31`, already checked to be a real calendar day.
    Date(String),
    /// A datetime `2024-01-31T10:00:00Z` or with an offset (`+02:00`), already checked.
    DateTime(String),
    /// A relative date literal standing for a range of days: `THIS_MONTH` (`n` is `None`) or
    /// `LAST_N_DAYS:30`. `name` is upper case; `n` the digits as written.
    DateRange {
        /// The literal's name in upper case.
        name: String,
        /// The count of a `..._N_...` literal.
        n: Option<String>,
    },
}

/// Prefix operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnaryOp {
    /// Arithmetic negation `-x`.
    Neg,
    /// Logical negation `NOT x`.
    Not,
}

/// Infix operators with two operands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `||`, text concatenation.
    Concat,
    /// `=`
    Eq,
    /// `!=` or `<>`
    NotEq,
    /// `<`
    Lt,
    /// `<=`
    LtEq,
    /// `>`
    Gt,
    /// `>=`
    GtEq,
    /// `AND`
    And,
    /// `OR`
    Or,
}

impl BinaryOp {
    /// The operator as the printer writes it (`!=` for both spellings of "not equal").
    pub fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Concat => "||",
            BinaryOp::Eq => "=",
            BinaryOp::NotEq => "!=",
            BinaryOp::Lt => "<",
            BinaryOp::LtEq => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::GtEq => ">=",
            BinaryOp::And => "AND",
            BinaryOp::Or => "OR",
        }
    }

    /// True for the comparison operators, which do not chain (`a < b < c` is an error).
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Eq
                | BinaryOp::NotEq
                | BinaryOp::Lt
                | BinaryOp::LtEq
                | BinaryOp::Gt
                | BinaryOp::GtEq
        )
    }
}

impl Expr {
    /// Calls `visit` on this expression and then on every sub-expression, parents first.
    ///
    /// Later stages use it for whole-tree checks (unknown function names, aggregates in
    /// WHERE) without writing their own traversal. The recursion is bounded by the parser's
    /// nesting limit.
    pub fn walk(&self, visit: &mut dyn FnMut(&Expr)) {
        visit(self);
        match &self.kind {
            ExprKind::Literal(_) | ExprKind::Param(_) | ExprKind::Path(_) => {}
            ExprKind::Unary { operand, .. } | ExprKind::IsNull { operand, .. } => {
                operand.walk(visit)
            }
            ExprKind::Binary { left, right, .. } => {
                left.walk(visit);
                right.walk(visit);
            }
            ExprKind::InList { operand, items, .. } => {
                operand.walk(visit);
                for item in items {
                    item.walk(visit);
                }
            }
            ExprKind::Like {
                operand,
                pattern,
                escape,
                ..
            } => {
                operand.walk(visit);
                pattern.walk(visit);
                if let Some(escape) = escape {
                    escape.walk(visit);
                }
            }
            ExprKind::InSubquery { operand, query, .. } => {
                operand.walk(visit);
                query.walk_exprs(visit);
            }
            ExprKind::Case {
                branches,
                otherwise,
            } => {
                for branch in branches {
                    branch.condition.walk(visit);
                    branch.value.walk(visit);
                }
                if let Some(otherwise) = otherwise {
                    otherwise.walk(visit);
                }
            }
            ExprKind::User(_) => {}
            ExprKind::Includes { operand, items, .. } => {
                operand.walk(visit);
                for item in items {
                    item.walk(visit);
                }
            }
            ExprKind::InArray { operand, array, .. } => {
                operand.walk(visit);
                array.walk(visit);
            }
            ExprKind::Call { args, .. } => {
                if let CallArgs::List { items, .. } = args {
                    for item in items {
                        item.walk(visit);
                    }
                }
            }
        }
    }
}

/// A HOQS query (`SELECT ... FROM ...`), also used for child-relationship subqueries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Query {
    /// True for `SELECT DISTINCT`.
    pub distinct: bool,
    /// The select list; never empty when produced by the parser.
    pub select: Vec<SelectItem>,
    /// The FROM target: `<module>.<object>` for a query, and for a subquery the child
    /// relationship `<module>.<object>.<lookupField>` (or `<module>.<object>` when one lookup
    /// of that object targets the parent). Which object it names is decided by `hf-hoqs`.
    pub from: Path,
    /// The WHERE condition.
    pub where_clause: Option<Expr>,
    /// The GROUP BY expressions (empty when absent).
    pub group_by: Vec<Expr>,
    /// The HAVING condition.
    pub having: Option<Expr>,
    /// The ORDER BY items (empty when absent).
    pub order_by: Vec<OrderItem>,
    /// `LIMIT n`; the default and maximum are applied by `hf-hoqs`.
    pub limit: Option<RowCount>,
    /// `OFFSET n`.
    pub offset: Option<RowCount>,
    /// The whole query (for a subquery, including its parentheses).
    pub span: Span,
}

impl Query {
    /// Calls `visit` on every expression of this query and of its subqueries, each tree
    /// parents first, in source order of the clauses.
    pub fn walk_exprs(&self, visit: &mut dyn FnMut(&Expr)) {
        for item in &self.select {
            match &item.value {
                SelectValue::Expr(expr) => expr.walk(visit),
                SelectValue::Subquery(query) => query.walk_exprs(visit),
            }
        }
        if let Some(expr) = &self.where_clause {
            expr.walk(visit);
        }
        for expr in &self.group_by {
            expr.walk(visit);
        }
        if let Some(expr) = &self.having {
            expr.walk(visit);
        }
        for item in &self.order_by {
            item.expr.walk(visit);
        }
    }
}

/// One item of the select list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SelectItem {
    /// The selected value.
    pub value: SelectValue,
    /// The `AS alias`, if written.
    pub alias: Option<Ident>,
    /// The exact source text of the value (without `AS alias`); see [`SelectItem::key`].
    pub text: String,
    /// The whole item, alias included.
    pub span: Span,
}

/// What a select item selects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SelectValue {
    /// A path, an aggregate or any other expression.
    Expr(Expr),
    /// A child-relationship subquery `(SELECT ... FROM <relationship> ...)`, returned as a
    /// JSON array per record.
    Subquery(Box<Query>),
}

impl SelectItem {
    /// The key of this item in each result record (the path as written, or the alias; an
    /// unaliased aggregate is its text in lower case without spaces).
    ///
    /// The alias if there is one; for a path, the path as written (`account.name`); for a
    /// subquery, the child object key (the second FROM segment); for any other expression,
    /// its source text in lower case without spaces (`count(*)`, `sum(amount)`), with
    /// string literals and quoted names kept as written.
    pub fn key(&self) -> String {
        if let Some(alias) = &self.alias {
            return alias.name.clone();
        }
        match &self.value {
            SelectValue::Expr(Expr {
                kind: ExprKind::Path(path),
                ..
            }) => path.dotted(),
            SelectValue::Subquery(query) => match query.from.segments.get(1) {
                Some(object) => object.name.clone(),
                None => query.from.dotted(),
            },
            SelectValue::Expr(_) => crate::lexer::compact_text(&self.text),
        }
    }
}

/// One ORDER BY item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderItem {
    /// What to sort by.
    pub expr: Expr,
    /// ASC or DESC if written (absent means ascending).
    pub direction: Option<Direction>,
    /// NULLS FIRST or NULLS LAST if written (absent means PostgreSQL's default).
    pub nulls: Option<NullsOrder>,
    /// The whole item.
    pub span: Span,
}

/// Sort direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// `ASC`
    Asc,
    /// `DESC`
    Desc,
}

/// Where NULLs sort.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NullsOrder {
    /// `NULLS FIRST`
    First,
    /// `NULLS LAST`
    Last,
}

/// The value of LIMIT or OFFSET.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowCount {
    /// A number or a parameter.
    pub value: RowCountValue,
    /// Where it was written.
    pub span: Span,
}

/// A LIMIT/OFFSET value: digits kept as text (so huge numbers cannot overflow here) or a
/// parameter bound at run time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RowCountValue {
    /// Digits as written.
    Integer(String),
    /// A `:name` parameter; holds the name without `:`.
    Param(String),
}
