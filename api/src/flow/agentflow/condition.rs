//! The condition node's table (Flowise's `conditionAgentflow`): rows of
//! `{type, value1, operation, value2}` over strings, numbers or booleans, tried
//! in order; the first that holds picks its output, and when none does the
//! output after the last row (Else) is taken.

use serde_json::{Map, Value};

/// Whether one row holds; its values are already resolved.
pub fn holds(row: &Map<String, Value>, value1: &Value, value2: &Value) -> bool {
    let operation = row
        .get("operation")
        .and_then(Value::as_str)
        .unwrap_or("equal");
    match row.get("type").and_then(Value::as_str).unwrap_or("string") {
        "number" => {
            let empty =
                |v: &Value| matches!(v, Value::Null) || v.as_str().is_some_and(str::is_empty);
            let (a, b) = (number(value1), number(value2));
            match operation {
                "smaller" => a < b,
                "smallerEqual" => a <= b,
                "equal" => a == b,
                "notEqual" => a != b,
                "larger" => a > b,
                "largerEqual" => a >= b,
                "isEmpty" => empty(value1),
                "notEmpty" => !empty(value1),
                _ => false,
            }
        }
        "boolean" => {
            let (a, b) = (boolean(value1), boolean(value2));
            match operation {
                "equal" => a == b,
                "notEqual" => a != b,
                _ => false,
            }
        }
        _ => {
            let a = text(value1);
            let b = text(value2);
            match operation {
                "contains" => a.contains(b.as_str()),
                "notContains" => !a.contains(b.as_str()),
                "equal" => a == b,
                "notEqual" => a != b,
                "startsWith" => a.starts_with(b.as_str()),
                "endsWith" => a.ends_with(b.as_str()),
                "regex" => regex::RegexBuilder::new(&b)
                    .size_limit(1 << 20)
                    .build()
                    .is_ok_and(|re| re.is_match(&a)),
                "isEmpty" => a.is_empty(),
                "notEmpty" => !a.is_empty(),
                _ => false,
            }
        }
    }
}

/// Text compared as Flowise compares it: trimmed of the editor's markup.
fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.trim().to_owned(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn number(value: &Value) -> f64 {
    match value {
        Value::Number(n) => n.as_f64().unwrap_or(0.0),
        Value::String(s) => s.trim().parse().unwrap_or(0.0),
        Value::Bool(b) => f64::from(u8::from(*b)),
        _ => 0.0,
    }
}

fn boolean(value: &Value) -> bool {
    match value {
        Value::Bool(b) => *b,
        Value::String(s) => s.trim().eq_ignore_ascii_case("true"),
        Value::Number(n) => n.as_f64().is_some_and(|n| n != 0.0),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row(kind: &str, operation: &str) -> Map<String, Value> {
        json!({"type": kind, "operation": operation})
            .as_object()
            .cloned()
            .unwrap()
    }

    #[test]
    fn strings_numbers_and_booleans() {
        assert!(holds(
            &row("string", "equal"),
            &json!(" yes "),
            &json!("yes")
        ));
        assert!(holds(
            &row("string", "contains"),
            &json!("oh yes"),
            &json!("yes")
        ));
        assert!(holds(
            &row("string", "regex"),
            &json!("A-12"),
            &json!("^A-\\d+$")
        ));
        assert!(!holds(&row("string", "regex"), &json!("x"), &json!("(")));
        assert!(holds(&row("string", "isEmpty"), &json!(""), &json!(null)));
        assert!(holds(&row("number", "larger"), &json!("10"), &json!(3)));
        assert!(!holds(&row("number", "larger"), &json!("many"), &json!(3)));
        assert!(holds(
            &row("number", "smallerEqual"),
            &json!(3),
            &json!("3")
        ));
        assert!(holds(
            &row("boolean", "equal"),
            &json!("true"),
            &json!(true)
        ));
        assert!(holds(
            &row("boolean", "notEqual"),
            &json!(false),
            &json!(true)
        ));
    }
}
