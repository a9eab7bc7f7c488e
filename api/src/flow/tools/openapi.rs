//! OpenAPI descriptions as tools (`openAPIToolkit`): each operation of a
//! JSON or YAML description (3.x; local `$ref`s inlined) becomes a tool whose
//! arguments are Flowise's `PathParameters`, `QueryParameters` and
//! `RequestBody`. A call builds the URL and JSON body and goes out through the
//! request tools' guard ([`super::web::WebClient::send`]); a `customCode` of
//! the node's own runs in the Python runtime's sandbox instead.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::web::{HttpCall, WebClient};
use super::{FlowContext, ToolEnv, ToolOutcome};
use crate::flow::component::{OpenApiOperation, PythonDefinition};

/// Methods that become tools (Flowise 2.1's list).
const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];
/// How many `$ref`s deep a schema is inlined (one that refers to itself stops here).
const MAX_REF_DEPTH: usize = 8;
/// Characters of an answer the model reads at most.
const MAX_OUTPUT_CHARS: usize = 20_000;

/// What a node asks of a description: the server (else its first), the
/// operations kept (else all), and the settings every tool shares.
pub struct Toolkit<'a> {
    pub server: Option<&'a str>,
    pub endpoints: &'a [String],
    pub headers: Map<String, Value>,
    pub remove_nulls: bool,
    pub return_direct: bool,
    pub custom_code: Option<String>,
}

/// An operation as the canvas's endpoint picker lists it (`listEndpoints`).
#[derive(Debug, PartialEq)]
pub struct Endpoint {
    /// The tool's name: what `selectedEndpoints` keeps.
    pub name: String,
    /// `GET /pets/{petId}`
    pub label: String,
    pub description: String,
}

/// An OpenAPI 3 description, JSON or YAML.
fn parse(text: &str) -> Result<Value, String> {
    let spec: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(_) => serde_norway::from_str(text)
            .map_err(|e| format!("the OpenAPI description is neither JSON nor YAML: {e}"))?,
    };
    if !spec.get("openapi").is_some_and(Value::is_string) {
        return Err("the description is not OpenAPI 3 (it has no 'openapi' version)".into());
    }
    Ok(spec)
}

/// The description's servers (`listServers`): each URL, its variables at their
/// defaults, with the server's description.
pub fn servers(text: &str) -> Result<Vec<(String, String)>, String> {
    let spec = parse(text)?;
    Ok(spec
        .get("servers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|server| {
            let description = server.get("description").and_then(Value::as_str);
            Some((url_of(server)?, description.unwrap_or_default().to_owned()))
        })
        .collect())
}

/// The description's operations (`listEndpoints`), named as their tools are.
pub fn endpoints(text: &str) -> Result<Vec<Endpoint>, String> {
    let spec = parse(text)?;
    let Some(Value::Object(paths)) = spec.get("paths") else {
        return Err("the OpenAPI description has no paths".into());
    };
    let mut found = Vec::new();
    for (path, item) in paths {
        let item = resolve(&spec, item, 0);
        for method in METHODS {
            let Some(operation) = item.get(method) else {
                continue;
            };
            let text = |key: &str| operation.get(key).and_then(Value::as_str);
            found.push(Endpoint {
                name: tool_name(operation, method, path),
                label: format!("{} {path}", method.to_uppercase()),
                description: text("summary")
                    .or_else(|| text("description"))
                    .unwrap_or_default()
                    .to_owned(),
            });
        }
    }
    Ok(found)
}

/// The description's operations as tools.
pub fn operations(text: &str, kit: Toolkit<'_>) -> Result<Vec<OpenApiOperation>, String> {
    let spec = parse(text)?;
    let base = match kit.server {
        Some(server) => server.to_owned(),
        None => server_url(&spec)?,
    };
    if !(base.starts_with("http://") || base.starts_with("https://")) {
        return Err(format!(
            "the server URL '{base}' is not an absolute http(s) URL; choose one with selectedServer"
        ));
    }
    let Some(Value::Object(paths)) = spec.get("paths") else {
        return Err("the OpenAPI description has no paths".into());
    };
    let custom_code = kit.custom_code.map(|code| {
        Arc::new(PythonDefinition {
            name: "customCode".into(),
            description: String::new(),
            schema: Vec::new(),
            code,
            requirements: Vec::new(),
            javascript: true,
        })
    });
    let mut tools: Vec<OpenApiOperation> = Vec::new();
    for (path, item) in paths {
        let item = resolve(&spec, item, 0);
        let shared = item.get("parameters").cloned().unwrap_or(Value::Null);
        for method in METHODS {
            let Some(operation) = item.get(method) else {
                continue;
            };
            let name = tool_name(operation, method, path);
            if !kit.endpoints.is_empty() && !kit.endpoints.contains(&name) {
                continue;
            }
            if tools.iter().any(|t| t.name == name) {
                return Err(format!("two operations are both named '{name}'"));
            }
            let text = |key: &str| operation.get(key).and_then(Value::as_str);
            let description = text("description")
                .or_else(|| text("summary"))
                .unwrap_or(&name)
                .chars()
                .filter(|c| !c.is_control() || *c == '\n')
                .take(1024)
                .collect();
            tools.push(OpenApiOperation {
                parameters: arguments(&spec, &shared, operation),
                name,
                description,
                method: method.to_uppercase(),
                url: format!("{}{path}", base.trim_end_matches('/')),
                headers: kit.headers.clone(),
                remove_nulls: kit.remove_nulls,
                return_direct: kit.return_direct,
                custom_code: custom_code.clone(),
            });
        }
    }
    if tools.is_empty() {
        return Err(if kit.endpoints.is_empty() {
            "the OpenAPI description has no operations".into()
        } else {
            format!(
                "none of selectedEndpoints ({}) is an operation of the description",
                kit.endpoints.join(", ")
            )
        });
    }
    Ok(tools)
}

/// The first server's URL, its variables at their defaults.
fn server_url(spec: &Value) -> Result<String, String> {
    let server = spec
        .get("servers")
        .and_then(|s| s.get(0))
        .ok_or("the OpenAPI description has no server URL; set selectedServer")?;
    url_of(server).ok_or_else(|| "the OpenAPI description's server has no url".into())
}

/// A server's URL, its variables at their defaults.
fn url_of(server: &Value) -> Option<String> {
    let mut url = server.get("url").and_then(Value::as_str)?.to_owned();
    if let Some(Value::Object(variables)) = server.get("variables") {
        for (name, variable) in variables {
            if let Some(default) = variable.get("default").and_then(Value::as_str) {
                url = url.replace(&format!("{{{name}}}"), default);
            }
        }
    }
    Some(url)
}

/// The `operationId` as a tool name (`[a-zA-Z0-9_-]`, at most 64), else one
/// made of the method and path.
fn tool_name(operation: &Value, method: &str, path: &str) -> String {
    let written = operation
        .get("operationId")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| format!("{method}_{path}"));
    let mut name: String = written
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    while name.contains("__") {
        name = name.replace("__", "_");
    }
    name.trim_matches('_').chars().take(64).collect()
}

/// The JSON schema of an operation's arguments.
fn arguments(spec: &Value, shared: &Value, operation: &Value) -> Value {
    let mut groups: [(&str, Map<String, Value>, Vec<Value>); 2] = [
        ("path", Map::new(), Vec::new()),
        ("query", Map::new(), Vec::new()),
    ];
    let listed = [shared, operation.get("parameters").unwrap_or(&Value::Null)];
    for parameter in listed.iter().filter_map(|l| l.as_array()).flatten() {
        let parameter = resolve(spec, parameter, 0);
        let (Some(name), Some(place)) = (
            parameter.get("name").and_then(Value::as_str),
            parameter.get("in").and_then(Value::as_str),
        ) else {
            continue;
        };
        let Some((_, properties, required)) = groups.iter_mut().find(|(p, _, _)| *p == place)
        else {
            continue;
        };
        let mut schema = match parameter.get("schema") {
            Some(s) => inline(spec, s, 0),
            None => json!({"type": "string"}),
        };
        if let (Value::Object(fields), Some(text)) = (
            &mut schema,
            parameter.get("description").and_then(Value::as_str),
        ) {
            fields.insert("description".into(), Value::from(text));
        }
        // An operation's parameter replaces its path's of the same name.
        properties.insert(name.to_owned(), schema);
        required.retain(|r| r != name);
        if place == "path" || parameter.get("required").and_then(Value::as_bool) == Some(true) {
            required.push(Value::from(name));
        }
    }
    let mut properties = Map::new();
    let mut needed = Vec::new();
    for ((_, fields, required), key) in groups
        .into_iter()
        .zip(["PathParameters", "QueryParameters"])
    {
        if fields.is_empty() {
            continue;
        }
        if !required.is_empty() {
            needed.push(Value::from(key));
        }
        properties.insert(
            key.into(),
            json!({"type": "object", "properties": fields, "required": required}),
        );
    }
    if let Some(body) = operation.get("requestBody") {
        let body = resolve(spec, body, 0);
        let schema = body
            .get("content")
            .and_then(|c| c.get("application/json"))
            .and_then(|c| c.get("schema"))
            .map(|s| inline(spec, s, 0))
            .unwrap_or_else(|| json!({"type": "object"}));
        properties.insert("RequestBody".into(), schema);
        if body.get("required").and_then(Value::as_bool) == Some(true) {
            needed.push(Value::from("RequestBody"));
        }
    }
    if properties.is_empty() {
        properties.insert(
            "input".into(),
            json!({"type": "string", "description": "Query input"}),
        );
    }
    json!({"type": "object", "properties": properties, "required": needed})
}

/// `value`, or what its `$ref` (`#/components/...`) points at.
fn resolve<'s>(spec: &'s Value, value: &'s Value, depth: usize) -> &'s Value {
    match value.get("$ref").and_then(Value::as_str) {
        Some(reference) if depth < MAX_REF_DEPTH => reference
            .strip_prefix("#/")
            .and_then(|pointer| spec.pointer(&format!("/{pointer}")))
            .map_or(value, |found| resolve(spec, found, depth + 1)),
        _ => value,
    }
}

/// A schema with every local `$ref` in it replaced by what it points at;
/// past [`MAX_REF_DEPTH`] references deep, a reference becomes an open object.
fn inline(spec: &Value, schema: &Value, refs: usize) -> Value {
    match schema {
        Value::Object(fields) if fields.contains_key("$ref") => {
            let target = resolve(spec, schema, 0);
            if refs >= MAX_REF_DEPTH || std::ptr::eq(target, schema) {
                json!({"type": "object"})
            } else {
                inline(spec, target, refs + 1)
            }
        }
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(k, v)| (k.clone(), inline(spec, v, refs)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|v| inline(spec, v, refs)).collect()),
        other => other.clone(),
    }
}

/// Drops every key whose value is null, at any depth.
fn without_nulls(value: &Value) -> Value {
    match value {
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

/// A value as URL text (a string as it is).
fn as_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The URL a call goes to: path parameters in their places (percent-encoded),
/// query parameters after `?`.
fn call_url(operation: &OpenApiOperation, arguments: &Value) -> Result<reqwest::Url, String> {
    let mut url = operation.url.clone();
    if let Some(Value::Object(path)) = arguments.get("PathParameters") {
        for (name, value) in path {
            url = url.replace(
                &format!("{{{name}}}"),
                &super::percent_encode(&as_text(value)),
            );
        }
    }
    if url.contains('{') {
        return Err(format!(
            "the call lacks path parameters of {} (PathParameters)",
            operation.url
        ));
    }
    let mut url = reqwest::Url::parse(&url).map_err(|e| format!("bad URL {url}: {e}"))?;
    if let Some(Value::Object(query)) = arguments.get("QueryParameters") {
        let mut pairs = url.query_pairs_mut();
        for (name, value) in query {
            match value {
                Value::Null => {}
                Value::Array(items) => {
                    for item in items {
                        pairs.append_pair(name, &as_text(item));
                    }
                }
                other => {
                    pairs.append_pair(name, &as_text(other));
                }
            }
        }
    }
    Ok(url)
}

/// Calls the operation with the model's arguments.
pub async fn call(
    operation: &OpenApiOperation,
    arguments: &Value,
    web: &WebClient,
    runtime: &super::python::RuntimeClient,
    env: &ToolEnv,
    flow: &FlowContext,
) -> ToolOutcome {
    let arguments = if operation.remove_nulls {
        without_nulls(arguments)
    } else {
        arguments.clone()
    };
    let url = match call_url(operation, &arguments) {
        Ok(url) => url,
        Err(why) => return ToolOutcome::error(why),
    };
    let mut headers: Vec<(String, String)> =
        vec![("Content-Type".into(), "application/json".into())];
    headers.extend(
        operation
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), as_text(v))),
    );
    let body = (operation.method != "GET")
        .then(|| arguments.get("RequestBody").cloned())
        .flatten();
    if let Some(code) = &operation.custom_code {
        let mut options = json!({"method": operation.method, "headers": headers
            .iter()
            .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
            .collect::<Map<String, Value>>()});
        if let Some(body) = &body {
            options["body"] = Value::from(body.to_string());
        }
        // Each becomes the global `$<name>` (an argument the model left out, null).
        let mut globals = Map::new();
        for key in ["PathParameters", "QueryParameters", "RequestBody", "input"] {
            globals.insert(
                key.into(),
                arguments.get(key).cloned().unwrap_or(Value::Null),
            );
        }
        globals.insert("url".into(), Value::from(url.as_str()));
        globals.insert("options".into(), options);
        return runtime.execute(code, globals, None, env, flow).await;
    }
    let method = match reqwest::Method::from_bytes(operation.method.as_bytes()) {
        Ok(m) => m,
        Err(_) => return ToolOutcome::error(format!("bad method {}", operation.method)),
    };
    let call = HttpCall {
        method,
        url,
        headers: headers
            .into_iter()
            .filter(|(k, _)| body.is_some() || !k.eq_ignore_ascii_case("content-type"))
            .collect(),
        body: body.map(|b| ("application/json".to_owned(), b.to_string().into_bytes())),
    };
    match web.send(call).await {
        Ok(reply) => {
            let text: String = String::from_utf8_lossy(&reply.body)
                .chars()
                .take(MAX_OUTPUT_CHARS)
                .collect();
            if (200..300).contains(&reply.status) {
                ToolOutcome::text(text)
            } else {
                ToolOutcome::error(format!(
                    "HTTP {} {}: {text}",
                    reply.status, reply.status_text
                ))
            }
        }
        Err(why) => ToolOutcome::error(why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PETS: &str = r##"
openapi: 3.0.0
info: {title: Pets, version: "1"}
servers:
  - url: "{scheme}://pets.example/v1"
    variables: {scheme: {default: https}}
paths:
  /pets/{petId}:
    parameters:
      - {name: petId, in: path, required: true, schema: {type: string}, description: The pet}
    get:
      operationId: showPetById
      summary: Info for a pet
      parameters:
        - {name: fields, in: query, schema: {type: array, items: {type: string}}}
  /pets:
    post:
      operationId: create pet!
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: "#/components/schemas/Pet"}
components:
  schemas:
    Pet:
      type: object
      required: [name]
      properties:
        name: {type: string}
        friend: {$ref: "#/components/schemas/Pet"}
"##;

    fn kit(endpoints: &[String]) -> Toolkit<'_> {
        Toolkit {
            server: None,
            endpoints,
            headers: Map::new(),
            remove_nulls: false,
            return_direct: false,
            custom_code: None,
        }
    }

    #[test]
    fn operations_become_tools_with_flowises_arguments() {
        let tools = operations(PETS, kit(&[])).unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["create_pet", "showPetById"]);
        let show = &tools[1];
        assert_eq!(show.url, "https://pets.example/v1/pets/{petId}");
        assert_eq!(show.description, "Info for a pet");
        assert_eq!(show.parameters["required"], json!(["PathParameters"]));
        assert_eq!(
            show.parameters["properties"]["PathParameters"]["properties"]["petId"]["description"],
            "The pet"
        );
        let create = &tools[0];
        assert_eq!(create.method, "POST");
        let body = &create.parameters["properties"]["RequestBody"];
        assert_eq!(body["required"], json!(["name"]));
        // A schema that refers to itself is cut off, not followed forever.
        assert!(body["properties"]["friend"]["properties"]["name"].is_object());
        assert_eq!(create.parameters["required"], json!(["RequestBody"]));
        let only = ["showPetById".to_owned()];
        assert_eq!(operations(PETS, kit(&only)).unwrap().len(), 1);
        assert!(operations(PETS, kit(&["nope".to_owned()])).is_err());
        assert!(operations("{\"swagger\": \"2.0\"}", kit(&[])).is_err());
    }

    #[test]
    fn the_canvas_lists_servers_and_endpoints_by_their_tool_names() {
        let listed = endpoints(PETS).unwrap();
        let tools = operations(PETS, kit(&[])).unwrap();
        let mut names: Vec<&str> = listed.iter().map(|e| e.name.as_str()).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>()
        );
        let show = listed.iter().find(|e| e.name == "showPetById").unwrap();
        assert_eq!(show.label, "GET /pets/{petId}");
        assert_eq!(
            servers(PETS).unwrap(),
            [("https://pets.example/v1".to_owned(), String::new())]
        );
        assert!(servers("{\"swagger\": \"2.0\"}").is_err());
    }

    #[test]
    fn calls_fill_the_path_and_the_query() {
        let tools = operations(PETS, kit(&[])).unwrap();
        let url = call_url(
            &tools[1],
            &json!({"PathParameters": {"petId": "a b/c"}, "QueryParameters": {"fields": ["x", "y"]}}),
        )
        .unwrap();
        assert_eq!(
            url.as_str(),
            "https://pets.example/v1/pets/a%20b%2Fc?fields=x&fields=y"
        );
        assert!(call_url(&tools[1], &json!({})).is_err());
        assert_eq!(
            without_nulls(&json!({"a": null, "b": {"c": null, "d": 1}})),
            json!({"b": {"d": 1}})
        );
    }
}
