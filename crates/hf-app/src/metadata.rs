//! Writing metadata: modules, objects, fields, screens and vendored files, with every rule a
//! write must keep, whoever asks (the HTTP service or a tool).
//!
//! The rules, in the order they are checked:
//! - a screen's HFX compiles (bounded like every compile, see [`crate::compile`]);
//! - a screen imports only screens and vendored files the branch has, and its literal `{#query}`
//!   texts name only objects and fields the branch has (located in the screen source);
//! - the edit itself (keys, missing or existing items, references) and the model's validation:
//!   a write may not add a validation problem;
//! - a write that breaks another screen (a query that named only existing things now names a
//!   missing one, or an import of a screen the write deletes) is refused as `IN_USE`, naming the
//!   screen; screens already broken do not block other writes. The screens this rule reads are
//!   compiled before the write takes its lock, through the application's compiler and module
//!   cache, so the rule compiles nothing under the lock;
//! - on the live branch, the DDL runs with the commit (`hf_storage::deploy::write_live`) and a
//!   plan that loses data needs `allow_destructive`.
//!
//! A dry run ([`WriteOptions::dry_run`]) checks all of it against the branch's current model,
//! plans the DDL of a live-branch write, and writes nothing: no commit, no object in the
//! repository, no statement that changes the database.

use std::collections::BTreeSet;
use std::sync::Arc;

use hf_ddl::{ApplyStats, Plan};
use hf_metastore::Snapshot;
use hf_model::{Change, Field, Model, Module, Object, QualifiedName, Screen, Target};

use crate::expressions::expression_problems;
use crate::{blocking, App, Error, Result};

/// Longest vendored path, in bytes.
pub const MAX_VENDOR_PATH_BYTES: usize = 255;

/// One edit of a branch's metadata.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Edit {
    /// Creates a module.
    CreateModule(Module),
    /// Replaces a module's definition.
    ReplaceModule(Module),
    /// Deletes a module that has no objects or screens left.
    DeleteModule(String),
    /// Creates an object in a module.
    CreateObject {
        /// The module key.
        module: String,
        /// The new object.
        object: Object,
    },
    /// Replaces an object's definition (its fields stay).
    ReplaceObject {
        /// The module key.
        module: String,
        /// The new definition.
        object: Object,
    },
    /// Deletes an object nothing extends or looks up.
    DeleteObject(QualifiedName),
    /// Creates a field.
    CreateField {
        /// The object.
        object: QualifiedName,
        /// The new field.
        field: Field,
    },
    /// Replaces a field's definition.
    ReplaceField {
        /// The object.
        object: QualifiedName,
        /// The new definition.
        field: Field,
    },
    /// Deletes a field nothing refers to.
    DeleteField {
        /// The object.
        object: QualifiedName,
        /// The field key.
        field: String,
    },
    /// Creates a screen; its HFX must compile and its queries name what the branch has.
    CreateScreen {
        /// The module key.
        module: String,
        /// The new screen.
        screen: Screen,
    },
    /// Replaces a screen; checked like a new one.
    ReplaceScreen {
        /// The module key.
        module: String,
        /// The new screen.
        screen: Screen,
    },
    /// Deletes a screen no other screen imports.
    DeleteScreen {
        /// The module key.
        module: String,
        /// The screen key.
        screen: String,
    },
}

impl Edit {
    /// Applies the edit to `model`; the model's edit helpers say what changed.
    pub fn apply(&self, model: &mut Model) -> Result<Change, hf_model::Error> {
        match self {
            Edit::CreateModule(module) => model.create_module(module.clone()),
            Edit::ReplaceModule(module) => model.replace_module(module.clone()),
            Edit::DeleteModule(key) => model.delete_module(key),
            Edit::CreateObject { module, object } => model.create_object(module, object.clone()),
            Edit::ReplaceObject { module, object } => model.replace_object(module, object.clone()),
            Edit::DeleteObject(name) => model.delete_object(name),
            Edit::CreateField { object, field } => model.create_field(object, field.clone()),
            Edit::ReplaceField { object, field } => model.replace_field(object, field.clone()),
            Edit::DeleteField { object, field } => model.delete_field(object, field),
            Edit::CreateScreen { module, screen } => model.create_screen(module, screen.clone()),
            Edit::ReplaceScreen { module, screen } => model.replace_screen(module, screen.clone()),
            Edit::DeleteScreen { module, screen } => model.delete_screen(module, screen),
        }
    }

    /// The screen this edit writes or deletes, as (module, screen key).
    fn touched_screen(&self) -> Option<(&str, &str)> {
        match self {
            Edit::DeleteScreen { module, screen } => Some((module, screen)),
            _ => self
                .written_screen()
                .map(|(module, screen)| (module, screen.key.as_str())),
        }
    }

    /// The screen a create or replace writes, with its module.
    fn written_screen(&self) -> Option<(&str, &Screen)> {
        match self {
            Edit::CreateScreen { module, screen } | Edit::ReplaceScreen { module, screen } => {
                Some((module, screen))
            }
            _ => None,
        }
    }
}

/// How a write runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// Allow a live-branch write whose DDL loses data (dropping a column or table).
    pub allow_destructive: bool,
    /// Check everything and plan the DDL, but write nothing.
    pub dry_run: bool,
}

/// What a metadata write did, or (dry run) would do.
#[derive(Debug, Clone)]
pub struct MetadataWritten {
    /// The branch written.
    pub branch: String,
    /// What the edit did to which item.
    pub change: Change,
    /// The item's file, relative to the metadata directory.
    pub file: String,
    /// The DDL of a live-branch write: what ran, or for a dry run what would run.
    pub apply: Option<ApplyStats>,
    /// The DDL plan of a live-branch dry run.
    pub plan: Option<Plan>,
    /// Whether nothing was written.
    pub dry_run: bool,
}

/// What a vendored-file write did, or (dry run) would do.
#[derive(Debug, Clone)]
pub struct FileWritten {
    /// The branch written.
    pub branch: String,
    /// The file, relative to the metadata directory.
    pub file: String,
    /// Whether the file existed before.
    pub existed: bool,
    /// Whether nothing was written.
    pub dry_run: bool,
}

impl App {
    /// Writes one edit to `branch` as `author`, keeping every rule of the module comment; on the
    /// live branch the DDL runs in the same step. A branch that does not exist is forked from the
    /// live branch.
    pub async fn write_metadata(
        &self,
        branch: &str,
        author: &str,
        edit: Edit,
        options: WriteOptions,
    ) -> Result<MetadataWritten> {
        let mut compiled = CompiledScreens::default();
        if let Some((module, screen)) = edit.written_screen() {
            let output = self.check_compiles(screen).await?;
            self.check_queries(branch, module, &output, screen).await?;
            compiled.insert(screen, Some(output));
        }
        let base = self.branch_or_live(branch).await?;
        self.compile_ruled_screens(&base.model, &mut compiled, edit.touched_screen())
            .await?;
        let typed =
            keeping_expressions_typed(branch, move |model: &mut Model| Ok(edit.apply(model)?));
        let edit = keeping_screen_queries(Arc::new(compiled), typed);
        let live = branch == self.live_branch();
        if options.dry_run {
            return self.dry_run(branch, live, options, edit).await;
        }
        if live {
            let written = hf_storage::deploy::write_live(
                self.pool(),
                self.store(),
                author,
                options.allow_destructive,
                edit,
            )
            .await?;
            return Ok(MetadataWritten {
                branch: branch.to_owned(),
                change: written.change,
                file: written.file,
                apply: Some(written.stats),
                plan: None,
                dry_run: false,
            });
        }
        let store = Arc::clone(self.store());
        let (b, author) = (branch.to_owned(), author.to_owned());
        let written = blocking(move || store.write(&b, &author, edit)).await??;
        Ok(MetadataWritten {
            branch: branch.to_owned(),
            change: written.change,
            file: written.file,
            apply: None,
            plan: None,
            dry_run: false,
        })
    }

    /// The write without its commit: the edit and the model's validation on the branch's
    /// current model (the live one for a branch that does not exist yet, as a write would fork
    /// it), and on the live branch the DDL plan and its refusals.
    async fn dry_run<F>(
        &self,
        branch: &str,
        live: bool,
        options: WriteOptions,
        mut edit: F,
    ) -> Result<MetadataWritten>
    where
        F: FnMut(&mut Model) -> Result<Change, hf_metastore::Error>,
    {
        let base = self.branch_or_live(branch).await?;
        let mut model = Model::clone(&base.model);
        let change = edit(&mut model)?;
        let problems = hf_model::new_problems(&base.model, &model);
        if !problems.is_empty() {
            return Err(hf_metastore::Error::Invalid {
                branch: branch.to_owned(),
                diagnostics: problems,
            }
            .into());
        }
        let (apply, plan) = if live {
            let client = self.pool().get().await?;
            let plan = hf_storage::deploy::plan_model(&**client, &model, Some(&base.model)).await?;
            hf_ddl::refusal(&**client, &plan, options.allow_destructive)
                .await
                .map_err(hf_storage::Error::Ddl)?;
            let stats = ApplyStats {
                tables_created: plan.summary.tables_created,
                columns_added: plan.summary.columns_added,
                ddl_executed: plan.summary.ddl_statements,
            };
            (Some(stats), Some(plan))
        } else {
            (None, None)
        };
        Ok(MetadataWritten {
            branch: branch.to_owned(),
            file: change.file(),
            change,
            apply,
            plan,
            dry_run: true,
        })
    }

    /// Stores (`Some`) or removes (`None`) the vendored file `path` of `module` on `branch`; one
    /// commit. The module must exist; a file that a screen of the module imports cannot be
    /// removed ([`Error::FileInUse`]), nor one that does not exist ([`Error::FileNotFound`]).
    pub async fn write_vendor_file(
        &self,
        branch: &str,
        author: &str,
        module: &str,
        path: &str,
        content: Option<Vec<u8>>,
        dry_run: bool,
    ) -> Result<FileWritten> {
        check_vendor_path(path)?;
        let base = self.branch_or_live(branch).await?;
        let found =
            base.model
                .modules
                .get(module)
                .ok_or_else(|| hf_model::Error::ModuleNotFound {
                    module: module.to_owned(),
                })?;
        if content.is_none() {
            if let Some(screen) = self.importing_screen(found, path).await? {
                return Err(Error::FileInUse {
                    module: module.to_owned(),
                    screen,
                    path: path.to_owned(),
                });
            }
        }
        let file = vendor_file(module, path);
        let deleting = content.is_none();
        let existed = if dry_run {
            let store = Arc::clone(self.store());
            let (tree, f) = (base.tree.clone(), file.clone());
            blocking(move || store.read_file(&tree, &f))
                .await??
                .is_some()
        } else {
            let store = Arc::clone(self.store());
            let (b, f, author) = (branch.to_owned(), file.clone(), author.to_owned());
            blocking(move || store.write_file(&b, &author, &f, content.as_deref()))
                .await??
                .existed
        };
        if deleting && !existed {
            return Err(Error::FileNotFound {
                module: module.to_owned(),
                path: path.to_owned(),
            });
        }
        Ok(FileWritten {
            branch: branch.to_owned(),
            file,
            existed,
            dry_run,
        })
    }

    /// The branch's snapshot, or the live branch's when the branch does not exist yet (a write
    /// forks it from there).
    pub(crate) async fn branch_or_live(&self, branch: &str) -> Result<Arc<Snapshot>> {
        let store = Arc::clone(self.store());
        let branch = branch.to_owned();
        Ok(blocking(move || match store.snapshot(&branch) {
            Err(hf_metastore::Error::BranchNotFound { .. }) => store.live(),
            other => other,
        })
        .await??)
    }

    /// `screen` compiled as the write rules read it (default options), through the compiler and
    /// its module cache.
    async fn compile_checked(&self, screen: &Screen) -> Result<Arc<hf_hfx::CompileOutput>> {
        self.compiler()
            .compile_cached(
                &screen.hfx_source,
                screen.sidecar.as_deref(),
                hf_hfx::CompileOptions::default(),
            )
            .await
    }

    /// A screen whose HFX does not compile is not written.
    async fn check_compiles(&self, screen: &Screen) -> Result<Arc<hf_hfx::CompileOutput>> {
        let output = self.compile_checked(screen).await?;
        if output.diagnostics.is_empty() {
            Ok(output)
        } else {
            Err(Error::Hfx {
                diagnostics: output.diagnostics.clone(),
            })
        }
    }

    /// Adds to `compiled` every screen of `model` the screen rules read ([`ruled`]), each
    /// compiled like any other compile: within the compiler's limit and time limit, in a worker
    /// process where the host isolates compiles, and through the module cache, so a screen
    /// compiles once however many writes check it.
    ///
    /// A compile that cannot finish (the compiler is busy, the time limit ran out, the worker
    /// failed) refuses the write rather than let a rule go unchecked: the error names the screen,
    /// which can then be fixed or deleted. Only the screen the write itself replaces or deletes
    /// (`touched`) is exempt, so a screen that never compiles can always be replaced or removed.
    pub(crate) async fn compile_ruled_screens(
        &self,
        model: &Model,
        compiled: &mut CompiledScreens,
        touched: Option<(&str, &str)>,
    ) -> Result<()> {
        for (module_key, module) in &model.modules {
            for (screen_key, screen) in module.screens.iter().filter(|(_, s)| ruled(s)) {
                if compiled.contains(screen) {
                    continue;
                }
                let output = match self.compile_checked(screen).await {
                    Ok(output) => Some(output),
                    Err(_) if touched == Some((module_key.as_str(), screen_key.as_str())) => None,
                    Err(failed) => {
                        tracing::warn!(error = %failed, screen = %format!("{module_key}/{screen_key}"), "a screen the write must not break could not be compiled; the write is refused");
                        return Err(failed);
                    }
                };
                compiled.insert(screen, output);
            }
        }
        Ok(())
    }

    /// The first screen of `module` whose script or sidecar imports the vendored `path`. A
    /// screen is compiled only when its source or sidecar mentions the path at all, and through
    /// the compiler like any compile. (A screen written at the same moment may slip past this
    /// check; it then fails at its next write, as an import of a missing file.)
    async fn importing_screen(&self, module: &Module, path: &str) -> Result<Option<String>> {
        let mentioning = module.screens.iter().filter(|(_, screen)| {
            screen.hfx_source.contains(path)
                || screen.sidecar.as_deref().is_some_and(|s| s.contains(path))
        });
        for (key, screen) in mentioning {
            let output = self.compile_checked(screen).await?;
            if output
                .vendor_imports
                .iter()
                .any(|import| import.specifier == path)
            {
                return Ok(Some(key.clone()));
            }
        }
        Ok(None)
    }

    /// A screen that imports a screen the branch does not have, or a vendored file its module
    /// does not have (`<moduleKey>/vendor/<path>`), or whose `{#query}` names an object or field
    /// the branch does not have, is not written: [`Error::Hfx`] located in the screen source.
    /// The query's `:parameters` are bound to null for the name check; those the screen writes
    /// as literals (`{ limit: 10 }`) are then bound to their value, and a type error at one of
    /// them (`{ limit: "ten" }` for `LIMIT :limit`) refuses the screen too, located at the
    /// parameter in the query. Other parameters' types are checked when the query runs.
    async fn check_queries(
        &self,
        branch: &str,
        module_key: &str,
        output: &hf_hfx::CompileOutput,
        screen: &Screen,
    ) -> Result<()> {
        let source = screen.hfx_source.as_str();
        if output.queries.is_empty()
            && output.screen_imports.is_empty()
            && output.vendor_imports.is_empty()
        {
            return Ok(());
        }
        let snapshot = self.snapshot(branch).await?;
        let mut problems = Vec::new();
        for import in &output.vendor_imports {
            let path = &import.specifier;
            let exists = check_vendor_path(path).is_ok() && {
                let store = Arc::clone(self.store());
                let tree = snapshot.tree.clone();
                let file = vendor_file(module_key, path);
                blocking(move || store.read_file(&tree, &file))
                    .await??
                    .is_some()
            };
            if !exists {
                problems.push(import.diagnostic(
                    hf_hfx::DiagnosticCode::InvalidImport,
                    format!(
                        "`{path}` is not a vendored file of module `{module_key}`; upload it with PUT /metadata@<branch>/{module_key}/vendor/{path}"
                    ),
                    source,
                    screen.sidecar.as_deref(),
                ));
            }
        }
        for import in &output.screen_imports {
            let exists = snapshot
                .model
                .modules
                .get(&import.module)
                .is_some_and(|module| module.screens.contains_key(&import.screen));
            if !exists {
                problems.push(hf_hfx::Diagnostic::at(
                    hf_hfx::DiagnosticCode::InvalidImport,
                    format!(
                        "there is no screen `{}/{}` in this branch",
                        import.module, import.screen
                    ),
                    hf_hfx::SourceFile::Screen,
                    source,
                    import.offset,
                ));
            }
        }
        for query in &output.queries {
            let found = query_problems(&snapshot.model, query)?;
            // A type error is reported only once every name resolves: an unknown name makes
            // the types around it meaningless.
            let (code, diagnostics) = if found.unknown_names.is_empty() {
                (
                    hf_hfx::DiagnosticCode::QueryTypeError,
                    found.literal_type_errors,
                )
            } else {
                (
                    hf_hfx::DiagnosticCode::QueryUnknownName,
                    found.unknown_names,
                )
            };
            problems.extend(diagnostics.into_iter().map(|diagnostic| {
                hf_hfx::Diagnostic::at(
                    code,
                    diagnostic.message,
                    hf_hfx::SourceFile::Screen,
                    source,
                    query.offset + diagnostic.span.start,
                )
            }));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Error::Hfx {
                diagnostics: problems,
            })
        }
    }
}

/// Wraps a metadata edit so that it is refused as invalid metadata (`INVALID_EXPRESSION` at the
/// formula, filter or assertion) when it adds an expression that does not compile: a type the
/// model's validation cannot see (see [`crate::expressions`]). Expressions already broken do
/// not block other writes.
fn keeping_expressions_typed<F>(
    branch: &str,
    mut edit: F,
) -> impl FnMut(&mut Model) -> Result<Change, hf_metastore::Error> + Clone + Send + 'static
where
    F: FnMut(&mut Model) -> Result<Change, hf_metastore::Error> + Clone + Send + 'static,
{
    let branch = branch.to_owned();
    move |model: &mut Model| {
        let validated = hf_model::validate(model);
        let before = expression_problems(model);
        let change = edit(model)?;
        let added: Vec<hf_model::Diagnostic> = expression_problems(model)
            .into_iter()
            .filter(|problem| !before.contains(problem))
            .collect();
        // A write the model's own validation refuses is reported by it, with its problems
        // (a missing lookup target, an empty label), not by what they break downstream; that
        // validation runs again only for a write the expressions would refuse.
        let model_refuses = || {
            hf_model::validate(model)
                .iter()
                .any(|problem| !validated.contains(problem))
        };
        if added.is_empty() || model_refuses() {
            Ok(change)
        } else {
            Err(hf_metastore::Error::Invalid {
                branch: branch.clone(),
                diagnostics: added,
            })
        }
    }
}

/// Wraps a metadata edit so that it is refused with `IN_USE`, naming the screen, when it breaks a
/// screen: a `{#query}` that named only existing objects and fields before the edit and names a
/// missing one after it (a deleted or renamed field), or whose literal parameters now have the
/// wrong type (a field's type changed), or an import of a screen the edit deletes.
/// Screens already broken do not block other writes, and a write of the screen itself is checked
/// by `check_queries`.
fn keeping_screen_queries<F>(
    compiled: Arc<CompiledScreens>,
    mut edit: F,
) -> impl FnMut(&mut Model) -> Result<Change, hf_metastore::Error> + Clone + Send + 'static
where
    F: FnMut(&mut Model) -> Result<Change, hf_metastore::Error> + Clone + Send + 'static,
{
    move |model: &mut Model| {
        let before = broken_screens(model, &compiled);
        let change = edit(model)?;
        let after = broken_screens(model, &compiled);
        let written = |module: &str, screen: &str| matches!(&change.target, Target::Screen { module: m, screen: s } if m == module && s == screen);
        let newly_broken = after
            .difference(&before)
            .find(|(module, screen)| !written(module, screen));
        match newly_broken {
            Some((module, screen)) => Err(hf_model::Error::InUse {
                target: Box::new(change.target.clone()),
                referrer: Box::new(Target::screen(module, screen)),
            }
            .into()),
            None => Ok(change),
        }
    }
}

/// The screens of `model` (module, screen) that it breaks: a literal `{#query}` that names an
/// object or field `model` does not have, or binds a parameter written as a literal to a value of
/// the wrong type (a field's type changed under `WHERE amount > :min` with `{ min: 10 }`), or an
/// import of a screen it does not have. A screen that does not compile counts as broken.
pub(crate) fn broken_screens(
    model: &Model,
    compiled: &CompiledScreens,
) -> BTreeSet<(String, String)> {
    let mut broken = BTreeSet::new();
    for (module_key, module) in &model.modules {
        for (screen_key, screen) in &module.screens {
            if !ruled(screen) {
                continue;
            }
            let Some(output) = compiled.get(screen) else {
                broken.insert((module_key.clone(), screen_key.clone()));
                continue;
            };
            let missing_import = output.screen_imports.iter().any(|import| {
                !model
                    .modules
                    .get(&import.module)
                    .is_some_and(|m| m.screens.contains_key(&import.screen))
            });
            let query_broken = |query: &hf_hfx::QueryText| {
                query_problems(model, query).is_ok_and(|found| {
                    !found.unknown_names.is_empty() || !found.literal_type_errors.is_empty()
                })
            };
            if missing_import || output.queries.iter().any(query_broken) {
                broken.insert((module_key.clone(), screen_key.clone()));
            }
        }
    }
    broken
}

/// Whether the screen rules read `screen`: only a screen with a literal `{#query}` or a
/// `screen:` import can be broken by another write.
fn ruled(screen: &Screen) -> bool {
    screen.hfx_source.contains("{#query") || screen.hfx_source.contains("screen:")
}

/// The screens the screen rules read, compiled before the rules run ([`App::compile_ruled_screens`]).
///
/// The rules run under the lock that serialises live writes, so they compile nothing there: a
/// compile is bounded and isolated only where it can be awaited. A screen that is not here (one
/// that changed between the compiles and the lock, or a tool's import that compiled nothing
/// first) is compiled on a thread with a large stack, as a tool compiles.
#[derive(Debug, Default)]
pub(crate) struct CompiledScreens {
    /// Compile results by cache key; `None` for a screen that does not compile.
    outputs: std::collections::HashMap<String, Option<Arc<hf_hfx::CompileOutput>>>,
}

impl CompiledScreens {
    fn key(screen: &Screen) -> String {
        hf_hfx::cache_key(
            &screen.hfx_source,
            screen.sidecar.as_deref(),
            &hf_hfx::CompileOptions::default(),
        )
    }

    fn contains(&self, screen: &Screen) -> bool {
        self.outputs.contains_key(&Self::key(screen))
    }

    fn insert(&mut self, screen: &Screen, output: Option<Arc<hf_hfx::CompileOutput>>) {
        self.outputs.insert(Self::key(screen), output);
    }

    /// `screen` compiled, or `None` when it does not compile.
    fn get(&self, screen: &Screen) -> Option<Arc<hf_hfx::CompileOutput>> {
        match self.outputs.get(&Self::key(screen)) {
            Some(found) => found.clone(),
            None => crate::compile::compile_screen(&screen.hfx_source, screen.sidecar.as_deref())
                .ok()
                .map(Arc::new),
        }
    }
}

/// What is wrong with a screen's literal `{#query}` against `model`, found by one compile with
/// the parameters the screen writes as literals bound to their values and the others to null.
struct QueryProblems {
    /// Objects and fields the query names that `model` does not have.
    unknown_names: Vec<hf_hoqs::Diagnostic>,
    /// Type errors located at a parameter written as a literal: a literal every run of the query
    /// would refuse (`{ limit: "ten" }` for `LIMIT :limit`). Type errors elsewhere may come from
    /// the parameters bound to null here, which have other values when the query runs.
    literal_type_errors: Vec<hf_hoqs::Diagnostic>,
}

fn query_problems(model: &Model, query: &hf_hfx::QueryText) -> Result<QueryProblems> {
    let mut params = null_parameters(&query.text);
    for param in &query.params {
        if let (Some(slot), Ok(value)) = (
            params.get_mut(&param.name),
            serde_json::value::RawValue::from_string(param.json.clone()),
        ) {
            *slot = value;
        }
    }
    let checked = hf_hoqs::compile_query(model, &query.text, &params).map_err(|error| {
        Error::Internal(format!(
            "the branch's metadata cannot be compiled to SQL: {error}"
        ))
    })?;
    let at_literal = |diagnostic: &hf_hoqs::Diagnostic| {
        let from = query.text.get(diagnostic.span.start..).unwrap_or_default();
        query.params.iter().any(|param| {
            from.strip_prefix(':')
                .and_then(|rest| rest.strip_prefix(param.name.as_str()))
                .is_some_and(|rest| !rest.starts_with(|c: char| c.is_alphanumeric() || c == '_'))
        })
    };
    let (unknown_names, others): (Vec<_>, Vec<_>) = checked
        .diagnostics
        .into_iter()
        .partition(|diagnostic| diagnostic.code == hf_hoqs::Code::UnknownName);
    let literal_type_errors = others
        .into_iter()
        .filter(|diagnostic| diagnostic.code == hf_hoqs::Code::TypeError && at_literal(diagnostic))
        .collect();
    Ok(QueryProblems {
        unknown_names,
        literal_type_errors,
    })
}

/// Every `:name` parameter of a query bound to null: enough to check its names and types.
fn null_parameters(text: &str) -> hf_hoqs::RequestParams {
    hf_hoqs_syntax::parameter_names(text)
        .into_iter()
        .filter_map(|name| {
            let null = serde_json::value::to_raw_value(&serde_json::Value::Null).ok()?;
            Some((name.to_owned(), null))
        })
        .collect()
}

/// Checks a vendored path: `[a-z0-9._-]` segments separated by `/`, none empty, `.` or `..`, and
/// not a `.json5` file (the branch's metadata files end in `.json5`).
pub fn check_vendor_path(path: &str) -> Result<()> {
    let segments_ok = path.split('/').all(|segment| {
        !segment.is_empty()
            && segment != "."
            && segment != ".."
            && segment.bytes().all(|b| {
                b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
            })
    });
    if segments_ok && path.len() <= MAX_VENDOR_PATH_BYTES && !path.ends_with(".json5") {
        return Ok(());
    }
    Err(Error::InvalidPath {
        path: path.chars().take(100).collect(),
        max_bytes: MAX_VENDOR_PATH_BYTES,
    })
}

/// The file of a vendored module in the branch, relative to the metadata directory.
pub fn vendor_file(module_key: &str, path: &str) -> String {
    format!("{module_key}/vendor/{path}")
}
