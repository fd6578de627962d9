//! HOQS and expression-language lexer, parser, AST and diagnostics.
