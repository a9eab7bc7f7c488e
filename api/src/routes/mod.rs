//! Route handlers, one module per area, each owning its `router()` and its private
//! request bodies. A handler extracts its inputs, checks the caller's permission,
//! calls the store (or an engine) once, and shapes the answer.
//!
//! Every handler carries a `#[utoipa::path]` annotation: routes are registered
//! through `utoipa_axum::routes!`, so a route cannot exist without being in the
//! OpenAPI document.

pub mod apikeys;
pub mod artifacts;
pub mod attachments;
pub mod chat;
pub mod chatflows;
pub mod credentials;
pub mod custom_mcp_servers;
pub mod document_stores;
pub mod executions;
pub mod flow_access;
pub mod health;
pub mod mcp;
pub mod nodes;
pub mod oauth;
pub mod predictions;
pub mod schedules;
pub mod signin;
pub mod tools;
pub mod triggers;
pub mod unserved;
pub mod variables;
pub mod vectors;
pub mod webhooks;

use chrono::{DateTime, NaiveDate, NaiveTime, Utc};
use serde::{Deserialize, Deserializer};
use uuid::Uuid;

use crate::domain::time::Timestamp;
use crate::http::error::{ApiError, ApiResult};
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;

use crate::http::AppState;
use crate::http::error::ErrorBody;

/// Where this server is reached: `PUBLIC_URL`, else the request's own host.
pub(crate) fn public_base_url(state: &AppState, headers: &axum::http::HeaderMap) -> String {
    if let Some(public) = &state.config.public_url {
        return public.clone();
    }
    let host = headers
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost");
    format!("http://{host}")
}

/// The document's frame; paths are added by the routers below.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "weir",
        description = "Chatflows, predictions and triggers over HTTP. Every error is `{\"message\"}`."
    ),
    components(schemas(ErrorBody)),
    modifiers(&Security),
    security(("bearer" = []), ("apiKey" = []))
)]
pub struct ApiDoc;

struct Security;

impl Modify for Security {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
        components.add_security_scheme(
            "apiKey",
            SecurityScheme::ApiKey(ApiKey::Query(ApiKeyValue::new("apiKey"))),
        );
    }
}

/// Every API route with its documentation.
pub fn api() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(health::router())
        .merge(signin::router())
        .merge(nodes::router())
        .merge(paged_for_the_ui(unserved::router()))
        .merge(paged_for_the_ui(apikeys::router()))
        .merge(paged_for_the_ui(chatflows::router()))
        .merge(paged_for_the_ui(credentials::router()))
        .merge(paged_for_the_ui(variables::router()))
        .merge(paged_for_the_ui(tools::router()))
        .merge(predictions::router())
        .merge(chat::router())
        .merge(attachments::router())
        .merge(artifacts::router())
        .merge(paged_for_the_ui(triggers::router()))
        .merge(schedules::router())
        .merge(webhooks::router())
        .merge(vectors::router())
        .merge(document_stores::router())
        .merge(executions::router())
        .merge(mcp::router())
        .merge(custom_mcp_servers::router())
        .merge(oauth::router())
}

/// The routers whose lists Flowise's UI pages through: their paged answers
/// wrapped for it (`http::ui::list_envelope`). Only these: the prediction path
/// carries no layer of the UI's.
fn paged_for_the_ui(router: OpenApiRouter<AppState>) -> OpenApiRouter<AppState> {
    router.route_layer(axum::middleware::from_fn(crate::http::ui::list_envelope))
}

/// A JSON-text field that clients send either as a string or as the JSON value
/// itself; kept as text (what Flowise stores and returns).
#[derive(Debug, Clone)]
pub struct JsonText(pub String);

impl<'de> Deserialize<'de> for JsonText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Keep an object's text byte for byte as the client wrote it.
        let raw = Box::<serde_json::value::RawValue>::deserialize(d)?;
        if raw.get().starts_with('"') {
            serde_json::from_str::<String>(raw.get())
                .map(JsonText)
                .map_err(serde::de::Error::custom)
        } else {
            Ok(JsonText(raw.get().to_owned()))
        }
    }
}

impl utoipa::PartialSchema for JsonText {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .description(Some("JSON text, or the JSON value itself"))
            .into()
    }
}

impl utoipa::ToSchema for JsonText {}

/// A parameter that must be a UUID.
pub fn parse_uuid(field: &str, text: &str) -> ApiResult<Uuid> {
    Uuid::parse_str(text).map_err(|_| ApiError::BadRequest(format!("'{field}' must be a UUID")))
}

pub fn end_of_day() -> NaiveTime {
    NaiveTime::from_hms_milli_opt(23, 59, 59, 999).unwrap_or(NaiveTime::MIN)
}

/// An RFC 3339 date-time (`2025-05-01T12:00:00Z`, any offset), or a bare date
/// (`2025-05-01`) read as `at_time` of that day in UTC.
pub fn parse_date(field: &str, text: &str, at_time: NaiveTime) -> ApiResult<Timestamp> {
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Ok(at.with_timezone(&Utc));
    }
    if let Ok(day) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        return Ok(day.and_time(at_time).and_utc());
    }
    Err(ApiError::BadRequest(format!(
        "'{field}' must be an ISO 8601 date-time or date (2025-05-01T12:00:00Z, 2025-05-01)"
    )))
}

/// Error answers of routes that read a JSON body, for the documentation.
#[derive(utoipa::IntoResponses)]
pub enum BodyErrors {
    /// The body is over the size limit.
    #[response(status = 413)]
    PayloadTooLarge(ErrorBody),
    /// A body sent without `Content-Type: application/json`.
    #[response(status = 415)]
    UnsupportedMediaType(ErrorBody),
}

/// Error answers shared by authenticated routes, for the documentation.
#[derive(utoipa::IntoResponses)]
pub enum CommonErrors {
    /// Malformed or invalid parameters.
    #[response(status = 400)]
    BadRequest(ErrorBody),
    /// Missing or invalid API key.
    #[response(status = 401)]
    Unauthorized(ErrorBody),
    /// The key lacks the permission.
    #[response(status = 403)]
    Forbidden(ErrorBody),
    /// Server-side failure.
    #[response(status = 500)]
    Internal(ErrorBody),
}
