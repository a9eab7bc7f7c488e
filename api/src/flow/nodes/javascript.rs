//! What every node holding a JavaScript body checks when a flow is saved: its
//! `$<name>` globals are JavaScript names, and it loads no Node.js module.
//! weir runs JavaScript in QuickJS inside the Python runtime's sandbox, where
//! `require` is not defined and ES module imports have nothing to load, so a
//! body that needs one is refused at save time, naming the module, rather
//! than failing on every run.

use crate::flow::FlowError;
use crate::flow::node::Build;

/// Whether `name` can follow `$` as a JavaScript global of a function's
/// sandbox: letters, digits, `_` and `$`, not starting with a digit.
pub fn is_js_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c == '$' || c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '$' || c == '_' || c.is_ascii_alphanumeric())
}

/// Refuses `code` (the body in `node`'s input `input`) when it loads a module
/// — `require('m')`, `import … from 'm'` or `import('m')` outside strings and
/// comments — which weir's JavaScript cannot run.
pub fn refuse_node_modules(node: &Build<'_>, input: &str, code: &str) -> Result<(), FlowError> {
    let Some((call, module)) = first_module_load(code) else {
        return Ok(());
    };
    Err(node.invalid(format_args!(
        "input '{input}' loads the Node.js module '{module}' ({call}): weir runs JavaScript in \
         QuickJS inside the Python runtime's sandbox, where require is not defined and no \
         Node.js module is installed; reach a database through an SQL tool or node, and a web \
         service through fetch, an HTTP node or a request tool"
    )))
}

/// The first module `code` loads, as written (`require('pg')`) and by name.
fn first_module_load(code: &str) -> Option<(String, String)> {
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                i = code[i..].find('\n').map_or(bytes.len(), |n| i + n);
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i = code[i + 2..]
                    .find("*/")
                    .map_or(bytes.len(), |n| i + 2 + n + 2);
            }
            quote @ (b'\'' | b'"' | b'`') => i = string_end(bytes, i, quote),
            c if is_word_byte(c) => {
                let start = i;
                while i < bytes.len() && is_word_byte(bytes[i]) {
                    i += 1;
                }
                let word = &code[start..i];
                // `x.require(…)` and `obj.import` are properties, not the keywords.
                let property = code[..start].trim_end().ends_with('.');
                if property || !(word == "require" || word == "import") {
                    continue;
                }
                if let Some(found) = module_after(code, i, word == "import") {
                    return Some(found);
                }
            }
            _ => i += 1,
        }
    }
    None
}

/// The module named right after the keyword ending at `end`: `require('m')`,
/// `import('m')`, or for a static import the first string of its statement.
fn module_after(code: &str, end: usize, import: bool) -> Option<(String, String)> {
    let after = &code[end..];
    let rest = after.trim_start();
    let (named, call) = match rest.strip_prefix('(') {
        Some(arguments) => (arguments.trim_start(), true),
        // `import x from 'm'`, `import {a} from "m"`, `import 'm'`: up to the statement's end.
        None if import && after.starts_with([' ', '\t', '\n', '{', '*', '\'', '"']) => {
            let statement = &rest[..rest.find([';', '\n']).unwrap_or(rest.len())];
            (&statement[statement.find(['\'', '"'])?..], false)
        }
        None => return None,
    };
    let quote = named
        .chars()
        .next()
        .filter(|c| matches!(c, '\'' | '"' | '`'))?;
    let module = &named[1..][..named[1..].find(quote)?];
    let written = match (call, import) {
        (true, true) => format!("import('{module}')"),
        (true, false) => format!("require('{module}')"),
        (false, _) => format!("import … from '{module}'"),
    };
    Some((written, module.to_owned()))
}

/// Where the string literal opened by `quote` at `start` ends (past its close).
fn string_end(bytes: &[u8], start: usize, quote: u8) -> usize {
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            c if c == quote => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

fn is_word_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'$'
}

#[cfg(test)]
mod tests {
    use super::first_module_load;

    fn module(code: &str) -> Option<String> {
        first_module_load(code).map(|(_, m)| m)
    }

    #[test]
    fn requires_and_imports_are_found() {
        let sql_agent =
            "const { DataSource } = require('typeorm');\nconst { Pool } = require(\"pg\");";
        assert_eq!(
            first_module_load(sql_agent),
            Some(("require('typeorm')".to_owned(), "typeorm".to_owned()))
        );
        assert_eq!(module("const fs = require ( `fs` );"), Some("fs".into()));
        assert_eq!(
            module("import axios from 'axios';\nreturn 1;"),
            Some("axios".into())
        );
        assert_eq!(
            module("import { a } from \"lodash\"\n"),
            Some("lodash".into())
        );
        assert_eq!(
            first_module_load("const m = await import('node:path');"),
            Some(("import('node:path')".to_owned(), "node:path".to_owned()))
        );
    }

    #[test]
    fn words_in_strings_comments_and_properties_are_not_loads() {
        for code in [
            "// require('pg') is not needed\nreturn 1;",
            "/* import x from 'y' */ return 2;",
            "return \"require('pg')\";",
            "return 'it\\'s require(\"pg\")';",
            "return `import x from 'y'`;",
            "const required = $input.required; return required;",
            "return $vars.require('x');",
            "const imports = 2; return imports;",
            "return require;",
        ] {
            assert_eq!(module(code), None, "{code}");
        }
    }
}
