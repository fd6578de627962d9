//! Questions about the object graph: inheritance and references.
//!
//! The DDL planner, the query compiler and the data layer all need the same answers (which fields
//! does an object really have, which tables does a query on a parent cover, who points at this
//! object), so they are answered once here. Every walk is safe on an invalid model: a missing
//! parent ends the chain and a cycle is followed only once.

use std::collections::BTreeSet;

use crate::key::QualifiedName;
use crate::model::{Field, FieldKind, Model, Module, Object, Rule};
use crate::target::Target;

/// A field as seen on an object: the field and the object that declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectiveField<'a> {
    /// The object that declares the field: the object itself or one of its ancestors.
    pub declared_on: QualifiedName,
    /// The field.
    pub field: &'a Field,
}

/// A rule as seen on an object: the rule, its key and the object that declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectiveRule<'a> {
    /// The object that declares the rule: the object itself or one of its ancestors.
    pub declared_on: QualifiedName,
    /// The rule key.
    pub key: &'a str,
    /// The rule.
    pub rule: &'a Rule,
}

/// How one item refers to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReferenceKind {
    /// An object extends it.
    Extends,
    /// A lookup field targets it.
    LookupTarget,
    /// A rollup field aggregates over it.
    RollupSource,
}

/// One reference to an object, found by [`Model::referrers`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Reference {
    /// The referring item: an object (for `extends`) or a field.
    pub referrer: Target,
    /// How it refers.
    pub kind: ReferenceKind,
}

impl Model {
    /// The module with this key.
    pub fn module(&self, key: &str) -> Option<&Module> {
        self.modules.get(key)
    }

    /// The object with this name.
    pub fn object(&self, name: &QualifiedName) -> Option<&Object> {
        self.modules.get(&name.module)?.objects.get(&name.object)
    }

    /// Every object with its name, sorted by module key, then object key.
    pub fn objects(&self) -> impl Iterator<Item = (QualifiedName, &Object)> {
        self.modules.values().flat_map(|module| {
            module
                .objects
                .values()
                .map(|object| (QualifiedName::new(&module.key, &object.key), object))
        })
    }

    /// The ancestors of an object, nearest first. Stops at a missing parent or a cycle.
    pub fn ancestors(&self, name: &QualifiedName) -> Vec<QualifiedName> {
        let mut seen = BTreeSet::from([name.clone()]);
        let mut chain = Vec::new();
        let mut current = self.object(name);
        while let Some(parent) = current.and_then(|object| object.extends.as_ref()) {
            if !seen.insert(parent.clone()) {
                break;
            }
            let Some(object) = self.object(parent) else {
                break;
            };
            chain.push(parent.clone());
            current = Some(object);
        }
        chain
    }

    /// The fields of an object including inherited ones: the root ancestor's fields first, the
    /// object's own last, each group sorted by key. A key declared twice in the chain (a
    /// validation error) is listed once, with its first (inherited) declaration.
    pub fn effective_fields(&self, name: &QualifiedName) -> Vec<EffectiveField<'_>> {
        let mut chain = self.ancestors(name);
        chain.reverse();
        chain.push(name.clone());
        let mut keys = BTreeSet::new();
        let mut fields = Vec::new();
        for declared_on in chain {
            let Some(object) = self.object(&declared_on) else {
                continue;
            };
            for field in object.fields.values() {
                if keys.insert(field.key.as_str()) {
                    fields.push(EffectiveField {
                        declared_on: declared_on.clone(),
                        field,
                    });
                }
            }
        }
        fields
    }

    /// One effective field of an object, by key.
    pub fn effective_field(&self, name: &QualifiedName, key: &str) -> Option<EffectiveField<'_>> {
        self.effective_fields(name)
            .into_iter()
            .find(|effective| effective.field.key == key)
    }

    /// The rules of an object including inherited ones, in the same order as
    /// [`Model::effective_fields`]: a subtype is checked against its parents' rules too.
    pub fn effective_rules(&self, name: &QualifiedName) -> Vec<EffectiveRule<'_>> {
        let mut chain = self.ancestors(name);
        chain.reverse();
        chain.push(name.clone());
        let mut keys = BTreeSet::new();
        let mut rules = Vec::new();
        for declared_on in chain {
            let Some(object) = self.object(&declared_on) else {
                continue;
            };
            for (key, rule) in &object.rules {
                if keys.insert(key.as_str()) {
                    rules.push(EffectiveRule {
                        declared_on: declared_on.clone(),
                        key,
                        rule,
                    });
                }
            }
        }
        rules
    }

    /// The objects that extend this one directly, sorted.
    pub fn subtypes(&self, name: &QualifiedName) -> Vec<QualifiedName> {
        self.objects()
            .filter(|(_, object)| object.extends.as_ref() == Some(name))
            .map(|(child, _)| child)
            .collect()
    }

    /// The concrete objects that extend this one directly or transitively, sorted; the object
    /// itself is not included. A query on the object covers its own table (when concrete) and
    /// the tables of these subtypes.
    pub fn concrete_subtypes(&self, name: &QualifiedName) -> Vec<QualifiedName> {
        let mut seen = BTreeSet::from([name.clone()]);
        let mut pending = vec![name.clone()];
        let mut concrete = BTreeSet::new();
        while let Some(current) = pending.pop() {
            for child in self.subtypes(&current) {
                if !seen.insert(child.clone()) {
                    continue;
                }
                if self
                    .object(&child)
                    .is_some_and(|object| !object.is_abstract)
                {
                    concrete.insert(child.clone());
                }
                pending.push(child);
            }
        }
        concrete.into_iter().collect()
    }

    /// The lookup fields, declared anywhere, whose target is this object; sorted by the
    /// declaring object and field key. These are the child relationships of the object.
    pub fn lookups_targeting(&self, name: &QualifiedName) -> Vec<EffectiveField<'_>> {
        let mut lookups = Vec::new();
        for (declared_on, object) in self.objects() {
            for field in object.fields.values() {
                if matches!(&field.kind, FieldKind::Lookup { target, .. } if target == name) {
                    lookups.push(EffectiveField {
                        declared_on: declared_on.clone(),
                        field,
                    });
                }
            }
        }
        lookups
    }

    /// Everything that refers to this object: subtypes, lookups to it and rollups over it;
    /// sorted.
    pub fn referrers(&self, name: &QualifiedName) -> Vec<Reference> {
        let mut references = BTreeSet::new();
        for (owner, object) in self.objects() {
            if object.extends.as_ref() == Some(name) {
                references.insert(Reference {
                    referrer: Target::object(&owner),
                    kind: ReferenceKind::Extends,
                });
            }
            for field in object.fields.values() {
                let kind = match &field.kind {
                    FieldKind::Lookup { target, .. } if target == name => {
                        ReferenceKind::LookupTarget
                    }
                    FieldKind::Rollup { source, .. } if &source.object == name => {
                        ReferenceKind::RollupSource
                    }
                    _ => continue,
                };
                references.insert(Reference {
                    referrer: Target::field(&owner, &field.key),
                    kind,
                });
            }
        }
        references.into_iter().collect()
    }

    /// The items that use one field of an object: rollups whose `source` or `field` resolves to
    /// it, and rules anchored to it (on the object or a subtype); sorted.
    pub fn field_referrers(&self, name: &QualifiedName, field_key: &str) -> Vec<Target> {
        let declared_here = |object: &QualifiedName, key: &str| {
            self.effective_field(object, key)
                .is_some_and(|effective| &effective.declared_on == name)
        };
        let mut referrers = BTreeSet::new();
        for (owner, object) in self.objects() {
            for field in object.fields.values() {
                if let FieldKind::Rollup {
                    source,
                    field: aggregated,
                    ..
                } = &field.kind
                {
                    let uses_source =
                        source.field == field_key && declared_here(&source.object, field_key);
                    let uses_field = aggregated.as_deref() == Some(field_key)
                        && declared_here(&source.object, field_key);
                    if uses_source || uses_field {
                        referrers.insert(Target::field(&owner, &field.key));
                    }
                }
            }
            for (rule_key, rule) in &object.rules {
                if rule.field.as_deref() == Some(field_key) && declared_here(&owner, field_key) {
                    referrers.insert(Target::rule(&owner, rule_key));
                }
            }
        }
        referrers.into_iter().collect()
    }
}
