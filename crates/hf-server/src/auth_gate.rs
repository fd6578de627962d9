//! Who may read and write metadata: the one place where the metadata routes ask for a caller.
//!
//! FIXME(auth): until the authentication extractors land, every caller is treated as the
//! administrator `admin`; switching to `auth::Authenticated`/`auth::Admin` is a change to these
//! two types only.

use std::future::{ready, Ready};

use actix_web::dev::Payload;
use actix_web::{FromRequest, HttpRequest};

use crate::error::ApiError;

/// A caller allowed to read metadata (any authenticated principal).
#[derive(Debug)]
pub struct MetadataReader;

impl FromRequest for MetadataReader {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(_req: &HttpRequest, _payload: &mut Payload) -> Self::Future {
        ready(Ok(MetadataReader))
    }
}

/// A caller allowed to write metadata (an administrator); its name authors the commits.
#[derive(Debug)]
pub struct MetadataWriter {
    /// The principal's name, used as the commit author.
    pub author: String,
}

impl FromRequest for MetadataWriter {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(_req: &HttpRequest, _payload: &mut Payload) -> Self::Future {
        ready(Ok(MetadataWriter {
            author: "admin".to_owned(),
        }))
    }
}
