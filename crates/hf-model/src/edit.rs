//! The edits the metadata write routes make, one method per route.
//!
//! Each edit checks the keys it is given, refuses with the contract's error (create of an existing
//! item: `AlreadyExists`; update or delete of an absent one: the matching `...NotFound`; delete of
//! something still used: `InUse` naming one user), applies itself to the model and returns the
//! [`Change`] that names the file and the commit message. Edits do not validate the whole model:
//! the store does that after the edit, with [`crate::new_problems`], so that references to
//! missing items are reported as diagnostics with every other problem.
//!
//! A create whose item carries `renamed_from` is a rename: it moves the old item (see
//! [`crate::rename`]). A replace keeps the stored `renamed_from` when the new definition has none,
//! so that a later edit does not lose the hint the DDL planner needs.

use crate::error::Error;
use crate::key::{check_key, KeyKind, QualifiedName};
use crate::model::{Field, Model, Module, Object, Screen};
use crate::target::{Action, Change, Target};

impl Model {
    /// Adds a module. Its `objects` and `screens` are taken as given (normally empty); with
    /// `renamed_from`, it is a rename that moves the old module's objects and screens.
    pub fn create_module(&mut self, module: Module) -> Result<Change, Error> {
        check_key(KeyKind::Module, &module.key)?;
        let target = Target::module(&module.key);
        if self.modules.contains_key(&module.key) {
            return Err(Error::AlreadyExists { target });
        }
        if module.renamed_from.is_some() {
            self.rename_module(module)?;
        } else {
            self.modules.insert(module.key.clone(), module);
        }
        Ok(created(target))
    }

    /// Replaces a module's own properties; its objects and screens are kept, and so is its
    /// rename hint unless the new definition carries one.
    pub fn replace_module(&mut self, mut module: Module) -> Result<Change, Error> {
        check_key(KeyKind::Module, &module.key)?;
        let existing = self.module_mut(&module.key)?;
        if module.renamed_from.is_none() {
            module.renamed_from = existing.renamed_from.take();
        }
        module.objects = std::mem::take(&mut existing.objects);
        module.screens = std::mem::take(&mut existing.screens);
        *existing = module;
        Ok(updated(Target::module(&existing.key)))
    }

    /// Deletes a module and its screens. Refused while the module has objects.
    pub fn delete_module(&mut self, key: &str) -> Result<Change, Error> {
        check_key(KeyKind::Module, key)?;
        let module = self.module_mut(key)?;
        let target = Target::module(key);
        if let Some(object) = module.objects.keys().next() {
            let referrer = Target::object(&QualifiedName::new(key, object));
            return Err(Error::InUse {
                target: Box::new(target),
                referrer: Box::new(referrer),
            });
        }
        self.modules.remove(key);
        Ok(deleted(target))
    }

    /// Adds an object to a module. Its `fields` are taken as given (normally empty); with
    /// `renamed_from`, it is a rename that moves the old object's fields.
    pub fn create_object(&mut self, module: &str, object: Object) -> Result<Change, Error> {
        check_key(KeyKind::Module, module)?;
        check_key(KeyKind::Object, &object.key)?;
        let name = QualifiedName::new(module, &object.key);
        let objects = &mut self.module_mut(module)?.objects;
        if objects.contains_key(&object.key) {
            return Err(Error::AlreadyExists {
                target: Target::object(&name),
            });
        }
        if object.renamed_from.is_some() {
            self.rename_object(module, object)?;
        } else {
            objects.insert(object.key.clone(), object);
        }
        Ok(created(Target::object(&name)))
    }

    /// Replaces an object's own properties (label, rules, extends...); its fields are kept and
    /// the `fields` of `object` are ignored. Fields change through the field edits. The rename
    /// hint is kept unless the new definition carries one.
    pub fn replace_object(&mut self, module: &str, mut object: Object) -> Result<Change, Error> {
        check_key(KeyKind::Module, module)?;
        check_key(KeyKind::Object, &object.key)?;
        let name = QualifiedName::new(module, &object.key);
        let existing = self
            .module_mut(module)?
            .objects
            .get_mut(&object.key)
            .ok_or_else(|| Error::ObjectNotFound {
                object: name.clone(),
            })?;
        if object.renamed_from.is_none() {
            object.renamed_from = existing.renamed_from.take();
        }
        object.fields = std::mem::take(&mut existing.fields);
        *existing = object;
        Ok(updated(Target::object(&name)))
    }

    /// Deletes an object with its fields. Refused while another object extends it, a lookup of
    /// another object targets it or a rollup of another object aggregates over it.
    pub fn delete_object(&mut self, name: &QualifiedName) -> Result<Change, Error> {
        check_key(KeyKind::Module, &name.module)?;
        check_key(KeyKind::Object, &name.object)?;
        let target = Target::object(name);
        self.module_mut(&name.module)?;
        if self.object(name).is_none() {
            return Err(Error::ObjectNotFound {
                object: name.clone(),
            });
        }
        let outside = self
            .referrers(name)
            .into_iter()
            .find(|reference| !targets_object(&reference.referrer, name));
        if let Some(reference) = outside {
            return Err(Error::InUse {
                target: Box::new(target),
                referrer: Box::new(reference.referrer),
            });
        }
        if let Some(module) = self.modules.get_mut(&name.module) {
            module.objects.remove(&name.object);
        }
        Ok(deleted(target))
    }

    /// Adds a field to an object; with `renamed_from`, it is a rename that replaces the old
    /// field.
    pub fn create_field(&mut self, object: &QualifiedName, field: Field) -> Result<Change, Error> {
        check_object_name(object)?;
        check_key(KeyKind::Field, &field.key)?;
        let target = Target::field(object, &field.key);
        let fields = &mut self.object_mut(object)?.fields;
        if fields.contains_key(&field.key) {
            return Err(Error::AlreadyExists { target });
        }
        if field.renamed_from.is_some() {
            self.rename_field(object, field)?;
        } else {
            fields.insert(field.key.clone(), field);
        }
        Ok(created(target))
    }

    /// Replaces a field declared on an object; its rename hint is kept unless the new
    /// definition carries one.
    pub fn replace_field(
        &mut self,
        object: &QualifiedName,
        mut field: Field,
    ) -> Result<Change, Error> {
        check_object_name(object)?;
        check_key(KeyKind::Field, &field.key)?;
        let target = Target::field(object, &field.key);
        let existing = self
            .object_mut(object)?
            .fields
            .get_mut(&field.key)
            .ok_or_else(|| Error::FieldNotFound {
                object: object.clone(),
                field: field.key.clone(),
            })?;
        if field.renamed_from.is_none() {
            field.renamed_from = existing.renamed_from.take();
        }
        *existing = field;
        Ok(updated(target))
    }

    /// Deletes a field. Refused while a rollup or a rule uses it.
    pub fn delete_field(&mut self, object: &QualifiedName, key: &str) -> Result<Change, Error> {
        check_object_name(object)?;
        check_key(KeyKind::Field, key)?;
        let target = Target::field(object, key);
        if !self.object_mut(object)?.fields.contains_key(key) {
            return Err(Error::FieldNotFound {
                object: object.clone(),
                field: key.to_owned(),
            });
        }
        if let Some(referrer) = self.field_referrers(object, key).into_iter().next() {
            return Err(Error::InUse {
                target: Box::new(target),
                referrer: Box::new(referrer),
            });
        }
        self.object_mut(object)?.fields.remove(key);
        Ok(deleted(target))
    }

    /// Adds a screen to a module.
    pub fn create_screen(&mut self, module: &str, screen: Screen) -> Result<Change, Error> {
        check_key(KeyKind::Module, module)?;
        check_key(KeyKind::Screen, &screen.key)?;
        let target = Target::screen(module, &screen.key);
        let screens = &mut self.module_mut(module)?.screens;
        if screens.contains_key(&screen.key) {
            return Err(Error::AlreadyExists { target });
        }
        screens.insert(screen.key.clone(), screen);
        Ok(created(target))
    }

    /// Replaces a screen.
    pub fn replace_screen(&mut self, module: &str, screen: Screen) -> Result<Change, Error> {
        check_key(KeyKind::Module, module)?;
        check_key(KeyKind::Screen, &screen.key)?;
        let target = Target::screen(module, &screen.key);
        let existing = self
            .module_mut(module)?
            .screens
            .get_mut(&screen.key)
            .ok_or_else(|| Error::ScreenNotFound {
                module: module.to_owned(),
                screen: screen.key.clone(),
            })?;
        *existing = screen;
        Ok(updated(target))
    }

    /// Deletes a screen.
    pub fn delete_screen(&mut self, module: &str, key: &str) -> Result<Change, Error> {
        check_key(KeyKind::Module, module)?;
        check_key(KeyKind::Screen, key)?;
        let target = Target::screen(module, key);
        if self.module_mut(module)?.screens.remove(key).is_none() {
            return Err(Error::ScreenNotFound {
                module: module.to_owned(),
                screen: key.to_owned(),
            });
        }
        Ok(deleted(target))
    }

    pub(crate) fn module_mut(&mut self, key: &str) -> Result<&mut Module, Error> {
        self.modules
            .get_mut(key)
            .ok_or_else(|| Error::ModuleNotFound {
                module: key.to_owned(),
            })
    }

    /// The object to edit fields of; a missing module also answers `ObjectNotFound`, because the
    /// contract reports a field edit on a missing object that way.
    pub(crate) fn object_mut(&mut self, name: &QualifiedName) -> Result<&mut Object, Error> {
        self.modules
            .get_mut(&name.module)
            .and_then(|module| module.objects.get_mut(&name.object))
            .ok_or_else(|| Error::ObjectNotFound {
                object: name.clone(),
            })
    }
}

fn check_object_name(name: &QualifiedName) -> Result<(), Error> {
    check_key(KeyKind::Module, &name.module)?;
    check_key(KeyKind::Object, &name.object)
}

/// Whether a referrer lives inside the object itself (a self-lookup does not block a delete).
fn targets_object(referrer: &Target, name: &QualifiedName) -> bool {
    match referrer {
        Target::Object { object } | Target::Field { object, .. } | Target::Rule { object, .. } => {
            object == name
        }
        Target::Module { .. } | Target::Screen { .. } => false,
    }
}

fn created(target: Target) -> Change {
    Change {
        action: Action::Created,
        target,
    }
}

fn updated(target: Target) -> Change {
    Change {
        action: Action::Updated,
        target,
    }
}

fn deleted(target: Target) -> Change {
    Change {
        action: Action::Deleted,
        target,
    }
}
