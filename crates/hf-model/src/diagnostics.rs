//! Problems found by validation, as data.
//!
//! Validation never stops at the first problem: it returns every [`Diagnostic`], each with a
//! stable [`Code`], the [`Target`] it concerns, the property of that target at fault, and an
//! English message. All message texts live in this file.

use std::fmt;

use crate::key::{KeyKind, KeyProblem, QualifiedName};
use crate::model::{RollupFunction, ScalarType};
use crate::target::Target;

/// One problem in a model.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Diagnostic {
    /// What kind of problem; stable, for programs.
    pub code: Code,
    /// The item at fault.
    pub target: Target,
    /// The property of the item at fault (`extends`, `lookupTarget`...), when one can be named.
    pub property: Option<&'static str>,
    /// What is wrong, in English, for people.
    pub message: String,
}

impl Diagnostic {
    /// The file, relative to the metadata directory, that holds the item at fault.
    pub fn file(&self) -> String {
        self.target.file()
    }

    /// An `INVALID_EXPRESSION` problem found by a checker outside this crate (the HOQS
    /// compiler knows the types of expressions; this crate only their syntax and names):
    /// `problem` says what is wrong and where in the text.
    pub fn invalid_expression(target: Target, property: &'static str, problem: &str) -> Self {
        invalid_expression(target, property, problem)
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} [{}] {}", self.target, self.code.name(), self.message)
    }
}

/// The kinds of problem validation reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Code {
    /// A key breaks the key grammar or is reserved (`INVALID_KEY`).
    InvalidKey,
    /// A label is longer than [`MAX_LABEL_CHARS`].
    LabelTooLong,
    /// A label is empty or only spaces.
    EmptyLabel,
    /// A label holds a control character, or a description one other than a line break or tab.
    ControlCharacter,
    /// An identity colour or icon is not a short kebab-case name.
    InvalidIdentity,
    /// `extends` names an object that does not exist (`INVALID_REFERENCE`).
    MissingParent,
    /// Following `extends` comes back to the object itself.
    ExtendsCycle,
    /// `extensionKind` is set on an object that extends nothing.
    ExtensionWithoutParent,
    /// A field redeclares a key the object inherits.
    RedefinedField,
    /// A rule redeclares a key the object inherits.
    RedefinedRule,
    /// A lookup's target object does not exist (`INVALID_REFERENCE`).
    MissingLookupTarget,
    /// A lookup targets an abstract object, which has no records to point at.
    LookupToAbstract,
    /// A rollup's `source` names an object or field that does not exist (`INVALID_REFERENCE`).
    MissingRollupSource,
    /// A rollup's `source` field is not a lookup.
    RollupSourceNotLookup,
    /// A rollup's `source` lookup points at another object than the rollup's.
    RollupSourceMismatch,
    /// A rollup other than `count` has no `field`.
    RollupFieldRequired,
    /// A rollup's `field` is not a field of the source object.
    MissingRollupField,
    /// A rollup's `field` has a type its function cannot aggregate.
    RollupFieldType,
    /// A rule's `field` is not a field of the object.
    MissingRuleField,
    /// A formula, rule assertion or rollup filter is not a valid expression.
    InvalidExpression,
    /// A screen's `hfxVersion` is not a known HFX version.
    InvalidHfxVersion,
    /// `renamedFrom` is not a valid key of the item's kind, or is the item's own key.
    InvalidRenameHint,
    /// A picklist's `values` or `defaultValue` is wrong: no choices, a key that breaks the key
    /// grammar or repeats, choices on a type that has none, a default that is not a choice.
    InvalidPicklist,
}

impl Code {
    /// Every code, in declaration order (documentation and the HTTP layer list them).
    pub const ALL: &'static [Code] = &[
        Code::InvalidKey,
        Code::LabelTooLong,
        Code::EmptyLabel,
        Code::ControlCharacter,
        Code::InvalidIdentity,
        Code::MissingParent,
        Code::ExtendsCycle,
        Code::ExtensionWithoutParent,
        Code::RedefinedField,
        Code::RedefinedRule,
        Code::MissingLookupTarget,
        Code::LookupToAbstract,
        Code::MissingRollupSource,
        Code::RollupSourceNotLookup,
        Code::RollupSourceMismatch,
        Code::RollupFieldRequired,
        Code::MissingRollupField,
        Code::RollupFieldType,
        Code::MissingRuleField,
        Code::InvalidExpression,
        Code::InvalidHfxVersion,
        Code::InvalidRenameHint,
        Code::InvalidPicklist,
    ];

    /// The code in SCREAMING_SNAKE_CASE, stable across versions.
    pub fn name(self) -> &'static str {
        match self {
            Code::InvalidKey => "INVALID_KEY",
            Code::LabelTooLong => "LABEL_TOO_LONG",
            Code::EmptyLabel => "EMPTY_LABEL",
            Code::ControlCharacter => "CONTROL_CHARACTER",
            Code::InvalidIdentity => "INVALID_IDENTITY",
            Code::MissingParent => "MISSING_PARENT",
            Code::ExtendsCycle => "EXTENDS_CYCLE",
            Code::ExtensionWithoutParent => "EXTENSION_WITHOUT_PARENT",
            Code::RedefinedField => "REDEFINED_FIELD",
            Code::RedefinedRule => "REDEFINED_RULE",
            Code::MissingLookupTarget => "MISSING_LOOKUP_TARGET",
            Code::LookupToAbstract => "LOOKUP_TO_ABSTRACT",
            Code::MissingRollupSource => "MISSING_ROLLUP_SOURCE",
            Code::RollupSourceNotLookup => "ROLLUP_SOURCE_NOT_LOOKUP",
            Code::RollupSourceMismatch => "ROLLUP_SOURCE_MISMATCH",
            Code::RollupFieldRequired => "ROLLUP_FIELD_REQUIRED",
            Code::MissingRollupField => "MISSING_ROLLUP_FIELD",
            Code::RollupFieldType => "ROLLUP_FIELD_TYPE",
            Code::MissingRuleField => "MISSING_RULE_FIELD",
            Code::InvalidExpression => "INVALID_EXPRESSION",
            Code::InvalidHfxVersion => "INVALID_HFX_VERSION",
            Code::InvalidRenameHint => "INVALID_RENAME_HINT",
            Code::InvalidPicklist => "INVALID_PICKLIST",
        }
    }

    /// Whether the problem is a reference to something missing; the contract answers those with
    /// `422 INVALID_REFERENCE`.
    pub fn is_missing_reference(self) -> bool {
        matches!(
            self,
            Code::MissingParent
                | Code::MissingLookupTarget
                | Code::MissingRollupSource
                | Code::MissingRollupField
                | Code::MissingRuleField
        )
    }
}

/// The longest label, in characters.
pub const MAX_LABEL_CHARS: usize = 256;

/// The longest identity colour or icon name, in bytes.
pub const MAX_IDENTITY_LEN: usize = 64;

fn diagnostic(
    code: Code,
    target: Target,
    property: Option<&'static str>,
    message: String,
) -> Diagnostic {
    Diagnostic {
        code,
        target,
        property,
        message,
    }
}

pub(crate) fn invalid_key(
    target: Target,
    kind: KeyKind,
    key: &str,
    problem: KeyProblem,
) -> Diagnostic {
    let message = format!("{kind} `{key}` {problem}");
    diagnostic(Code::InvalidKey, target, Some(kind.property()), message)
}

pub(crate) fn label_too_long(target: Target, property: &'static str, chars: usize) -> Diagnostic {
    let message = format!("{property} has {chars} characters; the limit is {MAX_LABEL_CHARS}");
    diagnostic(Code::LabelTooLong, target, Some(property), message)
}

pub(crate) fn empty_label(target: Target, property: &'static str) -> Diagnostic {
    let message =
        format!("{property}: a label is empty or only spaces; labels name things to people");
    diagnostic(Code::EmptyLabel, target, Some(property), message)
}

pub(crate) fn control_character(
    target: Target,
    property: &'static str,
    index: usize,
    c: char,
) -> Diagnostic {
    let message = format!(
        "{property} holds the control character U+{:04X} at character {}; labels hold none, descriptions only line breaks and tabs",
        u32::from(c),
        index + 1
    );
    diagnostic(Code::ControlCharacter, target, Some(property), message)
}

pub(crate) fn invalid_identity(target: Target, property: &'static str, value: &str) -> Diagnostic {
    let shown: String = value.chars().take(80).collect();
    let message = format!(
        "{property} `{shown}` must be a kebab-case name of at most {MAX_IDENTITY_LEN} characters"
    );
    diagnostic(Code::InvalidIdentity, target, Some(property), message)
}

pub(crate) fn missing_parent(target: Target, parent: &QualifiedName) -> Diagnostic {
    let message = format!("extends `{parent}`, which does not exist");
    diagnostic(Code::MissingParent, target, Some("extends"), message)
}

pub(crate) fn extends_cycle(target: Target, cycle: &[QualifiedName]) -> Diagnostic {
    let path: Vec<String> = cycle.iter().map(ToString::to_string).collect();
    let message = format!("extends forms a cycle: {}", path.join(" -> "));
    diagnostic(Code::ExtendsCycle, target, Some("extends"), message)
}

pub(crate) fn extension_without_parent(target: Target) -> Diagnostic {
    let message = "extensionKind is set but the object extends nothing".to_owned();
    diagnostic(
        Code::ExtensionWithoutParent,
        target,
        Some("extensionKind"),
        message,
    )
}

pub(crate) fn redefined_field(target: Target, declared_on: &QualifiedName) -> Diagnostic {
    let message = format!(
        "field `{}` is already inherited from `{declared_on}`; a subtype may not redefine it",
        target.key()
    );
    diagnostic(Code::RedefinedField, target, None, message)
}

pub(crate) fn redefined_rule(target: Target, declared_on: &QualifiedName) -> Diagnostic {
    let message = format!(
        "rule `{}` is already inherited from `{declared_on}`; a subtype may not redefine it",
        target.key()
    );
    diagnostic(Code::RedefinedRule, target, None, message)
}

pub(crate) fn missing_lookup_target(target: Target, lookup: &QualifiedName) -> Diagnostic {
    let message = format!("lookupTarget `{lookup}` does not exist");
    diagnostic(
        Code::MissingLookupTarget,
        target,
        Some("lookupTarget"),
        message,
    )
}

pub(crate) fn lookup_to_abstract(target: Target, lookup: &QualifiedName) -> Diagnostic {
    let message = format!("lookupTarget `{lookup}` is abstract and has no records to refer to");
    diagnostic(
        Code::LookupToAbstract,
        target,
        Some("lookupTarget"),
        message,
    )
}

pub(crate) fn missing_rollup_source(target: Target, source: &str, what: &str) -> Diagnostic {
    let message = format!("source `{source}`: {what} does not exist");
    diagnostic(Code::MissingRollupSource, target, Some("source"), message)
}

pub(crate) fn rollup_source_not_lookup(target: Target, source: &str, kind: &str) -> Diagnostic {
    let message = format!("source `{source}` is a {kind} field, not a lookup");
    diagnostic(Code::RollupSourceNotLookup, target, Some("source"), message)
}

pub(crate) fn rollup_source_mismatch(
    target: Target,
    source: &str,
    lookup_target: &QualifiedName,
    object: &QualifiedName,
) -> Diagnostic {
    let message = format!(
        "source `{source}` is a lookup to `{lookup_target}`, not to `{object}` or one of its parents"
    );
    diagnostic(Code::RollupSourceMismatch, target, Some("source"), message)
}

pub(crate) fn rollup_field_required(target: Target, function: RollupFunction) -> Diagnostic {
    let message = format!("a {function} rollup needs `field`, the source field it aggregates");
    diagnostic(Code::RollupFieldRequired, target, Some("field"), message)
}

pub(crate) fn missing_rollup_field(
    target: Target,
    field: &str,
    source: &QualifiedName,
) -> Diagnostic {
    let message = format!("field `{field}` is not a field of `{source}`");
    diagnostic(Code::MissingRollupField, target, Some("field"), message)
}

pub(crate) fn rollup_field_type(
    target: Target,
    function: RollupFunction,
    field: &str,
    field_type: ScalarType,
) -> Diagnostic {
    let needs = match function {
        RollupFunction::Sum | RollupFunction::Avg => "a numeric field",
        _ => "a field of an ordered type",
    };
    let message = format!("{function} needs {needs}, but `{field}` is {field_type}");
    diagnostic(Code::RollupFieldType, target, Some("field"), message)
}

pub(crate) fn missing_rule_field(
    target: Target,
    field: &str,
    object: &QualifiedName,
) -> Diagnostic {
    let message = format!("field `{field}` is not a field of `{object}`");
    diagnostic(Code::MissingRuleField, target, Some("field"), message)
}

pub(crate) fn invalid_expression(
    target: Target,
    property: &'static str,
    problem: &str,
) -> Diagnostic {
    let message = format!("{property}: {problem}");
    diagnostic(Code::InvalidExpression, target, Some(property), message)
}

pub(crate) fn invalid_hfx_version(target: Target, version: i32) -> Diagnostic {
    let message = format!("hfxVersion {version} is not a known HFX version (1)");
    diagnostic(Code::InvalidHfxVersion, target, Some("hfxVersion"), message)
}

pub(crate) fn invalid_rename_hint(target: Target, hint: &str, why: &str) -> Diagnostic {
    let shown: String = hint.chars().take(80).collect();
    let message = format!("renamedFrom `{shown}` {why}");
    diagnostic(
        Code::InvalidRenameHint,
        target,
        Some("renamedFrom"),
        message,
    )
}

pub(crate) fn invalid_picklist(
    target: Target,
    property: &'static str,
    message: String,
) -> Diagnostic {
    diagnostic(Code::InvalidPicklist, target, Some(property), message)
}
