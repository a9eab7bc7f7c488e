//! Browsers on other origins: which pages may call the API (`CORS_ORIGINS`; the MCP
//! endpoints `MCP_CORS_ORIGINS` instead, see [`is_mcp_endpoint`]), which may frame it
//! (`IFRAME_ORIGINS`), and a chatflow's own list (`chatbotConfig.allowedOrigins`,
//! checked by the prediction routes with `origin_allowed_by_chatflow`).
//!
//! Preflights (`OPTIONS` with `Access-Control-Request-Method`) are answered by the CORS
//! layer on every route. An allowed origin is reflected with `Vary: Origin`, never `*`
//! and never with credentials: weir authenticates with bearer keys, not cookies. A
//! request from an origin not allowed gets no CORS header, so the browser withholds the
//! answer.

use axum::http::{HeaderName, HeaderValue, Method, header};
use tower_http::cors::{AllowOrigin, CorsLayer};

/// What the browser may send and read across origins: what Flowise's clients
/// and MCP's use.
const ALLOWED_HEADERS: [HeaderName; 7] = [
    header::AUTHORIZATION,
    header::CONTENT_TYPE,
    header::ACCEPT,
    HeaderName::from_static("x-request-id"),
    HeaderName::from_static("mcp-session-id"),
    HeaderName::from_static("mcp-protocol-version"),
    HeaderName::from_static("last-event-id"),
];

/// A list setting of origins: `*` or a comma (or space) list; empty admits none.
#[derive(Debug, Clone)]
pub struct Origins {
    any: bool,
    list: Vec<String>,
}

impl Origins {
    pub fn parse(setting: &str) -> Self {
        let list = origins(setting);
        Origins {
            any: list.iter().any(|o| o == "*"),
            list,
        }
    }

    pub fn admits(&self, origin: &[u8]) -> bool {
        self.any || self.list.iter().any(|o| o.as_bytes() == origin)
    }
}

/// Whether a path is one of the MCP endpoints, whose origins are `MCP_CORS_ORIGINS`'.
pub fn is_mcp_endpoint(path: &str) -> bool {
    path == "/api/v1/mcp" || path.starts_with("/api/v1/mcp/")
}

/// The CORS layer: `CORS_ORIGINS` for the API, `MCP_CORS_ORIGINS` for the MCP
/// endpoints (each `*`, a comma list, or empty: none).
pub fn layer(cors_origins: &str, mcp_cors_origins: &str) -> CorsLayer {
    let api = Origins::parse(cors_origins);
    let mcp = Origins::parse(mcp_cors_origins);
    let allow = AllowOrigin::predicate(move |origin: &HeaderValue, request| {
        if is_mcp_endpoint(request.uri.path()) {
            mcp.admits(origin.as_bytes())
        } else {
            api.admits(origin.as_bytes())
        }
    });
    CorsLayer::new()
        .allow_origin(allow)
        .allow_methods([
            Method::GET,
            Method::POST,
            Method::PUT,
            Method::PATCH,
            Method::DELETE,
        ])
        .allow_headers(ALLOWED_HEADERS)
        .expose_headers([
            HeaderName::from_static("x-request-id"),
            HeaderName::from_static("mcp-session-id"),
        ])
        .max_age(std::time::Duration::from_secs(600))
}

/// The `Content-Security-Policy` for `IFRAME_ORIGINS`: `frame-ancestors` with the
/// origins (space or comma separated), `*` for any, `'none'` when empty.
pub fn frame_ancestors(iframe_origins: &str) -> HeaderValue {
    let origins = origins(iframe_origins);
    let list = if origins.is_empty() {
        "'none'".to_owned()
    } else {
        origins.join(" ")
    };
    HeaderValue::from_str(&format!("frame-ancestors {list}"))
        .unwrap_or_else(|_| HeaderValue::from_static("frame-ancestors 'none'"))
}

/// `frame_ancestors` added to the policy a handler already set (an artifact's
/// `sandbox`), or alone when it set none: the handler's directives must survive the
/// global layer, or an HTML artifact would run script on weir's origin.
pub fn add_frame_ancestors(
    existing: Option<&HeaderValue>,
    frame_ancestors: &HeaderValue,
) -> HeaderValue {
    let Some(existing) = existing.filter(|v| !v.is_empty()) else {
        return frame_ancestors.clone();
    };
    // A handler that says who may frame it (the UI's page: only itself) is obeyed.
    if existing
        .to_str()
        .is_ok_and(|policy| policy.contains("frame-ancestors"))
    {
        return existing.clone();
    }
    let mut joined = Vec::with_capacity(existing.len() + 2 + frame_ancestors.len());
    joined.extend_from_slice(existing.as_bytes());
    joined.extend_from_slice(b"; ");
    joined.extend_from_slice(frame_ancestors.as_bytes());
    // Both parts are valid header bytes, so the joined value is too.
    HeaderValue::from_bytes(&joined).unwrap_or_else(|_| existing.clone())
}

/// The origins of a list setting, trimmed, without a trailing slash, empty ones dropped.
fn origins(setting: &str) -> Vec<String> {
    setting
        .split([',', ' '])
        .map(|o| o.trim().trim_end_matches('/').to_owned())
        .filter(|o| !o.is_empty())
        .collect()
}

/// Whether a prediction from `origin` may use a chatflow with `chatbot_config` (JSON
/// text): yes without an `Origin` (not a browser), without a list, or when the list
/// (`allowedOrigins`, Flowise's field; empty entries ignored) names it.
pub fn origin_allowed_by_chatflow(chatbot_config: Option<&str>, origin: Option<&str>) -> bool {
    let Some(origin) = origin else {
        return true;
    };
    let Some(config) =
        chatbot_config.and_then(|c| serde_json::from_str::<serde_json::Value>(c).ok())
    else {
        return true;
    };
    let allowed: Vec<&str> = config
        .get("allowedOrigins")
        .and_then(|v| v.as_array())
        .map(|list| {
            list.iter()
                .filter_map(|o| o.as_str())
                .map(|o| o.trim().trim_end_matches('/'))
                .filter(|o| !o.is_empty())
                .collect()
        })
        .unwrap_or_default();
    allowed.is_empty() || allowed.contains(&origin.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chatflows_list_admits_only_its_origins() {
        let config = r#"{"allowedOrigins": ["https://shop.example/", ""]}"#;
        assert!(origin_allowed_by_chatflow(
            Some(config),
            Some("https://shop.example")
        ));
        assert!(!origin_allowed_by_chatflow(
            Some(config),
            Some("https://evil.example")
        ));
        assert!(
            origin_allowed_by_chatflow(Some(config), None),
            "not a browser"
        );
        assert!(origin_allowed_by_chatflow(
            Some(r#"{"allowedOrigins": [""]}"#),
            Some("https://x.example")
        ));
        assert!(origin_allowed_by_chatflow(None, Some("https://x.example")));
    }

    #[test]
    fn a_handlers_policy_keeps_its_directives() {
        let ancestors = frame_ancestors("*");
        assert_eq!(add_frame_ancestors(None, &ancestors), "frame-ancestors *");
        assert_eq!(
            add_frame_ancestors(Some(&HeaderValue::from_static("sandbox")), &ancestors),
            "sandbox; frame-ancestors *"
        );
    }

    #[test]
    fn frame_ancestors_follow_the_setting() {
        assert_eq!(frame_ancestors("*"), "frame-ancestors *");
        assert_eq!(
            frame_ancestors("https://a.example, https://b.example/"),
            "frame-ancestors https://a.example https://b.example"
        );
        assert_eq!(frame_ancestors(""), "frame-ancestors 'none'");
    }
}
