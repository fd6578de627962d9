//! Assembles the actix application: routes, extractor configuration, middleware, OpenAPI.

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceFactory, ServiceRequest, ServiceResponse};
use actix_web::{middleware, web, App};
use utoipa::OpenApi;
use utoipa_actix_web::AppExt;

use crate::error::ErrorBody;
use crate::extract::{self, BodyLimit};
use crate::middleware::RouteTable;
use crate::routes::system;
use crate::state::AppState;

/// Static parts of the OpenAPI document that no handler carries.
#[derive(OpenApi)]
#[openapi(
    info(title = "hf", description = "Metadata-driven application backend."),
    components(schemas(ErrorBody)),
    tags(
        (name = "auth"), (name = "iam"), (name = "metadata"),
        (name = "data"), (name = "hfx"), (name = "system"),
    )
)]
struct ApiDoc;

/// The generated OpenAPI document, serialised once.
#[derive(Debug, Clone)]
pub struct OpenApiDocument {
    /// The document as JSON text.
    pub json: String,
}

/// Registers every documented route. Shared by [`build`] and [`openapi`], so the served routes
/// and the document come from the same list.
fn register<T>(app: utoipa_actix_web::UtoipaApp<T>) -> utoipa_actix_web::UtoipaApp<T>
where
    T: ServiceFactory<ServiceRequest, Config = (), Error = actix_web::Error, InitError = ()>,
{
    app.service(system::health)
        .service(system::status)
        .service(system::openapi)
}

/// Builds the application with its state; returns it with the OpenAPI document of its routes.
pub fn build(
    state: AppState,
    body_limit: usize,
) -> App<
    impl ServiceFactory<
        ServiceRequest,
        Config = (),
        Response = ServiceResponse<impl MessageBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    let doc = openapi();
    let app = App::new()
        .app_data(web::Data::new(state))
        .app_data(BodyLimit(body_limit))
        .app_data(extract::query_config())
        .app_data(extract::path_config())
        .app_data(extract::json_config(body_limit))
        .app_data(web::PayloadConfig::new(body_limit))
        .app_data(web::Data::new(OpenApiDocument {
            json: openapi_json(&doc),
        }))
        .app_data(web::Data::new(RouteTable::from_openapi(&doc)))
        .into_utoipa_app();
    let (app, _) = register(app).split_for_parts();
    app.default_service(web::to(crate::middleware::not_found))
        .wrap(middleware::from_fn(crate::middleware::edge))
}

/// The OpenAPI document of every route.
pub fn openapi() -> utoipa::openapi::OpenApi {
    register(App::new().into_utoipa_app().openapi(ApiDoc::openapi()))
        .split_for_parts()
        .1
}

fn openapi_json(doc: &utoipa::openapi::OpenApi) -> String {
    doc.to_pretty_json().unwrap_or_else(|_| "{}".to_owned())
}
