//! The metadata directory layout and its JSON5 files.
//!
//! Layout, relative to the metadata directory:
//! `<m>/module.json5`, `<m>/objects/<o>.json5` (the object with its fields) and
//! `<m>/screens/<s>.json5`. Keys come from the file and directory names. Files that do not end in
//! `.json5` (a README, `.gitkeep`) and anything under a directory starting with `.` are ignored;
//! a `.json5` file elsewhere is an error, so a typo such as `crm/object/x.json5` is not silently
//! dropped.
//!
//! Reading is bounded (size and depth) and every error names the file. Writing is deterministic
//! and [`render_changes`] touches only the files whose item changed, so hand-edited files keep
//! their comments until they are edited through the API.

mod json5_read;
mod json5_write;
mod shape;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

pub use json5_read::{MAX_DEPTH, MAX_FILE_BYTES};
pub use shape::{FieldFile, ModuleFile, ObjectFile, RuleFile, ScreenFile, UniqueMap};

use crate::error::Error;
use crate::model::{Model, Module, Object, Screen};

/// What a path in the metadata directory holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileRole {
    /// `<module>/module.json5`.
    Module {
        /// The module key.
        module: String,
    },
    /// `<module>/objects/<object>.json5`.
    Object {
        /// The module key.
        module: String,
        /// The object key.
        object: String,
    },
    /// `<module>/screens/<screen>.json5`.
    Screen {
        /// The module key.
        module: String,
        /// The screen key.
        screen: String,
    },
    /// Not metadata (a README, a dotfile): left alone.
    Ignored,
}

/// Classifies a `/`-separated path relative to the metadata directory.
pub fn classify(path: &str) -> Result<FileRole, Error> {
    let parts: Vec<&str> = path.split('/').collect();
    let hidden = parts.iter().any(|part| part.starts_with('.'));
    let Some(name) = parts.last() else {
        return Ok(FileRole::Ignored);
    };
    if hidden || !name.ends_with(".json5") {
        return Ok(FileRole::Ignored);
    }
    let stem = |name: &str| name.trim_end_matches(".json5").to_owned();
    match parts.as_slice() {
        [module, "module.json5"] => Ok(FileRole::Module {
            module: (*module).to_owned(),
        }),
        [module, "objects", object] => Ok(FileRole::Object {
            module: (*module).to_owned(),
            object: stem(object),
        }),
        [module, "screens", screen] => Ok(FileRole::Screen {
            module: (*module).to_owned(),
            screen: stem(screen),
        }),
        _ => Err(Error::UnexpectedFile {
            file: path.to_owned(),
        }),
    }
}

/// Builds a model from `(path, bytes)` pairs, paths relative to the metadata directory.
///
/// Fails on the first file that cannot be read; problems inside a readable model are left to
/// [`crate::validate`].
pub fn load<I, P, B>(files: I) -> Result<Model, Error>
where
    I: IntoIterator<Item = (P, B)>,
    P: AsRef<str>,
    B: AsRef<[u8]>,
{
    let mut modules: BTreeMap<String, Module> = BTreeMap::new();
    let mut objects: Vec<(String, Object)> = Vec::new();
    let mut screens: Vec<(String, Screen)> = Vec::new();
    for (path, bytes) in files {
        let path = path.as_ref();
        let bytes = bytes.as_ref();
        match classify(path)? {
            FileRole::Ignored => {}
            FileRole::Module { module } => {
                let file: ModuleFile = json5_read::parse(path, bytes)?;
                modules.insert(module.clone(), file.into_module(&module));
            }
            FileRole::Object { module, object } => {
                let file: ObjectFile = json5_read::parse(path, bytes)?;
                let object =
                    file.into_object(&object)
                        .map_err(|(property, source)| Error::InvalidFile {
                            file: path.to_owned(),
                            path: property,
                            source: Box::new(source),
                        })?;
                objects.push((module, object));
            }
            FileRole::Screen { module, screen } => {
                let file: ScreenFile = json5_read::parse(path, bytes)?;
                screens.push((module, file.into_screen(&screen)));
            }
        }
    }
    for (module, object) in objects {
        let entry = modules
            .get_mut(&module)
            .ok_or(Error::MissingModuleFile { module })?;
        entry.objects.insert(object.key.clone(), object);
    }
    for (module, screen) in screens {
        let entry = modules
            .get_mut(&module)
            .ok_or(Error::MissingModuleFile { module })?;
        entry.screens.insert(screen.key.clone(), screen);
    }
    Ok(Model { modules })
}

/// Reads every metadata file of a directory on disk as `(relative path, bytes)`, sorted by path.
/// Symbolic links and ignored files are skipped; files over [`MAX_FILE_BYTES`] are refused
/// before they are read.
pub fn read_dir_files(dir: &Path) -> Result<Vec<(String, Vec<u8>)>, Error> {
    let mut files = Vec::new();
    let mut pending = vec![(dir.to_path_buf(), String::new())];
    while let Some((path, prefix)) = pending.pop() {
        let entries = std::fs::read_dir(&path).map_err(|source| io_error(&path, source))?;
        for entry in entries {
            let entry = entry.map_err(|source| io_error(&path, source))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let relative = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}/{name}")
            };
            let file_type = entry
                .file_type()
                .map_err(|source| io_error(&entry.path(), source))?;
            if name.starts_with('.') || file_type.is_symlink() {
                continue;
            }
            if file_type.is_dir() {
                pending.push((entry.path(), relative));
                continue;
            }
            if classify(&relative)? == FileRole::Ignored {
                continue;
            }
            let size = entry
                .metadata()
                .map_err(|source| io_error(&entry.path(), source))?
                .len();
            if size > MAX_FILE_BYTES as u64 {
                return Err(Error::TooLarge {
                    file: relative,
                    size: usize::try_from(size).unwrap_or(usize::MAX),
                    limit: MAX_FILE_BYTES,
                });
            }
            let bytes =
                std::fs::read(entry.path()).map_err(|source| io_error(&entry.path(), source))?;
            files.push((relative, bytes));
        }
    }
    files.sort();
    Ok(files)
}

/// Loads the model of a metadata directory on disk.
pub fn load_dir(dir: &Path) -> Result<Model, Error> {
    load(read_dir_files(dir)?)
}

fn io_error(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The text of `<m>/module.json5`.
pub fn render_module(module: &Module) -> String {
    json5_write::to_text(&shape::module_value(module))
}

/// The text of `<m>/objects/<o>.json5`.
pub fn render_object(object: &Object) -> String {
    json5_write::to_text(&shape::object_value(object))
}

/// The text of `<m>/screens/<s>.json5`.
pub fn render_screen(screen: &Screen) -> String {
    json5_write::to_text(&shape::screen_value(screen))
}

/// Every file of a model, keyed by path. Fails if a file would exceed [`MAX_FILE_BYTES`], since
/// it could not be read back.
pub fn render(model: &Model) -> Result<BTreeMap<String, String>, Error> {
    render_changes(&Model::default(), model).map(|changes| {
        changes
            .into_iter()
            .filter_map(|change| change.content.map(|content| (change.path, content)))
            .collect()
    })
}

/// One file to write or remove.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    /// The path relative to the metadata directory.
    pub path: String,
    /// The new text, or `None` to remove the file.
    pub content: Option<String>,
}

/// The files that differ between two models: a file is rewritten only when its item changed
/// (a module's own properties, an object with its fields, a screen). Sorted by path.
pub fn render_changes(old: &Model, new: &Model) -> Result<Vec<FileChange>, Error> {
    let mut changes = Vec::new();
    let module_keys: BTreeSet<&String> = old.modules.keys().chain(new.modules.keys()).collect();
    for key in module_keys {
        let before = old.modules.get(key);
        let after = new.modules.get(key);
        let header_changed = match (before, after) {
            (Some(a), Some(b)) => !same_module_header(a, b),
            _ => true,
        };
        if header_changed {
            changes.push(FileChange {
                path: format!("{key}/module.json5"),
                content: after.map(render_module),
            });
        }
        diff_items(
            &format!("{key}/objects"),
            before.map(|m| &m.objects),
            after.map(|m| &m.objects),
            render_object,
            &mut changes,
        );
        diff_items(
            &format!("{key}/screens"),
            before.map(|m| &m.screens),
            after.map(|m| &m.screens),
            render_screen,
            &mut changes,
        );
    }
    for change in &changes {
        if let Some(content) = &change.content {
            if content.len() > MAX_FILE_BYTES {
                return Err(Error::TooLarge {
                    file: change.path.clone(),
                    size: content.len(),
                    limit: MAX_FILE_BYTES,
                });
            }
        }
    }
    changes.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(changes)
}

fn same_module_header(a: &Module, b: &Module) -> bool {
    a.key == b.key
        && a.label == b.label
        && a.description == b.description
        && a.identity == b.identity
        && a.vendor_key == b.vendor_key
        && a.renamed_from == b.renamed_from
}

fn diff_items<T: PartialEq>(
    dir: &str,
    before: Option<&BTreeMap<String, T>>,
    after: Option<&BTreeMap<String, T>>,
    render: fn(&T) -> String,
    changes: &mut Vec<FileChange>,
) {
    let empty = BTreeMap::new();
    let before = before.unwrap_or(&empty);
    let after = after.unwrap_or(&empty);
    let keys: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    for key in keys {
        let (old_item, new_item) = (before.get(key), after.get(key));
        if old_item != new_item {
            changes.push(FileChange {
                path: format!("{dir}/{key}.json5"),
                content: new_item.map(render),
            });
        }
    }
}

/// Writes every file of a model under `dir` (which should be empty), creating directories.
pub fn write_dir(model: &Model, dir: &Path) -> Result<(), Error> {
    for (path, content) in render(model)? {
        let full = dir.join(&path);
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent).map_err(|source| io_error(parent, source))?;
        }
        std::fs::write(&full, content).map_err(|source| io_error(&full, source))?;
    }
    Ok(())
}
