//! What a diagnostic, an error or a change is about, and which file holds it.
//!
//! A [`Target`] names one item of the model (a module, object, field, rule or screen). Diagnostics
//! point at targets, `IN_USE` errors name the referring target, and every edit returns a
//! [`Change`] whose target gives the commit message and the `file` of the write response.

use std::fmt;

use crate::key::QualifiedName;

/// One item of the model.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// A module.
    Module {
        /// The module key.
        module: String,
    },
    /// An object.
    Object {
        /// The object's qualified name.
        object: QualifiedName,
    },
    /// A field declared on an object.
    Field {
        /// The object that declares the field.
        object: QualifiedName,
        /// The field key.
        field: String,
    },
    /// A rule of an object.
    Rule {
        /// The object that declares the rule.
        object: QualifiedName,
        /// The rule key.
        rule: String,
    },
    /// A screen of a module.
    Screen {
        /// The module key.
        module: String,
        /// The screen key.
        screen: String,
    },
}

impl Target {
    /// The module target.
    pub fn module(module: impl Into<String>) -> Self {
        Target::Module {
            module: module.into(),
        }
    }

    /// The object target.
    pub fn object(object: &QualifiedName) -> Self {
        Target::Object {
            object: object.clone(),
        }
    }

    /// The field target.
    pub fn field(object: &QualifiedName, field: impl Into<String>) -> Self {
        Target::Field {
            object: object.clone(),
            field: field.into(),
        }
    }

    /// The rule target.
    pub fn rule(object: &QualifiedName, rule: impl Into<String>) -> Self {
        Target::Rule {
            object: object.clone(),
            rule: rule.into(),
        }
    }

    /// The screen target.
    pub fn screen(module: impl Into<String>, screen: impl Into<String>) -> Self {
        Target::Screen {
            module: module.into(),
            screen: screen.into(),
        }
    }

    /// The module this target lives in.
    pub fn module_key(&self) -> &str {
        match self {
            Target::Module { module } | Target::Screen { module, .. } => module,
            Target::Object { object }
            | Target::Field { object, .. }
            | Target::Rule { object, .. } => &object.module,
        }
    }

    /// The innermost key of the target: the field key of a field, the screen key of a screen...
    pub fn key(&self) -> &str {
        match self {
            Target::Module { module } => module,
            Target::Object { object } => &object.object,
            Target::Field { field, .. } => field,
            Target::Rule { rule, .. } => rule,
            Target::Screen { screen, .. } => screen,
        }
    }

    /// The file, relative to the metadata directory, that holds this item.
    pub fn file(&self) -> String {
        match self {
            Target::Module { module } => format!("{module}/module.json5"),
            Target::Object { object }
            | Target::Field { object, .. }
            | Target::Rule { object, .. } => {
                format!("{}/objects/{}.json5", object.module, object.object)
            }
            Target::Screen { module, screen } => format!("{module}/screens/{screen}.json5"),
        }
    }

    /// The word for the kind of item, used in messages (`field`, `screen`...).
    pub fn noun(&self) -> &'static str {
        match self {
            Target::Module { .. } => "module",
            Target::Object { .. } => "object",
            Target::Field { .. } => "field",
            Target::Rule { .. } => "rule",
            Target::Screen { .. } => "screen",
        }
    }
}

impl fmt::Display for Target {
    /// `crm`, `crm.account`, `crm.account.name`, `crm.account.rules.name_set`,
    /// `crm.screens.counter`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Module { module } => write!(f, "{module}"),
            Target::Object { object } => write!(f, "{object}"),
            Target::Field { object, field } => write!(f, "{object}.{field}"),
            Target::Rule { object, rule } => write!(f, "{object}.rules.{rule}"),
            Target::Screen { module, screen } => write!(f, "{module}.screens.{screen}"),
        }
    }
}

/// What an edit did to its target; the `status` of the write response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// The item did not exist and now does.
    Created,
    /// The item existed and was replaced.
    Updated,
    /// The item existed and is gone.
    Deleted,
}

impl Action {
    /// The contract's spelling: `created`, `updated`, `deleted`.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Created => "created",
            Action::Updated => "updated",
            Action::Deleted => "deleted",
        }
    }

    fn verb(self) -> &'static str {
        match self {
            Action::Created => "create",
            Action::Updated => "update",
            Action::Deleted => "delete",
        }
    }
}

/// One edit of the model, as returned by the edit helpers and recorded in the commit message.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Change {
    /// What happened.
    pub action: Action,
    /// To which item.
    pub target: Target,
}

impl Change {
    /// The file the change is written to, relative to the metadata directory.
    pub fn file(&self) -> String {
        self.target.file()
    }

    /// A one-line description, used as the commit message: `create field crm.account.name`.
    pub fn describe(&self) -> String {
        format!(
            "{} {} {}",
            self.action.verb(),
            self.target.noun(),
            self.target
        )
    }
}
