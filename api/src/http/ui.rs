//! Flowise's own UI, served at `/`: the `flowise-ui` build that `scripts/fetch-ui`
//! unpacks (pinned and checksummed) under `WEIR_UI_DIR/build`, read into memory
//! once, when the first page is asked for (a server nobody browses pays nothing
//! for it); and the node icons it shows (`/api/v1/node-icon/<node>`), read
//! from the `flowise-components` images it unpacks under `WEIR_UI_DIR/components`.
//!
//! Every path outside `/api` and `/metrics` is the single-page app's: a file of
//! the build when there is one, else `index.html`, whose router shows the page —
//! except under `assets/`, where a missing file is a 404 (a stale tab asking for
//! an old bundle must fail, not get HTML as JavaScript). The hashed files under
//! `assets/` are cached for a year; everything else is revalidated with its ETag,
//! and so is the entry script, whose tools page weir rewrites (`ui_tools_page`).
//! `index.html` carries a Content-Security-Policy that admits the bundle and its
//! two inline scripts (by hash) and nothing from elsewhere: the third-party fonts
//! and tracker the page links to are blocked, so the UI makes no request outside
//! this server.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, ETAG, IF_NONE_MATCH,
    X_CONTENT_TYPE_OPTIONS,
};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use bytes::Bytes;
use sha2::{Digest, Sha256};

use super::error::ApiError;
use super::pagination::TOTAL_COUNT;
use super::ui_tools_page;

/// The most the build may weigh; the pinned one is about 16 MB.
const MAX_BUNDLE_BYTES: u64 = 128 * 1024 * 1024;

/// One file of the build.
struct UiFile {
    body: Bytes,
    content_type: HeaderValue,
    etag: HeaderValue,
    /// Changed by weir (`ui_tools_page`): revalidated like a page, never cached
    /// as immutable, since its name is the build's hash of Flowise's bytes and
    /// another weir may serve other words under it.
    rewritten: bool,
}

/// The UI's build, in memory.
pub struct UiBundle {
    /// By path relative to the build's root (`assets/index-abc.js`).
    files: HashMap<String, UiFile>,
    /// The policy `index.html` is served with.
    index_policy: HeaderValue,
}

/// What `/` serves: the bundle, or why there is none.
#[derive(Clone)]
pub enum Ui {
    Serving(Arc<LazyBundle>),
    /// `WEIR_UI=on` without a build at `WEIR_UI_DIR`: pages say how to get one.
    Missing,
    Off,
}

/// The build, read on first use.
pub struct LazyBundle {
    dir: PathBuf,
    loaded: tokio::sync::OnceCell<Option<Arc<UiBundle>>>,
}

impl LazyBundle {
    /// The build, read now if it was not yet (off the async threads); `None`
    /// when it cannot be read (logged once).
    async fn get(&self) -> Option<Arc<UiBundle>> {
        self.loaded
            .get_or_init(|| async {
                let dir = self.dir.clone();
                match tokio::task::spawn_blocking(move || UiBundle::load(&dir)).await {
                    Ok(Ok(bundle)) => {
                        tracing::info!(dir = %self.dir.display(), files = bundle.files.len(), "UI read");
                        Some(Arc::new(bundle))
                    }
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e, "the UI's build cannot be read: run scripts/fetch-ui");
                        None
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "reading the UI's build failed");
                        None
                    }
                }
            })
            .await
            .clone()
    }
}

impl Ui {
    /// The UI as the configuration asks: the build at `WEIR_UI_DIR`, or off.
    pub fn from_config(config: &crate::config::Config) -> Ui {
        if !config.ui {
            return Ui::Off;
        }
        let dir = config.ui_dir().join("build");
        if dir.join("index.html").is_file() {
            tracing::info!(dir = %dir.display(), "serving the UI at /");
            Ui::Serving(Arc::new(LazyBundle {
                dir,
                loaded: tokio::sync::OnceCell::new(),
            }))
        } else {
            tracing::warn!(dir = %dir.display(), "no UI to serve: run scripts/fetch-ui (or set WEIR_UI=off)");
            Ui::Missing
        }
    }
}

impl UiBundle {
    /// Reads the build under `dir` (the folder holding `index.html`).
    pub fn load(dir: &Path) -> Result<Self, String> {
        let mut files = HashMap::new();
        let mut total = 0;
        read_tree(dir, dir, &mut files, &mut total)?;
        let index = files
            .get("index.html")
            .ok_or_else(|| format!("{} has no index.html", dir.display()))?;
        let index_policy = policy_for(&String::from_utf8_lossy(&index.body));
        Ok(UiBundle {
            files,
            index_policy,
        })
    }

    fn answer(&self, path: &str, file: &UiFile, request: &Request) -> Response {
        let cache = if path.starts_with("assets/") && !file.rewritten {
            "public, max-age=31536000, immutable"
        } else {
            "no-cache"
        };
        let fresh = request
            .headers()
            .get(IF_NONE_MATCH)
            .is_some_and(|tags| tags.as_bytes() == file.etag.as_bytes());
        let mut response = if fresh {
            StatusCode::NOT_MODIFIED.into_response()
        } else if request.method() == Method::HEAD {
            Response::new(Body::empty())
        } else {
            Response::new(Body::from(file.body.clone()))
        };
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, file.content_type.clone());
        headers.insert(ETAG, file.etag.clone());
        headers.insert(CACHE_CONTROL, HeaderValue::from_static(cache));
        headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
        if path == "index.html" {
            headers.insert(CONTENT_SECURITY_POLICY, self.index_policy.clone());
        }
        response
    }
}

/// The router's fallback: the UI's page or file, or the JSON 404 of an unknown
/// API route.
pub async fn fallback(ui: Ui, request: Request) -> Response {
    let path = request.uri().path();
    let is_api = path == "/api" || path.starts_with("/api/") || path == "/metrics";
    if is_api {
        return ApiError::NotFound("no such route".into()).into_response();
    }
    if !matches!(*request.method(), Method::GET | Method::HEAD) {
        return ApiError::MethodNotAllowed("the UI's pages are read with GET".into())
            .into_response();
    }
    let bundle = match ui {
        Ui::Serving(lazy) => match lazy.get().await {
            Some(bundle) => bundle,
            None => return not_installed(),
        },
        Ui::Missing => return not_installed(),
        Ui::Off => return ApiError::NotFound("no such route".into()).into_response(),
    };
    let relative = path.trim_start_matches('/');
    if let Some(file) = bundle.files.get(relative) {
        return bundle.answer(relative, file, &request);
    }
    if relative.starts_with("assets/") {
        return ApiError::NotFound("no such file in the UI".into()).into_response();
    }
    match bundle.files.get("index.html") {
        Some(index) => bundle.answer("index.html", index, &request),
        None => ApiError::NotFound("no such route".into()).into_response(),
    }
}

/// Flowise's UI asks a list for one page (`?page=&limit=`) and reads Flowise's
/// envelope `{"data": [...], "total": n}`; weir's list routes answer the bare
/// array with the total in `X-Total-Count` (SPEC). For the UI's requests only
/// (`x-request-from: internal`), a paged list's answer is wrapped; every other
/// caller gets weir's documented shape.
pub async fn list_envelope(request: Request, next: Next) -> Response {
    let paged = request.method() == Method::GET
        && super::session::from_ui(request.headers())
        && request.uri().query().is_some_and(|q| {
            let has = |name: &str| {
                q.split('&')
                    .any(|pair| pair.split('=').next() == Some(name))
            };
            has("page") && has("limit")
        });
    let response = next.run(request).await;
    if !paged || response.status() != StatusCode::OK {
        return response;
    }
    let Some(total) = response
        .headers()
        .get(TOTAL_COUNT)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
    else {
        return response;
    };
    let (mut parts, body) = response.into_parts();
    // The answer is in memory already (a serialised page): no new bound needed.
    let Ok(items) = axum::body::to_bytes(body, usize::MAX).await else {
        return ApiError::Internal("could not read a list to wrap it".into()).into_response();
    };
    if !items.starts_with(b"[") {
        return Response::from_parts(parts, Body::from(items));
    }
    let mut wrapped = Vec::with_capacity(items.len() + 32);
    wrapped.extend_from_slice(b"{\"data\":");
    wrapped.extend_from_slice(&items);
    wrapped.extend_from_slice(format!(",\"total\":{total}}}").as_bytes());
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(wrapped))
}

fn not_installed() -> Response {
    ApiError::NotFound(
        "weir's UI is not installed here: run scripts/fetch-ui (or set WEIR_UI=off)".into(),
    )
    .into_response()
}

fn read_tree(
    root: &Path,
    dir: &Path,
    files: &mut HashMap<String, UiFile>,
    total: &mut u64,
) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
        // Dot files are the fetch script's bookkeeping, not the UI's.
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        let kind = entry
            .file_type()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if kind.is_dir() {
            read_tree(root, &path, files, total)?;
            continue;
        }
        // Links are not followed: only what the build itself holds is served.
        if !kind.is_file() {
            continue;
        }
        let mut body = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        *total += body.len() as u64;
        if *total > MAX_BUNDLE_BYTES {
            return Err(format!(
                "{} holds more than {MAX_BUNDLE_BYTES} bytes: is WEIR_UI_DIR the UI's build?",
                root.display()
            ));
        }
        let Some(relative) = path
            .strip_prefix(root)
            .ok()
            .and_then(|p| p.to_str())
            .map(|p| p.replace('\\', "/"))
        else {
            continue;
        };
        let mut rewritten = false;
        if ui_tools_page::applies_to(&relative) {
            (body, rewritten) = ui_tools_page::rewrite(&relative, body);
        }
        let digest = Sha256::digest(&body);
        let etag = HeaderValue::from_str(&format!("\"{}\"", crate::domain::to_hex(&digest[..12])))
            .map_err(|e| e.to_string())?;
        files.insert(
            relative.clone(),
            UiFile {
                content_type: HeaderValue::from_static(content_type(&relative)),
                etag,
                rewritten,
                body: Bytes::from(body),
            },
        );
    }
    Ok(())
}

/// The media type of a file, by its extension.
pub fn content_type(path: &str) -> &'static str {
    let extension = path.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    match extension.to_ascii_lowercase().as_str() {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" | "map" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "ico" => "image/x-icon",
        "woff" => "font/woff",
        "woff2" => "font/woff2",
        "ttf" => "font/ttf",
        "txt" => "text/plain; charset=utf-8",
        "wasm" => "application/wasm",
        "mp3" => "audio/mpeg",
        _ => "application/octet-stream",
    }
}

/// `index.html`'s policy: this server's own files, its inline scripts by hash,
/// inline styles (the UI's components style themselves at run time), and images
/// from data and blob URLs (icons, uploads).
fn policy_for(index_html: &str) -> HeaderValue {
    let mut scripts = String::new();
    for inline in inline_scripts(index_html) {
        // The browser hashes the script as its parser saw it: line breaks
        // normalised to LF (the build's index.html has CRLF).
        let normalised = inline.replace("\r\n", "\n").replace('\r', "\n");
        scripts.push_str(" 'sha256-");
        scripts.push_str(&B64.encode(Sha256::digest(normalised.as_bytes())));
        scripts.push('\'');
    }
    let policy = format!(
        "default-src 'self'; script-src 'self'{scripts}; style-src 'self' 'unsafe-inline'; \
         img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; \
         media-src 'self' blob: data:; worker-src 'self' blob:; object-src 'none'; \
         base-uri 'self'; form-action 'self'; frame-ancestors 'self'"
    );
    HeaderValue::from_str(&policy)
        .unwrap_or_else(|_| HeaderValue::from_static("default-src 'self'"))
}

/// The bodies of the page's inline `<script>` elements (those without `src`).
fn inline_scripts(html: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut rest = html;
    while let Some(start) = rest.find("<script") {
        let after = &rest[start..];
        let Some(tag_end) = after.find('>') else {
            break;
        };
        let tag = &after[..tag_end];
        let body_start = &after[tag_end + 1..];
        let Some(close) = body_start.find("</script>") else {
            break;
        };
        if !tag.contains(" src=") {
            found.push(&body_start[..close]);
        }
        rest = &body_start[close + "</script>".len()..];
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_scripts_are_found_and_sourced_ones_skipped() {
        let html = "<head><script>var a = 1</script><script>\r\nb()</script><script async src=\"x.js\"></script>\
                    <script type=\"module\" src=\"/assets/i.js\"></script></head>\
                    <body><script>\n  b()\n</script></body>";
        assert_eq!(
            inline_scripts(html),
            vec!["var a = 1", "\r\nb()", "\n  b()\n"]
        );
        let policy = policy_for(html);
        let policy = policy.to_str().unwrap_or_default();
        let expected = B64.encode(Sha256::digest(b"var a = 1"));
        assert!(policy.contains(&format!("'sha256-{expected}'")), "{policy}");
        assert!(policy.contains("connect-src 'self'"));
        let crlf = B64.encode(Sha256::digest(b"\nb()"));
        assert!(policy.contains(&format!("'sha256-{crlf}'")), "{policy}");
    }
}
