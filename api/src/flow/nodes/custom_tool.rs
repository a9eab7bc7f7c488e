//! `customTool`: Flowise's custom tool. A tool of the workspace (`selectedTool`;
//! weir's stored tools are Python) or an inline definition whose function is
//! Flowise's JavaScript (run by the Python runtime's JavaScript executor, in
//! the same sandbox as Python tools) or Python.

use std::sync::Arc;

use crate::flow::FlowError;
use crate::flow::component::{Component, PythonSource, PythonTool, ToolKind, ToolSpec};
use crate::flow::node::{Build, Category, InputKind as K, Node, NodeSpec, input, sensitive};

pub struct CustomTool;

static SPEC: NodeSpec = NodeSpec {
    name: "customTool",
    category: Category::Tool,
    inputs: &[
        sensitive("selectedTool", K::Text),
        input("returnDirect", K::Boolean),
        sensitive("customToolName", K::Text),
        input("customToolDesc", K::Text),
        sensitive("customToolSchema", K::Json),
        sensitive("customToolFunc", K::Text),
    ],
};

impl Node for CustomTool {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let source = match node.text("customToolFunc") {
            Some(code) => {
                let name = node
                    .text("customToolName")
                    .ok_or_else(|| node.invalid("needs 'customToolName' with its function"))?;
                let mut definition = super::python_tool::definition(
                    node,
                    ("customToolName", name),
                    node.text("customToolDesc").unwrap_or_default(),
                    "customToolSchema",
                    code,
                    Vec::new(),
                )?;
                // Flowise's bodies are JavaScript; weir also takes Python here.
                definition.javascript = looks_like_javascript(code);
                if definition.javascript {
                    super::javascript::refuse_node_modules(node, "customToolFunc", code)?;
                }
                PythonSource::Inline(Arc::new(definition))
            }
            None => {
                let id = node
                    .text("selectedTool")
                    .ok_or_else(|| node.invalid("needs a 'selectedTool'"))?;
                PythonSource::Stored(super::python_tool::stored_id(node, "selectedTool", id)?)
            }
        };
        Ok(Component::Tool(ToolSpec {
            node_id: node.id().to_owned(),
            kind: ToolKind::Python(PythonTool {
                source,
                timeout: None,
                return_direct: node.boolean("returnDirect")?,
            }),
        }))
    }
}

/// Flowise's custom tools are JavaScript bodies (`const x = await fetch(…);
/// return x;`). Python has no `const`/`let`/`var` declarations, arrow functions
/// or `require`, so their presence (without a `def`) tells them apart.
fn looks_like_javascript(code: &str) -> bool {
    let has_def = code
        .lines()
        .any(|l| l.trim_start().starts_with("def ") || l.trim_start().starts_with("async def "));
    let js_line = code.lines().any(|l| {
        let l = l.trim_start();
        [
            "const ",
            "let ",
            "var ",
            "function ",
            "async function",
            "console.log(",
            "} catch",
            "throw ",
            "try {",
            "if (",
            "for (",
            "await ",
            "//",
        ]
        .iter()
        .any(|p| l.starts_with(p))
    });
    let js_syntax = ["=>", "require(", "await fetch(", "===", "!=="]
        .iter()
        .any(|p| code.contains(p));
    // A function body's `return` at the top level: Python has no such thing.
    let bare_return = code
        .lines()
        .any(|l| l.starts_with("return ") || l.starts_with("return;") || l == "return");
    !has_def && (js_line || js_syntax || bare_return)
}

#[cfg(test)]
mod tests {
    use super::looks_like_javascript;

    #[test]
    fn javascript_is_told_from_python() {
        assert!(looks_like_javascript(
            "const res = await fetch('https://x');\nreturn await res.text();"
        ));
        assert!(looks_like_javascript(
            "return $input.length > 3 ? 'a' : 'b'; // ok\nlet x = 1"
        ));
        assert!(!looks_like_javascript("def main(x):\n    return x * 2\n"));
        assert!(looks_like_javascript("return { city: $city, ok: true };"));
        assert!(looks_like_javascript(
            "throw new TypeError('no such city');"
        ));
        assert!(!looks_like_javascript("result = 1\nprint('return me')\n"));
        assert!(!looks_like_javascript(
            "import math\nresult = math.sqrt({{$n}})\n"
        ));
    }
}
