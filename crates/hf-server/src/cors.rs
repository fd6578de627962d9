//! Cross-origin requests from the web origins an administrator lists (`HF_CORS_ORIGINS`).
//!
//! None is listed by default, and then no CORS header is ever sent: browsers keep other origins'
//! pages from reading hf's answers. A listed origin (`https://app.example.com`) may call every
//! route with a bearer token; credentials (cookies) are never allowed cross-origin, since the
//! only cookie, `hf_runtime`, is for hf's own rendering frame. A request from an origin that is
//! not listed is served as any other request, just without CORS headers, so the browser refuses
//! its page the answer; same-origin requests (which also send `Origin`) are unaffected.

use actix_cors::Cors;
use actix_web::http::header;

/// The listed origins, checked.
#[derive(Debug, Clone, Default)]
pub struct CorsOrigins(Vec<String>);

/// An entry of `HF_CORS_ORIGINS` that is not an origin.
#[derive(Debug, thiserror::Error)]
#[error("HF_CORS_ORIGINS entry `{0}` is not an origin like https://app.example.com (scheme and host, optional port, no path)")]
pub struct InvalidOrigin(String);

impl CorsOrigins {
    /// Checks each entry: `http://` or `https://`, a host, an optional port, nothing else.
    pub fn new(origins: &[String]) -> Result<Self, InvalidOrigin> {
        let mut checked = Vec::new();
        for origin in origins.iter().map(|o| o.trim()).filter(|o| !o.is_empty()) {
            let rest = origin
                .strip_prefix("https://")
                .or_else(|| origin.strip_prefix("http://"));
            let valid = rest.is_some_and(|host| {
                !host.is_empty()
                    && host.bytes().all(|b| {
                        b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']')
                    })
            });
            if !valid {
                return Err(InvalidOrigin(origin.to_owned()));
            }
            checked.push(origin.to_ascii_lowercase());
        }
        Ok(Self(checked))
    }

    /// Whether any origin is listed.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The middleware for the listed origins.
    pub fn middleware(&self) -> Cors {
        let cors = Cors::default()
            .allowed_methods(["GET", "POST", "PUT", "PATCH", "DELETE"])
            .allowed_headers([
                header::AUTHORIZATION,
                header::CONTENT_TYPE,
                header::IF_MATCH,
                header::IF_NONE_MATCH,
                crate::middleware::REQUEST_ID,
                crate::routes::data::IDEMPOTENCY_KEY,
            ])
            .expose_headers([
                crate::middleware::REQUEST_ID,
                crate::routes::data::IDEMPOTENT_REPLAYED,
                header::ETAG,
                header::RETRY_AFTER,
                header::WWW_AUTHENTICATE,
            ])
            .max_age(600)
            .block_on_origin_mismatch(false);
        self.0
            .iter()
            .fold(cors, |cors, origin| cors.allowed_origin(origin))
    }
}

#[cfg(test)]
mod tests {
    use super::CorsOrigins;

    #[test]
    fn origins_are_checked() {
        let ok = |o: &str| CorsOrigins::new(&[o.to_owned()]).is_ok();
        assert!(ok("https://app.example.com"));
        assert!(ok("http://localhost:5173"));
        assert!(!ok("*"));
        assert!(!ok("app.example.com"));
        assert!(!ok("https://app.example.com/"));
        assert!(!ok("https://"));
        assert!(CorsOrigins::new(&[]).unwrap().is_empty());
    }
}
