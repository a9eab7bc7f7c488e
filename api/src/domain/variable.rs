//! Workspace variables (`$vars` of tool code): `{id, name, value, type}`.
//!
//! A `static` variable is its stored value; a `runtime` variable names an
//! environment variable of the server, read when a flow runs. Names are unique
//! within a workspace.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::time::{self, Timestamp};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum VariableType {
    #[default]
    Static,
    Runtime,
}

impl VariableType {
    pub fn as_str(self) -> &'static str {
        match self {
            VariableType::Static => "static",
            VariableType::Runtime => "runtime",
        }
    }

    pub fn parse_stored(s: &str) -> Self {
        if s == "runtime" {
            VariableType::Runtime
        } else {
            VariableType::Static
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Variable {
    pub id: Uuid,
    pub name: String,
    pub value: String,
    #[serde(rename = "type")]
    pub var_type: VariableType,
    #[serde(serialize_with = "time::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub created_date: Timestamp,
    #[serde(serialize_with = "time::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub updated_date: Timestamp,
}

#[derive(Debug, Clone)]
pub struct NewVariable {
    pub name: String,
    pub value: String,
    pub var_type: VariableType,
}

#[derive(Debug, Clone, Default)]
pub struct VariablePatch {
    pub name: Option<String>,
    pub value: Option<String>,
    pub var_type: Option<VariableType>,
}

impl VariablePatch {
    pub fn apply(self, var: &mut Variable, now: Timestamp) {
        if let Some(name) = self.name {
            var.name = name;
        }
        if let Some(value) = self.value {
            var.value = value;
        }
        if let Some(t) = self.var_type {
            var.var_type = t;
        }
        var.updated_date = now;
    }
}

/// The conflict message when a variable name is taken in the workspace.
pub fn name_taken(name: &str) -> String {
    format!("a variable named '{name}' already exists")
}

/// Longest accepted variable name.
pub const MAX_NAME_LEN: usize = 255;

/// A variable name is referenced as `{{$vars.<name>}}`: non-empty, no surrounding
/// white space, no braces.
pub fn validate_name(name: &str) -> Result<(), String> {
    if name.trim().is_empty() {
        return Err("name must not be empty".into());
    }
    if name.trim() != name {
        return Err("name must not start or end with white space".into());
    }
    if name.len() > MAX_NAME_LEN {
        return Err(format!("name must be at most {MAX_NAME_LEN} bytes"));
    }
    if name.contains(['{', '}']) || name.chars().any(char::is_control) {
        return Err("name must not contain braces or control characters".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(validate_name("openai_key").is_ok());
        assert!(validate_name("").is_err());
        assert!(validate_name(" a").is_err());
        assert!(validate_name("a}}").is_err());
        assert!(validate_name(&"x".repeat(256)).is_err());
    }
}
