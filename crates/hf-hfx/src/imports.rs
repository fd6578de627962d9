//! The import specifier rule: what a screen may import and which URL the browser loads.
//!
//! - `hfx` is the runtime: `/hfx/vendor/hfx-runtime.js`.
//! - `./sidecar` is the screen's sidecar and stays as written (the server serves it next to the
//!   module).
//! - `screen:<module>/<screen>` is another screen of the same snapshot (a component); it becomes a
//!   dynamic import of the sibling module URL, resolved by the runtime.
//! - Any other bare specifier `x` (`chart.js`, `@scope/pkg`) is a vendored module. A host that
//!   knows where the screen's vendored files are served passes that address as
//!   [`crate::CompileOptions::vendor_base`] and `x` becomes `<vendor_base>x`, exactly (the host
//!   checks that the file exists, from [`crate::CompileOutput::vendor_imports`]). Without it,
//!   `x` becomes `/hfx/vendor/x.js`, or `/hfx/vendor/x` when `x` already ends in `.js` or `.mjs`.
//! - Relative paths other than `./sidecar`, absolute paths and URLs are refused: a screen can only
//!   load what the server serves.

/// The URL the runtime is served at.
pub const RUNTIME_URL: &str = "/hfx/vendor/hfx-runtime.js";

/// Where a compiled module's imports point beyond the fixed rule: the sidecar's URL and the base
/// URL of vendored modules (see [`crate::CompileOptions`]).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Urls<'a> {
    /// What `./sidecar` becomes; `None` keeps it.
    pub(crate) sidecar: Option<&'a str>,
    /// The prefix of a vendored module's URL; `None` keeps the `/hfx/vendor/x.js` rule.
    pub(crate) vendor_base: Option<&'a str>,
}

impl Urls<'_> {
    /// The URL of the vendored module `spec`, whose URL by the fixed rule is `url`.
    pub(crate) fn vendor(&self, spec: &str, url: String) -> String {
        match self.vendor_base {
            Some(base) if is_vendored_module(spec) => format!("{base}{spec}"),
            _ => url,
        }
    }
}

/// Whether a bare specifier that [`classify`] accepted names a vendored module (rather than the
/// runtime or an explicit `/hfx/vendor/…` URL).
pub(crate) fn is_vendored_module(spec: &str) -> bool {
    spec != "hfx" && !spec.starts_with("/hfx/vendor/")
}

/// What an import specifier refers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Specifier {
    /// Kept as written (`./sidecar`).
    Sidecar,
    /// Another screen: `screen:<module>/<screen>`.
    Screen { module: String, screen: String },
    /// A vendored module, with its URL.
    Vendor(String),
}

/// Classifies a screen script's import specifier, or explains why it cannot be imported.
pub(crate) fn classify(spec: &str) -> Result<Specifier, String> {
    if spec == "./sidecar" {
        return Ok(Specifier::Sidecar);
    }
    if let Some(rest) = spec.strip_prefix("screen:") {
        return match rest.split_once('/') {
            Some((m, s)) if is_key(m) && is_key(s) => Ok(Specifier::Screen {
                module: m.to_string(),
                screen: s.to_string(),
            }),
            _ => Err(format!(
                "`{spec}`: a screen import is `screen:<moduleKey>/<screenKey>`"
            )),
        };
    }
    vendor_url(spec).map(Specifier::Vendor)
}

/// Classifies a sidecar's import specifier. Relative imports stay as written (they resolve next
/// to the sidecar's URL); bare ones follow the vendor rule.
pub(crate) fn classify_sidecar(spec: &str) -> Result<Specifier, String> {
    if spec.starts_with("./") || spec.starts_with("../") {
        return Ok(Specifier::Sidecar);
    }
    vendor_url(spec).map(Specifier::Vendor)
}

/// The vendor URL of a bare specifier (see the module docs for the rule).
fn vendor_url(spec: &str) -> Result<String, String> {
    if spec == "hfx" {
        return Ok(RUNTIME_URL.to_string());
    }
    if spec.starts_with("/hfx/vendor/") {
        return Ok(spec.to_string());
    }
    if spec.starts_with('.') || spec.starts_with('/') {
        return Err(format!("`{spec}`: a screen imports only `./sidecar`, other screens (`screen:m/s`) and vendored modules"));
    }
    let valid_chars = spec
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'@' | b'.' | b'_' | b'-' | b'/'));
    let valid_segments = spec
        .split('/')
        .all(|seg| !seg.is_empty() && seg != "." && seg != "..");
    if spec.is_empty() || !valid_chars || !valid_segments || spec.contains(':') {
        return Err(format!(
            "`{spec}` is not a valid vendored module name (letters, digits, `@ . _ - /`)"
        ));
    }
    if spec.ends_with(".js") || spec.ends_with(".mjs") {
        Ok(format!("/hfx/vendor/{spec}"))
    } else {
        Ok(format!("/hfx/vendor/{spec}.js"))
    }
}

fn is_key(s: &str) -> bool {
    let mut bytes = s.bytes();
    s.len() <= 63
        && matches!(bytes.next(), Some(b'a'..=b'z'))
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}
