//! The metadata model: modules, objects, fields, screens, validation and inheritance.
//!
//! This crate knows nothing of HTTP or git, and of PostgreSQL only the type each scalar type is
//! stored as (the contract fixes it). It owns:
//! - the types of one snapshot of metadata ([`Model`] and below) and the key grammar ([`key`]);
//! - [`validate`], which reports every problem of a model as a [`Diagnostic`] with a precise
//!   [`Target`];
//! - the questions the planner, the query compiler and the data layer ask about inheritance and
//!   references ([`Model::effective_fields`], [`Model::concrete_subtypes`], ...);
//! - the edits the write routes make ([`Model::create_field`], ...), each returning a [`Change`]
//!   or an [`Error`] that names the key or target concerned;
//! - the one value grammar ([`ScalarType::parse_json`], [`ScalarType::sql_type`]): what a value of
//!   each scalar type may be and the PostgreSQL type it is stored as, for records, query
//!   parameters and the DDL alike;
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
mod value;

pub use diagnostics::{Code, Diagnostic, MAX_IDENTITY_LEN, MAX_LABEL_CHARS};
pub use error::{Error, ErrorKind};
pub use expr::check_expression;
pub use inherit::{EffectiveField, EffectiveRule, Reference, ReferenceKind};
pub use key::{FieldPath, KeyKind, KeyProblem, QualifiedName};
pub use model::{
    ExtensionKind, Field, FieldKind, Identity, Model, Module, Object, PicklistValue,
    RollupFunction, Rule, ScalarType, Screen,
};
pub use target::{Action, Change, Target};
pub use validate::{new_problems, validate};
pub use value::{is_picklist_key, MAX_JSON_DEPTH};
