//! `postgres`: Flowise's pgvector store. weir keeps the chunks in its own store
//! (SQLite or PostgreSQL), whatever database the node names (its connection
//! inputs have no effect); on a PostgreSQL with pgvector in use they are
//! searched there (`similarity`, and `mmr`'s `fetchK` nearest), else in weir's
//! own index like every other store. `hybrid` always uses weir's index: its
//! BM25 half ranks every chunk's words.

use super::documents::{self, STORE_COMMON};
use super::{K, input};
use crate::flow::FlowError;
use crate::flow::component::Component;
use crate::flow::node::{Build, Category, InputSpec, Node, NodeSpec, concat};

pub struct Postgres;

const INPUTS: [InputSpec; 20] = concat(
    STORE_COMMON,
    [
        input("credential", K::Ignored),
        input("host", K::Ignored),
        input("database", K::Ignored),
        input("port", K::Ignored),
        input("ssl", K::Ignored),
        input("tableName", K::Ignored),
        input("driver", K::Ignored),
        input("distanceStrategy", K::Ignored),
        input("batchSize", K::Ignored),
        input("additionalConfig", K::Ignored),
        input("pgMetadataFilter", K::Ignored),
        input("contentColumnName", K::Ignored),
    ],
);

static SPEC: NodeSpec = NodeSpec {
    name: "postgres",
    category: Category::VectorStore,
    inputs: &INPUTS,
};

impl Node for Postgres {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let mut component = documents::vector_store(node, SPEC.name)?;
        if let Component::VectorStore(store) = &mut component {
            store.pgvector = true;
        }
        Ok(component)
    }
}
