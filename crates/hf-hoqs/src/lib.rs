//! HOQS type checker and SQL compiler.
