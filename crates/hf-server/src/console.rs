//! The console: the administration application served at `GET /`.
//!
//! The console is written in HFX (`crates/hf-server/console/*.hfx`, with TypeScript sidecars and
//! two plain TypeScript modules) and talks only to the public HTTP API with the logged-in
//! principal's Bearer token, so it proves that the API is enough to administer the service.
//! Its sources are embedded in the binary and compiled with `hf-hfx` once, the first time the
//! console is asked for. Every file is then served under `/console/{hash}/…`, where `{hash}` is a
//! hash of all the compiled files: a URL names one exact build, so it is cached for a year
//! (`immutable`), and the page at `/` (revalidated on every load) names the current build.
//!
//! The page runs under a strict Content-Security-Policy: scripts only from this origin (no inline
//! script, no `eval`, Trusted Types without policies), requests only to this origin, and frames
//! only of this origin (the screen preview shows the rendering frame).
//!
//! The compiled files keep the runtime's own URL (`/hfx/vendor/hfx-runtime.js`), so a console and
//! the screens it previews share one runtime.
//!
//! Inside a build directory, screen modules are named `c-console-<name>.js`: a compiled screen
//! finds the screens it imports (`import X from 'screen:console/x'`) next to itself by replacing
//! its own name after the first dash, so the `c-` prefix stands where a metadata tree id stands in
//! `/hfx/modules/`.

use std::collections::HashMap;
use std::sync::OnceLock;

use actix_web::http::header;
use actix_web::{web, HttpResponse};
use sha2::{Digest, Sha256};

use crate::error::{ApiError, Code};

/// One console screen: an HFX component and its optional TypeScript sidecar.
struct Source {
    /// The screen key (`screen:console/<name>`).
    name: &'static str,
    hfx: &'static str,
    sidecar: Option<&'static str>,
}

/// Every console screen. `app` is the shell that the entry script mounts.
const SCREENS: &[Source] = &[
    Source {
        name: "app",
        hfx: include_str!("../console/app.hfx"),
        sidecar: Some(include_str!("../console/app.ts")),
    },
    Source {
        name: "login",
        hfx: include_str!("../console/login.hfx"),
        sidecar: Some(include_str!("../console/login.ts")),
    },
    Source {
        name: "query",
        hfx: include_str!("../console/query.hfx"),
        sidecar: Some(include_str!("../console/query.ts")),
    },
    Source {
        name: "data",
        hfx: include_str!("../console/data.hfx"),
        sidecar: Some(include_str!("../console/data.ts")),
    },
    Source {
        name: "schema",
        hfx: include_str!("../console/schema.hfx"),
        sidecar: Some(include_str!("../console/schema.ts")),
    },
    Source {
        name: "screens",
        hfx: include_str!("../console/screens.hfx"),
        sidecar: Some(include_str!("../console/screens.ts")),
    },
    Source {
        name: "people",
        hfx: include_str!("../console/people.hfx"),
        sidecar: Some(include_str!("../console/people.ts")),
    },
    Source {
        name: "system",
        hfx: include_str!("../console/system.hfx"),
        sidecar: Some(include_str!("../console/system.ts")),
    },
];

/// Plain TypeScript modules, compiled like a sidecar: `lib` (the API client, the session and
/// formatting shared by every screen) and `main` (the entry script that mounts `app`).
const SCRIPTS: &[(&str, &str)] = &[
    ("lib", include_str!("../console/lib.ts")),
    ("main", include_str!("../console/main.ts")),
];

/// The console's global stylesheet (each screen may add scoped styles of its own).
const STYLESHEET: &str = include_str!("../console/console.css");

/// The `Content-Security-Policy` of the console page.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self' data:; font-src 'self'; frame-src 'self'; base-uri 'none'; \
                   form-action 'none'; frame-ancestors 'none'; \
                   require-trusted-types-for 'script'; trusted-types 'none'";

const JAVASCRIPT: &str = "application/javascript";
const CSS: &str = "text/css; charset=utf-8";

/// A compiled console: the files of one build and the page that loads them.
#[derive(Debug)]
pub struct Bundle {
    /// 16 hex characters of a SHA-256 over every file's name and content.
    pub hash: String,
    /// File name → (content type, content).
    pub files: HashMap<String, (&'static str, String)>,
    /// The HTML page served at `/`.
    pub html: String,
}

/// A console source that did not compile: which file, and the compiler's rendered diagnostic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceError {
    /// The source's name, e.g. `query.hfx` or `lib.ts`.
    pub file: String,
    /// `line:column: CODE message` with the offending line.
    pub message: String,
}

/// Compiles every console source into a [`Bundle`]. Pure: the same sources give the same
/// bundle, byte for byte (a test checks it).
pub fn build() -> Result<Bundle, Vec<SourceError>> {
    let mut files: Vec<(String, &'static str, String)> = Vec::new();
    let mut errors = Vec::new();
    for screen in SCREENS {
        let options = hf_hfx::CompileOptions {
            sidecar_url: Some(format!("./c-console-{}.sidecar.js", screen.name)),
            ..Default::default()
        };
        let output = hf_hfx::compile_with(screen.hfx, screen.sidecar, &options);
        collect_errors(&mut errors, screen.name, &output);
        if let Some(js) = output.js {
            files.push((format!("c-console-{}.js", screen.name), JAVASCRIPT, js));
        }
        if let Some(js) = output.sidecar_js {
            files.push((
                format!("c-console-{}.sidecar.js", screen.name),
                JAVASCRIPT,
                js,
            ));
        }
    }
    for (name, script) in SCRIPTS {
        let output = hf_hfx::compile("", Some(script));
        collect_errors(&mut errors, name, &output);
        if let Some(js) = output.sidecar_js {
            files.push((format!("{name}.js"), JAVASCRIPT, js));
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    files.push(("console.css".to_owned(), CSS, STYLESHEET.to_owned()));
    files.sort_by(|a, b| a.0.cmp(&b.0));

    let mut hasher = Sha256::new();
    for (name, _, content) in &files {
        hasher.update((name.len() as u64).to_le_bytes());
        hasher.update(name.as_bytes());
        hasher.update((content.len() as u64).to_le_bytes());
        hasher.update(content.as_bytes());
    }
    let hash = hex::encode(hasher.finalize())[..16].to_owned();
    let html = page(&hash, &files);
    Ok(Bundle {
        hash,
        files: files
            .into_iter()
            .map(|(name, kind, content)| (name, (kind, content)))
            .collect(),
        html,
    })
}

fn collect_errors(errors: &mut Vec<SourceError>, name: &str, output: &hf_hfx::CompileOutput) {
    for d in &output.diagnostics {
        let file = match d.file {
            hf_hfx::SourceFile::Screen => format!("{name}.hfx"),
            hf_hfx::SourceFile::Sidecar => format!("{name}.ts"),
        };
        errors.push(SourceError {
            file,
            message: format!(
                "{}:{}: {} {}\n  | {}",
                d.line,
                d.column,
                d.code.as_str(),
                d.message,
                d.frame
            ),
        });
    }
}

/// The page: the stylesheet, preload hints for every module (they would otherwise load one
/// after another, each found only when its importer has loaded), and the entry script.
fn page(hash: &str, files: &[(String, &'static str, String)]) -> String {
    let mut preloads = format!(
        "<link rel=\"modulepreload\" href=\"{}\">\n",
        hf_hfx::RUNTIME_URL
    );
    for (name, kind, _) in files {
        if *kind == JAVASCRIPT && name != "main.js" {
            preloads.push_str(&format!(
                "<link rel=\"modulepreload\" href=\"/console/{hash}/{name}\">\n"
            ));
        }
    }
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>hf console</title>\n<link rel=\"icon\" href=\"data:,\">\n\
         <link rel=\"stylesheet\" href=\"/console/{hash}/console.css\">\n{preloads}\
         <script type=\"module\" src=\"/console/{hash}/main.js\"></script>\n</head>\n<body>\n\
         <div id=\"app\"><p class=\"boot\">Loading the console…</p></div>\n\
         <noscript><p>The hf console needs JavaScript.</p></noscript>\n</body>\n</html>\n"
    )
}

/// The console compiled once per process; an error means the embedded sources do not compile,
/// which the console's tests rule out.
fn bundle() -> Result<&'static Bundle, ApiError> {
    static BUNDLE: OnceLock<Result<Bundle, Vec<SourceError>>> = OnceLock::new();
    match BUNDLE.get_or_init(build) {
        Ok(bundle) => Ok(bundle),
        Err(errors) => {
            tracing::error!(?errors, "the console's sources do not compile");
            Err(ApiError::internal())
        }
    }
}

/// The console page.
pub async fn index() -> Result<HttpResponse, ApiError> {
    let bundle = bundle()?;
    Ok(HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, "text/html; charset=utf-8"))
        .insert_header((header::CONTENT_SECURITY_POLICY, CSP))
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header((header::REFERRER_POLICY, "no-referrer"))
        .body(bundle.html.clone()))
}

/// A file of one console build; any other build or name is 404 `FILE_NOT_FOUND`.
pub async fn asset(path: web::Path<(String, String)>) -> Result<HttpResponse, ApiError> {
    let (hash, file) = path.into_inner();
    let bundle = bundle()?;
    let found = (hash == bundle.hash)
        .then(|| bundle.files.get(&file))
        .flatten();
    let Some((kind, content)) = found else {
        return Err(ApiError::new(
            Code::FileNotFound,
            format!(
                "There is no console file `{}` here.",
                file.chars().take(100).collect::<String>()
            ),
        ));
    };
    Ok(HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, *kind))
        .insert_header((header::CACHE_CONTROL, "public, max-age=31536000, immutable"))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .body(content.clone()))
}

/// Adds the console's routes to the application. The application's compression applies to them
/// like to every answer (the console's files shrink to about a quarter).
pub fn register<T>(app: actix_web::App<T>) -> actix_web::App<T>
where
    T: actix_web::dev::ServiceFactory<
        actix_web::dev::ServiceRequest,
        Config = (),
        Error = actix_web::Error,
        InitError = (),
    >,
{
    // As resources, so that another method is 405 rather than 404.
    app.service(web::resource("/").route(web::get().to(index)))
        .service(web::resource("/console/{hash}/{file}").route(web::get().to(asset)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The console's sources are fixtures of the compiler: every one compiles without a
    /// diagnostic, and compiling them again gives the same files.
    #[test]
    fn the_console_compiles_deterministically() {
        let first = match build() {
            Ok(bundle) => bundle,
            Err(errors) => panic!("the console does not compile: {errors:#?}"),
        };
        let second = build().unwrap_or_else(|errors| panic!("{errors:#?}"));
        assert_eq!(first.hash, second.hash);
        assert_eq!(first.files, second.files);
        assert_eq!(first.html, second.html);
        for screen in SCREENS {
            assert!(first
                .files
                .contains_key(&format!("c-console-{}.js", screen.name)));
        }
        assert!(first
            .html
            .contains(&format!("/console/{}/main.js", first.hash)));
    }
}
