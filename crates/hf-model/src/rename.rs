//! Renames: a create whose item carries `renamed_from` moves the old item to the new key.
//!
//! A rename must never lose data, so it is not a delete plus a create: the moved item keeps its
//! `renamed_from` in its file, and the DDL planner turns that hint into `ALTER … RENAME` (see
//! docs/ddl.md). Here the model side happens:
//! - a module rename moves its objects and screens;
//! - an object rename moves its fields (within its module);
//! - a field rename replaces the old field (within its object).
//!
//! Structured references follow the renamed item: `extends`, lookup targets, rollup `source`
//! and `field`, rule `field` anchors. Expressions (formulas, rule assertions, rollup filters)
//! are text and are not rewritten: a field rename is refused with `InUse` while an expression
//! may mention the old key, so a rename never silently breaks a formula. Module and object keys
//! never appear in expressions.

use crate::error::Error;
use crate::key::{check_key, FieldPath, KeyKind, QualifiedName};
use crate::model::{Field, FieldKind, Model, Module, Object};
use crate::target::Target;

impl Model {
    /// Moves the module `module.renamed_from` to `module.key`, which the caller checked is free.
    pub(crate) fn rename_module(&mut self, mut module: Module) -> Result<(), Error> {
        let Some(old) = module.renamed_from.clone() else {
            return Ok(());
        };
        check_key(KeyKind::Module, &old)?;
        let existing = self
            .modules
            .remove(&old)
            .ok_or_else(|| Error::ModuleNotFound {
                module: old.clone(),
            })?;
        module.objects = existing.objects;
        module.screens = existing.screens;
        let new = module.key.clone();
        self.modules.insert(new.clone(), module);
        self.retarget_objects(|name| {
            (name.module == old).then(|| QualifiedName::new(new.clone(), name.object.clone()))
        });
        Ok(())
    }

    /// Moves the object `object.renamed_from` of `module` to `object.key`, which the caller
    /// checked is free. The new definition comes from `object`; the fields come from the old one.
    pub(crate) fn rename_object(&mut self, module: &str, mut object: Object) -> Result<(), Error> {
        let Some(old) = object.renamed_from.clone() else {
            return Ok(());
        };
        check_key(KeyKind::Object, &old)?;
        let old_name = QualifiedName::new(module, &old);
        let new_name = QualifiedName::new(module, &object.key);
        let objects = &mut self.module_mut(module)?.objects;
        let existing = objects.remove(&old).ok_or_else(|| Error::ObjectNotFound {
            object: old_name.clone(),
        })?;
        object.fields = existing.fields;
        objects.insert(object.key.clone(), object);
        self.retarget_objects(|name| (name == &old_name).then(|| new_name.clone()));
        Ok(())
    }

    /// Replaces the field `field.renamed_from` of `object` with `field`, whose key the caller
    /// checked is free. Refused with `InUse` while an expression may mention the old key.
    pub(crate) fn rename_field(
        &mut self,
        object: &QualifiedName,
        field: Field,
    ) -> Result<(), Error> {
        let Some(old) = field.renamed_from.clone() else {
            return Ok(());
        };
        check_key(KeyKind::Field, &old)?;
        if !self.object_mut(object)?.fields.contains_key(&old) {
            return Err(Error::FieldNotFound {
                object: object.clone(),
                field: old,
            });
        }
        if let Some(referrer) = self.expression_mentioning(object, &old) {
            return Err(Error::InUse {
                target: Box::new(Target::field(object, &old)),
                referrer: Box::new(referrer),
            });
        }
        // Found before the move, while `old` still resolves to this object's field.
        let referrers = self.field_referrers(object, &old);
        let new = field.key.clone();
        let fields = &mut self.object_mut(object)?.fields;
        fields.remove(&old);
        fields.insert(new.clone(), field);
        for referrer in referrers {
            self.retarget_field_reference(&referrer, &old, &new);
        }
        Ok(())
    }

    /// Rewrites every object reference (`extends`, lookup targets, rollup sources) for which
    /// `map` gives a new name.
    fn retarget_objects(&mut self, map: impl Fn(&QualifiedName) -> Option<QualifiedName>) {
        for module in self.modules.values_mut() {
            for object in module.objects.values_mut() {
                if let Some(new) = object.extends.as_ref().and_then(&map) {
                    object.extends = Some(new);
                }
                for field in object.fields.values_mut() {
                    match &mut field.kind {
                        FieldKind::Lookup { target, .. } => {
                            if let Some(new) = map(target) {
                                *target = new;
                            }
                        }
                        FieldKind::Rollup { source, .. } => {
                            if let Some(new) = map(&source.object) {
                                *source = FieldPath {
                                    object: new,
                                    field: source.field.clone(),
                                };
                            }
                        }
                        FieldKind::Scalar { .. } | FieldKind::Formula { .. } => {}
                    }
                }
            }
        }
    }

    /// Points one referrer found by [`Model::field_referrers`] at the field's new key.
    fn retarget_field_reference(&mut self, referrer: &Target, old: &str, new: &str) {
        match referrer {
            Target::Field { object, field } => {
                let Ok(owner) = self.object_mut(object) else {
                    return;
                };
                let Some(Field {
                    kind:
                        FieldKind::Rollup {
                            source,
                            field: aggregated,
                            ..
                        },
                    ..
                }) = owner.fields.get_mut(field)
                else {
                    return;
                };
                if source.field == old {
                    source.field = new.to_owned();
                }
                if aggregated.as_deref() == Some(old) {
                    *aggregated = Some(new.to_owned());
                }
            }
            Target::Rule { object, rule } => {
                let Ok(owner) = self.object_mut(object) else {
                    return;
                };
                if let Some(rule) = owner.rules.get_mut(rule) {
                    if rule.field.as_deref() == Some(old) {
                        rule.field = Some(new.to_owned());
                    }
                }
            }
            Target::Module { .. } | Target::Object { .. } | Target::Screen { .. } => {}
        }
    }

    /// An expression that may mention field `key` of `object`: a formula or rule assertion of
    /// the object or a subtype, a rollup filter over one of them, or any expression with a
    /// path segment `.key`. Conservative: a mention inside a string literal does not count, but
    /// an unrelated identifier of the same spelling does.
    fn expression_mentioning(&self, object: &QualifiedName, key: &str) -> Option<Target> {
        let mut family = vec![object.clone()];
        let mut index = 0;
        while let Some(current) = family.get(index).cloned() {
            for child in self.subtypes(&current) {
                if !family.contains(&child) {
                    family.push(child);
                }
            }
            index += 1;
        }
        for (owner, item) in self.objects() {
            let own = family.contains(&owner);
            for field in item.fields.values() {
                let (text, scoped) = match &field.kind {
                    FieldKind::Formula { formula, .. } => (Some(formula), own),
                    FieldKind::Rollup { source, filter, .. } => {
                        (filter.as_ref(), family.contains(&source.object))
                    }
                    FieldKind::Scalar { .. } | FieldKind::Lookup { .. } => (None, false),
                };
                if text.is_some_and(|text| mentions(text, key, scoped)) {
                    return Some(Target::field(&owner, &field.key));
                }
            }
            for (rule_key, rule) in &item.rules {
                if mentions(&rule.assert, key, own) {
                    return Some(Target::rule(&owner, rule_key));
                }
            }
        }
        None
    }
}

/// Whether `text` has the identifier `key` outside string literals: anywhere when `scoped`,
/// otherwise only as a later segment of a dotted path (`account.key`).
fn mentions(text: &str, key: &str, scoped: bool) -> bool {
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    let mut after_dot = false;
    while let Some(&c) = chars.get(i) {
        if c == '\'' {
            // A string literal; `''` inside it is an escaped quote.
            i += 1;
            while let Some(&inner) = chars.get(i) {
                i += 1;
                if inner == '\'' {
                    if chars.get(i) == Some(&'\'') {
                        i += 1;
                    } else {
                        break;
                    }
                }
            }
            after_dot = false;
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while chars
                .get(i)
                .is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_')
            {
                i += 1;
            }
            let word: String = chars.get(start..i).unwrap_or_default().iter().collect();
            if word == key && (scoped || after_dot) {
                return true;
            }
            after_dot = false;
        } else {
            if !c.is_whitespace() {
                after_dot = c == '.';
            }
            i += 1;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::mentions;

    #[test]
    fn mentions_finds_identifiers_outside_literals() {
        assert!(mentions("amount * 2", "amount", true));
        assert!(!mentions("amount * 2", "amount", false));
        assert!(mentions("account.amount > 0", "amount", false));
        assert!(!mentions("stage = 'amount'", "amount", true));
        assert!(!mentions("stage = 'it''s amount'", "amount", true));
        assert!(!mentions("amounts + 1", "amount", true));
        assert!(mentions("IF(x, amount, 0)", "amount", true));
        assert!(!mentions("'unterminated amount", "amount", true));
    }
}
