//! Where keys may be sent: the one rule for the server's provider keys and for a
//! stored credential's fields.
//!
//! A key goes to its provider's own host (over https, subdomains included), to a
//! host the operator trusts with every key (`PROVIDER_KEY_HOSTS`: `host` or
//! `host:port`, comma separated) and, for a credential, to the hosts recorded on
//! the credential itself (`allowedHosts`, which only a key with
//! `credentials:write` sets). A flow author choosing a node's endpoint (its
//! `basePath`, `baseUrl`, `url`: the inputs a [`NodeSpec`] marks as endpoints)
//! cannot move a credential anywhere else: such a node is refused when the flow
//! is saved ([`check_saved`]) and when it is built for a run ([`check_node`]),
//! before anything is sent. An endpoint the credential itself supplies, or the
//! server's own base setting, is not the author's choice and is not checked.

use serde_json::{Map, Value};

use super::FlowError;
use super::graph::{FlowGraph, credential_of};
use super::spec::NodeSpec;
use crate::llm::endpoints::home_of;

/// What a destination check needs of a credential: its kind and its own hosts.
#[derive(Debug, Clone, Copy)]
pub struct CredentialPolicy<'a> {
    pub id: &'a str,
    /// Flowise's credential type (`openAIApi`).
    pub kind: &'a str,
    pub allowed_hosts: &'a [String],
    /// The hosts the server trusts with every key (`PROVIDER_KEY_HOSTS`).
    pub trusted: &'a [String],
}

/// `host:port` of a URL, lower case.
pub fn host_of(url: &str) -> Option<String> {
    host_port(&reqwest::Url::parse(url).ok()?)
}

fn host_port(url: &reqwest::Url) -> Option<String> {
    Some(format!(
        "{}:{}",
        url.host_str()?.to_ascii_lowercase(),
        url.port_or_known_default()?
    ))
}

/// Whether `url` is on `home` (https, the host or a subdomain), or on a host
/// listed in `extra` or `trusted` (the server's `PROVIDER_KEY_HOSTS`).
pub fn may_receive_keys(
    url: &str,
    home: Option<&str>,
    extra: &[String],
    trusted: &[String],
) -> bool {
    let Ok(parsed) = reqwest::Url::parse(url) else {
        return false;
    };
    let Some(host) = parsed.host_str().map(str::to_ascii_lowercase) else {
        return false;
    };
    if let Some(home) = home
        && parsed.scheme() == "https"
        && (host == home || host.ends_with(&format!(".{home}")))
    {
        return true;
    }
    let Some(host_port) = host_port(&parsed) else {
        return false;
    };
    let listed = |h: &str| h == host || h == host_port;
    extra.iter().any(|h| listed(h)) || trusted.iter().any(|h| !h.is_empty() && listed(h))
}

/// Refuses a node whose own endpoint inputs (`chosen`: the node's inputs with the
/// request's overrides, before its credential fills the blanks) point `credential`
/// where it may not go.
pub fn check_node(
    spec: &NodeSpec,
    node_id: &str,
    chosen: &Map<String, Value>,
    credential: CredentialPolicy<'_>,
) -> Result<(), FlowError> {
    for input in spec.inputs.iter().filter(|i| i.endpoint) {
        let Some(url) = chosen
            .get(input.name)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|u| !u.is_empty())
        else {
            continue;
        };
        if may_receive_keys(
            url,
            home_of(credential.kind),
            credential.allowed_hosts,
            credential.trusted,
        ) {
            continue;
        }
        let home = home_of(credential.kind)
            .map(|h| format!("{h} (the provider's own host), "))
            .unwrap_or_default();
        return Err(FlowError::invalid(format!(
            "node {node_id} ({}) would send credential '{}' ({}) to {} through its '{}': a \
             credential goes only to {home}the hosts in its allowedHosts and those in \
             PROVIDER_KEY_HOSTS",
            spec.name,
            credential.id,
            credential.kind,
            host_of(url).unwrap_or_else(|| url.to_owned()),
            input.name,
        )));
    }
    Ok(())
}

/// One place a flow names a credential: a node's own (`data.credential`, its
/// `credential` / `FLOWISE_CREDENTIAL_ID` input), or an agentflow node's component
/// configured inside it (`<param>Config` beside `<param>` naming the component's
/// type, in the node's inputs or in rows such as `agentTools`).
#[derive(Debug)]
pub struct CredentialUse<'a> {
    pub node_id: &'a str,
    /// The type of the node or component that uses it (`chatOpenAI`).
    pub node_type: &'a str,
    pub credential: String,
    pub inputs: &'a Map<String, Value>,
}

/// Every place `graph` names a credential.
pub fn credential_uses(graph: &FlowGraph) -> Vec<CredentialUse<'_>> {
    fn walk<'a>(node_id: &'a str, map: &'a Map<String, Value>, out: &mut Vec<CredentialUse<'a>>) {
        for (key, value) in map {
            match value {
                Value::Object(config) => {
                    if let Some(param) = key.strip_suffix("Config")
                        && let Some(credential) = credential_of(None, config)
                    {
                        out.push(CredentialUse {
                            node_id,
                            node_type: map.get(param).and_then(Value::as_str).unwrap_or(""),
                            credential,
                            inputs: config,
                        });
                    }
                    walk(node_id, config, out);
                }
                Value::Array(items) => {
                    for item in items {
                        if let Value::Object(row) = item {
                            walk(node_id, row, out);
                        }
                    }
                }
                _ => {}
            }
        }
    }
    let mut uses = Vec::new();
    for node in &graph.nodes {
        if let Some(credential) = &node.credential {
            uses.push(CredentialUse {
                node_id: &node.id,
                node_type: &node.name,
                credential: credential.clone(),
                inputs: &node.inputs,
            });
        }
        walk(&node.id, &node.inputs, &mut uses);
    }
    uses
}

/// The save-time check: every use of a credential `stored` knows (the
/// workspace's: id → its type and its `allowedHosts`) must keep it on its hosts.
/// Credentials the workspace does not have are left to the run, which refuses them.
pub fn check_saved<'p>(
    graph: &FlowGraph,
    spec_of: impl Fn(&str) -> Option<&'static NodeSpec>,
    trusted: &[String],
    stored: impl Fn(&str) -> Option<(&'p str, &'p [String])>,
) -> Result<(), FlowError> {
    for used in credential_uses(graph) {
        let (Some((kind, allowed_hosts)), Some(spec)) =
            (stored(&used.credential), spec_of(used.node_type))
        else {
            continue;
        };
        let policy = CredentialPolicy {
            id: &used.credential,
            kind,
            allowed_hosts,
            trusted,
        };
        check_node(spec, used.node_id, used.inputs, policy)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credential_goes_home_or_where_it_is_allowed() {
        let home = home_of("openAIApi");
        assert!(may_receive_keys(
            "https://api.openai.com/v1",
            home,
            &[],
            &[]
        ));
        assert!(may_receive_keys(
            "https://eu.api.openai.com/v1",
            home,
            &[],
            &[]
        ));
        assert!(!may_receive_keys(
            "http://api.openai.com/v1",
            home,
            &[],
            &[]
        ));
        assert!(!may_receive_keys(
            "https://api.openai.com.evil.example/v1",
            home,
            &[],
            &[]
        ));
        assert!(!may_receive_keys("http://127.0.0.1:9/v1", home, &[], &[]));
        let allowed = vec!["127.0.0.1:9".to_owned(), "gateway.example".to_owned()];
        assert!(may_receive_keys(
            "http://127.0.0.1:9/v1",
            home,
            &allowed,
            &[]
        ));
        assert!(!may_receive_keys(
            "http://127.0.0.1:10/v1",
            home,
            &allowed,
            &[]
        ));
        assert!(may_receive_keys(
            "https://gateway.example:8443/v1",
            None,
            &allowed,
            &[]
        ));
        assert!(!may_receive_keys("not a url", None, &allowed, &[]));
        // The server's PROVIDER_KEY_HOSTS count for every credential.
        let trusted = vec!["proxy.internal:8080".to_owned()];
        assert!(may_receive_keys(
            "http://proxy.internal:8080/v1",
            home,
            &[],
            &trusted
        ));
        assert!(!may_receive_keys(
            "http://proxy.internal:8081/v1",
            home,
            &[],
            &trusted
        ));
    }

    #[test]
    fn uses_are_found_on_nodes_and_inside_agentflow_configs() {
        let flow = serde_json::json!({
            "nodes": [
                {"id": "chatOpenAI_0", "data": {"id": "chatOpenAI_0", "name": "chatOpenAI",
                    "credential": "c1", "inputs": {"basePath": "http://127.0.0.1:9/v1"}}},
                {"id": "agentAgentflow_0", "data": {"id": "agentAgentflow_0", "name": "agentAgentflow",
                    "inputs": {"agentModel": "chatOpenAI",
                               "agentModelConfig": {"credential": "c2", "basePath": "http://x.example"},
                               "agentTools": [{"agentSelectedTool": "requestsGet",
                                               "agentSelectedToolConfig": {"FLOWISE_CREDENTIAL_ID": "c3"}}]}}}
            ],
            "edges": []
        });
        let graph = FlowGraph::parse(&flow.to_string()).unwrap();
        let uses: Vec<_> = credential_uses(&graph)
            .into_iter()
            .map(|u| (u.node_id, u.node_type, u.credential))
            .collect();
        assert_eq!(
            uses,
            vec![
                ("chatOpenAI_0", "chatOpenAI", "c1".to_owned()),
                ("agentAgentflow_0", "chatOpenAI", "c2".to_owned()),
                ("agentAgentflow_0", "requestsGet", "c3".to_owned()),
            ]
        );
        let none: &[String] = &[];
        let only =
            |wanted: &'static str| move |id: &str| (id == wanted).then_some(("openAIApi", none));
        let err = check_saved(&graph, crate::flow::registry::spec, &[], only("c1")).unwrap_err();
        assert!(err.message.contains("127.0.0.1:9") && err.message.contains("allowedHosts"));
        let err = check_saved(&graph, crate::flow::registry::spec, &[], only("c2")).unwrap_err();
        assert!(err.message.contains("x.example:80"), "{}", err.message);
        assert!(check_saved(&graph, crate::flow::registry::spec, &[], |_| None).is_ok());
        let allowed = ["127.0.0.1:9".to_owned()];
        assert!(
            check_saved(&graph, crate::flow::registry::spec, &[], |id| (id == "c1")
                .then_some(("openAIApi", &allowed[..])))
            .is_ok()
        );
    }
}
