//! The import rule, enforced: the crate is built in floors, and a module
//! imports only from floors below its own (docs/architecture.md draws them).
//!
//! This test reads `api/src`, finds every path a module names through
//! `crate::…` or `super::…` (outside comments and its `tests` module), and
//! checks four things:
//!
//! 1. between areas (`domain`, `store`, `llm`, `flow`, `services`, the HTTP
//!    edge …), imports go down the [`AREAS`] table only;
//! 2. inside the engine, each part of `flow/` imports only the parts its row
//!    of [`FLOW`] lists below it;
//! 3. the two run kinds, `flow/chatflow` and `flow/agentflow`, never import
//!    each other;
//! 4. no circle at all between the parts of `flow/` and `services/` (a part is
//!    a direct child, file or folder; the area's own `mod.rs` is the shared
//!    vocabulary every part may use).
//!
//! A name an area's `mod.rs` re-exports (`crate::flow::Plan`) counts as an
//! import of the part that defines it (`flow/plan`), so the shortcut cannot
//! hide an import. Only paths spelled from `crate::` or `super::` are seen.
//!
//! A new module fails here until it is given a floor: that is the point.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Areas of the crate, lowest floor first. An area may import from areas of
/// lower floors; the edge (floor 5) is one floor whose modules may use each
/// other (but not in a circle).
const AREAS: &[(&str, u8)] = &[
    ("domain", 0),
    ("metrics", 0),
    ("sealing", 0),
    ("netguard", 0),
    ("config", 1),
    ("llm", 1),
    ("store", 2),
    ("retrieval", 2),
    ("flow", 3),
    ("services", 4),
    ("http", 5),
    ("routes", 5),
    ("ratelimit", 5),
    ("app", 5),
    ("keys", 5),
    ("demo", 5),
    ("telemetry", 5),
    ("crate", 6),
];

/// The engine's floors, lowest first: a part may import the parts of lower
/// floors only.
const FLOW: &[(&str, u8)] = &[
    // Plain data and text: a graph, prompts, parsers, what a node declares.
    ("flow/graph", 0),
    ("flow/prompt", 0),
    ("flow/output_parser", 0),
    ("flow/spec", 0),
    // What nodes build, and where keys may go.
    ("flow/component", 1),
    ("flow/destination", 1),
    // What a request may change; the tools agents call.
    ("flow/overrides", 2),
    ("flow/tools", 2),
    // Building: the node trait, the node types, the registry listing them.
    ("flow/node", 3),
    ("flow/nodes", 4),
    ("flow/registry", 5),
    // What every run kind shares.
    ("flow/runtime", 6),
    // The agentflow run kind (its steps are built from the registry).
    ("flow/agentflow", 7),
    // A validated flow and the runnable built from it.
    ("flow/plan", 8),
    // The chatflow run kind (it runs what the plan built).
    ("flow/chatflow", 9),
    // The one place that knows both run kinds.
    ("flow/engine", 10),
    // What Flowise's canvas shows of the registry's nodes (its tests draw flows
    // from it and check the plan takes them).
    ("flow/catalog", 11),
];

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every module of the crate: its path (`["flow", "runtime"]`) and its source.
fn modules() -> BTreeMap<Vec<String>, String> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{dir:?}: {e}")) {
            let path = entry.unwrap_or_else(|e| panic!("{dir:?}: {e}")).path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs")
                && path.file_name().is_some_and(|n| n != "main.rs")
            {
                // main.rs is the binary, a crate of its own over this library.
                out.push(path);
            }
        }
    }
    let root = src_dir();
    let mut files = Vec::new();
    walk(&root, &mut files);
    files
        .into_iter()
        .map(|file| {
            let rel = file.strip_prefix(&root).unwrap_or(&file).with_extension("");
            let mut path: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if path.last().is_some_and(|l| l == "mod") {
                path.pop();
            }
            if path == ["lib"] {
                path.clear();
            }
            let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{file:?}: {e}"));
            (path, text)
        })
        .collect()
}

/// The source a module's imports are read from: without comments and without
/// its `#[cfg(test)] mod tests` (tests may reach anything to build fixtures).
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or(text);
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every path the code names from `crate::` or `super::`, groups
/// (`crate::a::{b, c::d}`) expanded, as segments.
fn named_paths(code: &str) -> Vec<Vec<String>> {
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if !code.is_char_boundary(i) {
            i += 1;
            continue;
        }
        let rest = &code[i..];
        let starts = (rest.starts_with("crate::") || rest.starts_with("super::"))
            && (i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_'));
        if !starts {
            i += 1;
            continue;
        }
        let (paths, used) = parse_path(rest);
        out.extend(paths);
        i += used.max(1);
    }
    out
}

/// One path at the start of `text` (`a::b::{c, d::e}`): its expansions and
/// how many bytes it took.
fn parse_path(text: &str) -> (Vec<Vec<String>>, usize) {
    let mut segments = Vec::new();
    let mut pos = 0;
    loop {
        let ident: String = text[pos..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if ident.is_empty() {
            break;
        }
        pos += ident.len();
        segments.push(ident);
        if !text[pos..].starts_with("::") {
            return (vec![segments], pos);
        }
        pos += 2;
        if text[pos..].starts_with('{') {
            let mut depth = 0;
            let mut end = pos;
            for (k, c) in text[pos..].char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = pos + k;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let inner = &text[pos + 1..end];
            let mut items = Vec::new();
            let (mut depth, mut start) = (0, 0);
            for (k, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        items.push(&inner[start..k]);
                        start = k + 1;
                    }
                    _ => {}
                }
            }
            items.push(&inner[start..]);
            let mut paths = Vec::new();
            for item in items {
                let item = item.trim();
                if item.is_empty() || item == "self" {
                    paths.push(segments.clone());
                    continue;
                }
                let (inner_paths, _) = parse_path(item);
                for p in inner_paths {
                    let mut full = segments.clone();
                    full.extend(p);
                    paths.push(full);
                }
            }
            return (paths, end + 1);
        }
    }
    (vec![segments], pos)
}

/// The longest prefix of an absolute path that is a module.
fn longest_module(full: &[String], known: &BTreeSet<Vec<String>>) -> Option<Vec<String>> {
    (0..=full.len())
        .rev()
        .map(|n| full[..n].to_vec())
        .find(|prefix| known.contains(prefix))
}

/// A path named from `module`, from the crate root.
fn absolute(module: &[String], path: &[String]) -> Vec<String> {
    let mut base: Vec<String> = Vec::new();
    let mut rest = path;
    if rest.first().is_some_and(|s| s == "crate") {
        rest = &rest[1..];
    } else {
        base = module.to_vec();
        // `super` in `a/b.rs` and in `a/b/mod.rs` (both module a::b) is `a`.
        while rest.first().is_some_and(|s| s == "super") {
            base.pop();
            rest = &rest[1..];
        }
    }
    let mut full = base;
    full.extend(rest.iter().cloned());
    full
}

/// The part of the crate a module belongs to: `flow/runtime`, `services/triggers`,
/// or the area (`store`, `routes`) elsewhere.
fn part(module: &[String]) -> String {
    match module {
        [] => "crate".into(),
        [area, child, ..] if area == "flow" || area == "services" => format!("{area}/{child}"),
        [area, ..] => area.clone(),
    }
}

fn area(part: &str) -> &str {
    part.split('/').next().unwrap_or(part)
}

/// What an area's `mod.rs` re-exports from its parts (`pub use plan::{Plan,
/// Runnable};` in flow/mod.rs): name → the part's module, so that
/// `crate::flow::Plan` counts as an import of `flow/plan`.
fn re_exports(modules: &BTreeMap<Vec<String>, String>) -> BTreeMap<Vec<String>, Vec<String>> {
    let mut out = BTreeMap::new();
    for area in ["flow", "services"] {
        let root = vec![area.to_owned()];
        let Some(text) = modules.get(&root) else {
            continue;
        };
        for statement in code(text).split(';') {
            let Some(used) = statement.trim().strip_prefix("pub use ") else {
                continue;
            };
            for path in named_paths(&format!("crate::{used}")) {
                // crate::<part>::…::<name>
                if let [_, child, .., name] = path.as_slice() {
                    let mut named = root.clone();
                    named.push(name.clone());
                    out.insert(named, vec![area.to_owned(), child.clone()]);
                }
            }
        }
    }
    out
}

/// Every import between two parts: (from, to) → the module that names it.
fn part_edges() -> BTreeMap<(String, String), String> {
    let modules = modules();
    assert!(
        modules.len() > 100 && modules.contains_key(&vec!["flow".to_owned(), "runtime".to_owned()]),
        "the sources were not found where the test looks ({:?})",
        src_dir()
    );
    let known: BTreeSet<Vec<String>> = modules.keys().cloned().collect();
    let re_exported = re_exports(&modules);
    let mut edges = BTreeMap::new();
    for (module, text) in &modules {
        for path in named_paths(&code(text)) {
            let full = absolute(module, &path);
            let Some(mut target) = longest_module(&full, &known) else {
                continue;
            };
            // `crate::flow::Plan`: the part that defines it, not the area root.
            if target.len() == 1
                && let Some(named) = full.get(..2).and_then(|p| re_exported.get(p))
            {
                target.clone_from(named);
            }
            let (from, to) = (part(module), part(&target));
            if from != to {
                edges
                    .entry((from, to))
                    .or_insert_with(|| format!("{} names {}", module.join("/"), path.join("::")));
            }
        }
    }
    edges
}

fn floor(table: &[(&str, u8)], name: &str) -> Option<u8> {
    table.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

#[test]
fn areas_import_only_lower_floors() {
    let mut wrong = Vec::new();
    for ((from, to), example) in part_edges() {
        let (a, b) = (area(&from), area(&to));
        if a == b {
            continue;
        }
        let (Some(fa), Some(fb)) = (floor(AREAS, a), floor(AREAS, b)) else {
            wrong.push(format!("{a} or {b} has no floor in AREAS ({example})"));
            continue;
        };
        if fb > fa || (fb == fa && fa != 5) {
            wrong.push(format!(
                "{a} (floor {fa}) imports {b} (floor {fb}): {example}"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the floors:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_engine_imports_only_lower_floors() {
    let modules = modules();
    let mut wrong = Vec::new();
    for module in modules.keys() {
        if module.first().is_some_and(|a| a == "flow") && module.len() >= 2 {
            let p = part(module);
            if floor(FLOW, &p).is_none() {
                wrong.push(format!("{p} has no floor in FLOW"));
            }
        }
    }
    for ((from, to), example) in part_edges() {
        let (Some(ff), Some(ft)) = (floor(FLOW, &from), floor(FLOW, &to)) else {
            continue;
        };
        if ft >= ff {
            wrong.push(format!(
                "{from} (floor {ff}) imports {to} (floor {ft}): {example}"
            ));
        }
    }
    wrong.sort();
    wrong.dedup();
    assert!(
        wrong.is_empty(),
        "the engine's floors are broken:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_two_run_kinds_never_import_each_other() {
    let edges = part_edges();
    for (from, to) in [
        ("flow/chatflow", "flow/agentflow"),
        ("flow/agentflow", "flow/chatflow"),
    ] {
        if let Some(example) = edges.get(&(from.to_owned(), to.to_owned())) {
            panic!("{from} imports {to}: {example} (what both need belongs in flow/runtime)");
        }
    }
}

#[test]
fn no_part_imports_in_a_circle() {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut examples = BTreeMap::new();
    for ((from, to), example) in part_edges() {
        // An area's own mod.rs is the vocabulary its parts share.
        if to == "flow" || to == "services" || to == "crate" {
            continue;
        }
        graph.entry(from.clone()).or_default().insert(to.clone());
        examples.insert((from, to), example);
    }
    // Depth-first search for a back edge; the circle is reported with how
    // each step of it imports the next.
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = stack.iter().position(|n| n == node) {
            let mut circle = stack[at..].to_vec();
            circle.push(node.to_owned());
            return Some(circle);
        }
        if done.contains(node) {
            return None;
        }
        stack.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(circle) = visit(next, graph, stack, done) {
                return Some(circle);
            }
        }
        stack.pop();
        done.insert(node.to_owned());
        None
    }
    let (mut stack, mut done) = (Vec::new(), BTreeSet::new());
    for node in graph.keys() {
        if let Some(circle) = visit(node, &graph, &mut stack, &mut done) {
            let steps: Vec<String> = circle
                .windows(2)
                .map(|w| examples[&(w[0].clone(), w[1].clone())].clone())
                .collect();
            panic!(
                "an import circle: {}\n{}",
                circle.join(" → "),
                steps.join("\n")
            );
        }
    }
}

#[test]
fn the_parser_reads_groups_and_supers() {
    let code =
        "use crate::flow::{runtime::{Tokens, model_step}, plan};\nlet x = super::super::a::B;";
    let paths = named_paths(code);
    let words: Vec<String> = paths.iter().map(|p| p.join("::")).collect();
    assert_eq!(
        words,
        [
            "crate::flow::runtime::Tokens",
            "crate::flow::runtime::model_step",
            "crate::flow::plan",
            "super::super::a::B",
        ]
    );
    let known: BTreeSet<Vec<String>> = [vec!["x".to_owned()], vec!["x".into(), "y".into()]]
        .into_iter()
        .collect();
    let module = vec!["x".to_owned(), "y".to_owned(), "z".to_owned()];
    let path: Vec<String> = ["super", "y"].iter().map(|s| s.to_string()).collect();
    assert_eq!(
        longest_module(&absolute(&module, &path), &known),
        Some(vec!["x".into(), "y".into()])
    );
}
