//! One conformance suite for every `Store` backend: each case runs against SQLite
//! and, when `WEIR_TEST_DATABASE_URL` is set, PostgreSQL.

mod common;

use weir_api::domain::apikey::generate_key;
use weir_api::domain::{
    ChatflowPatch, ChatflowType, MessageRole, NewApiKey, NewChatMessage, NewChatflow, NewVariable,
    Page, Permission, VariablePatch, VariableType,
};
use weir_api::store::{Store, StoreError};

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
    variable_names_are_unique_per_workspace,
    migrations_are_idempotent,
    chat_messages_keep_order_per_session,
    leads_are_listed_per_chatflow,
    rate_limit_windows_count_hits,
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
        .list_chatflows(ws.id, Page { page: 1, limit: 2 })
        .await
        .unwrap();
    assert_eq!(first.total, 5);
    let names: Vec<_> = first.items.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["f0", "f4"]);
    let last = store
        .list_chatflows(ws.id, Page { page: 3, limit: 2 })
        .await
        .unwrap();
    assert_eq!(last.items.len(), 1);
    assert_eq!(last.items[0].name, "f1");
    let beyond = store
        .list_chatflows(ws.id, Page { page: 9, limit: 2 })
        .await
        .unwrap();
    assert!(beyond.items.is_empty());
    assert_eq!(beyond.total, 5);
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
            .list_chatflows(ws.id, Page::default())
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
    assert_eq!(store.delete_chat_messages(f, Some("s2")).await.unwrap(), 1);
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

async fn leads_are_listed_per_chatflow(t: &common::TestStore) {
    let store: &dyn Store = &*t.store;
    let ws = store.ensure_workspace("leads").await.unwrap();
    let a = store.create_chatflow(flow(ws.id, "a")).await.unwrap().id;
    let b = store.create_chatflow(flow(ws.id, "b")).await.unwrap().id;
    let lead = store
        .create_lead(a, "chat-1", "x@example.com")
        .await
        .unwrap();
    store
        .create_lead(b, "chat-2", "y@example.com")
        .await
        .unwrap();
    assert_eq!(store.list_leads(a).await.unwrap(), vec![lead]);
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
