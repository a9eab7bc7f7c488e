//! A flow as Flowise's canvas needs it. Clients, scripts and tests write nodes
//! with only `id`, `name` and `inputs`; the canvas draws a node from its
//! `inputParams`, `inputAnchors` and `outputAnchors`, and an edge from its
//! handles, and goes blank without them. [`dress`] fills in what the catalog
//! knows, exactly as the canvas itself does when a node is dropped from the
//! palette (the anchor ids it derives, the defaults it sets), spreads nodes
//! stacked at one place, and draws the edges the inputs' references imply. It
//! changes a copy: what is stored changes only when the user saves.

use serde_json::{Map, Value, json};

use super::Catalog;

/// The input types the canvas shows as fields; any other type is an anchor.
const PARAM_TYPES: [&str; 17] = [
    "asyncOptions",
    "asyncMultiOptions",
    "options",
    "multiOptions",
    "array",
    "datagrid",
    "string",
    "number",
    "boolean",
    "password",
    "json",
    "code",
    "date",
    "file",
    "folder",
    "tabs",
    "conditionFunction",
];

/// `flow_data` with every node the canvas could not draw filled in, or `None`
/// when it needs nothing (or is not a flow at all: the canvas shows it as is).
pub fn dress(flow_data: &str) -> Option<String> {
    let mut flow: Value = serde_json::from_str(flow_data).ok()?;
    let nodes = flow.get_mut("nodes")?.as_array_mut()?;
    let mut changed = false;
    let agentflow = nodes
        .iter()
        .any(|n| n["data"]["name"].as_str() == Some("startAgentflow"));
    for node in nodes.iter_mut() {
        changed |= dress_node(node, agentflow);
    }
    changed |= spread(nodes);
    if !agentflow {
        let drawn = implied_edges(nodes);
        if let Some(edges) = flow
            .as_object_mut()
            .map(|f| f.entry("edges").or_insert_with(|| Value::Array(Vec::new())))
            && let Some(edges) = edges.as_array_mut()
        {
            for edge in drawn {
                let exists = edges.iter().any(|e| {
                    e["source"] == edge["source"]
                        && e["target"] == edge["target"]
                        && e["targetHandle"] == edge["targetHandle"]
                });
                if !exists {
                    edges.push(edge);
                    changed = true;
                }
            }
        }
    }
    changed.then(|| flow.to_string())
}

/// Fills in one node; whether it needed it.
fn dress_node(node: &mut Value, agentflow: bool) -> bool {
    let Some(object) = node.as_object_mut() else {
        return false;
    };
    let Some(id) = object.get("id").and_then(Value::as_str).map(str::to_owned) else {
        return false;
    };
    let Some(data) = object.get_mut("data").and_then(Value::as_object_mut) else {
        return false;
    };
    if data.contains_key("inputParams") && data.contains_key("outputAnchors") {
        return false;
    }
    let Some(name) = data.get("name").and_then(Value::as_str) else {
        return false;
    };
    let Some(definition) = Catalog::get().definition(name) else {
        return false;
    };
    let is_v2 = definition["category"] == "Agent Flows";
    let mut params = Vec::new();
    let mut anchors = Vec::new();
    let mut defaults = Map::new();
    for input in definition["inputs"].as_array().into_iter().flatten() {
        let input_name = input["name"].as_str().unwrap_or_default();
        let input_type = input["type"].as_str().unwrap_or_default();
        let mut placed = input.clone();
        if let Some(placed) = placed.as_object_mut() {
            placed.insert(
                "id".into(),
                json!(format!("{id}-input-{input_name}-{input_type}")),
            );
        }
        if PARAM_TYPES.contains(&input_type) {
            params.push(placed);
        } else {
            anchors.push(placed);
        }
        let default = input
            .get("default")
            .filter(|d| !d.is_null())
            .cloned()
            .unwrap_or_else(|| json!(""));
        defaults.insert(input_name.to_owned(), default);
    }
    if let Some(credential) = definition.get("credential") {
        let mut placed = credential.clone();
        if let Some(placed) = placed.as_object_mut() {
            placed.insert(
                "id".into(),
                json!(format!("{id}-input-credential-credential")),
            );
        }
        params.insert(0, placed);
    }
    let outputs = output_anchors(definition, &id, is_v2);
    // What the node was written with wins over the defaults.
    let written = data
        .get("inputs")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut inputs = defaults;
    inputs.extend(written);
    for key in [
        "label",
        "version",
        "type",
        "category",
        "description",
        "baseClasses",
        "color",
        "hideInput",
        "hideOutput",
    ] {
        if let Some(value) = definition.get(key) {
            data.entry(key).or_insert_with(|| value.clone());
        }
    }
    data.insert("id".into(), json!(id));
    data.insert("inputs".into(), Value::Object(inputs));
    data.insert("inputParams".into(), Value::Array(params));
    data.insert("inputAnchors".into(), Value::Array(anchors));
    data.insert("outputAnchors".into(), Value::Array(outputs.anchors));
    data.entry("outputs").or_insert(outputs.selected);
    data.entry("selected").or_insert(json!(false));
    let node_type = if is_v2 || agentflow {
        "agentFlow"
    } else {
        "customNode"
    };
    object.entry("type").or_insert_with(|| json!(node_type));
    true
}

struct Outputs {
    anchors: Vec<Value>,
    /// The node's `outputs`: which of several outputs is chosen.
    selected: Value,
}

/// The canvas's output anchors of a node of this definition with this id.
fn output_anchors(definition: &Value, id: &str, is_v2: bool) -> Outputs {
    let name = definition["name"].as_str().unwrap_or_default();
    let label = &definition["label"];
    let outputs = definition["outputs"].as_array().filter(|o| !o.is_empty());
    if definition["hideOutput"] == json!(true) {
        return Outputs {
            anchors: Vec::new(),
            selected: json!({}),
        };
    }
    if is_v2 {
        let anchors = match outputs {
            Some(outputs) => (0..outputs.len())
                .map(|i| json!({"id": format!("{id}-output-{i}"), "label": label, "name": name}))
                .collect(),
            None => {
                vec![json!({"id": format!("{id}-output-{name}"), "label": label, "name": name})]
            }
        };
        return Outputs {
            anchors,
            selected: json!({}),
        };
    }
    let classes: Vec<&str> = definition["baseClasses"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    Outputs {
        anchors: vec![json!({
            "id": format!("{id}-output-{name}-{}", classes.join("|")),
            "name": name,
            "label": definition["type"],
            "description": definition["description"],
            "type": classes.join(" | "),
        })],
        selected: json!({}),
    }
}

/// Spreads nodes that share one position (or have none) over a grid; whether
/// any moved.
fn spread(nodes: &mut [Value]) -> bool {
    let position = |n: &Value| {
        (
            n["position"]["x"].as_f64().unwrap_or(f64::NAN),
            n["position"]["y"].as_f64().unwrap_or(f64::NAN),
        )
    };
    let stacked = nodes.len() > 1 && {
        let first = position(&nodes[0]);
        nodes.iter().all(|n| {
            let p = position(n);
            (p.0 == first.0 && p.1 == first.1) || p.0.is_nan() || p.1.is_nan()
        })
    };
    let mut moved = false;
    for (i, node) in nodes.iter_mut().enumerate() {
        let missing = position(node).0.is_nan() || position(node).1.is_nan();
        if !(stacked || missing) {
            continue;
        }
        if let Some(object) = node.as_object_mut() {
            let (column, row) = (i % 4, i / 4);
            object.insert(
                "position".into(),
                json!({"x": 100 + column * 400, "y": 100 + row * 600}),
            );
            moved = true;
        }
    }
    moved
}

/// The edges a chatflow's anchor inputs imply (`{{source.data.instance}}`), with
/// the handles the canvas draws them between.
fn implied_edges(nodes: &[Value]) -> Vec<Value> {
    let mut edges = Vec::new();
    for target in nodes {
        let target_id = target["id"].as_str().unwrap_or_default();
        for anchor in target["data"]["inputAnchors"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let input = anchor["name"].as_str().unwrap_or_default();
            let value = &target["data"]["inputs"][input];
            for source_id in crate::flow::graph::references(value) {
                let source = nodes.iter().find(|n| n["id"].as_str() == Some(source_id));
                let Some(handle) = source
                    .and_then(|s| s["data"]["outputAnchors"].as_array())
                    .and_then(|a| a.first())
                    .and_then(|a| a["id"].as_str())
                else {
                    continue;
                };
                let target_handle = anchor["id"].as_str().unwrap_or_default();
                edges.push(json!({
                    "id": format!("{source_id}-{handle}-{target_id}-{target_handle}"),
                    "source": source_id,
                    "sourceHandle": handle,
                    "target": target_id,
                    "targetHandle": target_handle,
                    "type": "buttonedge",
                    "data": {"label": ""},
                }));
            }
        }
    }
    edges
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minimal_flow_is_dressed_for_the_canvas_and_a_full_one_left_alone() {
        let minimal = json!({"nodes": [
            {"id": "chatOpenAI_0", "data": {"id": "chatOpenAI_0", "name": "chatOpenAI",
                                            "inputs": {"modelName": "gpt-4o"}}},
            {"id": "bufferMemory_0", "data": {"id": "bufferMemory_0", "name": "bufferMemory", "inputs": {}}},
            {"id": "conversationChain_0", "data": {"id": "conversationChain_0", "name": "conversationChain",
                "inputs": {"model": "{{chatOpenAI_0.data.instance}}", "memory": "{{bufferMemory_0.data.instance}}"}}}
        ], "edges": []});
        let dressed: Value = dress(&minimal.to_string())
            .and_then(|d| serde_json::from_str(&d).ok())
            .unwrap_or_default();
        let model = &dressed["nodes"][0];
        assert_eq!(model["type"], "customNode");
        assert_eq!(model["data"]["inputs"]["modelName"], "gpt-4o");
        assert_eq!(model["data"]["inputs"]["temperature"], 0.9);
        let params = model["data"]["inputParams"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(params[0]["id"], "chatOpenAI_0-input-credential-credential");
        let anchor = &model["data"]["outputAnchors"][0];
        assert!(
            anchor["id"]
                .as_str()
                .unwrap_or_default()
                .starts_with("chatOpenAI_0-output-chatOpenAI-ChatOpenAI|")
        );
        assert_ne!(
            dressed["nodes"][0]["position"],
            dressed["nodes"][1]["position"]
        );
        let edges = dressed["edges"].as_array().cloned().unwrap_or_default();
        assert_eq!(edges.len(), 2, "{edges:?}");
        assert!(edges.iter().all(|e| e["target"] == "conversationChain_0"));
        assert_eq!(edges[0]["sourceHandle"], anchor["id"]);

        // Dressed once, it needs nothing more.
        assert_eq!(dress(&dressed.to_string()), None);
        assert_eq!(dress("not json"), None);
    }
}
