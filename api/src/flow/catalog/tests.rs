//! The catalog and the registry cannot drift: every node is described, every
//! advertised input is one the engine takes, and anchors wire exactly where the
//! engine accepts the connection.

use super::*;
use crate::config::ProviderSettings;
use crate::flow::plan::Plan;

fn definitions() -> &'static [Value] {
    Catalog::get().definitions()
}

fn str_of<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

fn types_of(input: &Value) -> Vec<&str> {
    str_of(input, "type").split('|').map(str::trim).collect()
}

fn base_classes(definition: &Value) -> Vec<&str> {
    definition
        .get("baseClasses")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

#[test]
fn both_data_files_parse_and_name_only_registered_nodes() {
    let flowise: FlowiseCatalog =
        serde_json::from_str(FLOWISE_NODES).unwrap_or_else(|e| panic!("flowise-nodes.json: {e}"));
    let weir: HashMap<String, WeirNode> =
        serde_json::from_str(WEIR_NODES).unwrap_or_else(|e| panic!("weir-nodes.json: {e}"));
    for name in flowise.nodes.keys().chain(weir.keys()) {
        assert!(
            registry::spec(name).is_some(),
            "{name} is described but not registered"
        );
    }
    let names: Vec<&str> = include_str!("names.txt").lines().collect();
    let mut registered: Vec<&str> = registry::specs().map(|s| s.name).collect();
    registered.sort_unstable();
    assert_eq!(
        names, registered,
        "names.txt (gen-node-catalog's list) is stale"
    );
}

#[test]
fn every_registered_node_is_described_in_weirs_words() {
    let weir: HashMap<String, WeirNode> = serde_json::from_str(WEIR_NODES).unwrap_or_default();
    for spec in registry::specs().filter(|s| s.category != Category::Unsupported) {
        let ours = weir.get(spec.name).unwrap_or_else(|| {
            panic!(
                "{} has no label and description in weir-nodes.json",
                spec.name
            )
        });
        assert!(
            !ours.label.trim().is_empty() && ours.description.len() > 20,
            "{}",
            spec.name
        );
        let definition = Catalog::get()
            .definition(spec.name)
            .unwrap_or_else(|| panic!("{} has no definition", spec.name));
        for key in ["label", "name", "type", "category", "description"] {
            assert!(
                !str_of(definition, key).is_empty(),
                "{}: no {key}",
                spec.name
            );
        }
        assert!(
            definition["version"].as_f64().is_some_and(|v| v >= 1.0),
            "{}",
            spec.name
        );
        assert!(!base_classes(definition).is_empty(), "{}", spec.name);
    }
}

#[test]
fn every_advertised_input_is_one_the_engine_takes() {
    for definition in definitions() {
        let name = str_of(definition, "name");
        let spec = registry::spec(name).unwrap_or_else(|| panic!("{name} is not registered"));
        let inputs = definition["inputs"].as_array().cloned().unwrap_or_default();
        for input in &inputs {
            let input_name = str_of(input, "name");
            let declared = spec.input(input_name).unwrap_or_else(|| {
                panic!("{name} advertises '{input_name}', which it does not declare")
            });
            assert_ne!(
                declared.kind,
                InputKind::Ignored,
                "{name}.{input_name} has no effect"
            );
            assert!(
                !str_of(input, "label").is_empty(),
                "{name}.{input_name}: no label"
            );
            assert_eq!(
                input["optional"],
                json!(!declared.required),
                "{name}.{input_name}"
            );
            let kind = str_of(input, "type");
            match declared.kind {
                InputKind::Anchor(_) | InputKind::Anchors(_) => {
                    assert!(
                        !is_param_type(kind),
                        "{name}.{input_name} is an anchor typed '{kind}'"
                    )
                }
                other => assert!(
                    is_param_type(kind) && fits_kind(other, kind),
                    "{name}.{input_name}: '{kind}' does not give a {other:?}"
                ),
            }
        }
        // Every input the engine acts on is offered.
        for declared in spec.inputs.iter().filter(|i| i.kind != InputKind::Ignored) {
            if is_credential_input(declared.name) {
                continue;
            }
            assert!(
                inputs.iter().any(|i| str_of(i, "name") == declared.name),
                "{name} does not advertise '{}'",
                declared.name
            );
        }
    }
}

#[test]
fn anchors_wire_exactly_where_the_engine_takes_the_connection() {
    for definition in definitions() {
        let name = str_of(definition, "name");
        let Some(spec) = registry::spec(name) else {
            continue;
        };
        for input in definition["inputs"].as_array().into_iter().flatten() {
            let Some(category) = spec.input(str_of(input, "name")).and_then(anchor_category) else {
                continue;
            };
            let accepted = types_of(input);
            let mut providers = 0;
            for other in definitions() {
                let other_spec = registry::spec(str_of(other, "name"));
                // Agentflow nodes are not on a chatflow's canvas.
                let Some(other_spec) = other_spec.filter(|s| !s.category.is_agentflow()) else {
                    continue;
                };
                let wires = base_classes(other).iter().any(|b| accepted.contains(b));
                if wires {
                    providers += 1;
                    assert!(
                        other_spec.category.fits(category),
                        "{} would wire into {name}.{} but the engine refuses a {:?} there",
                        other_spec.name,
                        str_of(input, "name"),
                        other_spec.category
                    );
                } else if other_spec.category.fits(category) && category != Category::Unsupported {
                    panic!(
                        "{} is a {:?} but cannot wire into {name}.{} (types {accepted:?})",
                        other_spec.name,
                        other_spec.category,
                        str_of(input, "name")
                    );
                }
            }
            assert!(
                providers > 0 || category == Category::Unsupported,
                "{name}: nothing wires in"
            );
        }
    }
}

/// A sample value of an input as the canvas would save it.
fn sample(input: &Value) -> Value {
    if let Some(default) = input.get("default").filter(|d| !d.is_null()) {
        return default.clone();
    }
    if let Some(first) = input["options"].as_array().and_then(|o| o.first()) {
        return first["name"].clone();
    }
    match str_of(input, "type") {
        "number" => json!(1),
        "boolean" => json!(true),
        "json" | "array" | "datagrid" => json!("[]"),
        _ => json!("sample"),
    }
}

#[test]
fn a_chatflow_drawn_from_the_definitions_validates() {
    let settings = ProviderSettings::default();
    for definition in definitions() {
        let name = str_of(definition, "name");
        let Some(spec) = registry::spec(name) else {
            continue;
        };
        if spec.category.is_agentflow() {
            continue;
        }
        let mut inputs = Map::new();
        let mut nodes = vec![];
        for input in definition["inputs"].as_array().into_iter().flatten() {
            let input_name = str_of(input, "name");
            if spec.input(input_name).and_then(anchor_category).is_some() {
                let accepted = types_of(input);
                let provider = definitions()
                    .iter()
                    .find(|d| base_classes(d).iter().any(|b| accepted.contains(b)));
                if let Some(provider) = provider {
                    let id = format!("{}_{}", str_of(provider, "name"), nodes.len() + 1);
                    let reference = format!("{{{{{id}.data.instance}}}}");
                    let value = if input["list"] == json!(true) {
                        json!([reference])
                    } else {
                        json!(reference)
                    };
                    inputs.insert(input_name.to_owned(), value);
                    nodes.push(json!({"id": id, "data": {"id": id, "name": str_of(provider, "name"), "inputs": {}}}));
                }
            } else {
                inputs.insert(input_name.to_owned(), sample(input));
            }
        }
        let id = format!("{name}_0");
        nodes.push(json!({"id": id, "data": {"id": id, "name": name, "inputs": inputs}}));
        let flow = json!({"nodes": nodes, "edges": []}).to_string();
        if let Err(e) = Plan::build(&flow, &settings) {
            let message = e.to_string();
            for refusal in ["does not know", "expects a", "is connected to"] {
                assert!(!message.contains(refusal), "{name}: {message}");
            }
        }
    }
}

#[test]
fn labels_and_types_are_readable() {
    assert_eq!(humanize("maxTokens"), "Max Tokens");
    assert_eq!(humanize("topK"), "Top K");
    assert_eq!(humanize("memory_key"), "Memory key");
    assert_eq!(pascal("chatOpenAI"), "ChatOpenAI");
    let openai = Catalog::get()
        .definition("chatOpenAI")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        openai["credential"]["credentialNames"],
        json!(["openAIApi"])
    );
    assert!(base_classes(&openai).contains(&"BaseChatModel"));
    assert!(base_classes(&openai).contains(&"BaseLanguageModel"));
    assert_eq!(
        Catalog::get().icon("chatOpenAI"),
        Some("dist/nodes/chatmodels/ChatOpenAI/openai.svg")
    );
}
