//! `POST /api/v1/prediction/:id` (JSON or multipart, answered as JSON or as a
//! Flowise-compatible SSE stream), `GET /api/v1/chatflows-streaming/:id` and
//! `GET /api/v1/public-chatbotConfig/:id` (what Flowise's chat widget loads).
//!
//! Who may ask: [`super::flow_access`].

use axum::extract::{DefaultBodyLimit, FromRequest, Multipart, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value, json};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::CommonErrors;
use super::flow_access::{admit, authorize, caller, caller_key};
use crate::domain::{ChatType, Permission, is_email};
use crate::flow::Plan;
use crate::http::AppState;
use crate::http::auth::AuthUser;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{Json, Path};
use crate::http::session;
use crate::ratelimit;
use crate::services::prediction::{
    self, HistoryItem, HumanAnswer, ImageUpload, PredictionRequest, PredictionResult, Upload,
    image_type,
};

/// Largest prediction body (files included).
pub const MAX_UPLOAD_BYTES: usize = 50 * 1024 * 1024;
/// Most files one prediction may attach.
pub const MAX_FILES: usize = 20;
/// Largest picture sent to a vision model (Flowise's default limit).
pub const MAX_IMAGE_BYTES: usize = 5 * 1024 * 1024;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_prediction))
        .routes(routes!(internal_prediction))
        .layer(DefaultBodyLimit::max(MAX_UPLOAD_BYTES))
        .merge(
            OpenApiRouter::new()
                .routes(routes!(chatflow_uploads))
                .routes(routes!(streaming_support))
                .routes(routes!(public_chatbot_config)),
        )
}

/// Accepts `true`/`false` and the strings `"true"`/`"false"` (multipart sends text).
fn bool_like<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(b)),
        Some(Value::String(s)) if s == "true" => Ok(Some(true)),
        Some(Value::String(s)) if s == "false" || s.is_empty() => Ok(Some(false)),
        Some(other) => Err(serde::de::Error::custom(format!(
            "expected true or false, got {other}"
        ))),
    }
}

/// The prediction request (SPEC.md); Flowise clients also send `chatflowId`,
/// `null` values and other fields, which are ignored.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct PredictionBody {
    /// The user's input (required).
    question: Option<String>,
    /// Conversation session; keeps memory between turns.
    chat_id: Option<String>,
    /// Alias of chatId.
    session_id: Option<String>,
    /// Earlier messages supplying context.
    history: Option<Vec<HistoryItem>>,
    /// Node input names → values for this request.
    override_config: Option<Map<String, Value>>,
    /// `true` asks for an SSE stream.
    #[serde(default, deserialize_with = "bool_like")]
    #[schema(value_type = Option<bool>)]
    streaming: Option<bool>,
    /// Address kept as a lead of the conversation.
    lead_email: Option<String>,
    /// Files sent inline as data URLs (what Flowise's clients send); `url`
    /// uploads are not fetched.
    uploads: Option<Vec<JsonUpload>>,
    /// An agentflow's form values (a form-input start), instead of a question.
    form: Option<Map<String, Value>>,
    /// A person's answer to an agentflow run that stopped for it.
    human_input: Option<HumanInputBody>,
}

/// `humanInput`: `{type: "proceed" | "reject", startNodeId?, feedback?}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct HumanInputBody {
    #[serde(rename = "type")]
    kind: Option<String>,
    start_node_id: Option<String>,
    feedback: Option<String>,
}

/// An upload inside a JSON body: `{data: "data:<mime>;base64,<…>", type, name, mime}`.
#[derive(Debug, Deserialize, ToSchema)]
struct JsonUpload {
    data: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    name: Option<String>,
}

impl JsonUpload {
    /// Whether this is a picture (`data:image/…`), for the chat model to see.
    fn is_image(&self) -> bool {
        self.kind.as_deref() != Some("url")
            && self
                .data
                .as_deref()
                .is_some_and(|d| d.starts_with("data:image/"))
    }

    /// The decoded picture: its declared type must be one a vision model takes
    /// and its bytes must be of that type.
    fn decode_image(self) -> ApiResult<ImageUpload> {
        let declared = self
            .data
            .as_deref()
            .and_then(|d| d.strip_prefix("data:"))
            .and_then(|d| d.split_once(';'))
            .map(|(mime, _)| mime.to_owned())
            .unwrap_or_default();
        let Some(file) = self.decode()? else {
            return Err(ApiError::BadRequest(
                "an image upload must carry its data".into(),
            ));
        };
        if file.bytes.len() > MAX_IMAGE_BYTES {
            return Err(ApiError::PayloadTooLarge(format!(
                "image '{}' is larger than {} MiB",
                file.name,
                MAX_IMAGE_BYTES / (1024 * 1024)
            )));
        }
        match image_type(&file.bytes) {
            Some(mime) if mime == declared => Ok(ImageUpload {
                name: file.name,
                mime,
                bytes: file.bytes,
            }),
            _ => Err(ApiError::BadRequest(format!(
                "image '{}' is not a {declared} picture (weir takes PNG, JPEG, GIF and WebP)",
                file.name
            ))),
        }
    }

    /// The decoded file, or `None` for a reference (`type: "url"`) weir does not fetch.
    fn decode(self) -> ApiResult<Option<Upload>> {
        use base64::Engine;
        if self.kind.as_deref() == Some("url") {
            return Ok(None);
        }
        let name = self.name.unwrap_or_else(|| "upload".to_owned());
        let data = self.data.unwrap_or_default();
        let payload = match data.split_once(";base64,") {
            Some((head, payload)) if head.starts_with("data:") => payload,
            _ => {
                return Err(ApiError::BadRequest(format!(
                    "upload '{name}' must carry a base64 data URL ('data:<type>;base64,...')"
                )));
            }
        };
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(payload.trim())
            .map_err(|e| {
                ApiError::BadRequest(format!("upload '{name}' is not valid base64: {e}"))
            })?;
        Ok(Some(Upload {
            name,
            bytes: bytes.into(),
        }))
    }
}

impl PredictionBody {
    fn into_request(self, mut uploads: Vec<Upload>) -> ApiResult<(PredictionRequest, bool)> {
        // Files the widget attached whole (`POST /attachments` read them): their
        // text goes to the model with the question.
        let mut attached = String::new();
        let mut images = Vec::new();
        for upload in self.uploads.unwrap_or_default() {
            if upload.is_image() {
                images.push(upload.decode_image()?);
                continue;
            }
            if upload.kind.as_deref() == Some("file:full") {
                let name = upload.name.as_deref().unwrap_or("attachment");
                attached.push_str(&format!(
                    "\n\n[Attached file: {name}]\n{}",
                    upload.data.as_deref().unwrap_or_default()
                ));
                continue;
            }
            if let Some(file) = upload.decode()? {
                uploads.push(file);
            }
        }
        if uploads.len() + images.len() > MAX_FILES {
            return Err(ApiError::BadRequest(format!(
                "at most {MAX_FILES} files may be attached"
            )));
        }
        let form = self.form.unwrap_or_default();
        let human_input = match self.human_input {
            None => None,
            Some(h) => Some(HumanAnswer {
                proceed: match h.kind.as_deref() {
                    Some("proceed") => true,
                    Some("reject") => false,
                    _ => {
                        return Err(ApiError::BadRequest(
                            "'humanInput.type' must be \"proceed\" or \"reject\"".into(),
                        ));
                    }
                },
                start_node_id: h.start_node_id.filter(|s| !s.is_empty()),
                feedback: h.feedback.unwrap_or_default(),
            }),
        };
        let question = match (self.question, form.is_empty()) {
            // Going on with a stopped run needs no question.
            (None, true) if human_input.is_some() => String::new(),
            (Some(q), true) if q.trim().is_empty() => {
                return Err(ApiError::BadRequest("'question' must not be empty".into()));
            }
            (Some(q), true) => q + &attached,
            (None, true) => return Err(ApiError::missing("question")),
            (Some(q), false) if !q.trim().is_empty() => {
                return Err(ApiError::BadRequest(
                    "give either a 'question' or a 'form', not both".into(),
                ));
            }
            (_, false) => String::new(),
        };
        let lead_email = match self.lead_email.map(|e| e.trim().to_owned()) {
            Some(e) if e.is_empty() => None,
            Some(e) if is_email(&e) => Some(e),
            Some(e) => {
                return Err(ApiError::BadRequest(format!(
                    "'leadEmail' is not an e-mail address: {e}"
                )));
            }
            None => None,
        };
        let chat_id = self
            .chat_id
            .filter(|c| !c.is_empty())
            .or(self.session_id.filter(|s| !s.is_empty()));
        if chat_id.as_ref().is_some_and(|c| c.len() > 256) {
            return Err(ApiError::BadRequest(
                "'chatId' must be at most 256 characters".into(),
            ));
        }
        Ok((
            PredictionRequest {
                question,
                chat_id,
                history: self.history.unwrap_or_default(),
                override_config: self.override_config,
                lead_email,
                uploads,
                images,
                flow_vars: Map::new(),
                form,
                streaming: self.streaming.unwrap_or(false),
                human_input,
                chat_type: ChatType::External,
                depth: 0,
                permit: None,
                firing_end: None,
            },
            self.streaming.unwrap_or(false),
        ))
    }
}

/// Reads a multipart body: `files` parts are uploads, every other part a text field.
/// A multipart body that could not be read: over [`MAX_UPLOAD_BYTES`] (413),
/// else malformed (400).
pub(super) fn multipart_error(e: axum::extract::multipart::MultipartError) -> ApiError {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::PayloadTooLarge(format!(
            "the request is over {} MiB",
            MAX_UPLOAD_BYTES / (1024 * 1024)
        ))
    } else {
        ApiError::BadRequest(format!("malformed multipart body: {}", e.body_text()))
    }
}

async fn read_multipart(mut form: Multipart) -> ApiResult<(PredictionBody, Vec<Upload>)> {
    let bad = multipart_error;
    let mut fields = Map::new();
    let mut uploads = Vec::new();
    while let Some(field) = form.next_field().await.map_err(bad)? {
        let name = field.name().unwrap_or_default().to_owned();
        if name == "files" || field.file_name().is_some() {
            if uploads.len() == MAX_FILES {
                return Err(ApiError::BadRequest(format!(
                    "at most {MAX_FILES} files may be attached"
                )));
            }
            let name = field.file_name().unwrap_or("upload").to_owned();
            let bytes = field.bytes().await.map_err(bad)?;
            uploads.push(Upload { name, bytes });
        } else {
            let text = field.text().await.map_err(bad)?;
            // Structured fields arrive as JSON text.
            let value = match name.as_str() {
                "history" | "overrideConfig" | "uploads" => {
                    serde_json::from_str(&text).map_err(|e| {
                        ApiError::BadRequest(format!("form field '{name}' must be JSON: {e}"))
                    })?
                }
                _ => Value::String(text),
            };
            fields.insert(name, value);
        }
    }
    let body = serde_json::from_value(Value::Object(fields))
        .map_err(|e| ApiError::BadRequest(format!("invalid form field: {e}")))?;
    Ok((body, uploads))
}

/// Asks a chatflow a question.
///
/// JSON (`application/json`) or multipart (`multipart/form-data`: files in
/// `files`, every other field as text). With `streaming: true` the answer is a
/// Server-Sent Events stream: `start`, `token`…, `metadata`, `end` (each `data:`
/// line is one JSON object `{"event", "data"}`); a failure after the stream
/// started is an `error` event followed by `end`.
#[utoipa::path(
    post,
    path = "/api/v1/prediction/{id}",
    tag = "predictions",
    params(("id" = Uuid, Path, description = "Chatflow id")),
    request_body(content((PredictionBody = "application/json"), (PredictionBody = "multipart/form-data"))),
    responses(
        (status = 200, description = "The answer (JSON), or an SSE stream when `streaming` is true",
         content((PredictionResult = "application/json"), (String = "text/event-stream"))),
        (status = 404, description = "No such chatflow", body = ErrorBody),
        (status = 412, description = "`question` is missing", body = ErrorBody),
        (status = 413, description = "Body over 50 MiB", body = ErrorBody),
        (status = 429, description = "Over the chatflow's rate limit", body = ErrorBody),
        CommonErrors
    )
)]
async fn create_prediction(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    request: Request,
) -> ApiResult<Response> {
    let (parts, body) = request.into_parts();
    let (flow, auth) = admit(&state, &parts, id).await?;
    if let Some(limit) = flow.api_config.as_ref().and_then(|c| c.rate_limit()) {
        let who = caller(&parts, auth.as_ref(), state.config.trust_proxy);
        ratelimit::check(&*state.store, limit, flow.id, &who).await?;
    }
    // Flowise's canvas marks its own chats; only a key holder's count as such.
    let internal = auth.is_some() && session::from_ui(&parts.headers);
    let request = Request::from_parts(parts, body);
    let is_multipart = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("multipart/form-data"));
    let (body, uploads) = if is_multipart {
        let form = Multipart::from_request(request, &state)
            .await
            .map_err(|e| {
                ApiError::BadRequest(format!("malformed multipart body: {}", e.body_text()))
            })?;
        read_multipart(form).await?
    } else {
        let Json(body) = Json::<PredictionBody>::from_request(request, &state).await?;
        (body, Vec::new())
    };
    let (mut request, streaming) = body.into_request(uploads)?;
    if internal {
        request.chat_type = ChatType::Internal;
    }
    let prediction = prediction::start(&state, &flow, request).await?;
    if streaming && prediction.streamable {
        crate::http::sse::stream_answer(prediction.events).await
    } else {
        Ok(axum::Json(prediction.answer().await?).into_response())
    }
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct StreamingSupport {
    is_streaming: bool,
}

/// Whether a chatflow can stream its answers. Flowise's clients ask before
/// predicting, without their key, so a caller who may not run the chatflow — and
/// one asking about an id that does not exist — gets the same answer as for a
/// flow that streams, `{"isStreaming": true}`: the route tells nobody which
/// chatflows exist. A caller who may run it (the prediction's rule: anyone for a
/// public chatflow) gets the flow's own answer.
#[utoipa::path(
    get,
    path = "/api/v1/chatflows-streaming/{id}",
    tag = "predictions",
    security((), ("bearer" = []), ("apiKey" = [])),
    params(("id" = Uuid, Path, description = "Chatflow id")),
    responses(
        (status = 200, description = "Whether answers can stream (true for a chatflow this caller may not run, or none)", body = StreamingSupport),
        CommonErrors
    )
)]
async fn streaming_support(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    request: Request,
) -> ApiResult<Json<StreamingSupport>> {
    let (parts, _) = request.into_parts();
    let auth = caller_key(&state, &parts).await?;
    let flow = match authorize(&state, id, auth.as_ref()).await {
        Ok(flow) => flow,
        Err(ApiError::NotFound(_) | ApiError::Unauthorized(_) | ApiError::Forbidden(_)) => {
            return Ok(Json(StreamingSupport { is_streaming: true }));
        }
        Err(other) => return Err(other),
    };
    let is_streaming = state
        .plans
        .get(flow.id, flow.updated_date, &flow.flow_data)
        .is_ok_and(|plan| plan.is_streamable());
    Ok(Json(StreamingSupport { is_streaming }))
}

/// The inputs of an agentflow's start node the chat widget reads to show its form.
const START_FORM_INPUTS: [&str; 4] = [
    "startInputType",
    "formTitle",
    "formDescription",
    "formInputTypes",
];

/// What Flowise's chat widget loads before its first message: the chatflow's
/// `chatbotConfig` (its look and texts), `uploads` (which files the chat takes) and,
/// for an agentflow, `flowData` holding only its start node's form. Flowise sends the
/// whole `flowData`, keys in node inputs included, to anyone; weir sends the form
/// alone, and only to a caller who may run the chatflow (the prediction's rule).
#[utoipa::path(
    get,
    path = "/api/v1/public-chatbotConfig/{id}",
    tag = "predictions",
    security((), ("bearer" = []), ("apiKey" = [])),
    params(("id" = Uuid, Path, description = "Chatflow id")),
    responses(
        (status = 200, description = "The widget's configuration", body = Object),
        (status = 404, description = "No such chatflow", body = ErrorBody),
        CommonErrors
    )
)]
async fn public_chatbot_config(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    request: Request,
) -> ApiResult<axum::Json<Map<String, Value>>> {
    let (parts, _) = request.into_parts();
    let (flow, _) = admit(&state, &parts, id).await?;
    let mut config = flow
        .chatbot_config
        .as_deref()
        .and_then(|text| serde_json::from_str::<Map<String, Value>>(text).ok())
        .unwrap_or_default();
    let plan = state
        .plans
        .get(flow.id, flow.updated_date, &flow.flow_data)
        .ok();
    // The widget needs only whether follow-up prompts come; their model and
    // credential are the chatflow's business.
    if let Some(Value::Object(follow_ups)) = config.get_mut("followUpPrompts") {
        follow_ups.retain(|key, _| key == "status");
    }
    config.insert("uploads".into(), uploads_of(plan.as_deref()));
    config.insert("isTTSEnabled".into(), Value::Bool(false));
    if let Some(start) = plan.as_ref().and_then(|plan| plan.agentflow_start()) {
        let inputs: Map<String, Value> = START_FORM_INPUTS
            .iter()
            .filter_map(|name| Some(((*name).to_owned(), start.inputs.get(*name)?.clone())))
            .collect();
        let flow_data = json!({"nodes": [{"id": start.id, "data": {"name": start.name, "inputs": inputs}}], "edges": []});
        config.insert("flowData".into(), Value::String(flow_data.to_string()));
    }
    Ok(axum::Json(config))
}

/// What a chat may send with a question: pictures when a model of the flow sees
/// them, files when the flow has a vector store to put them in.
fn uploads_of(plan: Option<&Plan>) -> Value {
    let takes_files = plan.is_some_and(Plan::takes_chat_files);
    let takes_images = plan.is_some_and(Plan::takes_images);
    json!({
        "isSpeechToTextEnabled": false,
        "isImageUploadAllowed": takes_images,
        "isRAGFileUploadAllowed": takes_files,
        "imgUploadSizeAndTypes": if takes_images {
            json!([{"fileTypes": ["image/gif", "image/jpeg", "image/png", "image/webp"],
                    "maxUploadSize": MAX_IMAGE_BYTES / (1024 * 1024)}])
        } else {
            json!([])
        },
        "fileUploadSizeAndTypes": if takes_files {
            json!([{"fileTypes": ["*"], "maxUploadSize": MAX_UPLOAD_BYTES / (1024 * 1024)}])
        } else {
            json!([])
        },
    })
}

/// What the canvas's chat panel may upload with a question (the `uploads` of
/// `public-chatbotConfig`), for a chatflow of the caller's workspace.
#[utoipa::path(
    get,
    path = "/api/v1/chatflows-uploads/{id}",
    tag = "predictions",
    params(("id" = Uuid, Path, description = "Chatflow id")),
    responses(
        (status = 200, description = "`isImageUploadAllowed`, `isRAGFileUploadAllowed` and their sizes and types", body = Object),
        (status = 404, description = "No such chatflow in this workspace", body = ErrorBody),
        CommonErrors
    )
)]
async fn chatflow_uploads(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> ApiResult<axum::Json<Value>> {
    auth.require(Permission::ChatflowsRead)?;
    let flow = super::chatflows::find(&state, &auth, id).await?;
    let plan = state
        .plans
        .get(flow.id, flow.updated_date, &flow.flow_data)
        .ok();
    Ok(axum::Json(uploads_of(plan.as_deref())))
}

/// The canvas's chat panel: a prediction by the signed-in user, on a chatflow of
/// their workspace, always kept as an `INTERNAL` chat (what the panel's history
/// reads). The body and answer are `/prediction/:id`'s.
#[utoipa::path(
    post,
    path = "/api/v1/internal-prediction/{id}",
    tag = "predictions",
    params(("id" = Uuid, Path, description = "Chatflow id")),
    request_body(content((PredictionBody = "application/json"), (PredictionBody = "multipart/form-data"))),
    responses(
        (status = 200, description = "The answer (JSON), or an SSE stream when `streaming` is true",
         content((PredictionResult = "application/json"), (String = "text/event-stream"))),
        (status = 404, description = "No such chatflow in this workspace", body = ErrorBody),
        (status = 412, description = "`question` is missing", body = ErrorBody),
        (status = 413, description = "Body over 50 MiB", body = ErrorBody),
        (status = 429, description = "Over the chatflow's rate limit", body = ErrorBody),
        CommonErrors
    )
)]
async fn internal_prediction(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    mut request: Request,
) -> ApiResult<Response> {
    auth.require(Permission::PredictionsCreate)?;
    // Public or not, the panel runs only the workspace's own chatflows.
    super::chatflows::find(&state, &auth, id).await?;
    request.headers_mut().insert(
        axum::http::HeaderName::from_static("x-request-from"),
        axum::http::HeaderValue::from_static("internal"),
    );
    create_prediction(State(state), Path(id), request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails() {
        assert!(is_email("a@example.com"));
        for bad in ["a", "@x.com", "a@x", "a b@x.com", "a@.com", "a@x."] {
            assert!(!is_email(bad), "{bad}");
        }
    }

    #[test]
    fn body_rules() {
        let body: PredictionBody = serde_json::from_value(json!({
            "question": "hi", "chatId": null, "sessionId": "s1", "overrideConfig": null,
            "streaming": "true", "chatflowId": "x"
        }))
        .unwrap();
        let (req, streaming) = body.into_request(vec![]).unwrap();
        assert!(streaming);
        assert_eq!(req.chat_id.as_deref(), Some("s1"));
        let missing: PredictionBody = serde_json::from_value(json!({"chatId": "c"})).unwrap();
        assert_eq!(missing.into_request(vec![]).unwrap_err().status_code(), 412);
    }
}
