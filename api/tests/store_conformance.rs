//! One conformance suite for every `Store` backend: each case runs against SQLite
//! and, when `WEIR_TEST_DATABASE_URL` is set, PostgreSQL.

mod common;

use std::sync::Arc;
use weir_api::domain::apikey::generate_key;
use weir_api::domain::callback::{AttemptOutcome, CallbackAttempt, CallbackStatus, NewCallback};
use weir_api::domain::trigger::LEASE_EXPIRED;
use weir_api::domain::{
    ChatType, ChatflowPatch, ChatflowType, Feedback, FeedbackFilter, FieldType, MessageFilter,
    MessageRole, NewApiKey, NewChatMessage, NewChatflow, NewLead, NewTool, NewVariable, Page,
    Permission, Rating, ToolField, ToolPatch, VariablePatch, VariableType,
};
use weir_api::domain::{Delivery, ResultStatus, Trigger, TriggerType, WebhookClaim, time};
use weir_api::domain::{ExecutionFilter, ExecutionState, ExecutionUpdate, NewExecution};
use weir_api::services::triggers::scheduler::plan;

use weir_api::store::{CachedStore, FiringClaim, FiringEnd, RunWrites, Store, StoreError};

macro_rules! conformance {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $case() {
                    let s = super::common::sqlite().await;
                    super::$case(&s).await;
                    s.cleanup().await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $case() {
                    let Some(s) = super::common::postgres().await else { return };
                    super::$case(&s).await;
                    s.cleanup().await;
                }
            )*
        }
    };
}

conformance!(
    workspaces_are_created_once,
    api_keys_are_found_by_hash_and_revoked,
    chatflows_round_trip_and_are_scoped,
    chatflow_listing_pages_newest_first,
    chatflow_patch_keeps_other_fields,
    mcp_publications_live_with_their_chatflow,
    mcp_servers_are_kept_per_workspace,
    variable_names_are_unique_per_workspace,
    tools_round_trip_with_unique_names,
    migrations_are_idempotent,
    chat_messages_keep_order_per_session,
    agent_checkpoints_are_kept_per_session_and_cleared_with_the_chat,
    leads_are_listed_per_chatflow,
    messages_are_filtered_and_rated,
    rate_limit_windows_count_hits,
    due_cron_triggers_are_claimed_once,
    deleting_a_trigger_drops_its_claimed_firing,
    expired_leases_fail_their_firing_once,
    webhook_claims_stop_at_max_executions,
    webhook_claims_of_one_batch_share_the_limit,
    firing_ends_of_one_batch_are_stored_and_trimmed,
    runs_end_their_firings_with_their_messages,
    unleased_ends_count_their_execution,
    callbacks_are_owed_from_the_claim_and_settled,
    webhook_deliveries_are_replayed,
    webhook_addresses_are_unique,
    trigger_secrets_are_replaced_only_as_read,
    triggers_per_workspace_are_bounded,
    a_chatflow_owns_one_trigger_which_ends_on_its_end_date,
    vector_writes_are_atomic_versioned_and_scoped,
    document_stores_keep_chunks_files_and_vectors,
    executions_start_in_progress_and_are_updated,
    latest_execution_is_the_newest_of_its_session,
    execution_listing_filters_and_pages_newest_first,
    executions_are_shared_and_deleted_per_workspace,
    runs_are_written_together_each_all_or_none,
    a_start_written_again_with_its_end_updates_the_record,
    grouped_runs_keep_a_failing_run_apart,
);

fn flow(ws: uuid::Uuid, name: &str) -> NewChatflow {
    NewChatflow {
        workspace_id: ws,
        name: name.into(),
        flow_data: r#"{"nodes":[],"edges":[]}"#.into(),
        deployed: false,
        is_public: false,
        apikeyid: None,
        chatbot_config: Some(r#"{"title":"hi"}"#.into()),
        api_config: None,
        category: None,
        flow_type: ChatflowType::Chatflow,
    }
}

async fn mcp_publications_live_with_their_chatflow(t: &common::TestStore) {
    use weir_api::domain::mcp::McpServerConfig;
    let store: &dyn Store = &*t.store;
    let ws = store.ensure_workspace("mcp").await.unwrap();
    let other = store.ensure_workspace("mcp-other").await.unwrap();
    let published = store.create_chatflow(flow(ws.id, "a")).await.unwrap();
    let plain = store.create_chatflow(flow(ws.id, "b")).await.unwrap();
    store.create_chatflow(flow(other.id, "c")).await.unwrap();
    assert!(store.list_mcp_chatflows(ws.id).await.unwrap().is_empty());
    let config = McpServerConfig {
        enabled: true,
        token_hash: "ab".repeat(32),
        sealed_token: "sealed:k:data".into(),
        tool_name: Some("tool_a".into()),
        description: None,
    };
    let patch = ChatflowPatch {
        mcp_server: Some(Some(config.clone())),
        ..Default::default()
    };
    let updated = store
        .update_chatflow(ws.id, published.id, patch)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(updated.mcp_server.as_ref(), Some(&config));
    assert_eq!(
        store
            .find_chatflow(published.id)
            .await
            .unwrap()
            .unwrap()
            .mcp_server,
        Some(config.clone())
    );
    // Other changes keep it; it never shows in the chatflow's JSON.
    let renamed = ChatflowPatch {
        name: Some("renamed".into()),
        ..Default::default()
    };
    store
        .update_chatflow(ws.id, published.id, renamed)
        .await
        .unwrap();
    let listed = store.list_mcp_chatflows(ws.id).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, published.id);
    assert_eq!(listed[0].mcp_server, Some(config));
    assert!(
        !serde_json::to_string(&*listed[0])
            .unwrap()
            .contains("sealed:k")
    );
    assert!(store.list_mcp_chatflows(other.id).await.unwrap().is_empty());
    assert!(
        store
            .get_chatflow(ws.id, plain.id)
            .await
            .unwrap()
            .unwrap()
            .mcp_server
            .is_none()
    );
    assert!(store.delete_chatflow(ws.id, published.id).await.unwrap());
    assert!(store.list_mcp_chatflows(ws.id).await.unwrap().is_empty());
}

async fn mcp_servers_are_kept_per_workspace(t: &common::TestStore) {
    use weir_api::domain::mcp::{CustomMcpServer, McpAuthType, McpServerStatus};
    let store: &dyn Store = &*t.store;
    let ws = store.ensure_workspace("mcp-servers").await.unwrap();
    let other = store.ensure_workspace("mcp-servers-other").await.unwrap();
    let now = time::now();
    let server = |name: &str, minutes_later: i64| CustomMcpServer {
        id: uuid::Uuid::new_v4(),
        workspace_id: ws.id,
        name: name.into(),
        server_url: "https://mcp.example/mcp".into(),
        icon_src: None,
        color: Some("#123456".into()),
        auth_type: McpAuthType::CustomHeaders,
        sealed_auth: Some("sealed:k:x".into()),
        tools: Some(r#"[{"name":"echo"}]"#.into()),
        tool_count: 1,
        status: McpServerStatus::Authorized,
        created_date: time::from_millis(time::to_millis(&(now + minutes(minutes_later)))),
        updated_date: time::from_millis(time::to_millis(&now)),
    };
    let first = server("first", 0);
    let second = server("second", 1);
    store.create_mcp_server(&second).await.unwrap();
    store.create_mcp_server(&first).await.unwrap();
    assert_eq!(
        store.get_mcp_server(ws.id, first.id).await.unwrap(),
        Some(first.clone())
    );
    assert_eq!(
        store.get_mcp_server(other.id, first.id).await.unwrap(),
        None
    );
    let listed = store
        .list_mcp_servers(ws.id, Page { page: 1, limit: 10 })
        .await
        .unwrap();
    assert_eq!(listed.total, 2);
    let names: Vec<_> = listed.items.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["first", "second"]);
    assert!(
        listed.items.iter().all(|s| s.tools.is_none()),
        "listings leave tools out"
    );
    let changed = CustomMcpServer {
        status: McpServerStatus::Error,
        tools: None,
        tool_count: 0,
        sealed_auth: None,
        auth_type: McpAuthType::None,
        ..first.clone()
    };
    assert!(store.update_mcp_server(&changed).await.unwrap());
    assert_eq!(
        store.get_mcp_server(ws.id, first.id).await.unwrap(),
        Some(changed)
    );
    assert!(!store.delete_mcp_server(other.id, first.id).await.unwrap());
    assert!(store.delete_mcp_server(ws.id, first.id).await.unwrap());
    assert!(!store.update_mcp_server(&first).await.unwrap());
}

async fn workspaces_are_created_once(t: &common::TestStore) {
    let store: &dyn Store = &*t.store;
    let a = store.ensure_workspace("alpha").await.unwrap();
    let again = store.ensure_workspace("alpha").await.unwrap();
    let b = store.ensure_workspace("beta").await.unwrap();
    assert_eq!(a, again);
    assert_ne!(a.id, b.id);
    assert_eq!(store.find_workspace("alpha").await.unwrap(), Some(a));
    assert_eq!(store.find_workspace("gamma").await.unwrap(), None);
}

async fn api_keys_are_found_by_hash_and_revoked(t: &common::TestStore) {
    let store: &dyn Store = &*t.store;
    let ws = store.ensure_workspace("keys").await.unwrap();
    assert_eq!(store.count_api_keys().await.unwrap(), 0);
    let (plaintext, hash) = generate_key();
    let key = store
        .create_api_key(NewApiKey {
            workspace_id: ws.id,
            name: "ci".into(),
            permissions: vec![Permission::ChatflowsRead, Permission::VariablesWrite],
            key_hash: hash.clone(),
        })
        .await
        .unwrap();
    assert_eq!(key.workspace_name, "keys");
    assert_eq!(key.last_used_date, None);
    let found = store.find_api_key_by_hash(&hash).await.unwrap().unwrap();
    assert_eq!(found, key);
    assert!(found.matches(&plaintext));
    assert!(found.has(Permission::VariablesWrite) && !found.has(Permission::ChatflowsWrite));

    store.touch_api_key(key.id).await.unwrap();
    let touched = store.find_api_key_by_hash(&hash).await.unwrap().unwrap();
    assert!(touched.last_used_date.is_some());

    let other = store.ensure_workspace("other").await.unwrap();
    assert!(!store.delete_api_key(Some(other.id), key.id).await.unwrap());
    assert_eq!(store.list_api_keys(Some(ws.id)).await.unwrap().len(), 1);
    assert!(store.delete_api_key(Some(ws.id), key.id).await.unwrap());
    assert_eq!(store.find_api_key_by_hash(&hash).await.unwrap(), None);
    assert_eq!(store.count_api_keys().await.unwrap(), 0);
}

async fn chatflows_round_trip_and_are_scoped(t: &common::TestStore) {
    let store: &dyn Store = &*t.store;
    let ws = store.ensure_workspace("a").await.unwrap();
    let other = store.ensure_workspace("b").await.unwrap();
    let created = store.create_chatflow(flow(ws.id, "one")).await.unwrap();
    let got = store.get_chatflow(ws.id, created.id).await.unwrap();
    assert_eq!(got.as_ref(), Some(&created));
    assert_eq!(
        store.get_chatflow(other.id, created.id).await.unwrap(),
        None
    );
    assert!(!store.delete_chatflow(other.id, created.id).await.unwrap());
    assert!(
        store
            .update_chatflow(other.id, created.id, ChatflowPatch::default())
            .await
            .unwrap()
            .is_none()
    );
    assert!(store.delete_chatflow(ws.id, created.id).await.unwrap());
    assert_eq!(store.get_chatflow(ws.id, created.id).await.unwrap(), None);
}

async fn chatflow_listing_pages_newest_first(t: &common::TestStore) {
    let store: &dyn Store = &*t.store;
    let ws = store.ensure_workspace("list").await.unwrap();
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(
            store
                .create_chatflow(flow(ws.id, &format!("f{i}")))
                .await
                .unwrap()
                .id,
        );
        tokio::time::sleep(std::time::Duration::from_millis(3)).await;
    }
    // Touch the oldest: it becomes the newest.
    store
        .update_chatflow(
            ws.id,
            ids[0],
            ChatflowPatch {
                deployed: Some(true),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let first = store
        .list_chatflows(ws.id, None, Page { page: 1, limit: 2 })
        .await
        .unwrap();
    assert_eq!(first.total, 5);
    let names: Vec<_> = first.items.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["f0", "f4"]);
    let last = store
        .list_chatflows(ws.id, None, Page { page: 3, limit: 2 })
        .await
        .unwrap();
    assert_eq!(last.items.len(), 1);
    assert_eq!(last.items[0].name, "f1");
    let beyond = store
        .list_chatflows(ws.id, None, Page { page: 9, limit: 2 })
        .await
        .unwrap();
    assert!(beyond.items.is_empty());
    assert_eq!(beyond.total, 5);

    // Filtered by type, counted by type.
    store
        .update_chatflow(
            ws.id,
            ids[2],
            ChatflowPatch {
                flow_type: Some(ChatflowType::Agentflow),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let agents = store
        .list_chatflows(ws.id, Some(ChatflowType::Agentflow), Page::default())
        .await
        .unwrap();
    assert_eq!(agents.total, 1);
    assert_eq!(agents.items[0].name, "f2");
    let chatflows = store
        .list_chatflows(
            ws.id,
            Some(ChatflowType::Chatflow),
            Page { page: 1, limit: 2 },
        )
        .await
        .unwrap();
    assert_eq!(chatflows.total, 4);
    assert!(
        chatflows
            .items
            .iter()
            .all(|f| f.flow_type == ChatflowType::Chatflow)
    );
}

async fn chatflow_patch_keeps_other_fields(t: &common::TestStore) {
    let store: &dyn Store = &*t.store;
    let ws = store.ensure_workspace("patch").await.unwrap();
    let created = store.create_chatflow(flow(ws.id, "before")).await.unwrap();
    let updated = store
        .update_chatflow(
            ws.id,
            created.id,
            ChatflowPatch {
                name: Some("after".into()),
                is_public: Some(true),
                chatbot_config: Some(None),
                flow_type: Some(ChatflowType::Agentflow),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(updated.name, "after");
    assert!(updated.is_public);
    assert_eq!(updated.chatbot_config, None);
    assert_eq!(updated.flow_data, created.flow_data);
    assert_eq!(updated.created_date, created.created_date);
    assert!(updated.updated_date >= created.updated_date);
    assert_eq!(
        store.get_chatflow(ws.id, created.id).await.unwrap(),
        Some(updated)
    );
}

async fn variable_names_are_unique_per_workspace(t: &common::TestStore) {
    let store: &dyn Store = &*t.store;
    let ws = store.ensure_workspace("vars").await.unwrap();
    let other = store.ensure_workspace("vars2").await.unwrap();
    let new = |name: &str| NewVariable {
        name: name.into(),
        value: "v".into(),
        var_type: VariableType::Static,
    };
    let a = store.create_variable(ws.id, new("token")).await.unwrap();
    match store.create_variable(ws.id, new("token")).await {
        Err(StoreError::Conflict(msg)) => assert!(msg.contains("token"), "{msg}"),
        other => panic!("expected a conflict, got {other:?}"),
    }
    // The same name in another workspace is fine.
    store.create_variable(other.id, new("token")).await.unwrap();
    let b = store.create_variable(ws.id, new("second")).await.unwrap();
    match store
        .update_variable(
            ws.id,
            b.id,
            VariablePatch {
                name: Some("token".into()),
                ..Default::default()
            },
        )
        .await
    {
        Err(StoreError::Conflict(_)) => {}
        other => panic!("expected a conflict, got {other:?}"),
    }
    let changed = store
        .update_variable(
            ws.id,
            a.id,
            VariablePatch {
                value: Some("new".into()),
                var_type: Some(VariableType::Runtime),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (changed.value.as_str(), changed.var_type),
        ("new", VariableType::Runtime)
    );
    let listing = store.list_variables(ws.id, Page::default()).await.unwrap();
    assert_eq!(listing.total, 2);
    assert_eq!(listing.items[0].name, "second");
    assert_eq!(store.get_variable(other.id, a.id).await.unwrap(), None);
    assert!(store.delete_variable(ws.id, a.id).await.unwrap());
    assert!(!store.delete_variable(ws.id, a.id).await.unwrap());
}

async fn tools_round_trip_with_unique_names(t: &common::TestStore) {
    let store: &dyn Store = &*t.store;
    let ws = store.ensure_workspace("tools").await.unwrap();
    let other = store.ensure_workspace("tools2").await.unwrap();
    let city = ToolField {
        property: "city".into(),
        field_type: FieldType::String,
        description: "City name".into(),
        required: true,
        enum_values: None,
        items: None,
    };
    let unit = ToolField {
        property: "unit".into(),
        field_type: FieldType::Enum,
        description: String::new(),
        required: false,
        enum_values: Some(vec!["C".into(), "F".into()]),
        items: None,
    };
    let new = |name: &str| NewTool {
        name: name.into(),
        description: "Weather of a city".into(),
        schema: vec![city.clone(), unit.clone()],
        code: "return $city".into(),
        requirements: vec!["requests>=2.31".into()],
    };
    let weather = store.create_tool(ws.id, new("weather")).await.unwrap();
    assert_eq!(
        (weather.schema.as_slice(), weather.requirements.as_slice()),
        (
            [city.clone(), unit.clone()].as_slice(),
            ["requests>=2.31".to_string()].as_slice()
        )
    );
    assert_eq!(
        store.get_tool(ws.id, weather.id).await.unwrap(),
        Some(weather.clone())
    );
    match store.create_tool(ws.id, new("weather")).await {
        Err(StoreError::Conflict(msg)) => assert!(msg.contains("weather"), "{msg}"),
        other => panic!("expected a conflict, got {other:?}"),
    }
    // The same name in another workspace is fine; its tools stay apart.
    store.create_tool(other.id, new("weather")).await.unwrap();
    assert_eq!(store.get_tool(other.id, weather.id).await.unwrap(), None);
    let clock = store.create_tool(ws.id, new("clock")).await.unwrap();
    match store
        .update_tool(
            ws.id,
            clock.id,
            ToolPatch {
                name: Some("weather".into()),
                ..Default::default()
            },
        )
        .await
    {
        Err(StoreError::Conflict(msg)) => assert!(msg.contains("weather"), "{msg}"),
        other => panic!("expected a conflict, got {other:?}"),
    }
    let changed = store
        .update_tool(
            ws.id,
            clock.id,
            ToolPatch {
                schema: Some(vec![]),
                requirements: Some(vec![]),
                code: Some("return 'noon'".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (changed.name.as_str(), changed.description.as_str()),
        ("clock", "Weather of a city")
    );
    assert!(changed.schema.is_empty() && changed.requirements.is_empty());
    assert!(changed.updated_date >= clock.updated_date);
    assert_eq!(
        store.get_tool(ws.id, clock.id).await.unwrap(),
        Some(changed.clone())
    );
    let update_elsewhere = store
        .update_tool(other.id, clock.id, ToolPatch::default())
        .await
        .unwrap();
    assert_eq!(update_elsewhere, None);
    let listing = store.list_tools(ws.id, Page::default()).await.unwrap();
    assert_eq!(listing.total, 2);
    assert_eq!(listing.items, vec![changed, weather.clone()]);
    let second_page = store
        .list_tools(ws.id, Page { page: 2, limit: 1 })
        .await
        .unwrap();
    assert_eq!(
        (second_page.total, second_page.items),
        (2, vec![weather.clone()])
    );
    assert!(!store.delete_tool(other.id, weather.id).await.unwrap());
    assert!(store.delete_tool(ws.id, weather.id).await.unwrap());
    assert!(!store.delete_tool(ws.id, weather.id).await.unwrap());
    assert_eq!(store.get_tool(ws.id, weather.id).await.unwrap(), None);
}

async fn migrations_are_idempotent(t: &common::TestStore) {
    let store: &dyn Store = &*t.store;
    let ws = store.ensure_workspace("m").await.unwrap();
    let kept = store.create_chatflow(flow(ws.id, "x")).await.unwrap();
    // Opening the same database again applies nothing twice and keeps the data.
    let reopened = t.reopen().await;
    assert_eq!(
        reopened.get_chatflow(ws.id, kept.id).await.unwrap(),
        Some(kept)
    );
    assert_eq!(
        reopened
            .list_chatflows(ws.id, None, Page::default())
            .await
            .unwrap()
            .total,
        1
    );
}

fn msg(flow: uuid::Uuid, chat: &str, role: MessageRole, text: &str) -> NewChatMessage {
    NewChatMessage {
        chatflow_id: flow,
        chat_id: chat.into(),
        role,
        content: text.into(),
        source_documents: None,
        used_tools: None,
        chat_type: ChatType::External,
        execution_id: None,
        memory_type: None,
        details: None,
    }
}

fn in_chat(chat: &str) -> MessageFilter {
    MessageFilter {
        chat_id: Some(chat.into()),
        ..MessageFilter::default()
    }
}

async fn chat_messages_keep_order_per_session(t: &common::TestStore) {
    let store: &dyn Store = &*t.store;
    let ws = store.ensure_workspace("chat").await.unwrap();
    let f = store.create_chatflow(flow(ws.id, "c")).await.unwrap().id;
    for i in 0..3 {
        store
            .append_chat_messages(vec![
                msg(f, "s1", MessageRole::User, &format!("q{i}")),
                msg(f, "s1", MessageRole::Api, &format!("a{i}")),
            ])
            .await
            .unwrap();
    }
    store
        .append_chat_messages(vec![msg(f, "s2", MessageRole::User, "other")])
        .await
        .unwrap();
    let all = store.list_chat_messages(f, Some("s1"), None).await.unwrap();
    let texts: Vec<_> = all.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(texts, ["q0", "a0", "q1", "a1", "q2", "a2"]);
    assert_eq!(all[1].role, MessageRole::Api);
    let last = store
        .list_chat_messages(f, Some("s1"), Some(2))
        .await
        .unwrap();
    let texts: Vec<_> = last.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(texts, ["q2", "a2"]);
    assert_eq!(
        store.list_chat_messages(f, None, None).await.unwrap().len(),
        7
    );
    assert_eq!(
        store.delete_chat_messages(f, &in_chat("s2")).await.unwrap(),
        1
    );
    assert_eq!(
        store.list_chat_messages(f, None, None).await.unwrap().len(),
        6
    );
    // Deleting the chatflow removes its conversations.
    store.delete_chatflow(ws.id, f).await.unwrap();
    assert!(
        store
            .list_chat_messages(f, None, None)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn agent_checkpoints_are_kept_per_session_and_cleared_with_the_chat(t: &common::TestStore) {
    let store: &dyn Store = &*t.store;
    let ws = store.ensure_workspace("checkpoints").await.unwrap();
    let f = store.create_chatflow(flow(ws.id, "seq")).await.unwrap().id;
    assert_eq!(store.get_agent_checkpoint(f, "s1").await.unwrap(), None);
    store
        .put_agent_checkpoint(f, "s1", "{\"a\":1}")
        .await
        .unwrap();
    store
        .put_agent_checkpoint(f, "s1", "{\"a\":2}")
        .await
        .unwrap();
    store
        .put_agent_checkpoint(f, "s2", "{\"b\":1}")
        .await
        .unwrap();
    assert_eq!(
        store
            .get_agent_checkpoint(f, "s1")
            .await
            .unwrap()
            .as_deref(),
        Some("{\"a\":2}")
    );
    // Clearing one chat's messages clears its checkpoint only.
    store.delete_chat_messages(f, &in_chat("s1")).await.unwrap();
    assert_eq!(store.get_agent_checkpoint(f, "s1").await.unwrap(), None);
    assert!(store.get_agent_checkpoint(f, "s2").await.unwrap().is_some());
    // Deleting the chatflow removes the rest.
    store.delete_chatflow(ws.id, f).await.unwrap();
    assert_eq!(store.get_agent_checkpoint(f, "s2").await.unwrap(), None);
}

async fn leads_are_listed_per_chatflow(t: &common::TestStore) {
    let store: &dyn Store = &*t.store;
    let ws = store.ensure_workspace("leads").await.unwrap();
    let a = store.create_chatflow(flow(ws.id, "a")).await.unwrap().id;
    let b = store.create_chatflow(flow(ws.id, "b")).await.unwrap().id;
    let lead = store
        .create_lead(NewLead {
            chatflow_id: a,
            chat_id: "chat-1".into(),
            name: Some("Ada".into()),
            phone: Some("+44 20".into()),
            ..NewLead::default()
        })
        .await
        .unwrap();
    store
        .create_lead(NewLead {
            chatflow_id: b,
            chat_id: "chat-2".into(),
            email: Some("y@example.com".into()),
            ..NewLead::default()
        })
        .await
        .unwrap();
    assert_eq!(store.list_leads(a).await.unwrap(), vec![lead]);
    // One lead per address and chat: the address again adds nothing, and its
    // name and phone are taken.
    let first = store.list_leads(b).await.unwrap().pop().expect("b's lead");
    let again = store
        .create_lead(NewLead {
            chatflow_id: b,
            chat_id: "chat-2".into(),
            email: Some("y@example.com".into()),
            name: Some("Yves".into()),
            ..NewLead::default()
        })
        .await
        .unwrap();
    assert_eq!(again.id, first.id);
    assert_eq!(again.name.as_deref(), Some("Yves"));
    assert_eq!(store.list_leads(b).await.unwrap(), vec![again]);
}

/// Flowise's message filters, and ratings: one per answer (rating again
/// replaces it), listed per chatflow, and gone with their message.
async fn messages_are_filtered_and_rated(t: &common::TestStore) {
    let store: &dyn Store = &*t.store;
    let ws = store.ensure_workspace("rated").await.unwrap();
    let f = store.create_chatflow(flow(ws.id, "r")).await.unwrap().id;
    let mut written = Vec::new();
    for (chat, kind) in [("c1", ChatType::External), ("c2", ChatType::Webhook)] {
        let mut q = msg(f, chat, MessageRole::User, &format!("{chat}-q"));
        let mut a = msg(f, chat, MessageRole::Api, &format!("{chat}-a"));
        q.chat_type = kind;
        a.chat_type = kind;
        a.memory_type = Some("Buffer Memory".into());
        a.details = Some("{\"action\":{\"id\":\"x\"}}".into());
        written.extend(store.append_chat_messages(vec![q, a]).await.unwrap());
    }
    let texts = |m: Vec<weir_api::domain::ChatMessageRecord>| -> Vec<String> {
        m.into_iter().map(|m| m.content).collect()
    };
    let query = |filter: MessageFilter, descending: bool| async move {
        texts(
            store
                .query_chat_messages(f, &filter, descending)
                .await
                .unwrap(),
        )
    };
    assert_eq!(
        query(MessageFilter::default(), false).await,
        ["c1-q", "c1-a", "c2-q", "c2-a"]
    );
    assert_eq!(
        query(MessageFilter::default(), true).await,
        ["c2-a", "c2-q", "c1-a", "c1-q"]
    );
    let webhooks = MessageFilter {
        chat_types: vec![ChatType::Webhook, ChatType::Mcp],
        ..MessageFilter::default()
    };
    assert_eq!(query(webhooks, false).await, ["c2-q", "c2-a"]);
    let memory = MessageFilter {
        memory_type: Some("Buffer Memory".into()),
        ..MessageFilter::default()
    };
    assert_eq!(query(memory, false).await, ["c1-a", "c2-a"]);
    let one = MessageFilter {
        message_id: Some(written[1].id),
        ..MessageFilter::default()
    };
    assert_eq!(query(one, false).await, ["c1-a"]);
    let later = MessageFilter {
        start_date: Some(time::now() + chrono::TimeDelta::minutes(1)),
        ..MessageFilter::default()
    };
    assert!(query(later, false).await.is_empty());
    let found = store
        .find_chat_message(written[3].id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found, written[3]);
    assert_eq!(found.chat_type, ChatType::Webhook);
    assert_eq!(
        found.details.as_deref(),
        Some("{\"action\":{\"id\":\"x\"}}")
    );

    let rating = |message: &weir_api::domain::ChatMessageRecord, rating| Feedback {
        id: uuid::Uuid::new_v4(),
        chatflow_id: f,
        chat_id: message.chat_id.clone(),
        message_id: message.id,
        rating,
        content: None,
        created_date: time::now(),
    };
    let up = store
        .rate_message(rating(&written[1], Rating::ThumbsUp))
        .await
        .unwrap();
    // Rating again replaces the rating, keeping its id.
    let mut again = rating(&written[1], Rating::ThumbsDown);
    again.content = Some("wrong".into());
    let down = store.rate_message(again).await.unwrap();
    assert_eq!(down.id, up.id);
    assert_eq!(
        (down.rating, down.content.as_deref()),
        (Rating::ThumbsDown, Some("wrong"))
    );
    store
        .rate_message(rating(&written[3], Rating::ThumbsUp))
        .await
        .unwrap();
    assert_eq!(store.get_feedback(up.id).await.unwrap(), Some(down.clone()));
    let mut changed = down.clone();
    changed.rating = Rating::ThumbsUp;
    changed.content = None;
    assert!(store.update_feedback(&changed).await.unwrap());
    assert_eq!(
        store.get_feedback(up.id).await.unwrap(),
        Some(changed.clone())
    );
    let all = store
        .list_feedback(f, &FeedbackFilter::default())
        .await
        .unwrap();
    assert_eq!(all.len(), 2);
    let newest_first = FeedbackFilter {
        descending: true,
        ..FeedbackFilter::default()
    };
    let listed = store.list_feedback(f, &newest_first).await.unwrap();
    assert_eq!(listed.iter().rev().cloned().collect::<Vec<_>>(), all);
    let of_c1 = FeedbackFilter {
        chat_id: Some("c1".into()),
        ..FeedbackFilter::default()
    };
    assert_eq!(
        store.list_feedback(f, &of_c1).await.unwrap(),
        vec![changed.clone()]
    );
    let ids: Vec<uuid::Uuid> = written.iter().map(|m| m.id).collect();
    assert_eq!(store.feedback_of_messages(f, &ids).await.unwrap().len(), 2);
    // feedbackType: the rated answers, each with its question.
    let rated_up = MessageFilter {
        feedback_types: vec![Rating::ThumbsUp],
        ..MessageFilter::default()
    };
    assert_eq!(
        query(rated_up.clone(), false).await,
        ["c1-q", "c1-a", "c2-q", "c2-a"]
    );
    let rated_down = MessageFilter {
        feedback_types: vec![Rating::ThumbsDown],
        ..MessageFilter::default()
    };
    assert!(query(rated_down, false).await.is_empty());
    // Deleting a chat's messages takes their ratings.
    assert_eq!(
        store.delete_chat_messages(f, &in_chat("c1")).await.unwrap(),
        2
    );
    assert_eq!(store.get_feedback(up.id).await.unwrap(), None);
    assert!(!store.update_feedback(&changed).await.unwrap());
    assert_eq!(query(rated_up, false).await, ["c2-q", "c2-a"]);
}

async fn rate_limit_windows_count_hits(t: &common::TestStore) {
    let store: &dyn Store = &*t.store;
    let minute = 60_000;
    let now = weir_api::domain::time::to_millis(&weir_api::domain::time::now());
    let start = now - now % minute;
    assert_eq!(
        store
            .rate_limit_hit("flow:key", start, minute)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        store
            .rate_limit_hit("flow:key", start, minute)
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        store
            .rate_limit_hit("flow:other", start, minute)
            .await
            .unwrap(),
        1
    );
    // The next window starts from zero.
    assert_eq!(
        store
            .rate_limit_hit("flow:key", start + minute, minute)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        store
            .rate_limit_hit("flow:key", start + minute, minute)
            .await
            .unwrap(),
        2
    );
}

fn trigger(ws: uuid::Uuid, flow: uuid::Uuid, kind: TriggerType, node: &str) -> Trigger {
    let now = time::now();
    Trigger {
        id: uuid::Uuid::new_v4(),
        workspace_id: ws,
        name: "t".into(),
        chatflow_id: flow,
        node_id: node.into(),
        trigger_type: kind,
        cron_expression: (kind == TriggerType::Cron).then(|| "* * * * *".into()),
        timezone: "UTC".into(),
        enabled: true,
        webhook_platform: None,
        webhook_secret: None,
        webhook_bot_token: None,
        trigger_message: Some("hello".into()),
        execution_count: 0,
        max_executions: None,
        timeout: 300,
        last_executed: None,
        // Due at the start of this minute, so no other minute of "* * * * *" begins
        // before the tests' claim time (`claim_time`) and nothing counts as missed.
        next_execution: (kind == TriggerType::Cron).then(|| minute_start(now)),
        notification_email: Some("ops@example.com".into()),
        owned_by_chatflow: false,
        ends_at: None,
        respond_async: false,
        callback_url: None,
        callback_secret: None,
        created_date: now,
        updated_date: now,
    }
}

async fn setup(store: &dyn Store, kind: TriggerType, node: &str) -> Trigger {
    let ws = store.ensure_workspace("triggers").await.unwrap();
    let f = store.create_chatflow(flow(ws.id, "flow")).await.unwrap();
    store
        .create_trigger(trigger(ws.id, f.id, kind, node), NO_LIMIT)
        .await
        .unwrap()
}

/// A workspace's trigger allowance no test reaches.
const NO_LIMIT: u64 = u64::MAX;

fn minutes(n: i64) -> chrono::TimeDelta {
    chrono::TimeDelta::minutes(n)
}

fn minute_start(at: time::Timestamp) -> time::Timestamp {
    chrono::DurationRound::duration_trunc(at, minutes(1)).unwrap_or(at)
}

/// The claim time of a cron fixture: a second after it fell due, whatever the
/// wall clock says, so a minute boundary during the test changes nothing.
fn claim_time(tr: &Trigger) -> time::Timestamp {
    tr.next_execution.unwrap() + chrono::TimeDelta::seconds(1)
}

async fn due_cron_triggers_are_claimed_once(t: &common::TestStore) {
    let store: &dyn Store = &*t.store;
    let other = t.reopen().await;
    let tr = setup(store, TriggerType::Cron, "n").await;
    let now = claim_time(&tr);
    let owner = uuid::Uuid::new_v4();
    let (a, b) = tokio::join!(
        store.claim_due_triggers(now, owner, now + minutes(1), 10, plan),
        other.claim_due_triggers(now, owner, now + minutes(1), 10, plan),
    );
    let firings: Vec<_> = a.unwrap().into_iter().chain(b.unwrap()).collect();
    assert_eq!(firings.len(), 1, "claimed by exactly one claimer");
    let firing = &firings[0];
    assert_eq!(
        firing.scheduled_at,
        tr.next_execution.unwrap(),
        "{firing:?}"
    );
    assert_eq!(firing.trigger.execution_count, 1);
    let stored = store
        .get_trigger(tr.workspace_id, tr.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.execution_count, 1);
    assert!(stored.next_execution.unwrap() > now);
    assert!(
        store
            .claim_due_triggers(now, owner, now, 10, plan)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(store.firing_exists(firing.id).await.unwrap());

    let result = weir_api::domain::trigger::failed_result(
        &tr,
        now,
        Some(firing.scheduled_at),
        "q".into(),
        "c".into(),
        "boom".into(),
    );
    let done = store
        .finish_firing(firing.id, result.clone(), None, None, 1000)
        .await
        .unwrap();
    assert_eq!(done.unwrap().status, ResultStatus::Failed);
    assert!(
        store
            .finish_firing(firing.id, result, None, None, 1000)
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        store.list_trigger_results(tr.id, 10).await.unwrap().len(),
        1
    );
    let recent = store.recent_trigger_results(&[tr.id], 5).await.unwrap();
    assert_eq!(recent.len(), 1);
    // Results are deleted by id, only the trigger's own.
    let stored = store.list_trigger_results(tr.id, 10).await.unwrap();
    let other = uuid::Uuid::new_v4();
    assert_eq!(
        store
            .delete_trigger_results(other, &[stored[0].id])
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        store
            .delete_trigger_results(tr.id, &[stored[0].id, other])
            .await
            .unwrap(),
        1
    );
    assert!(
        store
            .list_trigger_results(tr.id, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn deleting_a_trigger_drops_its_claimed_firing(t: &common::TestStore) {
    let store: &dyn Store = &*t.store;
    let tr = setup(store, TriggerType::Cron, "n").await;
    let now = claim_time(&tr);
    let firings = store
        .claim_due_triggers(now, uuid::Uuid::new_v4(), now + minutes(1), 10, plan)
        .await
        .unwrap();
    assert_eq!(firings.len(), 1);
    assert!(store.delete_trigger(tr.workspace_id, tr.id).await.unwrap());
    assert!(!store.firing_exists(firings[0].id).await.unwrap());
    let result = weir_api::domain::trigger::failed_result(
        &tr,
        now,
        None,
        "q".into(),
        "c".into(),
        "x".into(),
    );
    assert!(
        store
            .finish_firing(firings[0].id, result, None, None, 10)
            .await
            .unwrap()
            .is_none()
    );
}

async fn expired_leases_fail_their_firing_once(t: &common::TestStore) {
    let store: &dyn Store = &*t.store;
    let tr = setup(store, TriggerType::Cron, "n").await;
    let now = claim_time(&tr);
    let firings = store
        .claim_due_triggers(
            now,
            uuid::Uuid::new_v4(),
            now - chrono::TimeDelta::seconds(1),
            10,
            plan,
        )
        .await
        .unwrap();
    assert_eq!(firings.len(), 1);
    assert_eq!(store.expire_firings(now, 1000).await.unwrap(), 1);
    assert_eq!(store.expire_firings(now, 1000).await.unwrap(), 0);
    let results = store.list_trigger_results(tr.id, 10).await.unwrap();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].status, ResultStatus::Failed);
    assert_eq!(results[0].error.as_deref(), Some(LEASE_EXPIRED));
    assert_eq!(results[0].input, "hello");
    // Its failure mail waits in the outbox, claimed once.
    let mail = store.claim_mail(now, now + minutes(1)).await.unwrap();
    assert_eq!(mail.len(), 1);
    assert_eq!(mail[0].0.recipient, "ops@example.com");
    assert!(mail[0].0.body.contains(LEASE_EXPIRED));
    assert!(
        store
            .claim_mail(now, now + minutes(1))
            .await
            .unwrap()
            .is_empty()
    );
    store.mail_sent(&[mail[0].0.id], now).await.unwrap();
    assert!(
        store
            .claim_mail(now + minutes(2), now + minutes(3))
            .await
            .unwrap()
            .is_empty()
    );
}

fn claim(input: &str, callback: Option<NewCallback>) -> WebhookClaim {
    WebhookClaim {
        input: input.into(),
        chat_id: "chat".into(),
        callback,
    }
}

/// Records one attempt at callback `id`.
async fn settle(store: &dyn Store, id: uuid::Uuid, at: time::Timestamp, outcome: AttemptOutcome) {
    store
        .settle_callbacks(&[CallbackAttempt { id, at, outcome }])
        .await
        .unwrap();
}

fn callback(url: &str) -> NewCallback {
    NewCallback {
        id: uuid::Uuid::new_v4(),
        url: url.into(),
        secret: Some("sealed:x".into()),
    }
}

async fn callbacks_are_owed_from_the_claim_and_settled(t: &common::TestStore) {
    let store: &dyn Store = &*t.store;
    let tr = setup(store, TriggerType::Webhook, "hook").await;
    let now = time::now();
    let owner = uuid::Uuid::new_v4();
    let owed = callback("http://receiver/a");
    let firing = store
        .claim_webhook_firing(
            tr.id,
            now,
            owner,
            now + minutes(1),
            claim("a", Some(owed.clone())),
        )
        .await
        .unwrap()
        .unwrap();
    // Owed, but not due while the run goes on.
    let later = now + minutes(5);
    assert!(
        store
            .claim_callbacks(later, later, 10)
            .await
            .unwrap()
            .is_empty()
    );
    let result = weir_api::domain::trigger::failed_result(
        &tr,
        now,
        None,
        "a".into(),
        "chat".into(),
        "boom".into(),
    );
    let body = r#"{"status":"ERROR"}"#.to_owned();
    let stored = store
        .finish_firing(firing.id, result, None, Some(body.clone()), 10)
        .await
        .unwrap()
        .unwrap();
    let due = store
        .claim_callbacks(now, now + minutes(1), 10)
        .await
        .unwrap();
    assert_eq!(due.len(), 1);
    assert_eq!(
        (due[0].id, &due[0].body, due[0].attempts),
        (owed.id, &body, 0)
    );
    assert_eq!(due[0].secret, owed.secret);
    // Claimed: another sender does not see it until the claim runs out.
    assert!(
        store
            .claim_callbacks(now, now, 10)
            .await
            .unwrap()
            .is_empty()
    );
    let retry_at = now + minutes(2);
    settle(
        store,
        owed.id,
        now,
        AttemptOutcome::Retry {
            at: retry_at,
            error: "HTTP 503".into(),
        },
    )
    .await;
    let [state] = &store.callbacks_of_results(&[stored.id]).await.unwrap()[..] else {
        panic!("one callback")
    };
    assert_eq!(state.status, CallbackStatus::Pending);
    assert_eq!(
        (state.attempts, state.last_error.as_deref()),
        (1, Some("HTTP 503"))
    );
    assert!(
        store
            .claim_callbacks(now + minutes(1), now, 10)
            .await
            .unwrap()
            .is_empty()
    );
    let due = store.claim_callbacks(retry_at, retry_at, 10).await.unwrap();
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].attempts, 1);
    settle(store, owed.id, retry_at, AttemptOutcome::Delivered).await;
    let [state] = &store.callbacks_of_results(&[stored.id]).await.unwrap()[..] else {
        panic!("one callback")
    };
    assert_eq!(state.status, CallbackStatus::Delivered);
    assert_eq!((state.attempts, state.last_error.as_deref()), (2, None));
    assert!(state.delivered_at.is_some());
    assert!(
        store
            .claim_callbacks(later, later, 10)
            .await
            .unwrap()
            .is_empty()
    );

    // A firing whose replica died owes an ERROR callback once its lease runs out.
    let cut = callback("http://receiver/b");
    store
        .claim_webhook_firing(
            tr.id,
            now,
            owner,
            now + minutes(1),
            claim("b", Some(cut.clone())),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(store.expire_firings(now + minutes(2), 10).await.unwrap(), 1);
    let due = store.claim_callbacks(later, later, 10).await.unwrap();
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].id, cut.id);
    let body: serde_json::Value = serde_json::from_str(&due[0].body).unwrap();
    assert_eq!(body["status"], "ERROR");
    assert_eq!(body["error"], LEASE_EXPIRED);
    settle(
        store,
        cut.id,
        later,
        AttemptOutcome::GaveUp {
            error: "refused".into(),
        },
    )
    .await;
    let results = store.list_trigger_results(tr.id, 10).await.unwrap();
    let ids: Vec<_> = results.iter().map(|r| r.id).collect();
    let states = store.callbacks_of_results(&ids).await.unwrap();
    assert_eq!(states.len(), 2);
    assert!(
        states
            .iter()
            .any(|s| s.id == cut.id && s.status == CallbackStatus::Failed)
    );
}

async fn webhook_claims_stop_at_max_executions(t: &common::TestStore) {
    let store: &dyn Store = &*t.store;
    let mut tr = setup(store, TriggerType::Webhook, "hook").await;
    tr.max_executions = Some(1);
    assert!(store.update_trigger(&tr).await.unwrap());
    let now = time::now();
    let owner = uuid::Uuid::new_v4();
    let first = store
        .claim_webhook_firing(tr.id, now, owner, now + minutes(1), claim("in", None))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.trigger.execution_count, 1);
    assert!(!first.trigger.enabled);
    assert!(
        store
            .claim_webhook_firing(tr.id, now, owner, now + minutes(1), claim("in", None))
            .await
            .unwrap()
            .is_none()
    );
    let found = store.find_webhook_triggers("hook").await.unwrap();
    assert_eq!(found.len(), 1);
    let found = &found[0];
    assert_eq!(found.execution_count, 1);
    assert!(!found.enabled);
}

/// A result of a webhook call for `tr`, executed at `at`.
fn call_result(
    tr: &Trigger,
    at: time::Timestamp,
    output: &str,
) -> weir_api::domain::NewTriggerResult {
    weir_api::domain::NewTriggerResult {
        trigger_id: tr.id,
        executed_at: at,
        scheduled_at: None,
        input: "in".into(),
        output: Some(output.into()),
        source_documents: None,
        used_tools: None,
        chat_id: Some("chat".into()),
        status: ResultStatus::Success,
        error: None,
        missed_count: None,
    }
}

async fn webhook_claims_of_one_batch_share_the_limit(t: &common::TestStore) {
    let store: &dyn Store = &*t.store;
    let mut tr = setup(store, TriggerType::Webhook, "hook").await;
    tr.max_executions = Some(3);
    assert!(store.update_trigger(&tr).await.unwrap());
    let now = time::now();
    let owner = uuid::Uuid::new_v4();
    let claims: Vec<FiringClaim> = (0..5)
        .map(|n| FiringClaim {
            trigger: tr.id,
            now: now + chrono::TimeDelta::milliseconds(n),
            owner,
            lease_until: now + minutes(1),
            call: claim(&format!("call {n}"), Some(callback("http://receiver/b"))),
        })
        .collect();
    let owed: Vec<_> = claims.iter().map(|c| c.call.callback.clone()).collect();
    let claimed: Vec<_> = store
        .claim_webhook_firings(claims)
        .await
        .into_iter()
        .map(|c| c.unwrap())
        .collect();
    // The first three in order get the three executions left, the others none.
    let granted: Vec<bool> = claimed.iter().map(Option::is_some).collect();
    assert_eq!(granted, [true, true, true, false, false]);
    let firings: Vec<_> = claimed.into_iter().flatten().collect();
    assert!(firings.iter().all(|f| f.leased && !f.is_cron));
    let ids: std::collections::HashSet<_> = firings.iter().map(|f| f.id).collect();
    assert_eq!(ids.len(), 3);
    let stored = store
        .get_trigger(tr.workspace_id, tr.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.execution_count, 3);
    assert!(!stored.enabled);
    // Each granted call owes its callback (due once its firing ends); the
    // refused ones owe none.
    for firing in &firings {
        let body = format!(r#"{{"status":"SUCCESS","firing":"{}"}}"#, firing.id);
        store
            .finish_firing(firing.id, call_result(&tr, now, "ok"), None, Some(body), 10)
            .await
            .unwrap()
            .unwrap();
    }
    let due = store
        .claim_callbacks(now + minutes(1), now + minutes(2), 10)
        .await
        .unwrap();
    let mut due_ids: Vec<_> = due.iter().map(|c| c.id).collect();
    let mut owed_ids: Vec<_> = owed[..3].iter().flatten().map(|c| c.id).collect();
    due_ids.sort();
    owed_ids.sort();
    assert_eq!(due_ids, owed_ids);
}

async fn firing_ends_of_one_batch_are_stored_and_trimmed(t: &common::TestStore) {
    let store: &dyn Store = &*t.store;
    let tr = setup(store, TriggerType::Webhook, "hook").await;
    let now = time::now();
    let owner = uuid::Uuid::new_v4();
    let claims: Vec<FiringClaim> = (0..4)
        .map(|_| FiringClaim {
            trigger: tr.id,
            now,
            owner,
            lease_until: now + minutes(1),
            call: claim("in", None),
        })
        .collect();
    let firings: Vec<_> = store
        .claim_webhook_firings(claims)
        .await
        .into_iter()
        .map(|c| c.unwrap().unwrap())
        .collect();
    let mut ends: Vec<FiringEnd> = firings
        .iter()
        .enumerate()
        .map(|(n, f)| FiringEnd {
            firing: f.id,
            leased: true,
            result: call_result(
                &tr,
                now + chrono::TimeDelta::seconds(n as i64),
                &format!("answer {n}"),
            ),
            mail: None,
            callback_body: None,
            keep: 2,
        })
        .collect();
    // An end whose firing is gone (say, its lease expired elsewhere) stores nothing.
    ends.push(FiringEnd {
        firing: uuid::Uuid::new_v4(),
        ..ends[0].clone()
    });
    let ended: Vec<_> = store
        .finish_firings(ends)
        .await
        .into_iter()
        .map(|e| e.unwrap())
        .collect();
    let stored: Vec<bool> = ended.iter().map(Option::is_some).collect();
    assert_eq!(stored, [true, true, true, true, false]);
    // Trimmed once, after the batch: the newest two results are kept.
    let results = store.list_trigger_results(tr.id, 10).await.unwrap();
    let outputs: Vec<_> = results.iter().filter_map(|r| r.output.clone()).collect();
    assert_eq!(outputs, ["answer 3", "answer 2"]);
    for firing in &firings {
        assert!(!store.firing_exists(firing.id).await.unwrap());
    }
}

/// A run that answers a trigger's firing ends it in the transaction of its
/// messages: both stored, or neither.
async fn runs_end_their_firings_with_their_messages(t: &common::TestStore) {
    let store: &dyn Store = &*t.store;
    let tr = setup(store, TriggerType::Webhook, "hook").await;
    let f = tr.chatflow_id;
    let now = time::now();
    let leased = store
        .claim_webhook_firings(vec![FiringClaim {
            trigger: tr.id,
            now,
            owner: uuid::Uuid::new_v4(),
            lease_until: now + minutes(1),
            call: claim("in", None),
        }])
        .await
        .into_iter()
        .next()
        .unwrap()
        .unwrap()
        .unwrap();
    let end = |firing: uuid::Uuid, leased: bool, at: time::Timestamp, output: &str| FiringEnd {
        firing,
        leased,
        result: call_result(&tr, at, output),
        mail: None,
        callback_body: None,
        keep: 2,
    };
    let run = |chat: &str, flow: uuid::Uuid, end: FiringEnd| RunWrites {
        messages: vec![
            msg(flow, chat, MessageRole::User, "q"),
            msg(flow, chat, MessageRole::Api, "a"),
        ],
        end_firing: Some(end),
        ..Default::default()
    };
    let counted = || async {
        store
            .get_trigger(tr.workspace_id, tr.id)
            .await
            .unwrap()
            .unwrap()
            .execution_count
    };
    let before = counted().await;
    let second = |n: i64| now + chrono::TimeDelta::seconds(n);
    let written = store
        .write_runs(vec![
            run("c1", f, end(uuid::Uuid::new_v4(), false, second(1), "one")),
            run("c2", f, end(leased.id, true, second(2), "two")),
            // Its messages cannot be stored (no such chatflow): its end is undone.
            run(
                "c3",
                uuid::Uuid::new_v4(),
                end(uuid::Uuid::new_v4(), false, second(3), "lost"),
            ),
            run("c4", f, end(uuid::Uuid::new_v4(), false, second(4), "four")),
        ])
        .await;
    let mut written = written.into_iter();
    let one = written.next().unwrap().unwrap();
    assert_eq!(one.messages.len(), 2);
    assert_eq!(
        one.firing_result.and_then(|r| r.output),
        Some("one".to_owned())
    );
    let two = written.next().unwrap().unwrap();
    assert_eq!(
        two.firing_result.and_then(|r| r.output),
        Some("two".to_owned())
    );
    assert!(written.next().unwrap().is_err());
    assert!(written.next().unwrap().unwrap().firing_result.is_some());
    // The unleased ends counted (the leased one was counted by its claim).
    assert_eq!(counted().await, before + 2);
    assert!(!store.firing_exists(leased.id).await.unwrap());
    // Trimmed to `keep` once the batch is in; nothing of the failed run.
    let results = store.list_trigger_results(tr.id, 10).await.unwrap();
    let outputs: Vec<_> = results.iter().filter_map(|r| r.output.clone()).collect();
    assert_eq!(outputs, ["four", "two"]);
    assert!(
        store
            .list_chat_messages(f, Some("c3"), None)
            .await
            .unwrap()
            .is_empty()
    );
    // A leased end whose firing is gone stores nothing, and the messages stay.
    let late = store
        .write_run(run("c5", f, end(leased.id, true, second(5), "late")))
        .await
        .unwrap();
    assert_eq!((late.messages.len(), late.firing_result), (2, None));
}

async fn unleased_ends_count_their_execution(t: &common::TestStore) {
    let store: &dyn Store = &*t.store;
    let tr = setup(store, TriggerType::Webhook, "hook").await;
    let now = time::now();
    let end = |at: time::Timestamp, output: &str| FiringEnd {
        firing: uuid::Uuid::new_v4(),
        leased: false,
        result: call_result(&tr, at, output),
        mail: None,
        callback_body: None,
        keep: 10,
    };
    let later = now + chrono::TimeDelta::seconds(5);
    let ended = store
        .finish_firings(vec![end(later, "second"), end(now, "first")])
        .await;
    assert!(ended.iter().all(|e| matches!(e, Ok(Some(_)))));
    let stored = store
        .get_trigger(tr.workspace_id, tr.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.execution_count, 2);
    // The latest of the batch, whatever the order it came in.
    assert_eq!(
        stored.last_executed.map(|t| t.timestamp_millis()),
        Some(later.timestamp_millis())
    );
    let one = store.end_firing(end(now, "third")).await.unwrap();
    assert_eq!(one.map(|r| r.output), Some(Some("third".to_owned())));
    assert_eq!(
        store.list_trigger_results(tr.id, 10).await.unwrap().len(),
        3
    );
    // A deleted trigger's call stores nothing.
    assert!(store.delete_trigger(tr.workspace_id, tr.id).await.unwrap());
    assert!(store.end_firing(end(now, "gone")).await.unwrap().is_none());
}

async fn webhook_deliveries_are_replayed(t: &common::TestStore) {
    let store: &dyn Store = &*t.store;
    let tr = setup(store, TriggerType::Webhook, "hook").await;
    let now = time::now();
    assert_eq!(
        store.begin_delivery(tr.id, "d1", now).await.unwrap(),
        Delivery::New
    );
    assert_eq!(
        store.begin_delivery(tr.id, "d1", now).await.unwrap(),
        Delivery::InProgress
    );
    store
        .finish_delivery(tr.id, "d1", 200, r#"{"text":"hi"}"#)
        .await
        .unwrap();
    assert_eq!(
        store.begin_delivery(tr.id, "d1", now).await.unwrap(),
        Delivery::Answered {
            status: 200,
            body: r#"{"text":"hi"}"#.into()
        }
    );
    assert_eq!(
        store.begin_delivery(tr.id, "d2", now).await.unwrap(),
        Delivery::New
    );
    // Forgotten after the memory window.
    store
        .prune_trigger_history(now - minutes(1), now + minutes(1))
        .await
        .unwrap();
    assert_eq!(
        store.begin_delivery(tr.id, "d1", now).await.unwrap(),
        Delivery::New
    );
}

async fn webhook_addresses_are_unique(t: &common::TestStore) {
    let store: &dyn Store = &*t.store;
    let tr = setup(store, TriggerType::Webhook, "same").await;
    let dup = trigger(
        tr.workspace_id,
        tr.chatflow_id,
        TriggerType::Webhook,
        "same",
    );
    assert!(
        matches!(store.create_trigger(dup, NO_LIMIT).await, Err(StoreError::Conflict(m)) if m.contains("same"))
    );
    let cron = trigger(tr.workspace_id, tr.chatflow_id, TriggerType::Cron, "same");
    let cron = store.create_trigger(cron, NO_LIMIT).await.unwrap();
    // Another workspace may use the node id: each trigger keeps its id address, and
    // the node id names both (oldest first), so the service can refuse the alias.
    let other = store.ensure_workspace("other").await.unwrap();
    let other_flow = store.create_chatflow(flow(other.id, "flow")).await.unwrap();
    let mut theirs = trigger(other.id, other_flow.id, TriggerType::Webhook, "same");
    theirs.created_date = tr.created_date + minutes(1);
    let theirs = store.create_trigger(theirs, NO_LIMIT).await.unwrap();
    let found = |address: String| async move {
        store
            .find_webhook_triggers(&address)
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.id)
            .collect::<Vec<_>>()
    };
    assert_eq!(found("same".into()).await, vec![tr.id, theirs.id]);
    assert_eq!(found(tr.id.to_string()).await, vec![tr.id]);
    assert_eq!(found(theirs.id.to_string()).await, vec![theirs.id]);
    assert_eq!(found(cron.id.to_string()).await, Vec::<uuid::Uuid>::new());
    assert_eq!(
        found(uuid::Uuid::new_v4().to_string()).await,
        Vec::<uuid::Uuid>::new()
    );
    assert_eq!(found("elsewhere".into()).await, Vec::<uuid::Uuid>::new());
    store.delete_trigger(other.id, theirs.id).await.unwrap();
    assert_eq!(found("same".into()).await, vec![tr.id]);
}

async fn trigger_secrets_are_replaced_only_as_read(t: &common::TestStore) {
    let store: &dyn Store = &*t.store;
    let ws = store.ensure_workspace("secrets").await.unwrap();
    let f = store.create_chatflow(flow(ws.id, "flow")).await.unwrap();
    let mut with_secret = trigger(ws.id, f.id, TriggerType::Webhook, "signed");
    with_secret.webhook_secret = Some("plain".into());
    with_secret.respond_async = true;
    with_secret.callback_url = Some("https://example.com/cb".into());
    with_secret.callback_secret = Some("plain-cb".into());
    let stored = store.create_trigger(with_secret, NO_LIMIT).await.unwrap();
    // A trigger without secrets is never listed.
    setup(store, TriggerType::Webhook, "unsigned").await;
    let listed = |prefix: &'static str| async move {
        store
            .triggers_with_secrets_not_sealed_by(prefix)
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.id)
            .collect::<Vec<_>>()
    };
    assert_eq!(listed("sealed:k:").await, vec![stored.id]);
    let mut sealed = stored.clone();
    sealed.webhook_secret = Some("sealed:k:abc".into());
    sealed.webhook_bot_token = Some("sealed:k:def".into());
    sealed.callback_secret = Some("sealed:k:ghi".into());
    assert!(
        store
            .replace_trigger_secrets(&stored, &sealed)
            .await
            .unwrap()
    );
    // Read before that change: no longer what is stored.
    assert!(
        !store
            .replace_trigger_secrets(&stored, &sealed)
            .await
            .unwrap()
    );
    let now = store.get_trigger(ws.id, stored.id).await.unwrap().unwrap();
    // Sealed by the current key: nothing to move; by another: listed.
    assert_eq!(listed("sealed:k:").await, Vec::<uuid::Uuid>::new());
    assert_eq!(listed("sealed:j:").await, vec![stored.id]);
    assert_eq!(now.webhook_secret.as_deref(), Some("sealed:k:abc"));
    assert_eq!(now.webhook_bot_token.as_deref(), Some("sealed:k:def"));
    assert_eq!(now.callback_secret.as_deref(), Some("sealed:k:ghi"));
    assert!(now.respond_async);
    assert_eq!(now.callback_url.as_deref(), Some("https://example.com/cb"));
}

async fn a_chatflow_owns_one_trigger_which_ends_on_its_end_date(t: &common::TestStore) {
    let store: &dyn Store = &*t.store;
    let ws = store.ensure_workspace("owned").await.unwrap();
    let f = store
        .create_chatflow(flow(ws.id, "scheduled"))
        .await
        .unwrap();
    assert!(store.owned_trigger(ws.id, f.id).await.unwrap().is_none());
    // A trigger of weir's own API on the same chatflow is not the owned one.
    store
        .create_trigger(trigger(ws.id, f.id, TriggerType::Cron, "n"), NO_LIMIT)
        .await
        .unwrap();
    assert!(store.owned_trigger(ws.id, f.id).await.unwrap().is_none());
    let due = trigger(ws.id, f.id, TriggerType::Cron, "startAgentflow_0");
    let now = claim_time(&due);
    // Due a second ago, and ending before its next time.
    let owned = Trigger {
        owned_by_chatflow: true,
        ends_at: Some(now),
        ..due
    };
    let created = store.create_trigger(owned.clone(), NO_LIMIT).await.unwrap();
    let found = store.owned_trigger(ws.id, f.id).await.unwrap().unwrap();
    assert_eq!(found.id, created.id);
    assert!(found.owned_by_chatflow);
    assert_eq!(
        found.ends_at.map(|t| time::to_millis(&t)),
        owned.ends_at.map(|t| time::to_millis(&t))
    );
    // Another workspace does not see it.
    let other = store.ensure_workspace("owned-other").await.unwrap();
    assert!(store.owned_trigger(other.id, f.id).await.unwrap().is_none());
    // One owned trigger per chatflow.
    let second = Trigger {
        id: uuid::Uuid::new_v4(),
        ..owned.clone()
    };
    assert!(store.create_trigger(second, NO_LIMIT).await.is_err());
    // The firing due now runs; the next time is after the end date, so the
    // trigger switches itself off.
    let firings = store
        .claim_due_triggers(now, uuid::Uuid::new_v4(), now + minutes(1), 10, plan)
        .await
        .unwrap();
    let mine: Vec<_> = firings
        .iter()
        .filter(|firing| firing.trigger.id == created.id)
        .collect();
    assert_eq!(mine.len(), 1);
    let after = store.owned_trigger(ws.id, f.id).await.unwrap().unwrap();
    assert!(
        !after.enabled && after.next_execution.is_none(),
        "{after:?}"
    );
    // The end date is changed by an update.
    let moved = Trigger {
        ends_at: None,
        ..after
    };
    assert!(store.update_trigger(&moved).await.unwrap());
    let stored = store.owned_trigger(ws.id, f.id).await.unwrap().unwrap();
    assert_eq!(stored.ends_at, None);
}

async fn triggers_per_workspace_are_bounded(t: &common::TestStore) {
    let store: &dyn Store = &*t.store;
    let first = setup(store, TriggerType::Cron, "n").await;
    let next = || {
        trigger(
            first.workspace_id,
            first.chatflow_id,
            TriggerType::Cron,
            "n",
        )
    };
    store.create_trigger(next(), 2).await.unwrap();
    assert!(matches!(
        store.create_trigger(next(), 2).await,
        Err(StoreError::Conflict(m)) if m.contains("WORKSPACE_MAX_TRIGGERS")
    ));
    let listed = store
        .list_triggers(
            first.workspace_id,
            weir_api::domain::Page { page: 1, limit: 10 },
        )
        .await
        .unwrap();
    assert_eq!(listed.total, 2);
    let other = store.ensure_workspace("other").await.unwrap();
    let other_flow = store.create_chatflow(flow(other.id, "flow")).await.unwrap();
    store
        .create_trigger(trigger(other.id, other_flow.id, TriggerType::Cron, "n"), 1)
        .await
        .unwrap();
}

fn chunk(hash: &str, source: Option<&str>, text: &str, v: &[f32]) -> weir_api::domain::VectorChunk {
    let mut metadata = serde_json::Map::new();
    metadata.insert("source".into(), serde_json::json!(source));
    weir_api::domain::VectorChunk {
        id: uuid::Uuid::now_v7(),
        content_hash: hash.into(),
        source: source.map(str::to_owned),
        chat_id: None,
        page_content: text.into(),
        metadata,
        embedding: v.to_vec(),
    }
}

async fn vector_writes_are_atomic_versioned_and_scoped(t: &common::TestStore) {
    use weir_api::domain::{UpsertCounts, VectorWrite};
    let store: &dyn Store = &*t.store;
    let ws = store.ensure_workspace("vectors").await.unwrap().id;
    let a = store.create_chatflow(flow(ws, "a")).await.unwrap();
    let b = store.create_chatflow(flow(ws, "b")).await.unwrap();
    assert_eq!(
        store.vector_store_version(a.id, "faiss_0").await.unwrap(),
        0
    );
    assert_eq!(
        store.list_vector_chunks(a.id, "faiss_0").await.unwrap(),
        (0, vec![])
    );

    let first = chunk("h1", Some("a.txt"), "one", &[0.5, -1.25, 3.0]);
    let second = chunk("h2", None, "two", &[1.0, 0.0, 0.0]);
    let counts = UpsertCounts {
        num_added: 2,
        ..UpsertCounts::default()
    };
    let record = store
        .write_vectors(VectorWrite {
            chatflow_id: a.id,
            node_id: "faiss_0".into(),
            added: vec![first.clone(), second.clone()],
            deleted: vec![],
            counts,
        })
        .await
        .unwrap();
    assert_eq!(record.counts, counts);
    let (version, chunks) = store.list_vector_chunks(a.id, "faiss_0").await.unwrap();
    assert_eq!(version, 1);
    assert_eq!(
        chunks,
        vec![first.clone(), second.clone()],
        "text, metadata and vectors round-trip in order"
    );
    let keys = store.vector_chunk_keys(a.id, "faiss_0").await.unwrap();
    assert_eq!(keys.len(), 2);
    assert_eq!(keys[0].source.as_deref(), Some("a.txt"));
    // Another node and another chatflow see nothing.
    assert!(
        store
            .list_vector_chunks(a.id, "faiss_1")
            .await
            .unwrap()
            .1
            .is_empty()
    );
    assert!(
        store
            .list_vector_chunks(b.id, "faiss_0")
            .await
            .unwrap()
            .1
            .is_empty()
    );

    // Deleting through another chatflow's scope removes nothing.
    store
        .write_vectors(VectorWrite {
            chatflow_id: b.id,
            node_id: "faiss_0".into(),
            added: vec![],
            deleted: vec![first.id],
            counts: UpsertCounts::default(),
        })
        .await
        .unwrap();
    assert_eq!(
        store
            .list_vector_chunks(a.id, "faiss_0")
            .await
            .unwrap()
            .1
            .len(),
        2
    );

    // A failed write (a duplicate id) leaves everything as it was.
    let dup = weir_api::domain::VectorChunk {
        content_hash: "h3".into(),
        ..second.clone()
    };
    let failed = store
        .write_vectors(VectorWrite {
            chatflow_id: a.id,
            node_id: "faiss_0".into(),
            added: vec![chunk("h4", None, "four", &[0.0, 1.0, 0.0]), dup],
            deleted: vec![first.id],
            counts: UpsertCounts::default(),
        })
        .await;
    assert!(failed.is_err());
    let (version, chunks) = store.list_vector_chunks(a.id, "faiss_0").await.unwrap();
    assert_eq!((version, chunks.len()), (1, 2), "nothing half-written");

    store
        .write_vectors(VectorWrite {
            chatflow_id: a.id,
            node_id: "faiss_0".into(),
            added: vec![],
            deleted: vec![first.id],
            counts: UpsertCounts {
                num_deleted: 1,
                ..UpsertCounts::default()
            },
        })
        .await
        .unwrap();
    assert_eq!(
        store.vector_store_version(a.id, "faiss_0").await.unwrap(),
        2
    );
    assert_eq!(
        store.list_vector_chunks(a.id, "faiss_0").await.unwrap().1,
        vec![second]
    );

    let history = store.list_upsert_history(a.id, 10).await.unwrap();
    assert_eq!(history.len(), 2, "the failed write left no record");
    assert_eq!(history[0].counts.num_deleted, 1, "newest first");
    assert_eq!(history[1].counts.num_added, 2);
    assert_eq!(store.list_upsert_history(a.id, 1).await.unwrap().len(), 1);
    assert_eq!(store.list_upsert_history(b.id, 10).await.unwrap().len(), 1);

    // Deleting the chatflow deletes its store.
    assert!(store.delete_chatflow(ws, a.id).await.unwrap());
    assert!(
        store
            .list_vector_chunks(a.id, "faiss_0")
            .await
            .unwrap()
            .1
            .is_empty()
    );
    assert!(
        store
            .list_upsert_history(a.id, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn document_stores_keep_chunks_files_and_vectors(t: &common::TestStore) {
    use weir_api::domain::document_store::VECTOR_NODE;
    use weir_api::domain::{
        ChunkChange, DocumentChunk, DocumentStoreStatus, DocumentStoreWrite, StoredFile,
        UpsertCounts, VectorWrite,
    };
    let store: &dyn Store = &*t.store;
    let ws = store.ensure_workspace("docstores").await.unwrap().id;
    let other = store.ensure_workspace("docstores-other").await.unwrap().id;
    let mut made =
        weir_api::services::document_stores::new_store(ws, "Handbook".into(), "staff".into());
    store.create_document_store(&made).await.unwrap();
    assert_eq!(
        store.get_document_store(ws, made.id).await.unwrap(),
        Some(made.clone())
    );
    assert_eq!(
        store.get_document_store(other, made.id).await.unwrap(),
        None
    );

    let loader = uuid::Uuid::new_v4();
    let chunk = |no: u64, text: &str| DocumentChunk {
        id: uuid::Uuid::new_v4(),
        store_id: made.id,
        loader_id: loader,
        chunk_no: no,
        page_content: text.into(),
        metadata: serde_json::Map::from_iter([("n".to_owned(), serde_json::json!(no))]),
    };
    let chunks: Vec<DocumentChunk> = (1..=5).map(|n| chunk(n, &format!("text {n}"))).collect();
    made.status = DocumentStoreStatus::Sync;
    made.name = "Handbook 2".into();
    let file = StoredFile {
        name: "a.txt".into(),
        bytes: b"hello".to_vec(),
    };
    assert!(
        store
            .save_document_store(DocumentStoreWrite {
                store: made.clone(),
                chunks: ChunkChange::Replace {
                    loader,
                    chunks: chunks.clone(),
                },
                files: Some((loader, vec![file.clone()])),
            })
            .await
            .unwrap()
    );
    assert_eq!(
        store.get_document_store(ws, made.id).await.unwrap(),
        Some(made.clone())
    );
    assert_eq!(
        store.loader_files(made.id, loader).await.unwrap(),
        vec![file]
    );
    let page = store
        .document_chunks(made.id, Some(loader), Some((2, 2)))
        .await
        .unwrap();
    assert_eq!((page.total, page.characters), (5, 30));
    assert_eq!(page.chunks, chunks[2..4].to_vec());
    assert_eq!(
        store
            .document_chunks(made.id, None, None)
            .await
            .unwrap()
            .chunks,
        chunks
    );
    let found = store
        .find_document_chunks(made.id, vec!["text 2".into(), "nope".into()])
        .await
        .unwrap();
    assert_eq!(found, vec![chunks[1].clone()]);

    let mut edited = chunks[0].clone();
    edited.page_content = "changed".into();
    for change in [
        ChunkChange::Edit(edited.clone()),
        ChunkChange::Remove(chunks[4].id),
    ] {
        store
            .save_document_store(DocumentStoreWrite {
                store: made.clone(),
                chunks: change,
                files: None,
            })
            .await
            .unwrap();
    }
    let left = store.document_chunks(made.id, None, None).await.unwrap();
    assert_eq!(left.total, 4);
    assert_eq!(left.chunks[0], edited);

    // The status and the users are set alone: the rest of the row stays as written.
    let user = uuid::Uuid::new_v4();
    assert!(
        store
            .set_document_store_status(made.id, DocumentStoreStatus::Upserted)
            .await
            .unwrap()
    );
    assert!(
        store
            .set_document_store_users(made.id, &[user])
            .await
            .unwrap()
    );
    let read = store
        .get_document_store(ws, made.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.status, DocumentStoreStatus::Upserted);
    assert_eq!(read.where_used, vec![user]);
    assert_eq!((read.name.as_str(), read.loaders.len()), ("Handbook 2", 0));
    assert!(
        !store
            .set_document_store_status(uuid::Uuid::new_v4(), DocumentStoreStatus::Sync)
            .await
            .unwrap()
    );

    // Vectors kept under the store's id go with it.
    store
        .write_vectors(VectorWrite {
            chatflow_id: made.id,
            node_id: VECTOR_NODE.into(),
            added: vec![self::chunk("h1", Some("x"), "one", &[1.0, 0.0])],
            deleted: vec![],
            counts: UpsertCounts::default(),
        })
        .await
        .unwrap();
    assert_eq!(
        store
            .list_vector_chunks(made.id, VECTOR_NODE)
            .await
            .unwrap()
            .1
            .len(),
        1
    );
    let listed = store.list_document_stores(ws, None).await.unwrap();
    assert_eq!((listed.total, listed.items.len()), (1, 1));
    assert!(!store.delete_document_store(other, made.id).await.unwrap());
    assert!(store.delete_document_store(ws, made.id).await.unwrap());
    assert!(
        store
            .list_vector_chunks(made.id, VECTOR_NODE)
            .await
            .unwrap()
            .1
            .is_empty()
    );
    assert_eq!(
        store
            .document_chunks(made.id, None, None)
            .await
            .unwrap()
            .total,
        0
    );
    assert!(
        !store
            .save_document_store(DocumentStoreWrite {
                store: made,
                chunks: ChunkChange::None,
                files: None,
            })
            .await
            .unwrap(),
        "a deleted store is not written"
    );
}

fn new_execution(ws: uuid::Uuid, flow: uuid::Uuid, session: &str) -> NewExecution {
    NewExecution::starting_now(ws, flow, session.into())
}

/// Lets the clock move past the last millisecond written.
async fn tick() {
    tokio::time::sleep(std::time::Duration::from_millis(3)).await;
}

async fn executions_start_in_progress_and_are_updated(t: &common::TestStore) {
    let store: &dyn Store = &*t.store;
    let ws = store.ensure_workspace("exec").await.unwrap();
    let other = store.ensure_workspace("exec-other").await.unwrap();
    let f = store
        .create_chatflow(flow(ws.id, "agent"))
        .await
        .unwrap()
        .id;
    let created = store
        .create_execution(&new_execution(ws.id, f, "s1"))
        .await
        .unwrap();
    assert_eq!(created.state, ExecutionState::InProgress);
    assert_eq!(created.execution_data, "[]");
    assert_eq!(
        (created.action.as_deref(), created.is_public),
        (None, false)
    );
    assert_eq!(created.stopped_date, None);
    assert_eq!(created.created_date, created.updated_date);
    assert_eq!((created.workspace_id, created.agentflow_id), (ws.id, f));
    assert_eq!(
        store
            .get_execution(ws.id, created.id)
            .await
            .unwrap()
            .as_ref(),
        Some(&created)
    );
    assert_eq!(
        store.get_execution(other.id, created.id).await.unwrap(),
        None
    );

    // An execution is of a chatflow of its own workspace.
    for (workspace, agentflow) in [(other.id, f), (ws.id, uuid::Uuid::new_v4())] {
        let err = store
            .create_execution(&new_execution(workspace, agentflow, "s"))
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Conflict(_)), "{err}");
    }

    tick().await;
    let data = r#"[{"nodeId":"start_0","data":{"output":"hi"}}]"#;
    let running = store
        .update_execution(
            created.id,
            ExecutionUpdate {
                execution_data: Some(data.into()),
                action: Some(Some(r#"{"id":"a1"}"#.into())),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(running.state, ExecutionState::InProgress);
    assert_eq!(running.execution_data, data);
    assert_eq!(running.action.as_deref(), Some(r#"{"id":"a1"}"#));
    assert!(running.updated_date > created.updated_date);
    assert_eq!(running.created_date, created.created_date);

    tick().await;
    let stopped = store
        .update_execution(
            created.id,
            ExecutionUpdate {
                state: Some(ExecutionState::Stopped),
                action: Some(None),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stopped.state, ExecutionState::Stopped);
    assert_eq!(stopped.action, None);
    assert_eq!(stopped.execution_data, data, "data not sent is kept");
    assert_eq!(stopped.stopped_date, Some(stopped.updated_date));
    assert_eq!(
        store.get_execution(ws.id, created.id).await.unwrap(),
        Some(stopped)
    );
    let missing = store
        .update_execution(uuid::Uuid::new_v4(), ExecutionUpdate::default())
        .await
        .unwrap();
    assert_eq!(missing, None);
}

fn finished(data: &str) -> ExecutionUpdate {
    ExecutionUpdate {
        state: Some(ExecutionState::Finished),
        execution_data: Some(data.into()),
        action: Some(None),
        ..Default::default()
    }
}

async fn runs_are_written_together_each_all_or_none(t: &common::TestStore) {
    let store: &dyn Store = &*t.store;
    let ws = store.ensure_workspace("runs").await.unwrap();
    let f = store
        .create_chatflow(flow(ws.id, "agent"))
        .await
        .unwrap()
        .id;
    let running = store
        .create_execution(&new_execution(ws.id, f, "s1"))
        .await
        .unwrap();
    let other_run = store
        .create_execution(&new_execution(ws.id, f, "s5"))
        .await
        .unwrap();
    let short_run = new_execution(ws.id, f, "s6");
    let short_id = short_run.id;
    tick().await;
    let stopped_only = ExecutionUpdate {
        state: Some(ExecutionState::InProgress),
        only_from: Some(ExecutionState::Stopped),
        ..Default::default()
    };
    let outcomes = store
        .write_runs(vec![
            // A run's end: its record and its messages.
            RunWrites {
                update_execution: Some((running.id, finished("[1]"))),
                messages: vec![
                    msg(f, "s1", MessageRole::User, "q"),
                    msg(f, "s1", MessageRole::Api, "a"),
                ],
                ..Default::default()
            },
            // A run of a chatflow that is gone: nothing of it is stored.
            RunWrites {
                start_execution: Some(new_execution(ws.id, uuid::Uuid::new_v4(), "s2")),
                messages: vec![msg(f, "s2", MessageRole::User, "lost")],
                ..Default::default()
            },
            // A run's start.
            RunWrites {
                start_execution: Some(new_execution(ws.id, f, "s3")),
                ..Default::default()
            },
            // An update that does not apply is no failure: the messages stay.
            RunWrites {
                update_execution: Some((running.id, stopped_only)),
                messages: vec![msg(f, "s4", MessageRole::User, "kept")],
                ..Default::default()
            },
            // A run whose messages cannot be stored: its update is undone.
            RunWrites {
                update_execution: Some((other_run.id, finished("[2]"))),
                messages: vec![msg(uuid::Uuid::new_v4(), "s5", MessageRole::User, "x")],
                ..Default::default()
            },
            // A short run: its start and its end written together.
            RunWrites {
                start_execution: Some(short_run.clone()),
                update_execution: Some((short_id, finished("[3]"))),
                messages: vec![msg(f, "s6", MessageRole::User, "short")],
                end_firing: None,
            },
        ])
        .await;
    assert_eq!(outcomes.len(), 6);
    let mut outcomes = outcomes.into_iter();
    let ended = outcomes.next().unwrap().unwrap();
    let updated = ended.updated.unwrap();
    assert_eq!(
        (updated.id, updated.state, updated.execution_data.as_str()),
        (running.id, ExecutionState::Finished, "[1]")
    );
    assert_eq!(ended.started, None);
    let texts: Vec<_> = ended.messages.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(texts, ["q", "a"]);
    let err = outcomes.next().unwrap().unwrap_err();
    assert!(matches!(err, StoreError::Conflict(_)), "{err}");
    let started = outcomes.next().unwrap().unwrap().started.unwrap();
    assert_eq!(
        (started.state, started.session_id.as_str()),
        (ExecutionState::InProgress, "s3")
    );
    let unapplied = outcomes.next().unwrap().unwrap();
    assert_eq!(unapplied.updated, None);
    assert_eq!(unapplied.messages.len(), 1);
    assert!(outcomes.next().unwrap().is_err());
    assert_eq!(
        store.get_execution(ws.id, other_run.id).await.unwrap(),
        Some(other_run)
    );
    let short = outcomes.next().unwrap().unwrap();
    let ended = short.updated.unwrap();
    assert_eq!(short.started.as_ref(), Some(&ended));
    assert_eq!(
        (ended.id, ended.state, ended.execution_data.as_str()),
        (short_id, ExecutionState::Finished, "[3]")
    );
    assert_eq!(ended.created_date, short_run.created_date);
    assert!(ended.updated_date > ended.created_date);
    assert_eq!(
        store.get_execution(ws.id, short_id).await.unwrap(),
        Some(ended)
    );

    assert_eq!(
        store.get_execution(ws.id, running.id).await.unwrap(),
        Some(updated)
    );
    assert_eq!(
        store.latest_execution(f, "s3").await.unwrap(),
        Some(started)
    );
    assert_eq!(store.latest_execution(f, "s2").await.unwrap(), None);
    let stored = |chat: &'static str| store.list_chat_messages(f, Some(chat), None);
    let texts = |m: Vec<weir_api::domain::ChatMessageRecord>| -> Vec<String> {
        m.into_iter().map(|m| m.content).collect()
    };
    assert_eq!(texts(stored("s1").await.unwrap()), ["q", "a"]);
    assert!(stored("s2").await.unwrap().is_empty());
    assert_eq!(texts(stored("s4").await.unwrap()), ["kept"]);
}

/// A run whose early start was stored though its writer could not know it
/// writes the start again with its end: the record ends, sharing kept.
async fn a_start_written_again_with_its_end_updates_the_record(t: &common::TestStore) {
    let store: &dyn Store = &*t.store;
    let ws = store.ensure_workspace("again").await.unwrap();
    let f = store
        .create_chatflow(flow(ws.id, "agent"))
        .await
        .unwrap()
        .id;
    let new = new_execution(ws.id, f, "s");
    let early = store.create_execution(&new).await.unwrap();
    store
        .set_execution_public(ws.id, early.id, true)
        .await
        .unwrap();
    tick().await;
    let ended = store
        .write_run(RunWrites {
            start_execution: Some(new),
            update_execution: Some((early.id, finished("[1]"))),
            messages: vec![msg(f, "s", MessageRole::User, "q")],
            end_firing: None,
        })
        .await
        .unwrap();
    let updated = ended.updated.unwrap();
    assert_eq!(
        (
            updated.state,
            updated.execution_data.as_str(),
            updated.is_public
        ),
        (ExecutionState::Finished, "[1]", true)
    );
    assert_eq!(updated.created_date, early.created_date);
    assert_eq!(ended.started.map(|s| s.id), Some(early.id));
    assert_eq!(
        store.get_execution(ws.id, early.id).await.unwrap(),
        Some(updated)
    );
    assert_eq!(ended.messages.len(), 1);
}

/// Through the store the server uses (group commit): runs written at the same
/// time are committed together, and the one that cannot be stored fails alone.
async fn grouped_runs_keep_a_failing_run_apart(t: &common::TestStore) {
    let store: Arc<dyn Store> = Arc::new(CachedStore::new(
        Arc::clone(&t.store),
        std::time::Duration::ZERO,
    ));
    let ws = store.ensure_workspace("grouped").await.unwrap();
    let f = store
        .create_chatflow(flow(ws.id, "agent"))
        .await
        .unwrap()
        .id;
    let runs = (0..40).map(|i| {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            let session = format!("s{i}");
            // Every tenth run names a chatflow that does not exist.
            let agentflow = if i % 10 == 3 { uuid::Uuid::new_v4() } else { f };
            let started = store
                .create_execution(&new_execution(ws.id, agentflow, &session))
                .await?;
            let ended = store
                .write_run(RunWrites {
                    update_execution: Some((started.id, finished("[]"))),
                    messages: vec![
                        msg(f, &session, MessageRole::User, "q"),
                        msg(f, &session, MessageRole::Api, "a"),
                    ],
                    ..Default::default()
                })
                .await?;
            Ok::<_, StoreError>(ended)
        })
    });
    let outcomes = futures_util::future::join_all(runs).await;
    let mut failed = 0;
    for (i, outcome) in outcomes.into_iter().enumerate() {
        match outcome.unwrap() {
            Ok(ended) => {
                let updated = ended.updated.unwrap();
                assert_eq!(updated.state, ExecutionState::Finished, "run {i}");
                assert_eq!(ended.messages.len(), 2, "run {i}");
            }
            Err(err) => {
                assert_eq!(i % 10, 3, "run {i} failed: {err}");
                assert!(matches!(err, StoreError::Conflict(_)), "{err}");
                failed += 1;
            }
        }
    }
    assert_eq!(failed, 4);
    assert_eq!(
        store.list_chat_messages(f, None, None).await.unwrap().len(),
        72
    );
    let listed = store
        .list_executions(
            ws.id,
            &ExecutionFilter::default(),
            Page {
                page: 1,
                limit: 100,
            },
        )
        .await
        .unwrap();
    assert_eq!(listed.total, 36);
    assert!(
        listed
            .items
            .iter()
            .all(|e| e.execution.state == ExecutionState::Finished)
    );
}

async fn latest_execution_is_the_newest_of_its_session(t: &common::TestStore) {
    let store: &dyn Store = &*t.store;
    let ws = store.ensure_workspace("latest").await.unwrap();
    let f = store
        .create_chatflow(flow(ws.id, "agent"))
        .await
        .unwrap()
        .id;
    let g = store
        .create_chatflow(flow(ws.id, "other"))
        .await
        .unwrap()
        .id;
    assert_eq!(store.latest_execution(f, "s1").await.unwrap(), None);
    // Made back to back: several may share a millisecond, the last made still wins.
    let mut made = Vec::new();
    for _ in 0..3 {
        made.push(
            store
                .create_execution(&new_execution(ws.id, f, "s1"))
                .await
                .unwrap(),
        );
    }
    let s2 = store
        .create_execution(&new_execution(ws.id, f, "s2"))
        .await
        .unwrap();
    store
        .create_execution(&new_execution(ws.id, g, "s1"))
        .await
        .unwrap();
    // Updating an older one does not make it the latest: creation decides.
    tick().await;
    store
        .update_execution(
            made[0].id,
            ExecutionUpdate {
                state: Some(ExecutionState::Finished),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let latest = store.latest_execution(f, "s1").await.unwrap().unwrap();
    assert_eq!(latest.id, made[2].id);
    assert_eq!(store.latest_execution(f, "s2").await.unwrap(), Some(s2));
    assert_eq!(store.latest_execution(f, "s3").await.unwrap(), None);
}

async fn execution_listing_filters_and_pages_newest_first(t: &common::TestStore) {
    let store: &dyn Store = &*t.store;
    let ws = store.ensure_workspace("elist").await.unwrap();
    let other = store.ensure_workspace("elist-other").await.unwrap();
    let support = store
        .create_chatflow(flow(ws.id, "Support Bot"))
        .await
        .unwrap();
    let sales = store
        .create_chatflow(flow(ws.id, "Sales_100%"))
        .await
        .unwrap();
    let foreign = store
        .create_chatflow(flow(other.id, "Support Bot"))
        .await
        .unwrap();
    store
        .create_execution(&new_execution(other.id, foreign.id, "a"))
        .await
        .unwrap();
    // e0..e3 made in this order, a few milliseconds apart.
    let mut e = Vec::new();
    for (f, session) in [
        (support.id, "a"),
        (support.id, "b"),
        (sales.id, "a"),
        (sales.id, "c"),
    ] {
        e.push(
            store
                .create_execution(&new_execution(ws.id, f, session))
                .await
                .unwrap(),
        );
        tick().await;
    }
    // Finishing e0 makes it the most recently updated.
    let finished = ExecutionUpdate {
        state: Some(ExecutionState::Finished),
        ..Default::default()
    };
    store.update_execution(e[0].id, finished).await.unwrap();

    let list = |filter: ExecutionFilter, page: Page| async move {
        store.list_executions(ws.id, &filter, page).await.unwrap()
    };
    let ids = |listing: &weir_api::store::Listing<weir_api::domain::ListedExecution>| {
        listing
            .items
            .iter()
            .map(|item| item.execution.id)
            .collect::<Vec<_>>()
    };

    let all = list(ExecutionFilter::default(), Page::default()).await;
    assert_eq!(
        all.total, 4,
        "another workspace's executions are not listed"
    );
    assert_eq!(ids(&all), [e[0].id, e[3].id, e[2].id, e[1].id]);
    assert_eq!(all.items[0].agentflow.id, support.id);
    assert_eq!(all.items[0].agentflow.name, "Support Bot");
    assert_eq!(all.items[1].agentflow.name, "Sales_100%");
    assert_eq!(all.items[0].execution.state, ExecutionState::Finished);

    let second = list(ExecutionFilter::default(), Page { page: 2, limit: 3 }).await;
    assert_eq!((second.total, ids(&second)), (4, vec![e[1].id]));

    let by = |filter: ExecutionFilter| async move {
        let mut got = ids(&list(filter, Page::default()).await);
        got.sort();
        got
    };
    let sorted = |mut v: Vec<uuid::Uuid>| {
        v.sort();
        v
    };
    let f = ExecutionFilter::default;
    assert_eq!(
        by(ExecutionFilter {
            id: Some(e[2].id),
            ..f()
        })
        .await,
        [e[2].id]
    );
    assert_eq!(
        by(ExecutionFilter {
            id: Some(uuid::Uuid::new_v4()),
            ..f()
        })
        .await,
        Vec::<uuid::Uuid>::new()
    );
    assert_eq!(
        by(ExecutionFilter {
            agentflow_id: Some(sales.id),
            ..f()
        })
        .await,
        sorted(vec![e[2].id, e[3].id])
    );
    assert_eq!(
        by(ExecutionFilter {
            agentflow_id: Some(foreign.id),
            ..f()
        })
        .await,
        Vec::<uuid::Uuid>::new()
    );
    // The chatflow's name: a case-insensitive substring; `%` and `_` are literal.
    for (name, expected) in [
        ("support", vec![e[0].id, e[1].id]),
        ("BOT", vec![e[0].id, e[1].id]),
        ("0%", vec![e[2].id, e[3].id]),
        ("%", vec![e[2].id, e[3].id]),
        ("s_1", vec![e[2].id, e[3].id]),
        ("t_b", vec![]),
    ] {
        let filter = ExecutionFilter {
            agentflow_name: Some(name.into()),
            ..f()
        };
        let expected = sorted(expected);
        assert_eq!(by(filter.clone()).await, expected, "{name}");
        // The total counts the same rows.
        let counted = list(filter, Page { page: 1, limit: 1 }).await.total;
        assert_eq!(counted, expected.len() as u64, "{name}");
    }
    assert_eq!(
        by(ExecutionFilter {
            session_id: Some("a".into()),
            ..f()
        })
        .await,
        sorted(vec![e[0].id, e[2].id])
    );
    assert_eq!(
        by(ExecutionFilter {
            state: Some(ExecutionState::Finished),
            ..f()
        })
        .await,
        [e[0].id]
    );
    assert_eq!(
        by(ExecutionFilter {
            state: Some(ExecutionState::InProgress),
            ..f()
        })
        .await,
        sorted(vec![e[1].id, e[2].id, e[3].id])
    );
    // Dates bound createdDate, both ends included.
    assert_eq!(
        by(ExecutionFilter {
            start_date: Some(e[1].created_date),
            end_date: Some(e[2].created_date),
            ..f()
        })
        .await,
        sorted(vec![e[1].id, e[2].id])
    );
    assert_eq!(
        by(ExecutionFilter {
            start_date: Some(e[3].created_date),
            ..f()
        })
        .await,
        [e[3].id]
    );
    assert_eq!(
        by(ExecutionFilter {
            end_date: Some(e[0].created_date),
            ..f()
        })
        .await,
        [e[0].id]
    );
    // Filters combine.
    assert_eq!(
        by(ExecutionFilter {
            agentflow_name: Some("sales".into()),
            session_id: Some("a".into()),
            state: Some(ExecutionState::InProgress),
            ..f()
        })
        .await,
        [e[2].id]
    );
    assert_eq!(
        list(ExecutionFilter::default(), Page::default())
            .await
            .total,
        4
    );
    // An empty workspace lists nothing.
    let empty = store
        .list_executions(
            uuid::Uuid::new_v4(),
            &ExecutionFilter::default(),
            Page::default(),
        )
        .await
        .unwrap();
    assert_eq!((empty.total, empty.items.len()), (0, 0));
}

async fn executions_are_shared_and_deleted_per_workspace(t: &common::TestStore) {
    let store: &dyn Store = &*t.store;
    let ws = store.ensure_workspace("eshare").await.unwrap();
    let other = store.ensure_workspace("eshare-other").await.unwrap();
    let f = store
        .create_chatflow(flow(ws.id, "agent"))
        .await
        .unwrap()
        .id;
    let g = store
        .create_chatflow(flow(other.id, "theirs"))
        .await
        .unwrap()
        .id;
    let mine = store
        .create_execution(&new_execution(ws.id, f, "s"))
        .await
        .unwrap();
    let theirs = store
        .create_execution(&new_execution(other.id, g, "s"))
        .await
        .unwrap();

    assert_eq!(store.find_public_execution(mine.id).await.unwrap(), None);
    assert_eq!(
        store
            .set_execution_public(other.id, mine.id, true)
            .await
            .unwrap(),
        None
    );
    tick().await;
    let shared = store
        .set_execution_public(ws.id, mine.id, true)
        .await
        .unwrap()
        .unwrap();
    assert!(shared.is_public);
    assert!(shared.updated_date > mine.updated_date);
    assert_eq!(
        store.find_public_execution(mine.id).await.unwrap(),
        Some(shared.clone())
    );
    assert_eq!(
        store.get_execution(ws.id, mine.id).await.unwrap(),
        Some(shared)
    );
    let unshared = store
        .set_execution_public(ws.id, mine.id, false)
        .await
        .unwrap()
        .unwrap();
    assert!(!unshared.is_public);
    assert_eq!(store.find_public_execution(mine.id).await.unwrap(), None);

    let second = store
        .create_execution(&new_execution(ws.id, f, "t"))
        .await
        .unwrap();
    // Only this workspace's executions count; unknown ids are skipped.
    let deleted = store
        .delete_executions(ws.id, &[mine.id, theirs.id, uuid::Uuid::new_v4()])
        .await
        .unwrap();
    assert_eq!(deleted, 1);
    assert_eq!(store.get_execution(ws.id, mine.id).await.unwrap(), None);
    assert!(
        store
            .get_execution(other.id, theirs.id)
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(store.delete_executions(ws.id, &[mine.id]).await.unwrap(), 0);
    assert_eq!(store.delete_executions(ws.id, &[]).await.unwrap(), 0);

    // Deleting the chatflow deletes its executions.
    assert!(store.delete_chatflow(ws.id, f).await.unwrap());
    assert_eq!(store.get_execution(ws.id, second.id).await.unwrap(), None);
    assert_eq!(store.latest_execution(f, "t").await.unwrap(), None);
}
