//! Who may read and write metadata and plan or apply schema changes: the one place where those
//! routes name their policy.

use std::future::Future;
use std::pin::Pin;

use actix_web::dev::Payload;
use actix_web::{FromRequest, HttpRequest};

use crate::auth::{Admin, Authenticated};
use crate::error::ApiError;

/// A caller allowed to read metadata: any authenticated principal.
#[derive(Debug)]
pub struct MetadataReader;

impl FromRequest for MetadataReader {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let authenticated = Authenticated::from_request(req, payload);
        Box::pin(async move { authenticated.await.map(|_| MetadataReader) })
    }
}

/// A caller allowed to write metadata: an administrator, whose name authors the commits.
#[derive(Debug)]
pub struct MetadataWriter {
    /// The principal's name, used as the commit author.
    pub author: String,
}

impl FromRequest for MetadataWriter {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let admin = Admin::from_request(req, payload);
        Box::pin(async move {
            admin.await.map(|Admin(principal)| MetadataWriter {
                author: principal.name,
            })
        })
    }
}
