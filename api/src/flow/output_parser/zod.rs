//! `advancedStructuredOutputParser`'s schema: a Zod expression as text
//! (`z.object({ title: z.string(), year: z.number().int() })`), read — never
//! evaluated — into a JSON schema. Understood: `z.object`, `z.array`,
//! `z.string`, `z.number`, `z.boolean`, `z.date`, `z.enum([...])`, `z.any`,
//! and the modifiers `.int()`, `.min(n)`, `.max(n)`, `.length(n)`,
//! `.optional()`, `.nullable()`, `.nullish()`, `.array()`, `.describe("...")`,
//! `.default(value)`; `//` and `/* */` comments are skipped. Anything else is
//! an error naming it. Unlike Flowise, the root may be any of these (its own
//! "Advanced Structured Output Parser" template starts with `z.array`, which
//! Flowise refuses).

use serde_json::{Map, Value, json};

/// Longest schema text read (it is a flow input, and nesting recurses).
const MAX_SCHEMA_BYTES: usize = 64 * 1024;
const MAX_DEPTH: usize = 32;

/// The JSON schema of a Zod expression.
pub fn to_json_schema(text: &str) -> Result<Value, String> {
    if text.len() > MAX_SCHEMA_BYTES {
        return Err(format!("is longer than {MAX_SCHEMA_BYTES} bytes"));
    }
    let mut reader = Reader {
        chars: strip_comments(text).chars().collect(),
        at: 0,
    };
    let (schema, _) = reader.expression(0)?;
    reader.skip_space();
    if reader.eat(';') {
        reader.skip_space();
    }
    if reader.at < reader.chars.len() {
        return Err(reader.unexpected("the end of the schema"));
    }
    Ok(schema)
}

/// Whether a field may be left out, as its modifiers say.
type Optional = bool;

struct Reader {
    chars: Vec<char>,
    at: usize,
}

impl Reader {
    /// `z.<base>(...)` and its modifiers.
    fn expression(&mut self, depth: usize) -> Result<(Value, Optional), String> {
        if depth > MAX_DEPTH {
            return Err(format!("nests deeper than {MAX_DEPTH} levels"));
        }
        self.skip_space();
        self.expect('z')?;
        self.expect('.')?;
        let base = self.identifier()?;
        self.expect('(')?;
        let mut schema = match base.as_str() {
            "object" => {
                let object = self.object(depth)?;
                self.expect(')')?;
                object
            }
            "array" => {
                let (items, _) = self.expression(depth + 1)?;
                self.expect(')')?;
                json!({"type": "array", "items": items})
            }
            "enum" => {
                let Value::Array(values) = self.literal()? else {
                    return Err("z.enum takes a list of strings".into());
                };
                if values.is_empty() || !values.iter().all(Value::is_string) {
                    return Err("z.enum takes a list of strings".into());
                }
                self.expect(')')?;
                json!({"type": "string", "enum": values})
            }
            "string" | "number" | "boolean" | "date" | "any" => {
                self.expect(')')?;
                match base.as_str() {
                    "string" => json!({"type": "string"}),
                    "number" => json!({"type": "number"}),
                    "boolean" => json!({"type": "boolean"}),
                    "date" => json!({"type": "string", "format": "date-time"}),
                    _ => json!({}),
                }
            }
            other => return Err(format!("z.{other}() is not a Zod type weir reads")),
        };
        let mut optional = false;
        loop {
            self.skip_space();
            if !self.eat('.') {
                break;
            }
            let modifier = self.identifier()?;
            self.expect('(')?;
            self.skip_space();
            match modifier.as_str() {
                "int" => schema["type"] = Value::from("integer"),
                "optional" => optional = true,
                "nullable" => schema["nullable"] = Value::Bool(true),
                "nullish" => {
                    optional = true;
                    schema["nullable"] = Value::Bool(true);
                }
                "array" => {
                    schema = json!({"type": "array", "items": schema});
                }
                "describe" => {
                    let Value::String(text) = self.literal()? else {
                        return Err(".describe() takes a string".into());
                    };
                    schema["description"] = Value::from(text);
                }
                "default" => {
                    schema["default"] = self.literal()?;
                    optional = true;
                }
                "min" | "max" | "length" => {
                    let Some(n) = self.literal()?.as_f64() else {
                        return Err(format!(".{modifier}() takes a number"));
                    };
                    let (low, high) = match schema["type"].as_str() {
                        Some("string") => ("minLength", "maxLength"),
                        Some("array") => ("minItems", "maxItems"),
                        _ => ("minimum", "maximum"),
                    };
                    let n = number(n);
                    if modifier != "max" {
                        schema[low] = n.clone();
                    }
                    if modifier != "min" {
                        schema[high] = n;
                    }
                }
                other => return Err(format!(".{other}() is not a Zod modifier weir reads")),
            }
            self.skip_space();
            // A modifier's own message argument (`.min(1, "too short")`) is ignored.
            if self.eat(',') {
                self.literal()?;
            }
            self.expect(')')?;
        }
        Ok((schema, optional))
    }

    /// `{ key: expression, ... }` as an object schema.
    fn object(&mut self, depth: usize) -> Result<Value, String> {
        self.expect('{')?;
        let (mut properties, mut required) = (Map::new(), Vec::new());
        loop {
            self.skip_space();
            if self.eat('}') {
                break;
            }
            let key = self.key()?;
            self.expect(':')?;
            let (schema, optional) = self.expression(depth + 1)?;
            if !optional {
                required.push(Value::from(key.as_str()));
            }
            properties.insert(key, schema);
            self.skip_space();
            if !self.eat(',') {
                self.expect('}')?;
                break;
            }
        }
        Ok(json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        }))
    }

    /// A JSON-like literal: a string ('…' or "…"), a number, true, false,
    /// null, or a list or object of those.
    fn literal(&mut self) -> Result<Value, String> {
        self.literal_at(0)
    }

    fn literal_at(&mut self, depth: usize) -> Result<Value, String> {
        if depth > MAX_DEPTH {
            return Err(format!("nests deeper than {MAX_DEPTH} levels"));
        }
        self.skip_space();
        match self.peek() {
            Some(quote @ ('"' | '\'')) => {
                self.at += 1;
                let mut text = String::new();
                loop {
                    match self.next() {
                        None => return Err("a string is not closed".into()),
                        Some('\\') => match self.next() {
                            Some('n') => text.push('\n'),
                            Some('t') => text.push('\t'),
                            Some(c) => text.push(c),
                            None => return Err("a string is not closed".into()),
                        },
                        Some(c) if c == quote => return Ok(Value::from(text)),
                        Some(c) => text.push(c),
                    }
                }
            }
            Some('[') => {
                self.at += 1;
                let mut items = Vec::new();
                loop {
                    self.skip_space();
                    if self.eat(']') {
                        return Ok(Value::Array(items));
                    }
                    items.push(self.literal_at(depth + 1)?);
                    self.skip_space();
                    if !self.eat(',') {
                        self.expect(']')?;
                        return Ok(Value::Array(items));
                    }
                }
            }
            Some('{') => {
                self.at += 1;
                let mut map = Map::new();
                loop {
                    self.skip_space();
                    if self.eat('}') {
                        return Ok(Value::Object(map));
                    }
                    let key = self.key()?;
                    self.expect(':')?;
                    map.insert(key, self.literal_at(depth + 1)?);
                    self.skip_space();
                    if !self.eat(',') {
                        self.expect('}')?;
                        return Ok(Value::Object(map));
                    }
                }
            }
            _ => {
                let start = self.at;
                while self
                    .peek()
                    .is_some_and(|c| c.is_alphanumeric() || matches!(c, '-' | '+' | '.' | '_'))
                {
                    self.at += 1;
                }
                let word: String = self.chars[start..self.at].iter().collect();
                match word.as_str() {
                    "true" => Ok(Value::Bool(true)),
                    "false" => Ok(Value::Bool(false)),
                    "null" => Ok(Value::Null),
                    _ => word
                        .parse::<f64>()
                        .ok()
                        .filter(|n| n.is_finite())
                        .map(number)
                        .ok_or_else(|| {
                            self.at = start;
                            self.unexpected("a value")
                        }),
                }
            }
        }
    }

    /// An object's key: a name, or a quoted string.
    fn key(&mut self) -> Result<String, String> {
        match self.peek() {
            Some('"' | '\'') => match self.literal()? {
                Value::String(key) => Ok(key),
                _ => Err(self.unexpected("a key")),
            },
            _ => self.identifier(),
        }
    }

    fn identifier(&mut self) -> Result<String, String> {
        self.skip_space();
        let start = self.at;
        while self
            .peek()
            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$')
        {
            self.at += 1;
        }
        if start == self.at {
            return Err(self.unexpected("a name"));
        }
        Ok(self.chars[start..self.at].iter().collect())
    }

    fn expect(&mut self, c: char) -> Result<(), String> {
        self.skip_space();
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.unexpected(&format!("'{c}'")))
        }
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn next(&mut self) -> Option<char> {
        let c = self.peek();
        self.at += 1;
        c
    }

    fn skip_space(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.at += 1;
        }
    }

    fn unexpected(&self, wanted: &str) -> String {
        let found: String = self.chars[self.at.min(self.chars.len())..]
            .iter()
            .take(20)
            .collect();
        if found.is_empty() {
            format!("expected {wanted} at the end")
        } else {
            format!("expected {wanted} at '{found}'")
        }
    }
}

/// A number as JSON: whole numbers without a fraction (`2`, not `2.0`).
fn number(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() < 9e15 {
        Value::from(n as i64)
    } else {
        serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number)
    }
}

/// The text without `//` line and `/* */` block comments (outside strings).
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut quote = None;
    while let Some(c) = chars.next() {
        if let Some(q) = quote {
            out.push(c);
            if c == '\\' {
                if let Some(escaped) = chars.next() {
                    out.push(escaped);
                }
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match (c, chars.peek()) {
            ('"' | '\'', _) => {
                quote = Some(c);
                out.push(c);
            }
            ('/', Some('/')) => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            ('/', Some('*')) => {
                chars.next();
                let mut last = ' ';
                for c in chars.by_ref() {
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
                out.push(' ');
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flowise_default_schema() {
        let text = r#"z.object({
    title: z.string(), // Title of the movie as a string
    yearOfRelease: z.number().int(), // Release year as an integer number,
    genres: z.enum([
        "Action", "Comedy", "Drama", "Fantasy", "Horror",
        "Mystery", "Romance", "Science Fiction", "Thriller", "Documentary"
    ]).array().max(2), // Array of genres, max of 2 from the defined enum
    shortDescription: z.string().max(500) // Short description, max 500 characters
})"#;
        let schema = to_json_schema(text).unwrap();
        assert_eq!(
            schema["properties"]["yearOfRelease"],
            json!({"type": "integer"})
        );
        assert_eq!(
            schema["properties"]["genres"]["items"]["enum"][7],
            json!("Science Fiction")
        );
        assert_eq!(schema["properties"]["genres"]["maxItems"], json!(2));
        assert_eq!(
            schema["properties"]["shortDescription"],
            json!({"type": "string", "maxLength": 500})
        );
        assert_eq!(
            schema["required"],
            json!(["title", "yearOfRelease", "genres", "shortDescription"])
        );
    }

    #[test]
    fn modifiers_nesting_and_an_array_root() {
        let schema = to_json_schema(
            "z.array(z.object({ 'name': z.string().describe('who, /* not a comment */'), \
             age: z.number().min(0, 'no').optional(), tags: z.array(z.string()).default([]), \
             at: z.date().nullable() }))",
        )
        .unwrap();
        let item = &schema["items"];
        assert_eq!(schema["type"], json!("array"));
        assert_eq!(item["required"], json!(["name", "at"]));
        assert_eq!(
            item["properties"]["name"]["description"],
            json!("who, /* not a comment */")
        );
        assert_eq!(item["properties"]["age"]["minimum"], json!(0));
        assert_eq!(item["properties"]["tags"]["default"], json!([]));
        assert_eq!(item["properties"]["at"]["nullable"], json!(true));
    }

    #[test]
    fn what_it_does_not_read_is_an_error_naming_it() {
        let err = |text: &str| to_json_schema(text).unwrap_err();
        assert!(err("z.object({ a: z.bigint() })").contains("z.bigint()"));
        assert!(err("z.object({ a: z.string().email() })").contains(".email()"));
        assert!(err("z.object({ a: z.string() ").contains("expected"));
        assert!(err("require('fs')").contains("expected 'z'"));
        assert!(err("z.object({}) extra").contains("end of the schema"));
        let deep = format!("{}z.string(){}", "z.array(".repeat(40), ")".repeat(40));
        assert!(err(&deep).contains("deeper"));
        let deep_default = format!(
            "z.string().default({}1{})",
            "[".repeat(5000),
            "]".repeat(5000)
        );
        assert!(err(&deep_default).contains("deeper"));
    }
}
