//! The demo chatflow `scripts/start` installs: the embedded local model in a
//! conversation chain with buffer memory, answering with no provider key and no
//! network. Installing it is idempotent (found by name in the workspace).

use serde_json::json;

use crate::domain::{Chatflow, ChatflowType, DEFAULT_WORKSPACE, NewChatflow, Page};
use crate::store::{Store, StoreResult};

pub const DEMO_NAME: &str = "Local assistant (demo)";

/// The demo's `flowData`, in Flowise's format.
pub fn flow_data() -> String {
    let node = |id: &str, name: &str, label: &str, category: &str, inputs: serde_json::Value| {
        json!({
            "id": id, "type": "customNode", "position": {"x": 0, "y": 0}, "width": 300, "height": 400,
            "data": {"id": id, "name": name, "label": label, "version": 1, "category": category,
                     "baseClasses": [], "inputParams": [], "inputAnchors": [], "outputAnchors": [],
                     "outputs": {}, "inputs": inputs}
        })
    };
    let edge = |source: &str, target: &str, handle: &str| {
        json!({"id": format!("{source}-{target}"), "source": source, "target": target,
               "sourceHandle": format!("{source}-output"), "targetHandle": format!("{target}-input-{handle}")})
    };
    json!({
        "nodes": [
            node("chatLocal_0", "chatLocal", "Local model (SmolLM2-135M)", "Chat Models",
                 json!({"temperature": 0, "maxTokens": 256})),
            node("bufferMemory_0", "bufferMemory", "Buffer Memory", "Memory", json!({})),
            node("conversationChain_0", "conversationChain", "Conversation Chain", "Chains", json!({
                "model": "{{chatLocal_0.data.instance}}",
                "memory": "{{bufferMemory_0.data.instance}}",
                "systemMessagePrompt": "You are a helpful assistant. Answer briefly."
            }))
        ],
        "edges": [
            edge("chatLocal_0", "conversationChain_0", "model"),
            edge("bufferMemory_0", "conversationChain_0", "memory")
        ],
        "viewport": {"x": 0, "y": 0, "zoom": 1}
    })
    .to_string()
}

/// The demo chatflow of the default workspace, created when absent.
pub async fn ensure(store: &dyn Store) -> StoreResult<Chatflow> {
    let ws = store.ensure_workspace(DEFAULT_WORKSPACE).await?;
    let mut page = Page {
        page: 1,
        limit: Page::MAX_LIMIT,
    };
    loop {
        let listing = store.list_chatflows(ws.id, None, page).await?;
        if let Some(found) = listing.items.iter().find(|f| f.name == DEMO_NAME) {
            return Ok(found.clone());
        }
        if u64::from(page.page) * u64::from(page.limit) >= listing.total {
            break;
        }
        page.page += 1;
    }
    store
        .create_chatflow(NewChatflow {
            workspace_id: ws.id,
            name: DEMO_NAME.to_owned(),
            flow_data: flow_data(),
            deployed: true,
            is_public: false,
            apikeyid: None,
            chatbot_config: None,
            api_config: None,
            category: Some("demo".to_owned()),
            flow_type: ChatflowType::Chatflow,
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::{Overrides, Plan};

    #[test]
    fn demo_flow_is_a_valid_local_conversation() {
        let settings = crate::config::ProviderSettings::default();
        let plan = Plan::build(&flow_data(), &settings).unwrap();
        let r = plan.runnable(&Overrides::new(&settings)).unwrap();
        let crate::flow::plan::Answer::Chain(chain) = &r.answer else {
            panic!("the demo is a chain: {:?}", r.answer);
        };
        assert_eq!(chain.model.node_type, "chatLocal");
        assert!(r.memory.is_some());
    }
}
