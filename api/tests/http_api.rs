//! The router in-process: auth, the error model and the OpenAPI document, driven
//! through `tower::ServiceExt::oneshot` exactly as the server would dispatch.

mod common;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use common::{app, assert_error};
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

#[tokio::test]
async fn keys_are_checked_and_scoped() {
    let app = app().await;
    let (s, b) = app.call(Method::GET, "/api/v1/chatflows", None, None).await;
    assert_error(s, &b, 401);
    let (s, b) = app
        .call(Method::GET, "/api/v1/chatflows", Some("weir_nope"), None)
        .await;
    assert_error(s, &b, 401);
    let (s, _) = app
        .call(
            Method::GET,
            &format!("/api/v1/chatflows?apiKey={}", app.reader),
            None,
            None,
        )
        .await;
    assert_eq!(s, 200);
    let flow = r#"{"name":"f","flowData":"{\"nodes\":[],\"edges\":[]}"}"#;
    let (s, b) = app
        .call(
            Method::POST,
            "/api/v1/chatflows",
            Some(&app.reader),
            Some(flow),
        )
        .await;
    assert_error(s, &b, 403);
    let (s, created) = app
        .call(
            Method::POST,
            "/api/v1/chatflows",
            Some(&app.admin),
            Some(flow),
        )
        .await;
    assert_eq!(s, 201);
    let uri = format!("/api/v1/chatflows/{}", created["id"].as_str().unwrap());
    let (s, b) = app.call(Method::GET, &uri, Some(&app.stranger), None).await;
    assert_error(s, &b, 404);
    let (s, got) = app.call(Method::GET, &uri, Some(&app.reader), None).await;
    assert_eq!((s, &got), (StatusCode::OK, &created));
}

#[tokio::test]
async fn every_error_class_is_json() {
    let app = app().await;
    let k = Some(app.admin.as_str());
    let (s, b) = app
        .call(Method::POST, "/api/v1/chatflows", k, Some("{nope"))
        .await;
    assert_error(s, &b, 400);
    let (s, b) = app
        .call(
            Method::POST,
            "/api/v1/chatflows",
            k,
            Some(r#"{"flowData":{"nodes":[],"edges":[]}}"#),
        )
        .await;
    assert_error(s, &b, 412);
    assert!(b["message"].as_str().unwrap().contains("name"));
    let (s, b) = app
        .call(
            Method::POST,
            "/api/v1/chatflows",
            k,
            Some(r#"{"name":"x","flowData":{"nodes":[]}}"#),
        )
        .await;
    assert_error(s, &b, 400);
    let (s, b) = app
        .call(Method::GET, "/api/v1/chatflows/not-a-uuid", k, None)
        .await;
    assert_error(s, &b, 400);
    let (s, b) = app
        .call(Method::GET, "/api/v1/no-such-thing", k, None)
        .await;
    assert_error(s, &b, 404);
    let (s, b) = app.call(Method::PATCH, "/api/v1/chatflows", k, None).await;
    assert_error(s, &b, 405);
    let (s, b) = app
        .call(
            Method::POST,
            "/api/v1/variables",
            k,
            Some(r#"{"name":"v"}"#),
        )
        .await;
    assert_eq!(s, 201, "{b}");
    let (s, b) = app
        .call(
            Method::POST,
            "/api/v1/variables",
            k,
            Some(r#"{"name":"v"}"#),
        )
        .await;
    assert_error(s, &b, 409);
    let big = format!(
        r#"{{"name":"x","flowData":"{}"}}"#,
        "a".repeat(weir_api::http::MAX_BODY_BYTES + 1)
    );
    let (s, b) = app
        .call(Method::POST, "/api/v1/chatflows", k, Some(&big))
        .await;
    assert_error(s, &b, 413);
    let req = Request::post("/api/v1/chatflows")
        .header(header::AUTHORIZATION, format!("Bearer {}", app.admin))
        .header(header::CONTENT_TYPE, "text/plain")
        .body(Body::from("{}"))
        .unwrap();
    let resp = app.router.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), 415);
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let body: Value = serde_json::from_slice(&bytes).unwrap();
    assert_error(StatusCode::UNSUPPORTED_MEDIA_TYPE, &body, 415);
}

/// Every route the API serves is in the OpenAPI document, and every documented
/// operation is served (not a 404/405 from the router).
#[tokio::test]
async fn openapi_documents_every_route() {
    let app = app().await;
    let (s, doc) = app
        .call(Method::GET, "/api/v1/openapi.json", None, None)
        .await;
    assert_eq!(s, 200);
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
    let expected = [
        ("get", "/api/v1/ping"),
        ("get", "/api/v1/apikey"),
        ("post", "/api/v1/apikey"),
        ("delete", "/api/v1/apikey/{id}"),
        ("get", "/api/v1/chatflows"),
        ("post", "/api/v1/chatflows"),
        ("get", "/api/v1/chatflows/{id}"),
        ("put", "/api/v1/chatflows/{id}"),
        ("delete", "/api/v1/chatflows/{id}"),
        ("get", "/api/v1/variables"),
        ("post", "/api/v1/variables"),
        ("get", "/api/v1/variables/{id}"),
        ("put", "/api/v1/variables/{id}"),
        ("delete", "/api/v1/variables/{id}"),
        ("post", "/api/v1/prediction/{id}"),
        ("get", "/api/v1/chatflows-streaming/{id}"),
        ("get", "/api/v1/public-chatbotConfig/{id}"),
        ("get", "/api/v1/chatmessage/{id}"),
        ("delete", "/api/v1/chatmessage/{id}"),
        ("get", "/api/v1/leads/{id}"),
        ("get", "/api/v1/triggers"),
        ("post", "/api/v1/triggers"),
        ("get", "/api/v1/triggers/{id}"),
        ("put", "/api/v1/triggers/{id}"),
        ("delete", "/api/v1/triggers/{id}"),
        ("get", "/api/v1/triggers/{id}/results"),
        ("post", "/api/v1/triggers/schedule-preview"),
        ("post", "/api/v1/triggers/webhook/{address}"),
        ("get", "/api/v1/executions"),
        ("delete", "/api/v1/executions"),
        ("get", "/api/v1/executions/{id}"),
        ("put", "/api/v1/executions/{id}"),
        ("delete", "/api/v1/executions/{id}"),
        ("get", "/api/v1/public-executions/{id}"),
        ("get", "/api/v1/credentials"),
        ("post", "/api/v1/credentials"),
        ("get", "/api/v1/credentials/{id}"),
        ("put", "/api/v1/credentials/{id}"),
        ("delete", "/api/v1/credentials/{id}"),
    ];
    let paths = doc["paths"].as_object().unwrap();
    for (method, path) in expected {
        assert!(
            paths.get(path).and_then(|p| p.get(method)).is_some(),
            "{method} {path} is not documented"
        );
    }
    let id = uuid::Uuid::new_v4().to_string();
    for (path, ops) in paths {
        for (method, op) in ops.as_object().unwrap() {
            let uri = path.replace("{id}", &id);
            let m = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let body = matches!(m, Method::POST | Method::PUT).then_some("{}");
            let (s, b) = app.call(m, &uri, Some(&app.admin), body).await;
            // A route may document 405 as its answer (MCP's GET stream, offered by none).
            let answers_405 = op["responses"].get("405").is_some();
            assert!(
                s != StatusCode::METHOD_NOT_ALLOWED || answers_405,
                "{method} {path} documented but not routed"
            );
            if s == StatusCode::NOT_FOUND {
                assert_ne!(
                    b["message"], "no such route",
                    "{method} {path} documented but not routed"
                );
            }
            assert!(
                op["responses"].as_object().is_some_and(|r| !r.is_empty()),
                "{method} {path} has no responses"
            );
        }
    }
}

#[tokio::test]
async fn swagger_ui_is_served_without_a_cdn() {
    let app = app().await;
    let req = Request::get("/api/v1/docs/").body(Body::empty()).unwrap();
    let resp = app.router.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let html = String::from_utf8(
        resp.into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec(),
    )
    .unwrap();
    assert!(html.contains("swagger-ui"));
    assert!(
        !html.contains("://unpkg") && !html.contains("://cdn"),
        "assets must be local"
    );
}
