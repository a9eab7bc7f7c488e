//! `/api/v1/executions` and `/api/v1/public-executions` in-process. Executions are
//! made by the engine as agentflows run; here they are put in through the store,
//! and everything else goes through HTTP.

mod common;

use axum::http::{Method, StatusCode};
use common::{App, app, assert_error};
use serde_json::{Value, json};
use weir_api::domain::{
    ChatflowType, Execution, ExecutionState, ExecutionUpdate, NewChatflow, NewExecution,
};

/// A chatflow named `name` in the workspace `workspace`, with one execution per
/// session; returns the executions.
async fn executions(app: &App, workspace: &str, name: &str, sessions: &[&str]) -> Vec<Execution> {
    let store = &*app.store.store;
    let ws = store.ensure_workspace(workspace).await.unwrap();
    let flow = store
        .create_chatflow(NewChatflow {
            workspace_id: ws.id,
            name: name.into(),
            flow_data: r#"{"nodes":[],"edges":[]}"#.into(),
            deployed: false,
            is_public: false,
            apikeyid: None,
            chatbot_config: None,
            api_config: None,
            category: None,
            flow_type: ChatflowType::Agentflow,
        })
        .await
        .unwrap();
    let mut made = Vec::new();
    for session in sessions {
        let new = NewExecution::starting_now(ws.id, flow.id, (*session).into());
        made.push(store.create_execution(&new).await.unwrap());
        tokio::time::sleep(std::time::Duration::from_millis(3)).await;
    }
    made
}

fn uri(id: impl std::fmt::Display) -> String {
    format!("/api/v1/executions/{id}")
}

#[tokio::test]
async fn executions_need_a_key_and_their_permissions() {
    let app = app().await;
    let e = &executions(&app, "default", "agent", &["s"]).await[0];
    let (s, b) = app
        .call(Method::GET, "/api/v1/executions", None, None)
        .await;
    assert_error(s, &b, 401);
    let reader = Some(app.reader.as_str());
    for (method, path, body) in [
        (Method::GET, "/api/v1/executions".to_owned(), None),
        (Method::GET, uri(e.id), None),
    ] {
        let (s, b) = app.call(method, &path, reader, body).await;
        assert_error(s, &b, 403);
        assert!(b["message"].as_str().unwrap().contains("executions:read"));
    }
    let ids = json!({"executionIds": [e.id]}).to_string();
    for (method, path, body) in [
        (Method::PUT, uri(e.id), Some(r#"{"isPublic":true}"#)),
        (Method::DELETE, uri(e.id), None),
        (
            Method::DELETE,
            "/api/v1/executions".to_owned(),
            Some(ids.as_str()),
        ),
    ] {
        let (s, b) = app.call(method, &path, reader, body).await;
        assert_error(s, &b, 403);
        assert!(b["message"].as_str().unwrap().contains("executions:write"));
    }
}

#[tokio::test]
async fn listing_filters_pages_and_names_the_agentflow() {
    let app = app().await;
    let k = Some(app.admin.as_str());
    let (s, empty) = app.call(Method::GET, "/api/v1/executions", k, None).await;
    assert_eq!(
        (s, empty),
        (StatusCode::OK, json!({"data": [], "total": 0}))
    );

    let support = executions(&app, "default", "Support Bot", &["a", "b"]).await;
    let sales = executions(&app, "default", "Sales", &["a"]).await;
    executions(&app, "elsewhere", "Support Bot", &["a"]).await;
    let data = r#"[{"nodeId":"agent_0","data":{"output":{"content":"hi"}}}]"#;
    app.store
        .store
        .update_execution(
            support[0].id,
            ExecutionUpdate {
                state: Some(ExecutionState::Finished),
                execution_data: Some(data.into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();

    let (s, all) = app.call(Method::GET, "/api/v1/executions", k, None).await;
    assert_eq!(s, 200, "{all}");
    assert_eq!(all["total"], 3);
    let first = &all["data"][0];
    assert_eq!(first["id"], support[0].id.to_string());
    assert_eq!(first["executionData"], data, "executionData is JSON text");
    assert_eq!(first["state"], "FINISHED");
    assert_eq!(first["sessionId"], "a");
    assert_eq!(first["agentflowId"], support[0].agentflow_id.to_string());
    assert_eq!(
        first["agentflow"],
        json!({"id": support[0].agentflow_id, "name": "Support Bot"})
    );
    for key in [
        "workspaceId",
        "action",
        "isPublic",
        "createdDate",
        "updatedDate",
        "stoppedDate",
    ] {
        assert!(first.get(key).is_some(), "{key} missing: {first}");
    }

    let ids = |body: &Value| -> Vec<String> {
        body["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let get = |query: String| {
        let app = &app;
        async move {
            let (s, b) = app
                .call(Method::GET, &format!("/api/v1/executions?{query}"), k, None)
                .await;
            assert_eq!(s, 200, "{query}: {b}");
            b
        }
    };
    let page = get("limit=2&page=2".into()).await;
    assert_eq!(
        (page["total"].clone(), ids(&page)),
        (json!(3), vec![support[1].id.to_string()])
    );
    let finished = get("state=FINISHED".into()).await;
    assert_eq!(ids(&finished), [support[0].id.to_string()]);
    let by_name = get("agentflowName=sUPPORT".into()).await;
    assert_eq!(by_name["total"], 2);
    let by_flow = get(format!("agentflowId={}&sessionId=a", sales[0].agentflow_id)).await;
    assert_eq!(ids(&by_flow), [sales[0].id.to_string()]);
    let by_id = get(format!("id={}", support[1].id)).await;
    assert_eq!(ids(&by_id), [support[1].id.to_string()]);
    let created = weir_api::domain::time::format(&sales[0].created_date);
    let since = get(format!("startDate={created}")).await;
    assert_eq!(ids(&since), [sales[0].id.to_string()]);
    let until = get(format!(
        "endDate={}&startDate=2000-01-01",
        support[0].created_date.format("%Y-%m-%d")
    ))
    .await;
    assert_eq!(until["total"], 3, "a bare end date covers its whole day");
    let unfiltered = get("state=&agentflowName=".into()).await;
    assert_eq!(unfiltered["total"], 3, "empty parameters filter nothing");

    for (query, mentions) in [
        (
            "state=DONE",
            "INPROGRESS, FINISHED, ERROR, TERMINATED, TIMEOUT, STOPPED",
        ),
        ("startDate=yesterday", "startDate"),
        ("endDate=2025-02-30", "endDate"),
        ("agentflowId=nope", "agentflowId"),
        ("limit=101", "limit"),
        ("page=0", "page"),
    ] {
        let (s, b) = app
            .call(Method::GET, &format!("/api/v1/executions?{query}"), k, None)
            .await;
        assert_error(s, &b, 400);
        assert!(
            b["message"].as_str().unwrap().contains(mentions),
            "{query}: {b}"
        );
    }

    let (s, theirs) = app
        .call(Method::GET, "/api/v1/executions", Some(&app.stranger), None)
        .await;
    assert_eq!((s, theirs["total"].clone()), (StatusCode::OK, json!(1)));
}

#[tokio::test]
async fn one_execution_is_read_shared_and_deleted() {
    let app = app().await;
    let k = Some(app.admin.as_str());
    let made = executions(&app, "default", "agent", &["a", "b", "c"]).await;
    let e = &made[0];
    let secret =
        r#"[{"nodeId":"llm_0","data":{"inputs":{"FLOWISE_CREDENTIAL_ID":"cred-1","model":"m"}}}]"#;
    app.store
        .store
        .update_execution(
            e.id,
            ExecutionUpdate {
                execution_data: Some(secret.into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();

    let (s, got) = app.call(Method::GET, &uri(e.id), k, None).await;
    assert_eq!(s, 200, "{got}");
    assert_eq!(
        got["executionData"], secret,
        "the owner sees the data as stored"
    );
    assert!(
        got.get("agentflow").is_none(),
        "one execution is not joined"
    );
    let (s, b) = app
        .call(Method::GET, &uri(e.id), Some(&app.stranger), None)
        .await;
    assert_error(s, &b, 404);
    let (s, b) = app
        .call(Method::GET, &uri(uuid::Uuid::new_v4()), k, None)
        .await;
    assert_error(s, &b, 404);
    let (s, b) = app.call(Method::GET, &uri("not-a-uuid"), k, None).await;
    assert_error(s, &b, 400);

    // Shared: readable without a key, credential ids left out.
    let public = format!("/api/v1/public-executions/{}", e.id);
    let (s, b) = app.call(Method::GET, &public, None, None).await;
    assert_error(s, &b, 404);
    let (s, shared) = app
        .call(Method::PUT, &uri(e.id), k, Some(r#"{"isPublic":true}"#))
        .await;
    assert_eq!((s, &shared["isPublic"]), (StatusCode::OK, &json!(true)));
    let (s, seen) = app.call(Method::GET, &public, None, None).await;
    assert_eq!(s, 200, "{seen}");
    assert_eq!(seen["id"], e.id.to_string());
    let data = seen["executionData"].as_str().unwrap();
    assert!(!data.contains("FLOWISE_CREDENTIAL_ID") && data.contains(r#""model":"m""#));
    for (body, status) in [
        (r#"{"isPublic":true,"state":"FINISHED"}"#, 400),
        (r#"{"executionData":"[]"}"#, 400),
        (r#"{"isPublic":"yes"}"#, 400),
        ("{}", 412),
    ] {
        let (s, b) = app.call(Method::PUT, &uri(e.id), k, Some(body)).await;
        assert_error(s, &b, status);
    }
    let (s, b) = app
        .call(
            Method::PUT,
            &uri(e.id),
            Some(&app.stranger),
            Some(r#"{"isPublic":false}"#),
        )
        .await;
    assert_error(s, &b, 404);
    let (s, _) = app
        .call(Method::PUT, &uri(e.id), k, Some(r#"{"isPublic":false}"#))
        .await;
    assert_eq!(s, 200);
    let (s, b) = app.call(Method::GET, &public, None, None).await;
    assert_error(s, &b, 404);

    // Deleting one, then several.
    let (s, b) = app
        .call(Method::DELETE, &uri(e.id), Some(&app.stranger), None)
        .await;
    assert_error(s, &b, 404);
    let (s, b) = app.call(Method::DELETE, &uri(e.id), k, None).await;
    assert_eq!(
        (s, b),
        (StatusCode::OK, json!({"success": true, "deletedCount": 1}))
    );
    let (s, b) = app.call(Method::DELETE, &uri(e.id), k, None).await;
    assert_error(s, &b, 404);
    let bulk = "/api/v1/executions";
    for body in [
        None,
        Some("{}"),
        Some(r#"{"executionIds":[]}"#),
        Some(r#"{"executionIds":null}"#),
    ] {
        let (s, b) = app.call(Method::DELETE, bulk, k, body).await;
        assert_error(s, &b, 400);
        assert_eq!(b["message"], "No execution IDs provided");
    }
    let (s, b) = app
        .call(
            Method::DELETE,
            bulk,
            k,
            Some(r#"{"executionIds":["nope"]}"#),
        )
        .await;
    assert_error(s, &b, 400);
    let ids = json!({"executionIds": [made[1].id, made[2].id, uuid::Uuid::new_v4()]}).to_string();
    let (s, b) = app
        .call(Method::DELETE, bulk, Some(&app.stranger), Some(&ids))
        .await;
    assert_eq!(
        (s, b),
        (StatusCode::OK, json!({"success": true, "deletedCount": 0}))
    );
    let (s, b) = app.call(Method::DELETE, bulk, k, Some(&ids)).await;
    assert_eq!(
        (s, b),
        (StatusCode::OK, json!({"success": true, "deletedCount": 2}))
    );
    let (_, left) = app.call(Method::GET, bulk, k, None).await;
    assert_eq!(left, json!({"data": [], "total": 0}));
}
