//! `seqState`: the state channels of a sequential flow (its `Custom State`
//! table: `{key, type: Replace | Append, defaultValue}`). A `Replace` key holds
//! the last value written (a null write keeps it), starting at its default as
//! written; an `Append` key is a list each write adds to (a list's items, or
//! one value), starting at its default read as JSON (`["a"]`), else empty.
//! The code tab (`stateMemoryCode`, when chosen) is JavaScript: an object of
//! LangGraph channels `{key: {value: (x, y) => …, default: () => …}}`, read
//! in the Python runtime's sandbox when a run starts (see
//! [`SeqStep::StateCode`]).

use serde_json::Value;

use crate::flow::FlowError;
use crate::flow::component::{Component, SeqStep, StateChannel};
use crate::flow::node::{Build, Category, InputKind as K, Node, NodeSpec, input};

pub struct SeqState;

static SPEC: NodeSpec = NodeSpec {
    name: "seqState",
    category: Category::Sequential,
    inputs: &[
        // The chosen tab's name, or (older flows) the rows themselves.
        input("stateMemory", K::Ignored),
        input("stateMemoryUI", K::Json),
        input("stateMemoryCode", K::Text),
        input("selectedStateTab", K::Ignored),
    ],
};

impl Node for SeqState {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let tab = node
            .value(&format!("selectedStateTab_{}", node.id()))
            .and_then(Value::as_str)
            .unwrap_or("stateMemoryUI");
        if tab.starts_with("stateMemoryCode")
            && let Some(code) = node.text("stateMemoryCode")
        {
            super::javascript::refuse_node_modules(node, "stateMemoryCode", code)?;
            return Ok(Component::Sequential(SeqStep::StateCode(code.to_owned())));
        }
        let mut rows = Vec::new();
        // Older flows wrote the table itself into `stateMemory`.
        for input in ["stateMemoryUI", "stateMemory"] {
            if let Some(Value::Array(items)) = super::seq_agent::json_rows(node, input)? {
                rows.extend(items);
            }
        }
        let mut channels: Vec<StateChannel> = Vec::with_capacity(rows.len());
        for row in rows {
            let text = |names: &[&str]| super::seq_agent::row_text(&row, names);
            let key = text(&["key", "Key"]);
            if key.is_empty() {
                return Err(node.invalid("has a state row without a key"));
            }
            if key == "messages" {
                // Flowise's own channel wins over a custom one of that name.
                continue;
            }
            let append = text(&["type", "Operation"]).eq_ignore_ascii_case("append");
            let written = text(&["defaultValue", "Default Value"]);
            let default = if !append {
                Value::String(written)
            } else if written.is_empty() {
                Value::Array(Vec::new())
            } else {
                match serde_json::from_str::<Value>(&written) {
                    Ok(Value::Array(items)) => Value::Array(items),
                    Ok(other) => Value::Array(vec![other]),
                    Err(e) => {
                        return Err(node.invalid(format_args!(
                            "state key '{key}' appends, and its default '{written}' is not JSON: {e}"
                        )));
                    }
                }
            };
            channels.retain(|c| c.key != key);
            channels.push(StateChannel {
                key,
                append,
                default,
            });
        }
        Ok(Component::Sequential(SeqStep::State(channels)))
    }
}
