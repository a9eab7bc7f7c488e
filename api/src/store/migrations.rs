//! The numbered schema migrations of each backend, embedded in the binary.
//!
//! A migration is applied once, in order, inside a transaction, and recorded in
//! `schema_migrations`. Published migrations are never edited: a change is a new
//! file with the next number.

pub struct Migration {
    pub version: i64,
    pub name: &'static str,
    pub sql: &'static str,
}

pub const SQLITE: &[Migration] = &[
    Migration {
        version: 1,
        name: "init",
        sql: include_str!("migrations/sqlite/0001_init.sql"),
    },
    Migration {
        version: 2,
        name: "conversations",
        sql: include_str!("migrations/sqlite/0002_conversations.sql"),
    },
    Migration {
        version: 3,
        name: "triggers",
        sql: include_str!("migrations/sqlite/0003_triggers.sql"),
    },
    Migration {
        version: 4,
        name: "tools",
        sql: include_str!("migrations/sqlite/0004_tools.sql"),
    },
    Migration {
        version: 5,
        name: "vectors",
        sql: include_str!("migrations/sqlite/0005_vectors.sql"),
    },
    Migration {
        version: 6,
        name: "executions",
        sql: include_str!("migrations/sqlite/0006_executions.sql"),
    },
    Migration {
        version: 7,
        name: "agent_checkpoints",
        sql: include_str!("migrations/sqlite/0007_agent_checkpoints.sql"),
    },
    Migration {
        version: 8,
        name: "credentials",
        sql: include_str!("migrations/sqlite/0008_credentials.sql"),
    },
    Migration {
        version: 9,
        name: "webhook_addresses",
        sql: include_str!("migrations/sqlite/0009_webhook_addresses.sql"),
    },
    Migration {
        version: 10,
        name: "credential_hosts",
        sql: include_str!("migrations/sqlite/0010_credential_hosts.sql"),
    },
    Migration {
        version: 11,
        name: "start_node_triggers",
        sql: include_str!("migrations/sqlite/0011_start_node_triggers.sql"),
    },
    Migration {
        version: 12,
        name: "callback_outbox",
        sql: include_str!("migrations/sqlite/0012_callback_outbox.sql"),
    },
    Migration {
        version: 13,
        name: "chat_surface",
        sql: include_str!("migrations/sqlite/0013_chat_surface.sql"),
    },
    Migration {
        version: 14,
        name: "chat_aborts",
        sql: include_str!("migrations/sqlite/0014_chat_aborts.sql"),
    },
    Migration {
        version: 15,
        name: "lead_per_address",
        sql: include_str!("migrations/sqlite/0015_lead_per_address.sql"),
    },
    Migration {
        version: 16,
        name: "token_usage",
        sql: include_str!("migrations/sqlite/0016_token_usage.sql"),
    },
    Migration {
        version: 17,
        name: "document_stores",
        sql: include_str!("migrations/sqlite/0017_document_stores.sql"),
    },
    Migration {
        version: 18,
        name: "mcp_servers",
        sql: include_str!("migrations/sqlite/0018_mcp_servers.sql"),
    },
    Migration {
        version: 19,
        name: "custom_mcp_servers",
        sql: include_str!("migrations/sqlite/0019_custom_mcp_servers.sql"),
    },
];

pub const POSTGRES: &[Migration] = &[
    Migration {
        version: 1,
        name: "init",
        sql: include_str!("migrations/postgres/0001_init.sql"),
    },
    Migration {
        version: 2,
        name: "conversations",
        sql: include_str!("migrations/postgres/0002_conversations.sql"),
    },
    Migration {
        version: 3,
        name: "triggers",
        sql: include_str!("migrations/postgres/0003_triggers.sql"),
    },
    Migration {
        version: 4,
        name: "tools",
        sql: include_str!("migrations/postgres/0004_tools.sql"),
    },
    Migration {
        version: 5,
        name: "vectors",
        sql: include_str!("migrations/postgres/0005_vectors.sql"),
    },
    Migration {
        version: 6,
        name: "executions",
        sql: include_str!("migrations/postgres/0006_executions.sql"),
    },
    Migration {
        version: 7,
        name: "agent_checkpoints",
        sql: include_str!("migrations/postgres/0007_agent_checkpoints.sql"),
    },
    Migration {
        version: 8,
        name: "credentials",
        sql: include_str!("migrations/postgres/0008_credentials.sql"),
    },
    Migration {
        version: 9,
        name: "webhook_addresses",
        sql: include_str!("migrations/postgres/0009_webhook_addresses.sql"),
    },
    Migration {
        version: 10,
        name: "credential_hosts",
        sql: include_str!("migrations/postgres/0010_credential_hosts.sql"),
    },
    Migration {
        version: 11,
        name: "start_node_triggers",
        sql: include_str!("migrations/postgres/0011_start_node_triggers.sql"),
    },
    Migration {
        version: 12,
        name: "callback_outbox",
        sql: include_str!("migrations/postgres/0012_callback_outbox.sql"),
    },
    Migration {
        version: 13,
        name: "chat_surface",
        sql: include_str!("migrations/postgres/0013_chat_surface.sql"),
    },
    Migration {
        version: 14,
        name: "chat_aborts",
        sql: include_str!("migrations/postgres/0014_chat_aborts.sql"),
    },
    Migration {
        version: 15,
        name: "lead_per_address",
        sql: include_str!("migrations/postgres/0015_lead_per_address.sql"),
    },
    Migration {
        version: 16,
        name: "token_usage",
        sql: include_str!("migrations/postgres/0016_token_usage.sql"),
    },
    Migration {
        version: 17,
        name: "document_stores",
        sql: include_str!("migrations/postgres/0017_document_stores.sql"),
    },
    Migration {
        version: 18,
        name: "mcp_servers",
        sql: include_str!("migrations/postgres/0018_mcp_servers.sql"),
    },
    Migration {
        version: 19,
        name: "custom_mcp_servers",
        sql: include_str!("migrations/postgres/0019_custom_mcp_servers.sql"),
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_consecutive_from_one() {
        for set in [SQLITE, POSTGRES] {
            for (i, m) in set.iter().enumerate() {
                assert_eq!(m.version, i as i64 + 1, "{}", m.name);
            }
        }
        assert_eq!(SQLITE.len(), POSTGRES.len(), "backends must stay in step");
    }
}
