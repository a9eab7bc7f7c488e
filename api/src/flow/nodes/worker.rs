//! `worker`: an agent of a multi-agent flow, with its own prompt, tools and
//! (optionally) model, acting when its supervisor routes to it.

use crate::flow::FlowError;
use crate::flow::component::{Component, WorkerSpec};
use crate::flow::node::{Build, Category, InputKind as K, Node, NodeSpec, input, required};

pub struct Worker;

static SPEC: NodeSpec = NodeSpec {
    name: "worker",
    category: Category::Worker,
    inputs: &[
        required("workerName", K::Text),
        required("workerPrompt", K::Text),
        input("tools", K::Anchors(Category::Tool)),
        required("supervisor", K::Anchor(Category::Supervisor)),
        input("model", K::Anchor(Category::ChatModel)),
        input("promptValues", K::Json),
        input("maxIterations", K::Integer),
    ],
};

impl Node for Worker {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let model = node.model("model")?;
        if let Some(m) = &model {
            super::tool_agent::refuse_local(node, &m.provider)?;
        }
        let name = node.text("workerName").unwrap_or_default();
        if name.eq_ignore_ascii_case("FINISH") {
            return Err(node.invalid("cannot be named FINISH (the supervisor's word for done)"));
        }
        Ok(Component::Worker(WorkerSpec {
            node_id: node.id().to_owned(),
            name: name.to_owned(),
            prompt: node.text("workerPrompt").unwrap_or_default().to_owned(),
            values: node.json_object("promptValues")?,
            model,
            tools: node.tools("tools")?,
            supervisor: node
                .references("supervisor")
                .first()
                .map(|s| (*s).to_owned())
                .unwrap_or_default(),
            max_iterations: node.count(
                "maxIterations",
                super::tool_agent::DEFAULT_MAX_ITERATIONS,
                100,
            )?,
        }))
    }
}
