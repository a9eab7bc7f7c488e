//! What a request may change of a flow: its `overrideConfig` values, the
//! sensitive inputs (keys, endpoints, tool code) the chatflow's
//! `apiConfig.overrideConfig.allow` lets it override, and the credentials
//! opened for its run — with the checks that refuse the rest (403).

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::FlowError;
use super::destination::CredentialPolicy;
use super::spec::NodeSpec;
use crate::config::ProviderSettings;

/// What building a flow's components for one request reads besides the flow:
/// the request's `overrideConfig`, what the chatflow allows of it, the fields
/// of the credentials its nodes name, and the server's provider settings.
#[derive(Debug)]
pub struct Overrides<'a> {
    pub values: Option<&'a Map<String, Value>>,
    /// Sensitive inputs the chatflow's `apiConfig.overrideConfig.allow` lists.
    pub allowed: &'a HashSet<String>,
    /// The opened credentials (`Plan::credential_ids`); `None` while the plan is
    /// checked, when a node naming a credential is taken to bring its own keys.
    pub credentials: Option<&'a CredentialFields>,
    /// The server's provider keys and endpoints (`Config`), which nodes fall
    /// back on.
    pub settings: &'a ProviderSettings,
}

impl<'a> Overrides<'a> {
    /// No overrides, nothing allowed, no credentials opened.
    pub fn new(settings: &'a ProviderSettings) -> Self {
        Overrides {
            values: None,
            allowed: crate::domain::api_config::nothing_allowed(),
            credentials: None,
            settings,
        }
    }
}

/// A credential opened for a run: its type, where it may go, its fields.
#[derive(Debug, Clone)]
pub struct OpenedCredential {
    /// Flowise's credential type (`openAIApi`).
    pub kind: String,
    pub allowed_hosts: Vec<String>,
    pub fields: Map<String, Value>,
}

impl OpenedCredential {
    pub fn policy<'a>(&'a self, id: &'a str, trusted: &'a [String]) -> CredentialPolicy<'a> {
        CredentialPolicy {
            id,
            kind: &self.kind,
            allowed_hosts: &self.allowed_hosts,
            trusted,
        }
    }
}

/// Opened credentials, keyed by the id as the flow spells it.
pub type CredentialFields = HashMap<String, OpenedCredential>;

/// Refuses overrides of a component built inside another node (an agentflow
/// node's model or tool) that touch its keys, endpoints or code, unless the
/// chatflow allows them — the same rule as for the flow's own nodes.
pub fn check_inner_overrides(spec: &NodeSpec, overrides: &Overrides<'_>) -> Result<(), FlowError> {
    let Some(values) = overrides.values else {
        return Ok(());
    };
    for key in values.keys() {
        if spec.input(key).is_some_and(|i| i.sensitive) && !overrides.allowed.contains(key) {
            return Err(not_overridable(key));
        }
    }
    Ok(())
}

/// 403 for a sensitive input the chatflow does not let requests override.
pub fn not_overridable(key: &str) -> FlowError {
    FlowError::forbidden(format!(
        "overrideConfig.{key} is not allowed: it is a key, an endpoint or tool code; the \
         chatflow's apiConfig.overrideConfig.allow must list it"
    ))
}
