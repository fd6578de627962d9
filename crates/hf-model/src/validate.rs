//! Validation of a whole model: every problem, each with a precise target.
//!
//! [`validate`] never stops early, so a user fixing a hand-edited branch sees all problems at
//! once. [`new_problems`] is what a write checks: a write may not add a problem, but a branch that
//! is already broken can still be repaired one write at a time.

use std::collections::BTreeSet;

use crate::diagnostics::{self as diag, Diagnostic, MAX_IDENTITY_LEN, MAX_LABEL_CHARS};
use crate::expr::check_expression;
use crate::key::{key_problem, KeyKind, QualifiedName};
use crate::model::{
    Field, FieldKind, Identity, Model, Module, Object, PicklistValue, RollupFunction, ScalarType,
    Screen,
};
use crate::target::Target;
use crate::value::is_picklist_key;

/// Every problem of the model, sorted by target, then code.
pub fn validate(model: &Model) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for module in model.modules.values() {
        check_module(module, &mut out);
        for object in module.objects.values() {
            let name = QualifiedName::new(&module.key, &object.key);
            check_object(model, &name, object, &mut out);
        }
        for screen in module.screens.values() {
            check_screen(&module.key, screen, &mut out);
        }
    }
    out.sort_by(|a, b| {
        (&a.target, a.code, a.property, &a.message)
            .cmp(&(&b.target, b.code, b.property, &b.message))
    });
    out.dedup();
    out
}

/// The problems of `new` that `old` did not have: what a write from `old` to `new` introduces.
pub fn new_problems(old: &Model, new: &Model) -> Vec<Diagnostic> {
    let before: BTreeSet<Diagnostic> = validate(old).into_iter().collect();
    validate(new)
        .into_iter()
        .filter(|problem| !before.contains(problem))
        .collect()
}

fn check_key(target: &Target, kind: KeyKind, key: &str, out: &mut Vec<Diagnostic>) {
    if let Some(problem) = key_problem(kind, key) {
        out.push(diag::invalid_key(target.clone(), kind, key, problem));
    }
}

/// A `renamedFrom` hint must be a valid key of the item's kind and not the item's own key.
fn check_rename_hint(
    target: &Target,
    kind: KeyKind,
    key: &str,
    hint: Option<&str>,
    out: &mut Vec<Diagnostic>,
) {
    let Some(hint) = hint else {
        return;
    };
    if let Some(problem) = key_problem(kind, hint) {
        let why = format!("is not a valid {kind}: it {problem}");
        out.push(diag::invalid_rename_hint(target.clone(), hint, &why));
    } else if hint == key {
        out.push(diag::invalid_rename_hint(
            target.clone(),
            hint,
            "is the item's own key",
        ));
    }
}

fn check_label(target: &Target, property: &'static str, label: &str, out: &mut Vec<Diagnostic>) {
    let chars = label.chars().count();
    if chars > MAX_LABEL_CHARS {
        out.push(diag::label_too_long(target.clone(), property, chars));
    }
    if label.trim().is_empty() {
        out.push(diag::empty_label(target.clone(), property));
    }
    // A label is one line: no control character at all.
    if let Some((index, c)) = label.chars().enumerate().find(|(_, c)| c.is_control()) {
        out.push(diag::control_character(target.clone(), property, index, c));
    }
}

/// A description may span lines (line breaks and tabs), but holds no other control character:
/// a NUL cannot be stored by PostgreSQL as a comment, and the others only hide text.
fn check_description(target: &Target, description: Option<&str>, out: &mut Vec<Diagnostic>) {
    let Some(text) = description else {
        return;
    };
    let forbidden = |c: &char| c.is_control() && !matches!(c, '\n' | '\r' | '\t');
    if let Some((index, c)) = text.chars().enumerate().find(|(_, c)| forbidden(c)) {
        out.push(diag::control_character(
            target.clone(),
            "description",
            index,
            c,
        ));
    }
}

fn is_kebab_name(text: &str) -> bool {
    let bytes = text.as_bytes();
    let allowed = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-';
    bytes.first().is_some_and(u8::is_ascii_lowercase)
        && bytes.len() <= MAX_IDENTITY_LEN
        && bytes.iter().all(allowed)
        && !text.ends_with('-')
        && !text.contains("--")
}

fn check_identity(target: &Target, identity: &Identity, out: &mut Vec<Diagnostic>) {
    let pairs = [
        ("identityColor", &identity.color),
        ("identityIcon", &identity.icon),
    ];
    for (property, value) in pairs {
        if let Some(value) = value {
            if !is_kebab_name(value) {
                out.push(diag::invalid_identity(target.clone(), property, value));
            }
        }
    }
}

/// Checks an expression whose paths are read from records of `object`.
fn check_expression_at(
    model: &Model,
    object: &QualifiedName,
    target: &Target,
    property: &'static str,
    text: &str,
    out: &mut Vec<Diagnostic>,
) {
    for problem in check_expression(model, object, text) {
        out.push(diag::invalid_expression(target.clone(), property, &problem));
    }
}

fn check_module(module: &Module, out: &mut Vec<Diagnostic>) {
    let target = Target::module(&module.key);
    check_key(&target, KeyKind::Module, &module.key, out);
    let hint = module.renamed_from.as_deref();
    check_rename_hint(&target, KeyKind::Module, &module.key, hint, out);
    check_label(&target, "label", &module.label, out);
    check_description(&target, module.description.as_deref(), out);
    check_identity(&target, &module.identity, out);
    if let Some(vendor) = &module.vendor_key {
        check_key(&target, KeyKind::Vendor, vendor, out);
    }
}

fn check_screen(module: &str, screen: &Screen, out: &mut Vec<Diagnostic>) {
    let target = Target::screen(module, &screen.key);
    check_key(&target, KeyKind::Screen, &screen.key, out);
    if let Some(label) = &screen.label {
        check_label(&target, "label", label, out);
    }
    if screen.hfx_version != 1 {
        out.push(diag::invalid_hfx_version(target, screen.hfx_version));
    }
}

fn check_object(model: &Model, name: &QualifiedName, object: &Object, out: &mut Vec<Diagnostic>) {
    let target = Target::object(name);
    check_key(&target, KeyKind::Object, &object.key, out);
    let hint = object.renamed_from.as_deref();
    check_rename_hint(&target, KeyKind::Object, &object.key, hint, out);
    check_label(&target, "label", &object.label, out);
    check_description(&target, object.description.as_deref(), out);
    check_identity(&target, &object.identity, out);
    check_parent(model, name, object, out);

    let ancestors = model.ancestors(name);
    let inherited_field = |key: &str| {
        ancestors.iter().rev().find(|ancestor| {
            model
                .object(ancestor)
                .is_some_and(|a| a.fields.contains_key(key))
        })
    };
    for field in object.fields.values() {
        let field_target = Target::field(name, &field.key);
        check_key(&field_target, KeyKind::Field, &field.key, out);
        let hint = field.renamed_from.as_deref();
        check_rename_hint(&field_target, KeyKind::Field, &field.key, hint, out);
        check_label(&field_target, "label", &field.label, out);
        check_description(&field_target, field.description.as_deref(), out);
        if let Some(declared_on) = inherited_field(&field.key) {
            out.push(diag::redefined_field(field_target.clone(), declared_on));
        }
        check_field_kind(model, name, field, &field_target, out);
    }

    let inherited_rule = |key: &str| {
        ancestors.iter().rev().find(|ancestor| {
            model
                .object(ancestor)
                .is_some_and(|a| a.rules.contains_key(key))
        })
    };
    for (key, rule) in &object.rules {
        let rule_target = Target::rule(name, key);
        check_key(&rule_target, KeyKind::Rule, key, out);
        if let Some(declared_on) = inherited_rule(key) {
            out.push(diag::redefined_rule(rule_target.clone(), declared_on));
        }
        check_expression_at(model, name, &rule_target, "assert", &rule.assert, out);
        if let Some(field) = &rule.field {
            if model.effective_field(name, field).is_none() {
                out.push(diag::missing_rule_field(rule_target, field, name));
            }
        }
    }
}

/// `extends` must name an existing object and must not lead back to the object itself.
fn check_parent(model: &Model, name: &QualifiedName, object: &Object, out: &mut Vec<Diagnostic>) {
    let target = Target::object(name);
    let Some(parent) = &object.extends else {
        if object.extension_kind.is_some() {
            out.push(diag::extension_without_parent(target));
        }
        return;
    };
    if model.object(parent).is_none() {
        out.push(diag::missing_parent(target, parent));
        return;
    }
    let mut path = vec![name.clone()];
    let mut current = parent.clone();
    loop {
        if &current == name {
            path.push(current);
            out.push(diag::extends_cycle(target, &path));
            return;
        }
        if path.contains(&current) {
            // A cycle further up that does not include this object: reported on its members.
            return;
        }
        path.push(current.clone());
        match model.object(&current).and_then(|o| o.extends.clone()) {
            Some(next) => current = next,
            None => return,
        }
    }
}

fn check_field_kind(
    model: &Model,
    name: &QualifiedName,
    field: &Field,
    target: &Target,
    out: &mut Vec<Diagnostic>,
) {
    match &field.kind {
        FieldKind::Scalar {
            field_type,
            values,
            default_value,
            ..
        } => check_picklist(*field_type, values, default_value.as_deref(), target, out),
        FieldKind::Formula {
            formula,
            field_type,
        } => {
            check_expression_at(model, name, target, "formula", formula, out);
            no_picklist_type(*field_type, target, out);
        }
        FieldKind::Lookup { target: lookup, .. } => match model.object(lookup) {
            None => out.push(diag::missing_lookup_target(target.clone(), lookup)),
            Some(object) if object.is_abstract => {
                out.push(diag::lookup_to_abstract(target.clone(), lookup));
            }
            Some(_) => {}
        },
        FieldKind::Rollup {
            function,
            source,
            field: aggregated,
            filter,
            ..
        } => {
            // A filter reads the source object's records; a missing source is reported below.
            if let (Some(filter), Some(_)) = (filter, model.object(&source.object)) {
                check_expression_at(model, &source.object, target, "filter", filter, out);
            }
            let source_text = source.to_string();
            if model.object(&source.object).is_none() {
                let what = format!("object `{}`", source.object);
                out.push(diag::missing_rollup_source(
                    target.clone(),
                    &source_text,
                    &what,
                ));
                return;
            }
            match model.effective_field(&source.object, &source.field) {
                None => {
                    let what = format!("field `{}`", source.field);
                    out.push(diag::missing_rollup_source(
                        target.clone(),
                        &source_text,
                        &what,
                    ));
                }
                Some(lookup) => match &lookup.field.kind {
                    FieldKind::Lookup {
                        target: lookup_target,
                        ..
                    } => {
                        let points_here =
                            lookup_target == name || model.ancestors(name).contains(lookup_target);
                        if !points_here {
                            out.push(diag::rollup_source_mismatch(
                                target.clone(),
                                &source_text,
                                lookup_target,
                                name,
                            ));
                        }
                    }
                    other => out.push(diag::rollup_source_not_lookup(
                        target.clone(),
                        &source_text,
                        other.name(),
                    )),
                },
            }
            check_rollup_field(model, source, *function, aggregated.as_deref(), target, out);
        }
    }
    if let FieldKind::Rollup { field_type, .. } = &field.kind {
        no_picklist_type(*field_type, target, out);
    }
}

/// Formula and rollup fields declare no choices, so they cannot yield picklist values.
fn no_picklist_type(field_type: ScalarType, target: &Target, out: &mut Vec<Diagnostic>) {
    if field_type.is_picklist() {
        let message = format!(
            "fieldType {field_type} needs a list of choices, which only scalar fields declare"
        );
        out.push(diag::invalid_picklist(target.clone(), "fieldType", message));
    }
}

/// A picklist declares at least one choice; keys follow the picklist key grammar and are
/// unique; labels follow the label rules; the default is one of the keys. Other types declare
/// neither choices nor a default.
fn check_picklist(
    field_type: ScalarType,
    values: &[PicklistValue],
    default_value: Option<&str>,
    target: &Target,
    out: &mut Vec<Diagnostic>,
) {
    if !field_type.is_picklist() {
        if !values.is_empty() {
            let message = format!("values: a {field_type} field has no list of choices");
            out.push(diag::invalid_picklist(target.clone(), "values", message));
        }
        if default_value.is_some() {
            let message = format!("defaultValue: only picklist fields have one, not {field_type}");
            out.push(diag::invalid_picklist(
                target.clone(),
                "defaultValue",
                message,
            ));
        }
        return;
    }
    if values.is_empty() {
        let message = format!("values: a {field_type} field needs at least one choice");
        out.push(diag::invalid_picklist(target.clone(), "values", message));
    }
    for (at, value) in values.iter().enumerate() {
        let shown: String = value.key.chars().take(80).collect();
        if !is_picklist_key(&value.key) {
            let message = format!(
                "values[{at}]: key `{shown}` must be 1 to 63 lower-case letters, digits or \
                 underscores"
            );
            out.push(diag::invalid_picklist(target.clone(), "values", message));
        } else if values[..at].iter().any(|other| other.key == value.key) {
            let message = format!("values[{at}]: key `{shown}` is already a choice");
            out.push(diag::invalid_picklist(target.clone(), "values", message));
        }
        check_label(target, "values", &value.label, out);
    }
    if let Some(default) = default_value {
        if !values.iter().any(|value| value.key == default) {
            let shown: String = default.chars().take(80).collect();
            let message = format!("defaultValue `{shown}` is not one of the keys in values");
            out.push(diag::invalid_picklist(
                target.clone(),
                "defaultValue",
                message,
            ));
        }
    }
}

fn check_rollup_field(
    model: &Model,
    source: &crate::key::FieldPath,
    function: RollupFunction,
    aggregated: Option<&str>,
    target: &Target,
    out: &mut Vec<Diagnostic>,
) {
    let Some(aggregated) = aggregated else {
        if function != RollupFunction::Count {
            out.push(diag::rollup_field_required(target.clone(), function));
        }
        return;
    };
    let Some(effective) = model.effective_field(&source.object, aggregated) else {
        out.push(diag::missing_rollup_field(
            target.clone(),
            aggregated,
            &source.object,
        ));
        return;
    };
    let value_type = effective.field.value_type();
    let fits = match function {
        RollupFunction::Count => true,
        RollupFunction::Sum | RollupFunction::Avg => value_type.is_numeric(),
        RollupFunction::Min | RollupFunction::Max => value_type.is_ordered(),
    };
    if !fits {
        out.push(diag::rollup_field_type(
            target.clone(),
            function,
            aggregated,
            value_type,
        ));
    }
}
