//! Conversations: the messages of each (chatflow, session), the ratings
//! visitors give answers (feedback) and the contacts they leave (leads).
//!
//! Roles, chat types and ratings use Flowise's names: `userMessage` (human) and
//! `apiMessage` (AI); `EXTERNAL`, `WEBHOOK`…; `THUMBS_UP`/`THUMBS_DOWN`.

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

/// Where a conversation came from (Flowise's `chatType`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ChatType {
    /// Flowise's own canvas (`x-request-from: internal`).
    Internal,
    /// A client of the prediction API.
    #[default]
    External,
    Evaluation,
    Mcp,
    /// A run a schedule started.
    Scheduled,
    /// A run an incoming webhook call (Telegram included) started.
    Webhook,
}

impl ChatType {
    pub const ALL: [ChatType; 6] = [
        ChatType::Internal,
        ChatType::External,
        ChatType::Evaluation,
        ChatType::Mcp,
        ChatType::Scheduled,
        ChatType::Webhook,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ChatType::Internal => "INTERNAL",
            ChatType::External => "EXTERNAL",
            ChatType::Evaluation => "EVALUATION",
            ChatType::Mcp => "MCP",
            ChatType::Scheduled => "SCHEDULED",
            ChatType::Webhook => "WEBHOOK",
        }
    }

    /// A stored name; rows written before chat types were kept read as `EXTERNAL`.
    pub fn parse_stored(s: &str) -> Self {
        s.parse().unwrap_or(ChatType::External)
    }
}

impl std::str::FromStr for ChatType {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        ChatType::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "'{s}' is not a chat type (INTERNAL, EXTERNAL, EVALUATION, MCP, SCHEDULED, WEBHOOK)"
                )
            })
    }
}

/// A stored message of a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
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
    pub created_date: Timestamp,
    pub chat_type: ChatType,
    /// The agentflow execution the message belongs to.
    pub execution_id: Option<Uuid>,
    /// The memory node's kind (Flowise's `memoryType`, its label).
    pub memory_type: Option<String>,
    /// JSON text of an object with the rest of Flowise's message fields, each
    /// present only when set: `agentReasoning`, `artifacts`, `action`,
    /// `fileUploads`, `followUpPrompts`, `aborted`, `leadEmail`.
    pub details: Option<String>,
}

#[derive(Debug, Clone)]
pub struct NewChatMessage {
    pub chatflow_id: Uuid,
    pub chat_id: String,
    pub role: MessageRole,
    pub content: String,
    pub source_documents: Option<String>,
    pub used_tools: Option<String>,
    pub chat_type: ChatType,
    pub execution_id: Option<Uuid>,
    pub memory_type: Option<String>,
    pub details: Option<String>,
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
            chat_type: self.chat_type,
            execution_id: self.execution_id,
            memory_type: self.memory_type,
            details: self.details,
        }
    }
}

/// Which messages a listing or a deletion takes (Flowise's `/chatmessage`
/// filters); an empty filter takes every message of the chatflow.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MessageFilter {
    /// One chat's messages (`chatId`, or `sessionId`: one id in weir).
    pub chat_id: Option<String>,
    /// Messages of these chat types (any, when empty).
    pub chat_types: Vec<ChatType>,
    pub memory_type: Option<String>,
    pub message_id: Option<Uuid>,
    /// Created at or after (inclusive).
    pub start_date: Option<Timestamp>,
    /// Created at or before (inclusive).
    pub end_date: Option<Timestamp>,
    /// Only answers rated with one of these, each with the question before it.
    pub feedback_types: Vec<Rating>,
}

impl MessageFilter {
    /// Whether the filter takes whole chats (one, or every one): nothing but
    /// the chat narrows it.
    pub fn takes_whole_chats(&self) -> bool {
        self.chat_types.is_empty()
            && self.memory_type.is_none()
            && self.message_id.is_none()
            && self.start_date.is_none()
            && self.end_date.is_none()
            && self.feedback_types.is_empty()
    }
}

/// A visitor's rating of an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub enum Rating {
    #[serde(rename = "THUMBS_UP")]
    ThumbsUp,
    #[serde(rename = "THUMBS_DOWN")]
    ThumbsDown,
}

impl Rating {
    pub fn as_str(self) -> &'static str {
        match self {
            Rating::ThumbsUp => "THUMBS_UP",
            Rating::ThumbsDown => "THUMBS_DOWN",
        }
    }

    pub fn parse_stored(s: &str) -> Self {
        if s == "THUMBS_DOWN" {
            Rating::ThumbsDown
        } else {
            Rating::ThumbsUp
        }
    }
}

impl std::str::FromStr for Rating {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "THUMBS_UP" => Ok(Rating::ThumbsUp),
            "THUMBS_DOWN" => Ok(Rating::ThumbsDown),
            _ => Err(format!("'{s}' is not a rating (THUMBS_UP, THUMBS_DOWN)")),
        }
    }
}

/// A rating of one answer, in Flowise's field names (`chatflowid` all lowercase).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Feedback {
    pub id: Uuid,
    #[serde(rename = "chatflowid")]
    pub chatflow_id: Uuid,
    pub chat_id: String,
    pub message_id: Uuid,
    pub rating: Rating,
    pub content: Option<String>,
    #[serde(serialize_with = "time::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub created_date: Timestamp,
}

/// Which ratings a feedback listing takes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FeedbackFilter {
    pub chat_id: Option<String>,
    pub start_date: Option<Timestamp>,
    pub end_date: Option<Timestamp>,
    /// Newest first.
    pub descending: bool,
}

/// A visitor's contact left with a conversation (Flowise's lead form, or a
/// prediction's `leadEmail`): each of name, e-mail and phone optional.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Lead {
    pub id: Uuid,
    /// Flowise's spelling (all lowercase).
    #[serde(rename = "chatflowid")]
    pub chatflow_id: Uuid,
    pub chat_id: String,
    pub name: Option<String>,
    pub email: Option<String>,
    pub phone: Option<String>,
    #[serde(serialize_with = "time::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub created_date: Timestamp,
}

/// What a lead is made of.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewLead {
    pub chatflow_id: Uuid,
    pub chat_id: String,
    pub name: Option<String>,
    pub email: Option<String>,
    pub phone: Option<String>,
}

impl NewLead {
    pub fn into_lead(self, id: Uuid, created_date: Timestamp) -> Lead {
        Lead {
            id,
            chatflow_id: self.chatflow_id,
            chat_id: self.chat_id,
            name: self.name,
            email: self.email,
            phone: self.phone,
            created_date,
        }
    }
}
