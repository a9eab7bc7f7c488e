//! A chatflow's publication as an MCP tool, as Flowise's `/mcp-server/<id>`
//! routes manage it: shown with its token, enabled (a new token unless it was
//! on), changed, disabled (kept, switched off) and given a new token.
//!
//! The token is stored sealed (for showing) and hashed (for checking); see
//! [`crate::domain::mcp`].

use serde::Serialize;
use utoipa::ToSchema;

use crate::domain::apikey::hash_key;
use crate::domain::mcp::{McpServerConfig, new_token, validate_tool_name};
use crate::domain::{Chatflow, ChatflowPatch};
use crate::services::sealed::{open_text, seal_text};
use crate::services::{ServiceError, ServiceResult, Services};

/// The publication as Flowise answers it: `{enabled, token, description, toolName}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerView {
    pub enabled: bool,
    /// The endpoint's bearer token (empty when never published).
    pub token: String,
    pub description: String,
    pub tool_name: String,
}

/// Changes to a publication; `None` leaves a field alone.
#[derive(Debug, Clone, Default)]
pub struct PublicationPatch {
    pub tool_name: Option<String>,
    pub description: Option<String>,
    pub enabled: Option<bool>,
}

impl PublicationPatch {
    fn validate(&self) -> ServiceResult<()> {
        if let Some(name) = &self.tool_name {
            validate_tool_name(name).map_err(ServiceError::Invalid)?;
        }
        if self
            .description
            .as_deref()
            .is_some_and(|d| d.trim().is_empty())
        {
            return Err(ServiceError::Invalid(
                "'description' must not be empty".into(),
            ));
        }
        Ok(())
    }
}

/// What binds a flow's sealed token to it.
fn sealing_context(flow: &Chatflow) -> String {
    format!("chatflow/{}/{}/mcpToken", flow.workspace_id, flow.id)
}

/// The publication as shown to the flow's owner (Flowise's blank one when the
/// flow was never published).
pub fn view(services: &Services, flow: &Chatflow) -> ServiceResult<McpServerView> {
    let Some(config) = &flow.mcp_server else {
        return Ok(McpServerView {
            enabled: false,
            token: String::new(),
            description: String::new(),
            tool_name: String::new(),
        });
    };
    Ok(McpServerView {
        enabled: config.enabled,
        token: open_text(
            &services.keyring,
            &sealing_context(flow),
            &config.sealed_token,
        )?,
        description: config.description.clone().unwrap_or_default(),
        tool_name: config.tool_name.clone().unwrap_or_default(),
    })
}

/// Publishes the flow. One already enabled is answered as it is; otherwise it
/// is switched on with the given name and description and a new token.
pub async fn enable(
    services: &Services,
    flow: &Chatflow,
    patch: PublicationPatch,
) -> ServiceResult<McpServerView> {
    if flow.mcp_server.as_ref().is_some_and(|c| c.enabled) {
        return view(services, flow);
    }
    patch.validate()?;
    let earlier = flow.mcp_server.clone();
    let config = McpServerConfig {
        enabled: true,
        tool_name: patch
            .tool_name
            .or_else(|| earlier.as_ref().and_then(|c| c.tool_name.clone())),
        description: patch
            .description
            .or_else(|| earlier.and_then(|c| c.description)),
        ..with_new_token(services, flow)?
    };
    save(services, flow, config).await
}

/// Changes a publication; 404 when the flow was never published.
pub async fn update(
    services: &Services,
    flow: &Chatflow,
    patch: PublicationPatch,
) -> ServiceResult<McpServerView> {
    let Some(mut config) = flow.mcp_server.clone() else {
        return Err(not_published());
    };
    patch.validate()?;
    if let Some(name) = patch.tool_name {
        config.tool_name = Some(name);
    }
    if let Some(description) = patch.description {
        config.description = Some(description);
    }
    if let Some(enabled) = patch.enabled {
        config.enabled = enabled;
    }
    save(services, flow, config).await
}

/// Switches a publication off, keeping it (Flowise's soft delete); 404 when
/// the flow was never published.
pub async fn disable(services: &Services, flow: &Chatflow) -> ServiceResult<()> {
    let Some(mut config) = flow.mcp_server.clone() else {
        return Err(not_published());
    };
    config.enabled = false;
    save(services, flow, config).await.map(|_| ())
}

/// Gives the publication a new token (the old one stops working at once);
/// 404 when the flow was never published.
pub async fn refresh(services: &Services, flow: &Chatflow) -> ServiceResult<McpServerView> {
    let Some(config) = flow.mcp_server.clone() else {
        return Err(not_published());
    };
    let fresh = with_new_token(services, flow)?;
    save(
        services,
        flow,
        McpServerConfig {
            token_hash: fresh.token_hash,
            sealed_token: fresh.sealed_token,
            ..config
        },
    )
    .await
}

fn not_published() -> ServiceError {
    ServiceError::NotFound("MCP server config")
}

/// An enabled publication with a new token and nothing else set.
fn with_new_token(services: &Services, flow: &Chatflow) -> ServiceResult<McpServerConfig> {
    let token = new_token();
    Ok(McpServerConfig {
        enabled: true,
        token_hash: hash_key(&token),
        sealed_token: seal_text(&services.keyring, &sealing_context(flow), &token)?,
        tool_name: None,
        description: None,
    })
}

async fn save(
    services: &Services,
    flow: &Chatflow,
    config: McpServerConfig,
) -> ServiceResult<McpServerView> {
    let patch = ChatflowPatch {
        mcp_server: Some(Some(config)),
        ..Default::default()
    };
    let saved = services
        .store
        .update_chatflow(flow.workspace_id, flow.id, patch)
        .await?
        .ok_or(ServiceError::NotFound("chatflow"))?;
    view(services, &saved)
}
