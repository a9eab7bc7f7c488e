//! From imports and `requirements` to the list of distributions to install.
//!
//! Owns the import-name → distribution table, the validation of requirement specifiers
//! (so nothing a request sends can become an installer option, a URL or a path), and
//! the pure planning step: which specifiers a run must install given the modules its code
//! imports that the venv lacks. Finding those modules (CPython's `ast`) is `py`'s job;
//! installing is `venvs`'.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

/// Import names whose distribution is named differently (import name, distribution).
pub const MODULE_TO_DISTRIBUTION: &[(&str, &str)] = &[
    ("PIL", "pillow"),
    ("cv2", "opencv-python"),
    ("sklearn", "scikit-learn"),
    ("skimage", "scikit-image"),
    ("yaml", "PyYAML"),
    ("bs4", "beautifulsoup4"),
    ("dateutil", "python-dateutil"),
    ("docx", "python-docx"),
    ("pptx", "python-pptx"),
    ("fitz", "PyMuPDF"),
    ("dotenv", "python-dotenv"),
    ("jwt", "PyJWT"),
    ("Crypto", "pycryptodome"),
    ("OpenSSL", "pyOpenSSL"),
    ("attr", "attrs"),
    ("psycopg2", "psycopg2-binary"),
    ("mysql", "mysql-connector-python"),
    ("serial", "pyserial"),
    ("magic", "python-magic"),
    ("git", "GitPython"),
    ("zmq", "pyzmq"),
    ("telegram", "python-telegram-bot"),
    // QuickJS's C module (the JavaScript harness imports it; `quickjs` itself is
    // an older, other distribution).
    ("_quickjs", "quickjs-ng"),
];

/// The distribution that provides the top-level module `module`.
pub fn distribution_for(module: &str) -> &str {
    MODULE_TO_DISTRIBUTION
        .iter()
        .find(|(name, _)| *name == module)
        .map_or(module, |(_, dist)| dist)
}

/// PEP 503 normalized form of a distribution name.
pub fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut last_sep = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !last_sep {
                out.push('-');
            }
            last_sep = true;
        } else {
            out.push(c.to_ascii_lowercase());
            last_sep = false;
        }
    }
    out
}

/// name, optional [extras], optional comma-separated version clauses. No URLs, paths,
/// options or environment markers.
static REQUIREMENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*(\[\s*[A-Za-z0-9._-]+(?:\s*,\s*[A-Za-z0-9._-]+)*\s*\])?\s*((?:===|==|!=|~=|>=|<=|>|<)\s*[A-Za-z0-9.*+!_-]+(?:\s*,\s*(?:===|==|!=|~=|>=|<=|>|<)\s*[A-Za-z0-9.*+!_-]+)*)?$",
    )
    .unwrap_or_else(|err| unreachable!("requirement regex is valid: {err}"))
});

/// A validated requirement specifier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// The specifier as given (trimmed), passed to the installer.
    pub spec: String,
    /// Normalized distribution name.
    pub name: String,
    /// Whether it carries extras or version clauses (then it is handed to the
    /// installer, which decides whether the installed version satisfies it —
    /// unless it is `pinned` to the version installed).
    pub constrained: bool,
    /// The version of a plain `name==version` pin (no extras, no wildcard).
    pub pinned: Option<String>,
}

/// Validates one requirement specifier such as `requests`, `six>=1.16`,
/// `pandas[excel]==2.2.*`.
pub fn parse_requirement(spec: &str) -> Result<Requirement, String> {
    let spec = spec.trim();
    if spec.len() > 200 {
        return Err("a requirement is longer than 200 characters".to_owned());
    }
    let captures = REQUIREMENT.captures(spec).ok_or_else(|| {
        format!("`{spec}` is not a package requirement (expected e.g. `six` or `six>=1.16`)")
    })?;
    let name = captures.get(1).map_or("", |m| m.as_str());
    let pinned = match (captures.get(2), captures.get(3)) {
        (None, Some(clause)) => clause
            .as_str()
            .strip_prefix("==")
            .map(str::trim)
            .filter(|v| !v.contains(['*', ',', '=', '<', '>', '!', '~']))
            .map(str::to_owned),
        _ => None,
    };
    Ok(Requirement {
        spec: spec.to_owned(),
        name: normalize(name),
        constrained: captures.get(2).is_some() || captures.get(3).is_some(),
        pinned,
    })
}

/// Specifiers to install for a run: `requirements` not yet satisfied by name (constrained
/// ones always, the installer checks them), then the distributions of `missing_modules`
/// that no requirement already names. `installed` maps normalized names to versions.
pub fn plan(
    requirements: &[Requirement],
    missing_modules: &[String],
    installed: &BTreeMap<String, String>,
) -> Vec<String> {
    let mut specs: Vec<String> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for requirement in requirements {
        let installed_version = installed.get(&requirement.name);
        let satisfied = match &requirement.pinned {
            Some(version) => installed_version == Some(version),
            None => !requirement.constrained && installed_version.is_some(),
        };
        if !names.contains(&requirement.name) && !satisfied {
            specs.push(requirement.spec.clone());
        }
        names.push(requirement.name.clone());
    }
    for module in missing_modules {
        let dist = distribution_for(module);
        let name = normalize(dist);
        if !names.contains(&name) && !installed.contains_key(&name) {
            specs.push(dist.to_owned());
            names.push(name);
        }
    }
    specs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapping_table_and_default() {
        assert_eq!(distribution_for("PIL"), "pillow");
        assert_eq!(distribution_for("cv2"), "opencv-python");
        assert_eq!(distribution_for("sklearn"), "scikit-learn");
        assert_eq!(distribution_for("yaml"), "PyYAML");
        assert_eq!(distribution_for("bs4"), "beautifulsoup4");
        assert_eq!(distribution_for("dateutil"), "python-dateutil");
        assert_eq!(distribution_for("docx"), "python-docx");
        assert_eq!(distribution_for("fitz"), "PyMuPDF");
        assert_eq!(distribution_for("_quickjs"), "quickjs-ng");
        assert_eq!(distribution_for("six"), "six");
    }

    #[test]
    fn names_normalize() {
        assert_eq!(normalize("PyYAML"), "pyyaml");
        assert_eq!(normalize("python_dateutil"), "python-dateutil");
        assert_eq!(normalize("a.-_b"), "a-b");
    }

    #[test]
    fn requirements_accept_constraints_and_extras() {
        let r = parse_requirement(" six>=1.16 ").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (r.spec.as_str(), r.name.as_str(), r.constrained),
            ("six>=1.16", "six", true)
        );
        let r = parse_requirement("Pandas[excel, perf]==2.2.*").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.name, "pandas");
        let r = parse_requirement("requests").unwrap_or_else(|e| panic!("{e}"));
        assert!(!r.constrained);
        assert!(parse_requirement("six>=1.0,<2").is_ok());
    }

    #[test]
    fn a_pin_to_the_installed_version_installs_nothing() {
        let pin = |spec: &str| parse_requirement(spec).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            pin("quickjs-ng==0.17.0.2").pinned.as_deref(),
            Some("0.17.0.2")
        );
        for loose in [
            "six>=1.16",
            "six==1.*",
            "six[x]==1.0",
            "six==1.0,!=1.1",
            "six",
        ] {
            assert_eq!(pin(loose).pinned, None, "{loose}");
        }
        let installed: BTreeMap<String, String> =
            [("quickjs-ng".to_owned(), "0.17.0.2".to_owned())].into();
        assert!(plan(&[pin("quickjs-ng==0.17.0.2")], &[], &installed).is_empty());
        assert_eq!(
            plan(&[pin("quickjs-ng==0.17.0.3")], &[], &installed),
            vec!["quickjs-ng==0.17.0.3".to_owned()]
        );
        assert_eq!(
            plan(&[pin("quickjs-ng>=0.1")], &[], &installed),
            vec!["quickjs-ng>=0.1".to_owned()]
        );
    }

    #[test]
    fn requirements_reject_options_urls_and_paths() {
        for bad in [
            "",
            "-r /etc/passwd",
            "--index-url=http://evil",
            "six @ https://example.com/six.whl",
            "./local",
            "/abs/path",
            "six; os_name=='nt'",
            "six>=",
            "git+https://x/y",
        ] {
            assert!(parse_requirement(bad).is_err(), "{bad:?} must be rejected");
        }
    }

    #[test]
    fn plan_prefers_requirements_and_skips_installed() {
        let installed: BTreeMap<String, String> = [("numpy".to_owned(), "2.0".to_owned())]
            .into_iter()
            .collect();
        let reqs = vec![
            parse_requirement("six>=1.16").unwrap_or_else(|e| panic!("{e}")),
            parse_requirement("numpy").unwrap_or_else(|e| panic!("{e}")),
        ];
        let missing = vec!["six".to_owned(), "PIL".to_owned(), "yaml".to_owned()];
        assert_eq!(
            plan(&reqs, &missing, &installed),
            vec!["six>=1.16", "pillow", "PyYAML"]
        );
        assert!(plan(&[], &["numpy".to_owned()], &installed).is_empty());
    }
}
