//! `/api/v1/credentials`: named sets of secret fields nodes use by id (Flowise's
//! shape: `name`, `credentialName`, write-only `plainDataObj`). Reads name the set
//! fields, each valued with Flowise's redaction marker; values never leave the
//! server.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::Deserialize;
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::{BodyErrors, CommonErrors};
use crate::domain::Permission;
use crate::domain::credential::Credential;
use crate::http::AppState;
use crate::http::auth::AuthUser;
use crate::http::error::{ApiResult, ErrorBody};
use crate::http::extract::{Json, Path, Query};
use crate::http::pagination::{PageQuery, total_count};
use crate::services::credentials::{self, CredentialWrite};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_credentials, create_credential))
        .routes(routes!(
            get_credential,
            update_credential,
            delete_credential
        ))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct CredentialBody {
    /// What people call it (required on create).
    name: Option<String>,
    /// Flowise's credential type, such as `openAIApi` (required on create).
    credential_name: Option<String>,
    /// The secret fields (`{"openAIApiKey": "sk-…"}`): strings, numbers or booleans.
    /// On update, a field valued with the redaction marker keeps its value and one
    /// valued `null` or `""` is removed.
    #[schema(value_type = Option<Object>)]
    plain_data_obj: Option<Map<String, Value>>,
    /// Hosts (`host` or `host:port`) besides the provider's own that nodes may send
    /// the fields to: a gateway or a self-hosted model server. Replaces the list.
    allowed_hosts: Option<Vec<String>>,
}

impl From<CredentialBody> for CredentialWrite {
    fn from(body: CredentialBody) -> Self {
        CredentialWrite {
            name: body.name,
            credential_name: body.credential_name,
            plain_data_obj: body.plain_data_obj,
            allowed_hosts: body.allowed_hosts,
        }
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
struct ListQuery {
    /// Only credentials of this type.
    credential_name: Option<String>,
    /// 1-based page number (default 1).
    page: Option<u32>,
    /// Items per page (default 20, at most 100).
    limit: Option<u32>,
}

/// Lists the workspace's credentials by name (without their fields).
#[utoipa::path(
    get,
    path = "/api/v1/credentials",
    tag = "credentials",
    params(ListQuery),
    responses(
        (status = 200, description = "One page of credentials; the total is in X-Total-Count",
         body = [Credential], headers(("X-Total-Count" = u64, description = "Number of credentials in all pages"))),
        CommonErrors
    )
)]
async fn list_credentials(
    auth: AuthUser,
    State(state): State<AppState>,
    Query(query): Query<ListQuery>,
) -> ApiResult<impl IntoResponse> {
    auth.require(Permission::CredentialsRead)?;
    let page = PageQuery {
        page: query.page,
        limit: query.limit,
    }
    .page()?;
    let kind = query.credential_name.as_deref().filter(|k| !k.is_empty());
    let listing = credentials::list(&state, auth.workspace(), kind, page).await?;
    Ok((total_count(listing.total), Json(listing.items)))
}

/// Creates a credential; its fields are sealed before they are stored.
#[utoipa::path(
    post,
    path = "/api/v1/credentials",
    tag = "credentials",
    request_body = CredentialBody,
    responses(
        (status = 201, description = "The created credential, its fields redacted", body = Credential),
        (status = 412, description = "A required field is missing", body = ErrorBody),
        CommonErrors,
        BodyErrors
    )
)]
async fn create_credential(
    auth: AuthUser,
    State(state): State<AppState>,
    Json(body): Json<CredentialBody>,
) -> ApiResult<(StatusCode, Json<Credential>)> {
    auth.require(Permission::CredentialsWrite)?;
    let created = credentials::create(&state, auth.workspace(), body.into()).await?;
    Ok((StatusCode::CREATED, Json(created)))
}

/// Reads one credential: which fields are set, never their values.
#[utoipa::path(
    get,
    path = "/api/v1/credentials/{id}",
    tag = "credentials",
    params(("id" = Uuid, Path, description = "Credential id")),
    responses(
        (status = 200, description = "The credential, its fields redacted", body = Credential),
        (status = 404, description = "No such credential in this workspace", body = ErrorBody),
        CommonErrors
    )
)]
async fn get_credential(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<Credential>> {
    auth.require(Permission::CredentialsRead)?;
    Ok(Json(credentials::get(&state, auth.workspace(), id).await?))
}

/// Changes the given fields of a credential.
#[utoipa::path(
    put,
    path = "/api/v1/credentials/{id}",
    tag = "credentials",
    params(("id" = Uuid, Path, description = "Credential id")),
    request_body = CredentialBody,
    responses(
        (status = 200, description = "The updated credential, its fields redacted", body = Credential),
        (status = 404, description = "No such credential in this workspace", body = ErrorBody),
        (status = 409, description = "The credential changed during the update", body = ErrorBody),
        CommonErrors,
        BodyErrors
    )
)]
async fn update_credential(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    Json(body): Json<CredentialBody>,
) -> ApiResult<Json<Credential>> {
    auth.require(Permission::CredentialsWrite)?;
    Ok(Json(
        credentials::update(&state, auth.workspace(), id, body.into()).await?,
    ))
}

/// Deletes a credential (flows that name it then fail with 400 until changed).
#[utoipa::path(
    delete,
    path = "/api/v1/credentials/{id}",
    tag = "credentials",
    params(("id" = Uuid, Path, description = "Credential id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such credential in this workspace", body = ErrorBody),
        CommonErrors
    )
)]
async fn delete_credential(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> ApiResult<StatusCode> {
    auth.require(Permission::CredentialsWrite)?;
    credentials::delete(&state, auth.workspace(), id).await?;
    Ok(StatusCode::NO_CONTENT)
}
