//! Conversation memory and leads: the messages of each (chatflow, session) and the
//! e-mail addresses visitors left (`leadEmail`).
//!
//! Roles use Flowise's names: `userMessage` (human) and `apiMessage` (AI).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::time::{self, Timestamp};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub enum MessageRole {
    #[serde(rename = "userMessage")]
    User,
    #[serde(rename = "apiMessage")]
    Api,
}

impl MessageRole {
    pub fn as_str(self) -> &'static str {
        match self {
            MessageRole::User => "userMessage",
            MessageRole::Api => "apiMessage",
        }
    }

    pub fn parse_stored(s: &str) -> Self {
        if s == "apiMessage" {
            MessageRole::Api
        } else {
            MessageRole::User
        }
    }
}

/// A stored message of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChatMessageRecord {
    pub id: Uuid,
    pub chatflow_id: Uuid,
    /// The session (`chatId`) the message belongs to.
    pub chat_id: String,
    pub role: MessageRole,
    pub content: String,
    /// JSON text of the documents retrieved for an answer, when any.
    pub source_documents: Option<String>,
    /// JSON text of the tools used for an answer, when any.
    pub used_tools: Option<String>,
    #[serde(serialize_with = "time::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub created_date: Timestamp,
}

#[derive(Debug, Clone)]
pub struct NewChatMessage {
    pub chatflow_id: Uuid,
    pub chat_id: String,
    pub role: MessageRole,
    pub content: String,
    pub source_documents: Option<String>,
    pub used_tools: Option<String>,
}

impl NewChatMessage {
    pub fn into_record(self, id: Uuid, created_date: Timestamp) -> ChatMessageRecord {
        ChatMessageRecord {
            id,
            chatflow_id: self.chatflow_id,
            chat_id: self.chat_id,
            role: self.role,
            content: self.content,
            source_documents: self.source_documents,
            used_tools: self.used_tools,
            created_date,
        }
    }
}

/// A visitor's address left with a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Lead {
    pub id: Uuid,
    pub chatflow_id: Uuid,
    pub chat_id: String,
    pub email: String,
    #[serde(serialize_with = "time::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub created_date: Timestamp,
}
