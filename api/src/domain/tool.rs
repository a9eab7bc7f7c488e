//! Python tools of a workspace: `{id, name, description, schema, code, requirements}`.
//!
//! A tool is Python code a model may call by `name`. Its `schema` lists the
//! arguments ([`ToolField`]s), each reaching the code as the template parameter
//! `{{$property}}`; `requirements` are the packages the runtime installs for it
//! (PEP 508 specifiers without URLs or options). This module owns the rules a
//! definition must follow — [`validate_tool_name`], [`parse_schema`] (which also
//! reads Flowise's schema-as-JSON-text) and [`validate_requirement`] — and the
//! two faces of the schema at call time: [`parameters_schema`], the JSON Schema a
//! model is given, and [`check_arguments`], which checks what the model sent
//! back. Names are unique within a workspace; storing and running tools is left
//! to the store and the Python runtime.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use utoipa::ToSchema;
use uuid::Uuid;

use super::time::{self, Timestamp};

/// The type of one tool argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum FieldType {
    String,
    Number,
    Boolean,
    /// A string out of the field's `enum` list.
    Enum,
    /// A list whose elements have the field's `items` type.
    Array,
}

impl FieldType {
    const ALL: [FieldType; 5] = [
        FieldType::String,
        FieldType::Number,
        FieldType::Boolean,
        FieldType::Enum,
        FieldType::Array,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FieldType::String => "string",
            FieldType::Number => "number",
            FieldType::Boolean => "boolean",
            FieldType::Enum => "enum",
            FieldType::Array => "array",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == text)
    }

    /// Whether an array may hold elements of this type.
    fn is_scalar(self) -> bool {
        matches!(
            self,
            FieldType::String | FieldType::Number | FieldType::Boolean
        )
    }
}

/// One argument of a tool, as Flowise's custom-tool schema writes it (other keys
/// Flowise adds, such as `id`, are ignored).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ToolField {
    /// The argument's name; the code reads it as `{{$property}}`.
    pub property: String,
    #[serde(rename = "type")]
    pub field_type: FieldType,
    /// What the model is told the argument means.
    #[serde(default)]
    pub description: String,
    /// Whether a call must give the argument (Flowise's default: no).
    #[serde(default)]
    pub required: bool,
    /// The allowed values of an `enum` field (only there, never empty).
    #[serde(rename = "enum", default, skip_serializing_if = "Option::is_none")]
    pub enum_values: Option<Vec<String>>,
    /// The element type of an `array` field (only there): string, number or boolean.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<FieldType>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    pub id: Uuid,
    pub name: String,
    pub description: String,
    pub schema: Vec<ToolField>,
    pub code: String,
    pub requirements: Vec<String>,
    #[serde(serialize_with = "time::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub created_date: Timestamp,
    #[serde(serialize_with = "time::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub updated_date: Timestamp,
}

/// A validated definition, before the store gives it an id and times.
#[derive(Debug, Clone)]
pub struct NewTool {
    pub name: String,
    pub description: String,
    pub schema: Vec<ToolField>,
    pub code: String,
    pub requirements: Vec<String>,
}

/// The fields an update changes (`None`: kept), each already validated.
#[derive(Debug, Clone, Default)]
pub struct ToolPatch {
    pub name: Option<String>,
    pub description: Option<String>,
    pub schema: Option<Vec<ToolField>>,
    pub code: Option<String>,
    pub requirements: Option<Vec<String>>,
}

impl ToolPatch {
    pub fn apply(self, tool: &mut Tool, now: Timestamp) {
        if let Some(name) = self.name {
            tool.name = name;
        }
        if let Some(description) = self.description {
            tool.description = description;
        }
        if let Some(schema) = self.schema {
            tool.schema = schema;
        }
        if let Some(code) = self.code {
            tool.code = code;
        }
        if let Some(requirements) = self.requirements {
            tool.requirements = requirements;
        }
        tool.updated_date = now;
    }
}

/// The conflict message when a tool name is taken in the workspace.
pub fn name_taken(name: &str) -> String {
    format!("a tool named '{name}' already exists")
}

/// Longest tool name: what OpenAI and Anthropic accept for a function name.
pub const MAX_TOOL_NAME_LEN: usize = 64;

/// Longest argument name.
pub const MAX_PROPERTY_LEN: usize = 64;

/// Longest requirement specifier.
pub const MAX_REQUIREMENT_LEN: usize = 200;

/// A tool name is what a model calls: 1 to 64 of `A-Z a-z 0-9 _ -`.
pub fn validate_tool_name(name: &str) -> Result<(), String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if name.is_empty() || name.len() > MAX_TOOL_NAME_LEN || !name.chars().all(allowed) {
        return Err(format!(
            "tool name '{name}' is invalid: use 1 to {MAX_TOOL_NAME_LEN} letters, digits, '_' or '-' \
             (no spaces)"
        ));
    }
    Ok(())
}

/// An argument name becomes the template parameter `{{$property}}`: an
/// identifier of at most 64 characters.
fn is_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && text.len() <= MAX_PROPERTY_LEN
}

/// Reads a tool schema: a JSON array of fields, a string holding the JSON text
/// of one (how Flowise stores custom tool schemas), or `null`/`""` for none.
/// Arrays get their element type (`string` unless given); unknown keys are
/// dropped. The error names the field and what is wrong with it.
pub fn parse_schema(value: &Value) -> Result<Vec<ToolField>, String> {
    let parsed;
    let items = match value {
        Value::Null => return Ok(Vec::new()),
        Value::String(text) if text.trim().is_empty() => return Ok(Vec::new()),
        Value::String(text) => {
            parsed = serde_json::from_str::<Value>(text)
                .map_err(|e| format!("schema is not valid JSON text: {e}"))?;
            match &parsed {
                Value::Array(items) => items,
                _ => return Err("schema must be an array of fields".into()),
            }
        }
        Value::Array(items) => items,
        _ => return Err("schema must be an array of fields (or its JSON text)".into()),
    };
    let mut seen = HashSet::new();
    let mut fields = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let field = parse_field(index, item)?;
        if !seen.insert(field.property.clone()) {
            return Err(format!(
                "schema[{index}]: duplicate property '{}'",
                field.property
            ));
        }
        fields.push(field);
    }
    Ok(fields)
}

/// Names the runtime gives its own variable groups (`$vars`, `$flow`, `$form`):
/// an argument of that name would be overwritten.
const RESERVED_PROPERTIES: &[&str] = &["vars", "flow", "form"];

/// One field of [`parse_schema`]; `index` is its position, for messages.
fn parse_field(index: usize, item: &Value) -> Result<ToolField, String> {
    let Value::Object(object) = item else {
        return Err(format!("schema[{index}] must be an object"));
    };
    let property = match object.get("property") {
        Some(Value::String(p)) if is_identifier(p) => p.clone(),
        Some(Value::String(p)) if p.is_empty() => {
            return Err(format!("schema[{index}]: property must not be empty"));
        }
        Some(Value::String(p)) => {
            return Err(format!(
                "schema[{index}]: property '{p}' is invalid: use a letter or '_' then letters, \
                 digits or '_', at most {MAX_PROPERTY_LEN} in all"
            ));
        }
        None | Some(Value::Null) => return Err(format!("schema[{index}]: property is missing")),
        Some(_) => return Err(format!("schema[{index}]: property must be a string")),
    };
    let at = format!("schema[{index}] ('{property}')");
    if RESERVED_PROPERTIES.contains(&property.as_str()) {
        return Err(format!(
            "{at}: '{property}' is reserved for the runtime's own variables ($vars, $flow, $form); \
             choose another name"
        ));
    }
    let field_type = match object.get("type") {
        Some(Value::String(t)) => FieldType::parse(t).ok_or_else(|| {
            format!("{at}: unknown type '{t}' (allowed: string, number, boolean, enum, array)")
        })?,
        None | Some(Value::Null) => return Err(format!("{at}: type is missing")),
        Some(_) => return Err(format!("{at}: type must be a string")),
    };
    let description = match object.get("description") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(d)) => d.clone(),
        Some(_) => return Err(format!("{at}: description must be a string")),
    };
    let required = match object.get("required") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(r)) => *r,
        Some(_) => return Err(format!("{at}: required must be true or false")),
    };
    let enum_values = match object.get("enum") {
        None | Some(Value::Null) => None,
        Some(Value::Array(values)) => Some(
            values
                .iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| format!("{at}: enum values must be strings"))?,
        ),
        Some(_) => return Err(format!("{at}: enum must be a list of strings")),
    };
    let items = match object.get("items") {
        None | Some(Value::Null) => None,
        Some(Value::String(t)) => Some(
            FieldType::parse(t)
                .filter(|t| t.is_scalar())
                .ok_or_else(|| {
                    format!("{at}: items must be string, number or boolean, not '{t}'")
                })?,
        ),
        Some(_) => return Err(format!("{at}: items must be a type name")),
    };
    let enum_values = match (field_type, enum_values) {
        (FieldType::Enum, None) => return Err(format!("{at}: type enum needs a list of values")),
        (FieldType::Enum, Some(values)) if values.is_empty() => {
            return Err(format!("{at}: type enum needs at least one value"));
        }
        (FieldType::Enum, Some(values)) => {
            let mut distinct = HashSet::new();
            if let Some(repeated) = values.iter().find(|v| !distinct.insert(v.as_str())) {
                return Err(format!("{at}: enum value '{repeated}' is listed twice"));
            }
            Some(values)
        }
        (_, Some(_)) => {
            return Err(format!(
                "{at}: enum values are only allowed on type enum, not {}",
                field_type.as_str()
            ));
        }
        (_, None) => None,
    };
    let items = match (field_type, items) {
        (FieldType::Array, items) => Some(items.unwrap_or(FieldType::String)),
        (_, Some(_)) => {
            return Err(format!(
                "{at}: items is only allowed on type array, not {}",
                field_type.as_str()
            ));
        }
        (_, None) => None,
    };
    Ok(ToolField {
        property,
        field_type,
        description,
        required,
        enum_values,
        items,
    })
}

/// Version comparison operators of PEP 440, longest first so that a prefix
/// (`==` of `===`) never wins.
const VERSION_OPERATORS: [&str; 8] = ["===", "==", "!=", "<=", ">=", "~=", "<", ">"];

/// A requirement is a PEP 508 package specifier without URLs, markers or pip
/// options: `name`, optional `[extra,…]`, optional `op version` clauses
/// separated by commas (`requests[socks]>=2.31,<3`). Spaces may separate those
/// parts; nothing else may.
pub fn validate_requirement(spec: &str) -> Result<(), String> {
    let invalid = |why: &str| Err(format!("requirement '{spec}' is invalid: {why}"));
    if spec.len() > MAX_REQUIREMENT_LEN {
        return Err(format!(
            "requirement '{}…' is invalid: at most {MAX_REQUIREMENT_LEN} characters",
            spec.chars().take(40).collect::<String>()
        ));
    }
    if spec.starts_with('-') {
        return invalid("pip options are not allowed");
    }
    if spec.contains("://") || spec.contains('@') {
        return invalid("URLs and direct references are not allowed");
    }
    if spec.contains(';') {
        return invalid("environment markers are not allowed");
    }
    if spec
        .chars()
        .any(|c| c.is_control() || (c.is_whitespace() && c != ' '))
    {
        return invalid("only plain spaces may separate its parts");
    }
    if spec.is_empty() {
        return invalid("it is empty");
    }
    if spec.trim() != spec {
        return invalid("it must not start or end with a space");
    }
    let mut rest = spec;
    let Some(name) = take_package_name(&mut rest) else {
        return invalid("expected a package name of letters, digits, '.', '_' or '-'");
    };
    rest = rest.trim_start();
    if let Some(after) = rest.strip_prefix('[') {
        let Some((extras, after)) = after.split_once(']') else {
            return invalid("extras are not closed with ']'");
        };
        for extra in extras.split(',').map(str::trim) {
            let mut extra_rest = extra;
            if take_package_name(&mut extra_rest).is_none() || !extra_rest.is_empty() {
                return invalid(&format!("extra '{extra}' is not a name"));
            }
        }
        rest = after.trim_start();
    }
    if rest.is_empty() {
        return Ok(());
    }
    for clause in rest.split(',').map(str::trim) {
        let Some(operator) = VERSION_OPERATORS
            .into_iter()
            .find(|op| clause.starts_with(op))
        else {
            return invalid(&format!(
                "'{clause}' after '{name}' is not a version clause (==, !=, <=, >=, <, >, ~=, ===)"
            ));
        };
        let version = clause[operator.len()..].trim_start();
        let version_char = |c: char| c.is_ascii_alphanumeric() || ".*+!_-".contains(c);
        if version.is_empty() || !version.chars().all(version_char) {
            return invalid(&format!("'{clause}' has no valid version"));
        }
    }
    Ok(())
}

/// Takes a package name (`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`) off the
/// front of `rest`.
fn take_package_name<'a>(rest: &mut &'a str) -> Option<&'a str> {
    let text: &'a str = rest;
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || ".-_".contains(c)))
        .unwrap_or(text.len());
    let name = &text[..end];
    let alnum_ends = name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if !alnum_ends {
        return None;
    }
    *rest = &text[end..];
    Some(name)
}

/// The JSON Schema of a tool's arguments, as a model's tool definition needs it.
pub fn parameters_schema(fields: &[ToolField]) -> Value {
    let mut properties = Map::new();
    for field in fields {
        let mut property = Map::new();
        let json_type = match field.field_type {
            FieldType::Enum => FieldType::String,
            other => other,
        };
        property.insert("type".into(), json_type.as_str().into());
        property.insert("description".into(), field.description.clone().into());
        if let Some(values) = &field.enum_values {
            property.insert("enum".into(), values.clone().into());
        }
        if let Some(items) = field.items {
            property.insert("items".into(), json!({ "type": items.as_str() }));
        }
        properties.insert(field.property.clone(), Value::Object(property));
    }
    let required: Vec<&str> = fields
        .iter()
        .filter(|f| f.required)
        .map(|f| f.property.as_str())
        .collect();
    json!({ "type": "object", "properties": properties, "required": required })
}

/// Checks the arguments a model sent for a call against the tool's fields:
/// an object (`null` counts as `{}`) holding every required field with a value
/// of its type; numbers and booleans sent as text (`"3"`, `"true"`) are
/// converted; enum values must be listed. Unknown keys and `null` values of
/// optional fields are dropped. The error names the argument: it goes back to
/// the model.
pub fn check_arguments(fields: &[ToolField], args: &Value) -> Result<Map<String, Value>, String> {
    let empty = Map::new();
    let given = match args {
        Value::Object(object) => object,
        Value::Null => &empty,
        _ => return Err("the arguments must be a JSON object".into()),
    };
    let mut checked = Map::new();
    for field in fields {
        let name = &field.property;
        let value = match given.get(name) {
            None | Some(Value::Null) if field.required => {
                return Err(format!("missing required argument '{name}'"));
            }
            None | Some(Value::Null) => continue,
            Some(value) => value,
        };
        let value = match field.field_type {
            FieldType::Enum => {
                let allowed = field.enum_values.as_deref().unwrap_or_default();
                match value.as_str() {
                    Some(text) if allowed.iter().any(|a| a == text) => value.clone(),
                    _ => {
                        return Err(format!(
                            "argument '{name}' must be one of: {}",
                            allowed.join(", ")
                        ));
                    }
                }
            }
            FieldType::Array => {
                let element_type = field.items.unwrap_or(FieldType::String);
                let Value::Array(elements) = value else {
                    return Err(format!(
                        "argument '{name}' must be an array of {}s",
                        element_type.as_str()
                    ));
                };
                let converted = elements
                    .iter()
                    .enumerate()
                    .map(|(i, element)| {
                        coerce_scalar(element_type, element).ok_or_else(|| {
                            format!("argument '{name}'[{i}] must be a {}", element_type.as_str())
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Value::Array(converted)
            }
            scalar => coerce_scalar(scalar, value)
                .ok_or_else(|| format!("argument '{name}' must be a {}", scalar.as_str()))?,
        };
        checked.insert(name.clone(), value);
    }
    Ok(checked)
}

/// `value` as a `string`, `number` or `boolean`, converting text that spells a
/// number or `true`/`false`; `None` when it is not one.
fn coerce_scalar(field_type: FieldType, value: &Value) -> Option<Value> {
    match (field_type, value) {
        (FieldType::String, Value::String(_))
        | (FieldType::Number, Value::Number(_))
        | (FieldType::Boolean, Value::Bool(_)) => Some(value.clone()),
        (FieldType::Number, Value::String(text)) => parse_number(text.trim()),
        (FieldType::Boolean, Value::String(text)) => match text.trim() {
            "true" => Some(Value::Bool(true)),
            "false" => Some(Value::Bool(false)),
            _ => None,
        },
        _ => None,
    }
}

/// A JSON number from its text: an integer when it is one, else a finite float.
fn parse_number(text: &str) -> Option<Value> {
    if let Ok(integer) = text.parse::<i64>() {
        return Some(integer.into());
    }
    let float = text.parse::<f64>().ok().filter(|f| f.is_finite())?;
    serde_json::Number::from_f64(float).map(Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(property: &str, field_type: FieldType, required: bool) -> ToolField {
        ToolField {
            property: property.into(),
            field_type,
            description: String::new(),
            required,
            enum_values: None,
            items: None,
        }
    }

    #[test]
    fn tool_names_are_call_names() {
        for good in ["get_weather", "a", "Tool-2", &"x".repeat(64)] {
            assert!(validate_tool_name(good).is_ok(), "{good}");
        }
        for bad in ["", "my tool", "wetter.de", "é", &"x".repeat(65)] {
            let message = validate_tool_name(bad).unwrap_err();
            assert!(message.contains("letters, digits"), "{message}");
        }
    }

    #[test]
    fn schema_is_read_from_an_array_or_its_text() {
        let flowise = json!([
            {"id": 0, "property": "city", "type": "string", "description": "City name", "required": true},
            {"id": 1, "property": "days", "type": "number", "description": "How many"}
        ]);
        let fields = parse_schema(&flowise).unwrap();
        assert_eq!(fields.len(), 2);
        assert_eq!(
            (fields[0].property.as_str(), fields[0].required),
            ("city", true)
        );
        assert_eq!(
            (fields[1].field_type, fields[1].required, fields[1].items),
            (FieldType::Number, false, None)
        );
        let as_text = Value::String(flowise.to_string());
        assert_eq!(parse_schema(&as_text).unwrap(), fields);
        assert_eq!(parse_schema(&Value::Null).unwrap(), vec![]);
        let reserved = json!([{"property": "vars", "type": "string"}]);
        assert!(parse_schema(&reserved).unwrap_err().contains("reserved"));
        assert_eq!(parse_schema(&json!("")).unwrap(), vec![]);
        assert_eq!(parse_schema(&json!("[]")).unwrap(), vec![]);
    }

    #[test]
    fn schema_fields_serialize_with_flowise_keys() {
        let fields = parse_schema(&json!([
            {"property": "unit", "type": "enum", "enum": ["C", "F"]},
            {"property": "tags", "type": "array"},
            {"property": "q", "type": "string"}
        ]))
        .unwrap();
        assert_eq!(fields[1].items, Some(FieldType::String));
        assert_eq!(
            serde_json::to_value(&fields).unwrap(),
            json!([
                {"property": "unit", "type": "enum", "description": "", "required": false, "enum": ["C", "F"]},
                {"property": "tags", "type": "array", "description": "", "required": false, "items": "string"},
                {"property": "q", "type": "string", "description": "", "required": false}
            ])
        );
        let round_trip: Vec<ToolField> =
            serde_json::from_value(serde_json::to_value(&fields).unwrap()).unwrap();
        assert_eq!(round_trip, fields);
    }

    #[test]
    fn schema_errors_name_the_field_and_the_problem() {
        let cases = [
            (json!({"property": "a"}), "array"),
            (json!("{not json"), "JSON"),
            (json!([1]), "schema[0] must be an object"),
            (
                json!([{"type": "string"}]),
                "schema[0]: property is missing",
            ),
            (
                json!([{"property": "", "type": "string"}]),
                "must not be empty",
            ),
            (
                json!([{"property": "my city", "type": "string"}]),
                "'my city' is invalid",
            ),
            (
                json!([{"property": "2x", "type": "string"}]),
                "'2x' is invalid",
            ),
            (
                json!([{"property": "d", "type": "date"}]),
                "schema[0] ('d'): unknown type 'date'",
            ),
            (json!([{"property": "d"}]), "type is missing"),
            (
                json!([{"property": "a", "type": "string"}, {"property": "a", "type": "number"}]),
                "schema[1]: duplicate property 'a'",
            ),
            (
                json!([{"property": "u", "type": "enum"}]),
                "enum needs a list of values",
            ),
            (
                json!([{"property": "u", "type": "enum", "enum": []}]),
                "at least one value",
            ),
            (
                json!([{"property": "u", "type": "enum", "enum": ["a", "a"]}]),
                "listed twice",
            ),
            (
                json!([{"property": "u", "type": "string", "enum": ["a"]}]),
                "only allowed on type enum",
            ),
            (
                json!([{"property": "u", "type": "enum", "enum": [1]}]),
                "must be strings",
            ),
            (
                json!([{"property": "l", "type": "array", "items": "enum"}]),
                "items must be string, number or boolean",
            ),
            (
                json!([{"property": "l", "type": "number", "items": "number"}]),
                "only allowed on type array",
            ),
            (
                json!([{"property": "r", "type": "string", "required": "yes"}]),
                "required must be true or false",
            ),
        ];
        for (schema, expected) in cases {
            let message = parse_schema(&schema).unwrap_err();
            assert!(message.contains(expected), "{schema}: {message}");
        }
    }

    #[test]
    fn requirements_are_plain_package_specifiers() {
        for good in [
            "requests",
            "requests==2.31.0",
            "requests[socks,security]>=2.31,<3",
            "numpy >= 1.26, != 1.26.1",
            "zope.interface~=6.0",
            "pkg===1.0+local",
            "Django==5.*",
            "a",
        ] {
            assert!(validate_requirement(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "-e git+https://x",
            "--index-url http://evil",
            "pkg @ http://x",
            "pkg@file:///tmp/x",
            "pkg; python_version < '3.8'",
            "my pkg",
            "pkg\n--extra-index-url x",
            " pkg",
            "pkg-",
            "pkg[",
            "pkg[a b]",
            "pkg=1",
            "pkg>=",
            "pkg>=1 2",
            "pkg>=1,",
            "https://example.com/pkg.whl",
        ] {
            let message = validate_requirement(bad).unwrap_err();
            assert!(message.contains("requirement '"), "{bad}: {message}");
        }
        let long = format!("pkg=={}", "1".repeat(200));
        assert!(
            validate_requirement(&long)
                .unwrap_err()
                .contains("at most 200")
        );
    }

    #[test]
    fn parameters_schema_is_json_schema() {
        let mut unit = field("unit", FieldType::Enum, false);
        unit.enum_values = Some(vec!["C".into(), "F".into()]);
        unit.description = "Unit".into();
        let mut days = field("days", FieldType::Array, false);
        days.items = Some(FieldType::Number);
        let fields = [field("city", FieldType::String, true), unit, days];
        assert_eq!(
            parameters_schema(&fields),
            json!({
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": ""},
                    "unit": {"type": "string", "description": "Unit", "enum": ["C", "F"]},
                    "days": {"type": "array", "description": "", "items": {"type": "number"}}
                },
                "required": ["city"]
            })
        );
        assert_eq!(
            parameters_schema(&[]),
            json!({"type": "object", "properties": {}, "required": []})
        );
    }

    #[test]
    fn arguments_are_checked_and_converted() {
        let mut unit = field("unit", FieldType::Enum, false);
        unit.enum_values = Some(vec!["C".into(), "F".into()]);
        let mut days = field("days", FieldType::Array, false);
        days.items = Some(FieldType::Number);
        let fields = [
            field("city", FieldType::String, true),
            field("count", FieldType::Number, false),
            field("exact", FieldType::Boolean, false),
            unit,
            days,
        ];
        let checked = check_arguments(
            &fields,
            &json!({
                "city": "Paris", "count": "3", "exact": "true", "unit": "C",
                "days": [1, "2.5"], "extra": "dropped"
            }),
        )
        .unwrap();
        assert_eq!(
            Value::Object(checked),
            json!({"city": "Paris", "count": 3, "exact": true, "unit": "C", "days": [1, 2.5]})
        );
        let only_required =
            check_arguments(&fields, &json!({"city": "Oslo", "count": null})).unwrap();
        assert_eq!(Value::Object(only_required), json!({"city": "Oslo"}));
        assert!(check_arguments(&[], &Value::Null).unwrap().is_empty());
    }

    #[test]
    fn argument_errors_name_the_argument() {
        let mut unit = field("unit", FieldType::Enum, false);
        unit.enum_values = Some(vec!["C".into(), "F".into()]);
        let mut days = field("days", FieldType::Array, false);
        days.items = Some(FieldType::Number);
        let fields = [
            field("city", FieldType::String, true),
            field("count", FieldType::Number, false),
            field("exact", FieldType::Boolean, false),
            unit,
            days,
        ];
        let cases = [
            (json!("Paris"), "must be a JSON object"),
            (json!({}), "missing required argument 'city'"),
            (json!({"city": null}), "missing required argument 'city'"),
            (json!({"city": 5}), "argument 'city' must be a string"),
            (
                json!({"city": "x", "count": "three"}),
                "argument 'count' must be a number",
            ),
            (
                json!({"city": "x", "count": "NaN"}),
                "argument 'count' must be a number",
            ),
            (
                json!({"city": "x", "exact": "yes"}),
                "argument 'exact' must be a boolean",
            ),
            (
                json!({"city": "x", "unit": "K"}),
                "argument 'unit' must be one of: C, F",
            ),
            (
                json!({"city": "x", "days": 3}),
                "argument 'days' must be an array",
            ),
            (
                json!({"city": "x", "days": [1, "x"]}),
                "argument 'days'[1] must be a number",
            ),
        ];
        for (args, expected) in cases {
            let message = check_arguments(&fields, &args).unwrap_err();
            assert!(message.contains(expected), "{args}: {message}");
        }
    }

    #[test]
    fn patch_changes_only_given_fields() {
        let created = time::now();
        let mut tool = Tool {
            id: Uuid::new_v4(),
            name: "t".into(),
            description: "d".into(),
            schema: vec![],
            code: "return 1".into(),
            requirements: vec!["requests".into()],
            created_date: created,
            updated_date: created,
        };
        let later = created + chrono::TimeDelta::seconds(1);
        ToolPatch {
            code: Some("return 2".into()),
            ..Default::default()
        }
        .apply(&mut tool, later);
        assert_eq!(
            (tool.name.as_str(), tool.code.as_str(), tool.updated_date),
            ("t", "return 2", later)
        );
        assert_eq!(tool.requirements, vec!["requests".to_string()]);
    }
}
