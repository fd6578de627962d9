//! Assembles the actix application: routes, extractor configuration, middleware, OpenAPI.

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceFactory, ServiceRequest, ServiceResponse};
use actix_web::{middleware, web, App};
use utoipa::OpenApi;
use utoipa_actix_web::AppExt;

use crate::compression;
use crate::cors::CorsOrigins;
use crate::error::ErrorBody;
use crate::extract::{self, BodyLimit};
use crate::middleware::RouteTable;
use crate::public_access::PublicAccess;
use crate::routes::system;
use crate::state::AppState;

/// Static parts of the OpenAPI document that no handler carries.
#[derive(OpenApi)]
#[openapi(
    info(title = "hf", description = "Metadata-driven application backend."),
    components(schemas(ErrorBody)),
    modifiers(&BearerScheme),
    tags(
        (name = "auth"), (name = "iam"), (name = "metadata"),
        (name = "data"), (name = "hfx"), (name = "system"),
    )
)]
struct ApiDoc;

/// Declares the `bearer` security scheme (an ES256 JWT) that protected operations name.
struct BearerScheme;

impl utoipa::Modify for BearerScheme {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .build(),
            ),
        );
    }
}

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
    // Routes are tried in registration order. Fixed paths first: skipping one costs a string
    // comparison, while skipping a pattern costs a regex match (measured: 5 record patterns
    // ahead of `/auth/me` took ~4 % of its CPU).
    let app = app
        .service(system::health)
        .service(system::status)
        .service(system::openapi);
    let app = register_fixed_auth(app);
    // Before the metadata routes, whose `/{branchRoot}/{moduleKey}` would match its path.
    let app = app.service(crate::routes::query::query);
    // Then the record routes, the hottest patterns, before any other pattern is tried.
    let app = app
        .service(crate::routes::data::create_record)
        .service(crate::routes::data::read_record)
        .service(crate::routes::data::update_record)
        .service(crate::routes::data::upsert_record)
        .service(crate::routes::data::delete_record);
    let app = register_iam_patterns(app);
    let app = crate::routes::hfx::register(app);
    register_metadata(app)
}

/// The `auth` and `iam` routes with fixed paths.
fn register_fixed_auth<T>(app: utoipa_actix_web::UtoipaApp<T>) -> utoipa_actix_web::UtoipaApp<T>
where
    T: ServiceFactory<ServiceRequest, Config = (), Error = actix_web::Error, InitError = ()>,
{
    use crate::routes::{auth, iam};
    app.service(auth::login)
        .service(auth::set_password)
        .service(auth::challenge)
        .service(auth::verify)
        .service(auth::me)
        .service(auth::session)
        .service(auth::exchange)
        .service(auth::jwks)
        .service(iam::create_principal)
        .service(iam::list_principals)
}

/// The `iam` routes with path parameters; registered before the metadata routes, whose
/// `/{branchRoot}/…` patterns would otherwise match their paths.
fn register_iam_patterns<T>(app: utoipa_actix_web::UtoipaApp<T>) -> utoipa_actix_web::UtoipaApp<T>
where
    T: ServiceFactory<ServiceRequest, Config = (), Error = actix_web::Error, InitError = ()>,
{
    use crate::routes::iam;
    app.service(iam::get_principal)
        .service(iam::patch_principal)
        .service(iam::delete_principal)
        .service(iam::list_credentials)
        .service(iam::attach_credential)
        .service(iam::revoke_credential)
        .service(iam::reset_token)
}

/// The metadata routes. Order matters among them: the fixed segments (`objects`, `fields`)
/// before the `{moduleKey}` patterns they would otherwise match.
fn register_metadata<T>(app: utoipa_actix_web::UtoipaApp<T>) -> utoipa_actix_web::UtoipaApp<T>
where
    T: ServiceFactory<ServiceRequest, Config = (), Error = actix_web::Error, InitError = ()>,
{
    use crate::routes::metadata as m;
    app.service(crate::routes::schema::plan)
        .service(crate::routes::schema::apply)
        .service(m::list_branches)
        .service(m::list_modules)
        .service(m::list_all_objects)
        .service(m::list_all_fields)
        .service(m::get_module)
        .service(m::create_module)
        .service(m::replace_module)
        .service(m::delete_module)
        .service(m::list_objects)
        .service(m::get_object)
        .service(m::create_object)
        .service(m::replace_object)
        .service(m::delete_object)
        .service(m::list_fields)
        .service(m::get_field)
        .service(m::create_field)
        .service(m::replace_field)
        .service(m::delete_field)
        .service(m::list_screens)
        .service(m::get_screen)
        .service(m::create_screen)
        .service(m::replace_screen)
        .service(m::delete_screen)
        .service(crate::routes::vendor::put_vendor)
        .service(crate::routes::vendor::get_vendor)
        .service(crate::routes::vendor::delete_vendor)
}

/// Builds the application with its state; returns it with the OpenAPI document of its routes.
pub fn build(
    state: AppState,
    body_limit: usize,
    public_access: PublicAccess,
    cors_origins: &CorsOrigins,
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
        .app_data(web::Data::new(public_access))
        .app_data(extract::query_config())
        .app_data(extract::path_config())
        .app_data(extract::json_config(body_limit))
        .app_data(web::PayloadConfig::new(body_limit))
        .app_data(web::Data::new(OpenApiDocument {
            // Compact: the document is large (every operation's error codes), and tools read it.
            json: serde_json::to_string(&doc).unwrap_or_else(|_| "{}".to_owned()),
        }))
        .app_data(web::Data::new(RouteTable::from_openapi(&doc)))
        .into_utoipa_app();
    let (app, _) = register(app).split_for_parts();
    // The console is a web page, not part of the API: it stays out of the OpenAPI document.
    let app = crate::console::register(app);
    // Innermost first: small answers are marked uncompressed, `Compress` encodes the rest as the
    // client asks, the mark is dropped, CORS headers are added, and `edge` sees everything.
    app.default_service(web::to(crate::middleware::not_found))
        .wrap(middleware::from_fn(compression::skip_small))
        .wrap(middleware::Compress::default())
        .wrap(middleware::from_fn(compression::drop_identity_mark))
        .wrap(middleware::Condition::new(
            !cors_origins.is_empty(),
            cors_origins.middleware(),
        ))
        .wrap(middleware::from_fn(crate::middleware::edge))
}

/// The OpenAPI document of every route, as served at `/openapi.json`.
pub fn openapi() -> serde_json::Value {
    crate::openapi::finish(&generated_openapi())
}

/// The document as utoipa generates it from the route annotations, before
/// [`crate::openapi::finish`] gives it literal metadata paths, error codes and patterns.
pub fn generated_openapi() -> utoipa::openapi::OpenApi {
    register(App::new().into_utoipa_app().openapi(ApiDoc::openapi()))
        .split_for_parts()
        .1
}
