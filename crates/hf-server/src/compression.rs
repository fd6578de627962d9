//! Compression of large answers, when the client asks for it (`Accept-Encoding: br` or `gzip`).
//!
//! actix's `Compress` middleware negotiates the encoding and compresses every body. A small
//! answer gains nothing from it (it fits one packet either way) while every compressed
//! response pays for an encoder's state, so answers under [`MIN_COMPRESSED_BYTES`] are sent as
//! they are: [`skip_small`], inside `Compress`, marks them with `Content-Encoding: identity`,
//! which `Compress` leaves alone, and [`drop_identity_mark`], outside it, removes that mark
//! again before the response leaves. Streamed answers (unknown size) are compressed.

use actix_web::body::{BodySize, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderValue};
use actix_web::middleware::Next;

/// Answers shorter than this many bytes are never compressed.
pub const MIN_COMPRESSED_BYTES: u64 = 1024;

/// Inside `Compress`: marks small answers so that it leaves them uncompressed.
pub async fn skip_small(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let mut response = next.call(req).await?;
    let small =
        matches!(response.response().body().size(), BodySize::Sized(n) if n < MIN_COMPRESSED_BYTES);
    if small && !response.headers().contains_key(header::CONTENT_ENCODING) {
        response.headers_mut().insert(
            header::CONTENT_ENCODING,
            HeaderValue::from_static("identity"),
        );
    }
    Ok(response)
}

/// Outside `Compress`: removes the mark [`skip_small`] set; `identity` is not a content coding
/// a response should name.
pub async fn drop_identity_mark(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let mut response = next.call(req).await?;
    let marked = response
        .headers()
        .get(header::CONTENT_ENCODING)
        .is_some_and(|value| value == "identity");
    if marked {
        response.headers_mut().remove(header::CONTENT_ENCODING);
    }
    Ok(response)
}
