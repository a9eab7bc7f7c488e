//! The JSON schemas output parsers check answers against: built from
//! `structuredOutputParser`'s rows, or read from a Zod schema (`zod.rs`), and
//! the check itself. Only what those two produce is understood: `type`
//! (object, array, string, number, integer, boolean), `properties`,
//! `required`, `items`, `enum`, `default`, the length and size bounds, and
//! `nullable` (weir's word for zod's `.nullable()`).

use serde_json::{Map, Value, json};

/// `structuredOutputParser`'s `jsonStructure` rows (`{property, type,
/// description}`, as an array or its JSON text) as an object schema. As in
/// Flowise every key is optional (the grid has no "required" column) unless a
/// row says `required: true`; a row without a property or with a type other
/// than string, number, boolean or date is skipped.
pub fn schema_from_rows(rows: &Value) -> Result<Value, String> {
    let parsed;
    let rows = match rows {
        Value::String(text) => {
            parsed = serde_json::from_str::<Value>(text)
                .map_err(|e| format!("is not JSON rows ({e})"))?;
            &parsed
        }
        other => other,
    };
    let Some(rows) = rows.as_array() else {
        return Err("must be a list of rows {property, type, description}".into());
    };
    let (mut properties, mut required) = (Map::new(), Vec::new());
    for row in rows {
        let text = |key: &str| row.get(key).and_then(Value::as_str).unwrap_or("").trim();
        let property = text("property");
        let mut schema = match text("type") {
            "string" => json!({"type": "string"}),
            "number" => json!({"type": "number"}),
            "boolean" => json!({"type": "boolean"}),
            "date" => json!({"type": "string", "format": "date-time"}),
            _ => continue,
        };
        if property.is_empty() {
            continue;
        }
        if !text("description").is_empty() {
            schema["description"] = Value::from(text("description"));
        }
        if row.get("required").and_then(Value::as_bool) == Some(true) {
            required.push(Value::from(property));
        }
        properties.insert(property.to_owned(), schema);
    }
    let mut schema = json!({"type": "object", "properties": properties});
    if !required.is_empty() {
        schema["required"] = Value::Array(required);
    }
    schema["additionalProperties"] = Value::Bool(false);
    Ok(schema)
}

/// `value` checked against `schema`: the value with keys the schema does not
/// name dropped and missing keys' defaults filled in, or what is wrong (with
/// the path to it).
pub fn conform(value: &Value, schema: &Value) -> Result<Value, String> {
    at(value, schema, "")
}

fn at(value: &Value, schema: &Value, path: &str) -> Result<Value, String> {
    let name = || {
        if path.is_empty() {
            "the answer".to_owned()
        } else {
            format!("'{path}'")
        }
    };
    if value.is_null() {
        if schema.get("nullable").and_then(Value::as_bool) == Some(true) {
            return Ok(Value::Null);
        }
        return Err(format!("{} is null", name()));
    }
    let ty = schema.get("type").and_then(Value::as_str).unwrap_or("");
    let fits = match ty {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => value.is_i64() || value.is_u64(),
        "boolean" => value.is_boolean(),
        _ => true,
    };
    if !fits {
        return Err(format!("{} is not {}", name(), a(ty)));
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let allowed: Vec<String> = allowed.iter().map(Value::to_string).collect();
        return Err(format!("{} is not one of {}", name(), allowed.join(", ")));
    }
    let bound = |key: &str| schema.get(key).and_then(Value::as_f64);
    let size = match value {
        Value::String(s) => Some(s.chars().count() as f64),
        Value::Array(items) => Some(items.len() as f64),
        _ => None,
    };
    if let Some(size) = size {
        let (min, max) = match value {
            Value::String(_) => (bound("minLength"), bound("maxLength")),
            _ => (bound("minItems"), bound("maxItems")),
        };
        let unit = if value.is_string() {
            "characters"
        } else {
            "items"
        };
        if let Some(max) = max.filter(|max| size > *max) {
            return Err(format!("{} has more than {max} {unit}", name()));
        }
        if let Some(min) = min.filter(|min| size < *min) {
            return Err(format!("{} has fewer than {min} {unit}", name()));
        }
    }
    if let Some(n) = value.as_f64() {
        if let Some(max) = bound("maximum").filter(|max| n > *max) {
            return Err(format!("{} is above {max}", name()));
        }
        if let Some(min) = bound("minimum").filter(|min| n < *min) {
            return Err(format!("{} is below {min}", name()));
        }
    }
    let child = |key: &str| {
        if path.is_empty() {
            key.to_owned()
        } else {
            format!("{path}.{key}")
        }
    };
    match value {
        Value::Array(items) => match schema.get("items") {
            Some(item_schema) => items
                .iter()
                .enumerate()
                .map(|(i, item)| at(item, item_schema, &child(&i.to_string())))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array),
            None => Ok(value.clone()),
        },
        Value::Object(given) => {
            let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
                return Ok(value.clone());
            };
            let required = |key: &str| {
                schema
                    .get("required")
                    .and_then(Value::as_array)
                    .is_some_and(|r| r.iter().any(|k| k == key))
            };
            let mut out = Map::new();
            for (key, property) in properties {
                match given.get(key) {
                    Some(v) if !v.is_null() || property.get("nullable").is_some() => {
                        out.insert(key.clone(), at(v, property, &child(key))?);
                    }
                    _ => {
                        if let Some(default) = property.get("default") {
                            out.insert(key.clone(), default.clone());
                        } else if required(key) {
                            return Err(format!("'{}' is missing", child(key)));
                        }
                    }
                }
            }
            Ok(Value::Object(out))
        }
        _ => Ok(value.clone()),
    }
}

fn a(ty: &str) -> &'static str {
    match ty {
        "object" => "an object",
        "array" => "an array",
        "string" => "a string",
        "number" => "a number",
        "integer" => "an integer",
        "boolean" => "true or false",
        _ => "of the right type",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_become_an_object_schema_of_optional_keys() {
        let rows = json!([
            {"property": "answer", "type": "string", "description": "the answer"},
            {"property": "score", "type": "number", "description": "", "id": 2},
            {"property": "", "type": "string"},
            {"property": "blank", "type": ""},
        ]);
        let schema = schema_from_rows(&rows).unwrap();
        assert_eq!(
            schema,
            json!({"type": "object", "additionalProperties": false, "properties": {
                "answer": {"type": "string", "description": "the answer"},
                "score": {"type": "number"},
            }})
        );
        let text = Value::from(rows.to_string());
        assert_eq!(schema_from_rows(&text).unwrap(), schema);
        assert!(schema_from_rows(&json!({"a": 1})).is_err());
        assert_eq!(
            conform(&json!({"score": 2.5, "other": 1}), &schema).unwrap(),
            json!({"score": 2.5})
        );
    }

    #[test]
    fn conform_checks_types_bounds_enums_and_fills_defaults() {
        let schema = json!({"type": "object", "required": ["title", "genres"], "properties": {
            "title": {"type": "string", "maxLength": 5},
            "year": {"type": "integer", "default": 2000},
            "genres": {"type": "array", "maxItems": 2,
                       "items": {"type": "string", "enum": ["Drama", "Comedy"]}},
            "note": {"type": "string", "nullable": true},
        }});
        assert_eq!(
            conform(
                &json!({"title": "Up", "genres": ["Drama"], "note": null}),
                &schema
            )
            .unwrap(),
            json!({"title": "Up", "year": 2000, "genres": ["Drama"], "note": null})
        );
        let wrong = |v: Value| conform(&v, &schema).unwrap_err();
        assert!(wrong(json!({"genres": []})).contains("'title' is missing"));
        assert!(wrong(json!({"title": "Too long", "genres": []})).contains("more than 5"));
        assert!(wrong(json!({"title": "Up", "genres": ["Horror"]})).contains("'genres.0'"));
        assert!(wrong(json!({"title": "Up", "genres": [], "year": 1.5})).contains("integer"));
        assert!(
            wrong(json!({"title": "Up", "genres": ["Drama", "Drama", "Comedy"]}))
                .contains("more than 2 items")
        );
        assert!(wrong(json!([1])).contains("the answer is not an object"));
    }
}
