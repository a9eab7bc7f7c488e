//! Files a chat's visitor attaches (`POST /api/v1/attachments/:chatflowId/:chatId`,
//! Flowise's full-file upload: weir's loaders read each file — PDFs in their
//! confined child process — and the text is answered, for the widget to send with
//! the next question) and the files a chat uploaded
//! (`GET /api/v1/get-upload-file`).
//!
//! Both follow the prediction's rule ([`super::flow_access`]). Attached files are
//! kept with the chat (within `WORKSPACE_UPLOAD_QUOTA`, gone with the chat and
//! after `UPLOAD_TTL_DAYS`); they are served back only as downloads, with
//! `nosniff` and a sandboxing policy, so an uploaded page never runs as weir's.

use axum::extract::{DefaultBodyLimit, FromRequest, Multipart, Request, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::CommonErrors;
use super::flow_access::{admit, authorize, caller_key};
use super::predictions::{MAX_FILES, MAX_UPLOAD_BYTES, multipart_error};
use crate::domain::Chatflow;
use crate::http::AppState;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{Json, Path, Query};
use crate::retrieval::load::{self, FileData, LoaderKind};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(attach_files))
        .layer(DefaultBodyLimit::max(MAX_UPLOAD_BYTES))
        .merge(OpenApiRouter::new().routes(routes!(get_upload_file)))
}

/// One attached file as read (Flowise's shape).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct Attachment {
    name: String,
    mime_type: String,
    size: usize,
    /// The text weir's loaders read, or (with `base64`) a data URL of the file.
    content: String,
}

/// `chatbotConfig.fullFileUpload`: whether the chat takes whole files, and of
/// which MIME types (none listed: any weir can read).
fn full_file_upload(flow: &Chatflow) -> (bool, Vec<String>) {
    let config: Value = flow
        .chatbot_config
        .as_deref()
        .and_then(|c| serde_json::from_str(c).ok())
        .unwrap_or(Value::Null);
    let upload = &config["fullFileUpload"];
    let on =
        matches!(&upload["status"], Value::Bool(true)) || upload["status"].as_str() == Some("true");
    let allowed = upload["allowedUploadFileTypes"]
        .as_str()
        .unwrap_or_default()
        .split(',')
        .map(|t| t.trim().to_ascii_lowercase())
        .filter(|t| !t.is_empty())
        .collect();
    (on, allowed)
}

/// The MIME type of a file name's extension (what weir serves and checks).
fn mime_of(name: &str) -> &'static str {
    match load::extension(name).as_str() {
        "pdf" => "application/pdf",
        "docx" => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "txt" | "text" | "log" => "text/plain",
        "md" | "markdown" => "text/markdown",
        "csv" => "text/csv",
        "json" => "application/json",
        "jsonl" => "application/jsonl",
        "html" | "htm" => "text/html",
        "xml" => "application/xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        _ => "application/octet-stream",
    }
}

/// The loader that reads a file of this name, if weir has one.
fn loader_for(name: &str) -> Option<LoaderKind> {
    [
        LoaderKind::Pdf { per_page: false },
        LoaderKind::Docx,
        LoaderKind::Csv { column: None },
        LoaderKind::Json {
            pointers: Vec::new(),
        },
        LoaderKind::JsonLines { pointer: None },
        LoaderKind::Text,
    ]
    .into_iter()
    .find(|kind| kind.accepts(name))
}

/// Reads a multipart body: files in `files`, and whether `base64` is asked.
async fn read_files(form: &mut Multipart) -> ApiResult<(Vec<(FileData, String)>, bool)> {
    let bad = multipart_error;
    let mut files = Vec::new();
    let mut base64 = false;
    while let Some(field) = form.next_field().await.map_err(bad)? {
        let name = field.name().unwrap_or_default().to_owned();
        if name == "files" || field.file_name().is_some() {
            if files.len() == MAX_FILES {
                return Err(ApiError::BadRequest(format!(
                    "at most {MAX_FILES} files may be attached"
                )));
            }
            let file_name = field.file_name().unwrap_or("upload").to_owned();
            let declared = field
                .content_type()
                .map(|t| t.to_ascii_lowercase())
                .filter(|t| t != "application/octet-stream");
            let bytes = field.bytes().await.map_err(bad)?;
            let mime = declared.unwrap_or_else(|| mime_of(&file_name).to_owned());
            files.push((
                FileData {
                    name: file_name,
                    bytes,
                },
                mime,
            ));
        } else if name == "base64" {
            let text = field.text().await.map_err(bad)?;
            base64 = matches!(text.as_str(), "true" | "1" | "yes");
        }
    }
    if files.is_empty() {
        return Err(ApiError::BadRequest(
            "no files: send them in the multipart field 'files'".into(),
        ));
    }
    Ok((files, base64))
}

/// Reads a chat's attached files and keeps them with the chat; answers the text
/// of each (or, with `base64=true`, each file as a data URL). The chatflow must
/// take whole files (`chatbotConfig.fullFileUpload.status`), of the MIME types it
/// lists in `allowedUploadFileTypes` (any weir reads when none are listed).
#[utoipa::path(
    post,
    path = "/api/v1/attachments/{id}/{chatId}",
    tag = "chat",
    security((), ("bearer" = []), ("apiKey" = [])),
    params(
        ("id" = Uuid, Path, description = "Chatflow id"),
        ("chatId" = String, Path, description = "The chat the files belong to")
    ),
    request_body(content = String, content_type = "multipart/form-data",
                 description = "`files` (one or more), `base64` (optional: `true`)"),
    responses(
        (status = 200, description = "Each file as read", body = [Attachment]),
        (status = 404, description = "No such chatflow", body = ErrorBody),
        (status = 413, description = "Over 50 MiB, or over the workspace's upload quota", body = ErrorBody),
        (status = 415, description = "Not a multipart body", body = ErrorBody),
        CommonErrors
    )
)]
async fn attach_files(
    State(state): State<AppState>,
    Path((id, chat_id)): Path<(Uuid, String)>,
    request: Request,
) -> ApiResult<Json<Vec<Attachment>>> {
    let (parts, body) = request.into_parts();
    let (flow, _) = admit(&state, &parts, id).await?;
    if chat_id.is_empty() || chat_id.len() > 256 {
        return Err(ApiError::BadRequest(
            "'chatId' must be 1 to 256 characters".into(),
        ));
    }
    let (on, allowed) = full_file_upload(&flow);
    if !on {
        return Err(ApiError::BadRequest(
            "File upload is not enabled for this chatflow (chatbotConfig.fullFileUpload.status)"
                .into(),
        ));
    }
    let request = Request::from_parts(parts, body);
    let mut form = Multipart::from_request(request, &state)
        .await
        .map_err(|e| ApiError::UnsupportedMediaType(e.body_text()))?;
    let (files, base64) = read_files(&mut form).await?;
    for (file, mime) in &files {
        if !allowed.is_empty() && !allowed.contains(mime) {
            return Err(ApiError::BadRequest(format!(
                "File type '{mime}' of '{}' is not allowed for this chatflow (allowed: {})",
                file.name,
                allowed.join(", ")
            )));
        }
        if mime.as_str() != mime_of(&file.name) && mime_of(&file.name) != "application/octet-stream"
        {
            return Err(ApiError::BadRequest(format!(
                "'{}' is sent as {mime}, which its extension does not match",
                file.name
            )));
        }
    }
    let mut answered = Vec::with_capacity(files.len());
    for (file, mime) in &files {
        let content = if base64 {
            use base64::Engine;
            format!(
                "data:{mime};base64,{}",
                base64::engine::general_purpose::STANDARD.encode(&file.bytes)
            )
        } else {
            let kind = loader_for(&file.name).ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "weir cannot read '{}': attach text, Markdown, HTML, source code, PDF, \
                     DOCX, CSV, JSON or JSON Lines (or ask for base64)",
                    file.name
                ))
            })?;
            let documents = load::load(&kind, std::slice::from_ref(file))
                .await
                .map_err(|e| ApiError::BadRequest(e.0))?;
            documents
                .into_iter()
                .map(|d| d.page_content)
                .collect::<Vec<_>>()
                .join("\n\n")
        };
        answered.push(Attachment {
            name: file.name.clone(),
            mime_type: mime.clone(),
            size: file.bytes.len(),
            content,
        });
    }
    // Kept once every file was read: a file weir cannot read keeps nothing.
    let kept: Vec<FileData> = files.into_iter().map(|(f, _)| f).collect();
    state
        .uploads
        .keep(flow.workspace_id, flow.id, &chat_id, &kept)
        .await?;
    Ok(Json(answered))
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
struct UploadFileQuery {
    #[param(value_type = Uuid)]
    chatflow_id: Option<String>,
    chat_id: Option<String>,
    file_name: Option<String>,
    /// Ignored: files are always served as downloads.
    download: Option<String>,
}

/// A file a chat uploaded (the newest of that name), as a download.
#[utoipa::path(
    get,
    path = "/api/v1/get-upload-file",
    tag = "chat",
    security((), ("bearer" = []), ("apiKey" = [])),
    params(UploadFileQuery),
    responses(
        (status = 200, description = "The file", content_type = "application/octet-stream", body = Vec<u8>),
        (status = 404, description = "No such chatflow or file", body = ErrorBody),
        CommonErrors
    )
)]
async fn get_upload_file(
    State(state): State<AppState>,
    Query(query): Query<UploadFileQuery>,
    parts: axum::http::request::Parts,
) -> ApiResult<Response> {
    let given = |v: Option<String>, field: &str| {
        v.filter(|v| !v.is_empty())
            .ok_or_else(|| ApiError::BadRequest(format!("'{field}' is required")))
    };
    let flow = given(query.chatflow_id, "chatflowId")?;
    let flow = super::parse_uuid("chatflowId", &flow)?;
    let chat = given(query.chat_id, "chatId")?;
    let name = given(query.file_name, "fileName")?;
    if name.contains(['/', '\\']) || name.contains("..") {
        return Err(ApiError::BadRequest(
            "Invalid path characters detected in filename".into(),
        ));
    }
    let _ = query.download;
    let auth = caller_key(&state, &parts).await?;
    let flow = authorize(&state, flow, auth.as_ref()).await?;
    let bytes = state
        .uploads
        .find(flow.workspace_id, flow.id, &chat, &name)
        .await?
        .ok_or_else(|| ApiError::not_found("file"))?;
    let mut response = bytes.into_response();
    let headers = response.headers_mut();
    let mime = mime_of(&name);
    // Only pictures keep their type (the widget shows them); nothing is ever
    // rendered as a page of weir's origin.
    let served = if mime.starts_with("image/") {
        mime
    } else {
        "application/octet-stream"
    };
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(served));
    super::artifacts::confine(headers);
    headers.insert(
        header::CONTENT_DISPOSITION,
        super::artifacts::attachment(&name),
    );
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_go_to_the_loader_of_their_extension() {
        assert!(matches!(loader_for("a.PDF"), Some(LoaderKind::Pdf { .. })));
        assert!(matches!(loader_for("notes.md"), Some(LoaderKind::Text)));
        assert!(matches!(
            loader_for("rows.csv"),
            Some(LoaderKind::Csv { .. })
        ));
        assert!(loader_for("photo.png").is_none());
        assert_eq!(mime_of("photo.JPG"), "image/jpeg");
        assert_eq!(mime_of("x.exe"), "application/octet-stream");
    }
}
