//! The metadata model: modules, objects, fields, screens, validation and inheritance.
//!
//! This crate knows nothing of HTTP, git or PostgreSQL. It owns:
//! - the types of one snapshot of metadata ([`Model`] and below) and the key grammar ([`key`]);
//! - [`validate`], which reports every problem of a model as a [`Diagnostic`] with a precise
//!   [`Target`];
//! - the questions the planner, the query compiler and the data layer ask about inheritance and
//!   references ([`Model::effective_fields`], [`Model::concrete_subtypes`], ...);
//! - the edits the write routes make ([`Model::create_field`], ...), each returning a [`Change`]
//!   or an [`Error`] that names the key or target concerned;
//! - the JSON5 file layout ([`files`]), which is the model's own boundary.
//!
//! The meaning of the metadata for users (vendor keys, extension kinds) is in docs/metadata.md.

#![warn(missing_docs)]

mod diagnostics;
mod edit;
mod error;
mod expr;
pub mod files;
mod inherit;
pub mod key;
mod model;
mod rename;
mod target;
mod validate;

pub use diagnostics::{Code, Diagnostic, MAX_IDENTITY_LEN, MAX_LABEL_CHARS};
pub use error::{Error, ErrorKind};
pub use expr::check_expression;
pub use inherit::{EffectiveField, EffectiveRule, Reference, ReferenceKind};
pub use key::{FieldPath, KeyKind, KeyProblem, QualifiedName};
pub use model::{
    ExtensionKind, Field, FieldKind, Identity, Model, Module, Object, RollupFunction, Rule,
    ScalarType, Screen,
};
pub use target::{Action, Change, Target};
pub use validate::{new_problems, validate};
