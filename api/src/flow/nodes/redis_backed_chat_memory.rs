//! `RedisBackedChatMemory`: the session's conversation kept in the user's
//! Redis, as Flowise's node keeps it (`store::redis_history`): a
//! `redisCacheUrlApi` credential's `redisUrl`, or a `redisCacheApi`
//! credential's host, port, user and password (`redisCacheSslEnabled`: over
//! TLS, as a `rediss://` URL is); `sessionTTL`, `windowSize`.
//! `upstashRedisBackedChatMemory`: the same in an Upstash database, through its
//! REST API (`baseURL`, an `upstashRedisMemoryApi` credential's token).

use crate::flow::FlowError;
use crate::flow::component::{Component, MemorySpec};
use crate::flow::node::{Build, Category, InputKind as K, Node, NodeSpec, input, sensitive};
use crate::store::redis_history::RedisHistory;

pub struct RedisBackedChatMemory;

static SPEC: NodeSpec = NodeSpec {
    name: "RedisBackedChatMemory",
    category: Category::Memory,
    inputs: &[
        input("sessionId", K::Text),
        input("sessionTTL", K::Integer),
        input("windowSize", K::Integer),
        input("memoryKey", K::Ignored),
        sensitive("redisUrl", K::Text),
        sensitive("redisCacheHost", K::Text),
        sensitive("redisCachePort", K::Text),
        sensitive("redisCacheUser", K::Text),
        sensitive("redisCachePwd", K::Text),
        input("redisCacheSslEnabled", K::Boolean),
    ],
};

impl Node for RedisBackedChatMemory {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let memory = |redis| MemorySpec {
            node_id: node.id().to_owned(),
            window: None,
            session_id: node.text("sessionId").map(str::to_owned),
            label: Some("Redis-Backed Chat Memory"),
            redis,
        };
        let url = match node.text("redisUrl") {
            Some(url) => url.to_owned(),
            // A flow checked without its credentials opened (when it is saved):
            // the address is known only to a run.
            None if node.credential_unopened() => {
                return Ok(Component::Memory(memory(None)));
            }
            None => {
                let host = node.text("redisCacheHost").ok_or_else(|| {
                    node.invalid("needs a Redis credential (redisUrl, or host and port)")
                })?;
                let port = node.text("redisCachePort").unwrap_or("6379");
                let login = match (node.text("redisCacheUser"), node.text("redisCachePwd")) {
                    (Some(user), Some(password)) => format!(
                        "{}:{}@",
                        crate::flow::tools::percent_encode(user),
                        crate::flow::tools::percent_encode(password)
                    ),
                    (None, Some(password)) => {
                        format!(":{}@", crate::flow::tools::percent_encode(password))
                    }
                    _ => String::new(),
                };
                // Flowise's credential switch: TLS to that host and port.
                let scheme = if node.boolean("redisCacheSslEnabled")? {
                    "rediss"
                } else {
                    "redis"
                };
                format!("{scheme}://{login}{host}:{port}")
            }
        };
        let ttl = node.integer("sessionTTL")?.filter(|t| *t > 0);
        let history = RedisHistory::from_url(&url, ttl)
            .map_err(|e| node.invalid(format_args!("has an unusable Redis address: {e}")))?;
        Ok(Component::Memory(MemorySpec {
            window: node
                .integer("windowSize")?
                .filter(|k| *k > 0)
                .map(|k| u32::try_from(k).unwrap_or(u32::MAX)),
            ..memory(Some(Box::new(history)))
        }))
    }
}

pub struct UpstashRedisBackedChatMemory;

static UPSTASH: NodeSpec = NodeSpec {
    name: "upstashRedisBackedChatMemory",
    category: Category::Memory,
    inputs: &[
        crate::flow::node::endpoint_url("baseURL"),
        input("sessionId", K::Text),
        input("sessionTTL", K::Integer),
        input("memoryKey", K::Ignored),
        sensitive("upstashRestToken", K::Text),
    ],
};

impl Node for UpstashRedisBackedChatMemory {
    fn spec(&self) -> &'static NodeSpec {
        &UPSTASH
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let url = node
            .text("baseURL")
            .ok_or_else(|| node.invalid("needs the Upstash database's REST URL ('baseURL')"))?;
        let token = match node.text("upstashRestToken") {
            Some(token) => token,
            // Checked when saved: the credential's token is opened by a run.
            None if node.credential_unopened() => "",
            None => {
                return Err(node.invalid(
                    "needs an upstashRedisMemoryApi credential (its 'upstashRestToken')",
                ));
            }
        };
        let ttl = node.integer("sessionTTL")?.filter(|t| *t > 0);
        let history = RedisHistory::upstash(url, token, ttl)
            .map_err(|e| node.invalid(format_args!("has an unusable Upstash address: {e}")))?;
        Ok(Component::Memory(MemorySpec {
            node_id: node.id().to_owned(),
            window: None,
            session_id: node.text("sessionId").map(str::to_owned),
            label: Some("Upstash Redis-Backed Chat Memory"),
            redis: Some(Box::new(history)),
        }))
    }
}
