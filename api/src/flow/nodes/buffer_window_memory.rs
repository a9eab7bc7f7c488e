//! `bufferWindowMemory`: the last `k` exchanges of the session.

use crate::flow::FlowError;
use crate::flow::component::{Component, MemorySpec};
use crate::flow::node::{Build, Category, InputKind as K, Node, NodeSpec, input, required};

pub struct BufferWindowMemory;

static SPEC: NodeSpec = NodeSpec {
    name: "bufferWindowMemory",
    category: Category::Memory,
    inputs: &[
        required("k", K::Integer),
        input("sessionId", K::Text),
        input("memoryKey", K::Ignored),
    ],
};

impl Node for BufferWindowMemory {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let k = node.integer("k")?.unwrap_or(4);
        if k == 0 {
            return Err(node.invalid("input 'k' must be at least 1"));
        }
        Ok(Component::Memory(MemorySpec {
            node_id: node.id().to_owned(),
            window: Some(u32::try_from(k).unwrap_or(u32::MAX)),
            session_id: node.text("sessionId").map(str::to_owned),
            label: Some("Buffer Window Memory"),
            redis: None,
        }))
    }
}
