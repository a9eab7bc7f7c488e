//! The check behind the docs pages generated from code (the settings table
//! from `Config`, the node list from the registry): the lines between a page's
//! two markers must be what the code generates now. `WEIR_WRITE_DOCS=1`
//! rewrites them instead of failing.

use std::path::Path;

/// Fails unless `docs/<page>` holds `want` between `begin` and `end` (each on
/// its own line); `what` says in the failure what drifted from what.
pub fn check(page: &str, begin: &str, end: &str, want: &str, what: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../docs")
        .join(page);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let start = text
        .find(begin)
        .unwrap_or_else(|| panic!("docs/{page} has no line {begin}"))
        + begin.len()
        + 1;
    let stop = text
        .find(end)
        .unwrap_or_else(|| panic!("docs/{page} has no line {end}"));
    if text[start..stop] == *want {
        return;
    }
    if std::env::var_os("WEIR_WRITE_DOCS").is_some() {
        let rewritten = format!("{}{want}{}", &text[..start], &text[stop..]);
        std::fs::write(&path, rewritten).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        return;
    }
    panic!(
        "docs/{page}: {what}; rewrite it with \
         WEIR_WRITE_DOCS=1 cargo test -p weir-api --lib -- configuration_page nodes_page"
    );
}
