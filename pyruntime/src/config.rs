//! Runtime configuration: one `clap` struct, every field settable by flag or environment.
//!
//! Owns the names and defaults of the runtime's settings (`PY_TOOL_*`) and the parsing of
//! human-friendly values such as `512M`. It does not touch the file system or the
//! interpreter; `server::serve` turns a `Config` into running state.

use std::net::IpAddr;
use std::path::PathBuf;

use clap::Parser;

use crate::isolation::NetworkMode;

/// 1 GiB, SPEC.md's default address-space limit for one Python execution.
pub const DEFAULT_MAX_MEM: u64 = 1 << 30;

/// Settings of the Python tool runtime.
#[derive(Debug, Clone, Parser)]
#[command(name = "weir-pyruntime", version, about = "weir's Python tool runtime")]
pub struct Config {
    /// Address to listen on. Loopback by default: this server executes arbitrary code.
    #[arg(long, env = "PY_TOOL_HOST", default_value = "127.0.0.1")]
    pub host: IpAddr,

    /// TCP port (0 picks a free one; the chosen address is printed on stdout).
    #[arg(long, env = "PY_TOOL_PORT", default_value_t = 8000)]
    pub port: u16,

    /// Directory holding one virtual environment per workspace.
    #[arg(long, env = "PY_TOOL_VENVS", default_value = "./data/venvs")]
    pub venvs: PathBuf,

    /// Directory holding one artifact directory per workspace.
    #[arg(long, env = "PY_TOOL_ARTIFACTS", default_value = "./data/artifacts")]
    pub artifacts: PathBuf,

    /// Bytes of artifacts one workspace may keep (K, M, G); a run that would go beyond
    /// keeps none of its files and says so.
    #[arg(long, env = "PY_TOOL_WORKSPACE_QUOTA", default_value = "1G", value_parser = parse_mem_size)]
    pub workspace_quota: u64,

    /// Bytes one run may write while it runs (its work, home and tmp, on a tmpfs of this
    /// size; K, M, G), and the size of each workspace's cache.
    #[arg(long, env = "PY_TOOL_RUN_DISK", default_value = "256M", value_parser = parse_mem_size)]
    pub run_disk: u64,

    /// How long artifacts are kept after their last change: seconds, or with s, m, h, d.
    #[arg(long, env = "PY_TOOL_ARTIFACT_TTL", default_value = "7d", value_parser = parse_duration)]
    pub artifact_ttl: std::time::Duration,

    /// The API server's data directory (its database, keys, uploads): the runtime
    /// refuses to start when a run's view would show it.
    #[arg(long, env = "WEIR_DATA_DIR")]
    pub api_data_dir: Option<PathBuf>,

    /// Address-space limit of one execution: bytes, or a number with K, M, G (powers of 1024).
    #[arg(long, env = "PY_TOOL_MAX_MEM", default_value = "1G", value_parser = parse_mem_size)]
    pub max_mem: u64,

    /// Largest `code` of one execution (bytes, or with K, M): a larger one is a 413 before
    /// any analysis.
    #[arg(long, env = "PY_TOOL_MAX_CODE", default_value = "1M", value_parser = parse_mem_size)]
    pub max_code: u64,

    /// Seconds the analysis of one execution's code (template substitution, import
    /// detection) may take, in a worker process; longer is a 400.
    #[arg(long, env = "PY_TOOL_ANALYSIS_TIMEOUT", default_value_t = 5.0)]
    pub analysis_timeout: f64,

    /// Upper bound (seconds) for the `timeout` of one execution.
    #[arg(long, env = "PY_TOOL_MAX_TIMEOUT", default_value_t = 300)]
    pub max_timeout: u64,

    /// How many executions may run at once (more wait their turn); by default twice the
    /// number of CPUs.
    #[arg(long, env = "PY_TOOL_MAX_CONCURRENCY")]
    pub max_concurrency: Option<usize>,

    /// How many executions may wait for a slot; beyond that a request is answered 429 with
    /// `Retry-After`. By default eight times the concurrency.
    #[arg(long, env = "PY_TOOL_MAX_QUEUE")]
    pub max_queue: Option<usize>,

    /// How many executions of one workspace may wait; beyond that its requests are
    /// answered 429 while other workspaces still queue. By default a quarter of the queue
    /// (at least 1).
    #[arg(long, env = "PY_TOOL_MAX_QUEUE_PER_WORKSPACE")]
    pub max_queue_per_workspace: Option<usize>,

    /// Network access of tool code: `public` (default: the internet, never the host, its
    /// loopback or private, link-local and reserved addresses; needs root, `pasta` and
    /// `nft`, else runs get `deny`), `allow` (the host's network, unfiltered: unsafe) or
    /// `deny` (a network namespace with loopback only, and Landlock denies TCP).
    #[arg(long, env = "PY_TOOL_NETWORK", default_value = "public", value_parser = NetworkMode::parse)]
    pub network: NetworkMode,

    /// Refuse to start (and refuse to run code) when an isolation layer is missing.
    #[arg(long, env = "PY_TOOL_REQUIRE_ISOLATION", default_value = "0", value_parser = parse_flag)]
    pub require_isolation: bool,

    /// Layers `PY_TOOL_REQUIRE_ISOLATION=1` lets be missing (comma list of `cgroups`,
    /// `zygote`, `disk`: those the server alone applies). In a container without cgroup
    /// delegation, `cgroups`: the container's own limits then bound all runs together.
    #[arg(long, env = "PY_TOOL_OPTIONAL_LAYERS", default_value = "", value_parser = OptionalLayers::parse)]
    pub optional_layers: OptionalLayers,

    /// Every endpoint except /tools/health requires `Authorization: Bearer <key>`.
    /// Required: the runtime refuses to start without one (tool code could otherwise call
    /// this server as any workspace) unless `PY_TOOL_INSECURE_NO_KEY=1`.
    #[arg(long, env = "PY_TOOL_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,

    /// The bearer token `GET /metrics` asks for (not the API key: a scraper must not
    /// be able to run code). Unset: no metrics are served.
    #[arg(long, env = "PY_TOOL_METRICS_TOKEN", hide_env_values = true)]
    pub metrics_token: Option<String>,

    /// Serve without `PY_TOOL_API_KEY` (a laptop, never a shared machine).
    #[arg(long, env = "PY_TOOL_INSECURE_NO_KEY", default_value = "0", value_parser = parse_flag)]
    pub insecure_no_key: bool,

    /// Path of the `uv` binary; by default `uv` is looked up on PATH and beside the
    /// interpreter. `none` forces the fallback (`python -m venv` + pip).
    #[arg(long, env = "PY_TOOL_UV")]
    pub uv: Option<PathBuf>,

    /// Base interpreter for new virtual environments; by default the embedded CPython's.
    #[arg(long, env = "PY_TOOL_PYTHON")]
    pub python: Option<PathBuf>,

    /// How long a stdio MCP server (`/tools/mcp-stdio`) may sit unused before it is
    /// stopped; the next request starts it again.
    #[arg(long, env = "PY_TOOL_MCP_IDLE", default_value = "10m", value_parser = parse_duration)]
    pub mcp_idle: std::time::Duration,

    /// Stdio MCP servers one workspace may keep running at once.
    #[arg(long, env = "PY_TOOL_MCP_SERVERS_PER_WORKSPACE", default_value_t = 8)]
    pub mcp_servers_per_workspace: usize,

    /// A directory of npm packages installed ahead (`npm install --prefix DIR <pkg>`,
    /// e.g. baked into the runtime's image): shown read-only to every run, and an
    /// `npx <pkg>` stdio MCP server whose package is there runs it from there instead
    /// of fetching it (machines whose runs cannot reach the npm registry).
    #[arg(long, env = "PY_TOOL_NODE_PACKAGES")]
    pub node_packages: Option<PathBuf>,
}

impl Config {
    /// `max_concurrency`, or twice the number of CPUs; at least 1.
    pub fn concurrency(&self) -> usize {
        self.max_concurrency
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get() * 2))
            .max(1)
    }

    /// `max_queue`, or eight times the concurrency.
    pub fn queue(&self) -> usize {
        self.max_queue.unwrap_or_else(|| self.concurrency() * 8)
    }

    /// `max_queue_per_workspace`, or a quarter of the queue; at least 1.
    pub fn queue_per_workspace(&self) -> usize {
        self.max_queue_per_workspace
            .unwrap_or_else(|| self.queue() / 4)
            .max(1)
    }

    /// The API key, when one is set and not empty.
    pub fn key(&self) -> Option<&str> {
        self.api_key.as_deref().filter(|key| !key.trim().is_empty())
    }

    /// Refuses a configuration the runtime must not start with, in one line.
    pub fn check(&self) -> Result<(), String> {
        if self.key().is_none() && !self.insecure_no_key {
            return Err(
                "PY_TOOL_API_KEY is required (tool code could otherwise call this \
                        server as any workspace); set PY_TOOL_INSECURE_NO_KEY=1 to serve \
                        without one on a machine of your own"
                    .to_owned(),
            );
        }
        Ok(())
    }

    /// Upper bound (bytes) of a request body.
    pub const MAX_BODY_BYTES: usize = 10 << 20;
    /// Default `timeout` of an execution when the request sends none.
    pub const DEFAULT_TIMEOUT_SECS: f64 = 30.0;
}

/// Parses an on/off setting: `1`, `true`, `yes`, `on` or `0`, `false`, `no`, `off`, ``.
pub fn parse_flag(text: &str) -> Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" | "" => Ok(false),
        _ => Err(format!("`{text}` is not 0 or 1")),
    }
}

/// The isolation layers a required isolation may go without (`PY_TOOL_OPTIONAL_LAYERS`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OptionalLayers(Vec<&'static str>);

impl OptionalLayers {
    /// The layers the server alone applies: a run's own layers (namespaces, view,
    /// identity, Landlock, seccomp, network) can never be optional.
    pub const ALLOWED: [&'static str; 3] = ["cgroups", "zygote", "disk"];

    pub fn parse(text: &str) -> Result<Self, String> {
        let mut names = Vec::new();
        for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let known = Self::ALLOWED
                .iter()
                .find(|allowed| allowed.eq_ignore_ascii_case(name))
                .ok_or_else(|| {
                    format!(
                        "`{name}` cannot be optional: only {} can",
                        Self::ALLOWED.join(", ")
                    )
                })?;
            if !names.contains(known) {
                names.push(*known);
            }
        }
        Ok(Self(names))
    }

    pub fn contains(&self, layer: &str) -> bool {
        self.0.contains(&layer)
    }

    pub fn names(&self) -> &[&'static str] {
        &self.0
    }
}

/// Parses a duration: seconds (`3600`) or a number with `s`, `m`, `h` or `d`.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let number: u64 = digits
        .parse()
        .map_err(|_| format!("`{text}` is not a duration (expected e.g. 3600, 90m, 7d)"))?;
    let seconds = match unit.trim() {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("`{text}` has an unknown unit (use s, m, h or d)")),
    };
    number
        .checked_mul(seconds)
        .filter(|total| *total > 0)
        .map(std::time::Duration::from_secs)
        .ok_or_else(|| format!("`{text}` must be more than zero and not absurdly long"))
}

/// Parses a memory size: plain bytes (`1073741824`) or a number with a binary suffix
/// (`512K`, `512M`, `2G`, also `512MiB`, `2gb`). Zero and overflow are rejected.
pub fn parse_mem_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, suffix) = text.split_at(split);
    let number: u64 = digits.parse().map_err(|_| {
        format!("`{text}` is not a memory size (expected e.g. 1073741824, 512M, 2G)")
    })?;
    let shift = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(format!("`{text}` has an unknown unit (use K, M, G or T)")),
    };
    let bytes = number
        .checked_mul(1u64 << shift)
        .ok_or_else(|| format!("`{text}` is too large"))?;
    if bytes == 0 {
        return Err("the memory limit must be greater than zero".to_owned());
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_sizes_accept_bytes_and_binary_suffixes() {
        assert_eq!(parse_mem_size("1073741824"), Ok(1 << 30));
        assert_eq!(parse_mem_size("512M"), Ok(512 << 20));
        assert_eq!(parse_mem_size("2G"), Ok(2 << 30));
        assert_eq!(parse_mem_size("2g"), Ok(2 << 30));
        assert_eq!(parse_mem_size("64KiB"), Ok(64 << 10));
        assert_eq!(parse_mem_size(" 3 GB "), Ok(3 << 30));
    }

    #[test]
    fn mem_sizes_reject_nonsense() {
        assert!(parse_mem_size("").is_err());
        assert!(parse_mem_size("G").is_err());
        assert!(parse_mem_size("0").is_err());
        assert!(parse_mem_size("12X").is_err());
        assert!(parse_mem_size("-5M").is_err());
        assert!(parse_mem_size("1.5G").is_err());
        assert!(parse_mem_size("99999999999T").is_err());
    }

    #[test]
    fn only_the_servers_own_layers_may_be_optional() {
        let parsed = OptionalLayers::parse(" cgroups, Disk,cgroups,, ").unwrap();
        assert_eq!(parsed.names(), ["cgroups", "disk"]);
        assert!(parsed.contains("cgroups") && !parsed.contains("zygote"));
        assert_eq!(
            OptionalLayers::parse("").unwrap(),
            OptionalLayers::default()
        );
        for refused in ["seccomp", "network", "landlock", "namespaces", "everything"] {
            let error = OptionalLayers::parse(refused).unwrap_err();
            assert!(
                error.contains(refused) && error.contains("cgroups, zygote, disk"),
                "{error}"
            );
        }
    }

    #[test]
    fn defaults_are_safe() {
        let config = Config::parse_from(["weir-pyruntime"]);
        assert!(config.host.is_loopback());
        assert_eq!(config.max_mem, DEFAULT_MAX_MEM);
        assert_eq!(config.max_timeout, 300);
        assert_eq!(config.network, NetworkMode::Public);
        // CI exports PY_TOOL_REQUIRE_ISOLATION=1 for every process, this test included.
        if std::env::var_os("PY_TOOL_REQUIRE_ISOLATION").is_none() {
            assert!(!config.require_isolation);
        }
        assert_eq!(config.queue(), config.concurrency() * 8);
    }

    #[test]
    fn a_key_is_required_unless_insecure_is_asked_for() {
        let bare = Config::parse_from(["weir-pyruntime", "--api-key", " "]);
        assert!(bare.check().is_err());
        let keyed = Config::parse_from(["weir-pyruntime", "--api-key", "k"]);
        assert!(keyed.check().is_ok());
        let mut insecure = Config::parse_from(["weir-pyruntime", "--api-key", ""]);
        insecure.insecure_no_key = true;
        assert!(insecure.check().is_ok());
    }

    #[test]
    fn durations_parse() {
        assert_eq!(
            parse_duration("7d"),
            Ok(std::time::Duration::from_secs(604_800))
        );
        assert_eq!(
            parse_duration("90m"),
            Ok(std::time::Duration::from_secs(5400))
        );
        assert_eq!(parse_duration("2"), Ok(std::time::Duration::from_secs(2)));
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("1w").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn flags_parse() {
        assert_eq!(parse_flag("1"), Ok(true));
        assert_eq!(parse_flag("0"), Ok(false));
        assert_eq!(parse_flag("yes"), Ok(true));
        assert!(parse_flag("maybe").is_err());
    }
}
