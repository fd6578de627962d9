//! Property tests: random well-formed trees print to text that parses back to the same tree.

use hf_hoqs_syntax::ast::{
    BinaryOp, CallArgs, CaseBranch, Direction, Expr, ExprKind, Ident, Literal, NullsOrder,
    OrderItem, Path, Query, RowCount, RowCountValue, SelectItem, SelectValue, Span, UnaryOp,
    DATE_LITERALS, DATE_N_LITERALS,
};
use hf_hoqs_syntax::printer::{print, print_expr};
use hf_hoqs_syntax::{is_reserved, parse_expression, parse_query};
use proptest::prelude::*;

use crate::support::{clear_expr, clear_query};

fn expr(kind: ExprKind) -> Expr {
    Expr {
        kind,
        span: Span::default(),
    }
}

fn ident(name: String) -> Ident {
    Ident {
        name,
        span: Span::default(),
    }
}

/// Any name a quoted name can hold: plain words, keywords, spaces, quotes, emoji.
fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z][a-z0-9_]{0,8}",
        Just("order".to_string()),
        Just("SELECT".to_string()),
        Just("createdAt".to_string()),
        Just("desc".to_string()),
        Just("nulls".to_string()),
        Just("today".to_string()),
        Just("case".to_string()),
        Just("escape".to_string()),
        Just("includes".to_string()),
        "[^\u{0}]{1,6}",
        Just("a\"b".to_string()),
        Just("x y".to_string()),
    ]
}

/// Function names must be plain, non-reserved words.
fn function_name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("COUNT".to_string()),
        Just("upper".to_string()),
        Just("IF".to_string()),
        // Functions of the newer syntax, each a plain call to the parser.
        Just("REGEX".to_string()),
        Just("TOLABEL".to_string()),
        Just("contains".to_string()),
        Just("STARTS_WITH".to_string()),
        Just("ENDS_WITH".to_string()),
        "[A-Za-z][A-Za-z0-9_]{0,6}",
    ]
    .prop_filter("reserved", |name| !is_reserved(name))
}

fn path(max_segments: usize) -> impl Strategy<Value = Path> {
    prop::collection::vec(name(), 1..=max_segments).prop_map(|names| Path {
        segments: names.into_iter().map(ident).collect(),
        span: Span::default(),
    })
}

fn literal() -> impl Strategy<Value = Literal> {
    prop_oneof![
        "[^\u{0}]{0,8}".prop_map(Literal::String),
        Just(Literal::String(
            "it's -- /* not a comment */ ; \\ \\u0041".to_string()
        )),
        "[0-9]{1,30}".prop_map(Literal::Integer),
        "[0-9]{1,5}\\.[0-9]{1,5}".prop_map(Literal::Decimal),
        any::<bool>().prop_map(Literal::Boolean),
        Just(Literal::Null),
        (1u32..=9999, 1u32..=12, 1u32..=28)
            .prop_map(|(y, m, d)| Literal::Date(format!("{y:04}-{m:02}-{d:02}"))),
        Just(Literal::DateTime(
            "2024-02-29T23:59:59.123456+05:30".to_string()
        )),
        Just(Literal::DateTime("2024-01-31T10:00:00Z".to_string())),
        prop::sample::select(DATE_LITERALS).prop_map(|name| Literal::DateRange {
            name: name.to_owned(),
            n: None
        }),
        (prop::sample::select(DATE_N_LITERALS), "[0-9]{1,4}").prop_map(|(name, n)| {
            Literal::DateRange {
                name: name.to_owned(),
                n: Some(n),
            }
        }),
    ]
}

fn leaf() -> impl Strategy<Value = Expr> {
    prop_oneof![
        literal().prop_map(|literal| expr(ExprKind::Literal(literal))),
        "[a-z_][a-z0-9_]{0,6}".prop_map(|name| expr(ExprKind::Param(name))),
        path(3).prop_map(|path| expr(ExprKind::Path(path))),
        prop::sample::select(vec!["id", "name"])
            .prop_map(|field| expr(ExprKind::User(ident(field.to_owned())))),
    ]
}

const BINARY_OPS: &[BinaryOp] = &[
    BinaryOp::Add,
    BinaryOp::Sub,
    BinaryOp::Mul,
    BinaryOp::Div,
    BinaryOp::Concat,
    BinaryOp::Eq,
    BinaryOp::NotEq,
    BinaryOp::Lt,
    BinaryOp::LtEq,
    BinaryOp::Gt,
    BinaryOp::GtEq,
    BinaryOp::And,
    BinaryOp::Or,
];

fn any_expr() -> impl Strategy<Value = Expr> {
    leaf().prop_recursive(6, 64, 4, |inner| {
        let boxed = || inner.clone().prop_map(Box::new);
        prop_oneof![
            (
                prop::sample::select(vec![UnaryOp::Neg, UnaryOp::Not]),
                boxed()
            )
                .prop_map(|(op, operand)| expr(ExprKind::Unary { op, operand })),
            (prop::sample::select(BINARY_OPS), boxed(), boxed())
                .prop_map(|(op, left, right)| expr(ExprKind::Binary { op, left, right })),
            (boxed(), any::<bool>())
                .prop_map(|(operand, negated)| expr(ExprKind::IsNull { operand, negated })),
            (
                boxed(),
                prop::collection::vec(inner.clone(), 1..4),
                any::<bool>()
            )
                .prop_map(|(operand, items, negated)| expr(ExprKind::InList {
                    operand,
                    items,
                    negated
                })),
            (boxed(), "[a-z_][a-z0-9_]{0,6}", any::<bool>()).prop_map(
                |(operand, name, negated)| expr(ExprKind::InArray {
                    operand,
                    array: Box::new(expr(ExprKind::Param(name))),
                    negated
                })
            ),
            (
                boxed(),
                boxed(),
                any::<bool>(),
                any::<bool>(),
                prop::option::of(boxed())
            )
                .prop_map(|(operand, pattern, case_insensitive, negated, escape)| {
                    expr(ExprKind::Like {
                        operand,
                        pattern,
                        case_insensitive,
                        negated,
                        escape,
                    })
                }),
            (
                boxed(),
                prop::collection::vec(inner.clone(), 1..3),
                any::<bool>()
            )
                .prop_map(|(operand, items, negated)| expr(ExprKind::Includes {
                    operand,
                    items,
                    negated
                })),
            (
                prop::collection::vec((inner.clone(), inner.clone()), 1..3),
                prop::option::of(boxed())
            )
                .prop_map(|(branches, otherwise)| expr(ExprKind::Case {
                    branches: branches
                        .into_iter()
                        .map(|(condition, value)| CaseBranch { condition, value })
                        .collect(),
                    otherwise
                })),
            (
                function_name(),
                prop::collection::vec(inner.clone(), 0..3),
                any::<bool>()
            )
                .prop_map(|(name, items, distinct)| {
                    let distinct = distinct && !items.is_empty();
                    expr(ExprKind::Call {
                        name: ident(name),
                        args: CallArgs::List { distinct, items },
                    })
                }),
            function_name().prop_map(|name| expr(ExprKind::Call {
                name: ident(name),
                args: CallArgs::Star
            })),
        ]
    })
}

fn row_count() -> impl Strategy<Value = Option<RowCount>> {
    prop::option::of(
        prop_oneof![
            "[0-9]{1,25}".prop_map(RowCountValue::Integer),
            "[a-z][a-z0-9_]{0,5}".prop_map(RowCountValue::Param),
        ]
        .prop_map(|value| RowCount {
            value,
            span: Span::default(),
        }),
    )
}

fn order_item() -> impl Strategy<Value = OrderItem> {
    (
        any_expr(),
        prop::option::of(prop::sample::select(vec![Direction::Asc, Direction::Desc])),
        prop::option::of(prop::sample::select(vec![
            NullsOrder::First,
            NullsOrder::Last,
        ])),
    )
        .prop_map(|(expr, direction, nulls)| OrderItem {
            expr,
            direction,
            nulls,
            span: Span::default(),
        })
}

fn select_item(subquery: Option<BoxedStrategy<Query>>) -> BoxedStrategy<SelectItem> {
    let value = match subquery {
        Some(subquery) => prop_oneof![
            3 => any_expr().prop_map(SelectValue::Expr),
            1 => subquery.prop_map(|query| SelectValue::Subquery(Box::new(query))),
        ]
        .boxed(),
        None => any_expr().prop_map(SelectValue::Expr).boxed(),
    };
    (value, prop::option::of(name()))
        .prop_map(|(value, alias)| SelectItem {
            value,
            alias: alias.map(ident),
            text: String::new(),
            span: Span::default(),
        })
        .boxed()
}

fn query_with(
    from_segments: std::ops::RangeInclusive<usize>,
    subquery: Option<BoxedStrategy<Query>>,
) -> BoxedStrategy<Query> {
    let from = prop::collection::vec(name(), from_segments).prop_map(|names| Path {
        segments: names.into_iter().map(ident).collect(),
        span: Span::default(),
    });
    (
        any::<bool>(),
        prop::collection::vec(select_item(subquery), 1..4),
        from,
        prop::option::of(any_expr()),
        prop::collection::vec(any_expr(), 0..3),
        prop::option::of(any_expr()),
        prop::collection::vec(order_item(), 0..3),
        row_count(),
        row_count(),
    )
        .prop_map(
            |(distinct, select, from, where_clause, group_by, having, order_by, limit, offset)| {
                Query {
                    distinct,
                    select,
                    from,
                    where_clause,
                    group_by,
                    having,
                    order_by,
                    limit,
                    offset,
                    span: Span::default(),
                }
            },
        )
        .boxed()
}

fn any_query() -> BoxedStrategy<Query> {
    let semi_join = (
        any_expr(),
        query_with(2..=2, None),
        any::<bool>(),
        any_expr(),
    )
        .prop_map(|(operand, query, negated, other)| {
            let test = expr(ExprKind::InSubquery {
                operand: Box::new(operand),
                query: Box::new(query),
                negated,
            });
            expr(ExprKind::Binary {
                op: BinaryOp::And,
                left: Box::new(test),
                right: Box::new(other),
            })
        });
    (
        query_with(2..=2, Some(query_with(2..=3, None))),
        prop::option::of(semi_join),
    )
        .prop_map(|(mut query, semi_join)| {
            if semi_join.is_some() {
                query.where_clause = semi_join;
            }
            query
        })
        .boxed()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn printed_expressions_parse_back(original in any_expr()) {
        let printed = print_expr(&original);
        let result = parse_expression(&printed);
        prop_assert!(result.diagnostics.is_empty(), "{printed}\n{:?}", result.diagnostics);
        let mut reparsed = result.expr.unwrap();
        clear_expr(&mut reparsed);
        prop_assert_eq!(reparsed, original, "{}", printed);
    }

    #[test]
    fn printed_queries_parse_back(original in any_query()) {
        let printed = print(&original);
        let result = parse_query(&printed);
        prop_assert!(result.diagnostics.is_empty(), "{printed}\n{:?}", result.diagnostics);
        let mut reparsed = result.query.unwrap();
        clear_query(&mut reparsed);
        prop_assert_eq!(reparsed, original, "{}", printed);
    }
}
