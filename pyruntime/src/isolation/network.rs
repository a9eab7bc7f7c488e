//! The network runs reach (`PY_TOOL_NETWORK`), and the egress of `public` mode.
//!
//! - `public` (the default): each confined zygote gets a network namespace of its own,
//!   shared by its runs. Its only way out is `pasta` (user-mode networking, from
//!   Debian's `passt` package), attached by the server to the zygote's keeper before the
//!   zygote imports anything: the gateway is not mapped to the host, and no port is
//!   forwarded in either direction, so the host's loopback is out of reach. An nftables
//!   table in the namespace, loaded by the server first, rejects every destination that
//!   is not public: the host's own addresses and the networks they are on, loopback,
//!   RFC 1918, shared (CGNAT), link-local (cloud metadata), benchmarking, multicast and
//!   reserved ranges, and their IPv6 equivalents. (Documentation ranges are not
//!   rejected: nothing private lives there, and some sandboxes route their internet
//!   through them.) Only DNS to pasta's forwarder (`DNS_FORWARD`,
//!   which the view's `/etc/resolv.conf` names) passes to such an address. Neither the
//!   zygote nor its runs hold CAP_NET_ADMIN over the namespace, so neither can change it.
//! - `allow`: the host's network as it is (unsafe: the host's loopback, the API's port,
//!   private networks and metadata endpoints are all reachable).
//! - `deny`: a network namespace per run with loopback only.
//!
//! Where a zygote cannot be confined (the runtime is not root, or the kernel refuses
//! namespaces), `public` falls back to `deny` for its runs: never to the host's network.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::io::AsyncWriteExt;

use serde::{Deserialize, Serialize};

/// What runs may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NetworkMode {
    Public,
    Allow,
    Deny,
}

impl NetworkMode {
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "public" => Ok(Self::Public),
            "allow" => Ok(Self::Allow),
            "deny" => Ok(Self::Deny),
            _ => Err(format!("`{text}` is not public, allow or deny")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Public => "public",
            Self::Allow => "allow",
            Self::Deny => "deny",
        }
    }

    /// Whether a zygote in this mode has a network namespace of its own.
    pub fn zygote_namespace(self) -> bool {
        self != Self::Allow
    }

    /// Whether each run has a network namespace of its own (loopback only).
    pub fn run_namespace(self) -> bool {
        self == Self::Deny
    }
}

/// How the network layer reads where `public` is in force.
pub const PUBLIC_LAYER: &str = "public: the zygote's network namespace, out only through \
                                pasta; the host and private, link-local and reserved \
                                addresses rejected by nftables";

/// The address runs send DNS queries to; pasta forwards them to the host's resolver.
pub const DNS_FORWARD: &str = "169.254.1.53";

/// Destinations a `public` run may never reach (besides the host's own addresses).
const NOT_PUBLIC_V4: &[&str] = &[
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.88.99.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "224.0.0.0/3",
];
const NOT_PUBLIC_V6: &[&str] = &[
    "::/127",
    "::ffff:0:0/96",
    "64:ff9b::/96",
    "64:ff9b:1::/48",
    "100::/64",
    "2002::/16",
    "fc00::/7",
    "fe80::/10",
    "fec0::/10",
    "ff00::/8",
];

/// The nftables table loaded into a `public` zygote's namespace: `host` (the host's
/// addresses and networks) and the non-public ranges rejected, one rule each (ranges
/// may overlap), after DNS to the forwarder.
pub fn rules(host: &[String]) -> String {
    let mut text = format!(
        "table inet weir_egress {{\n\tchain out {{\n\t\ttype filter hook output priority 0; \
         policy accept;\n\t\toifname \"lo\" accept\n\t\tip daddr {DNS_FORWARD} udp dport 53 \
         accept\n\t\tip daddr {DNS_FORWARD} tcp dport 53 accept\n"
    );
    let ranges = host
        .iter()
        .map(String::as_str)
        .chain(NOT_PUBLIC_V4.iter().copied())
        .chain(NOT_PUBLIC_V6.iter().copied());
    for range in ranges {
        let family = if range.contains(':') { "ip6" } else { "ip" };
        text.push_str(&format!(
            "\t\t{family} daddr {range} reject with icmpx type admin-prohibited\n"
        ));
    }
    text.push_str("\t}\n}\n");
    text
}

/// The host's own addresses and the networks they are on: reached through pasta, any
/// of them would be the host or its neighbours.
fn host_networks() -> Vec<String> {
    let Ok(addresses) = nix::ifaddrs::getifaddrs() else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for interface in addresses {
        let (Some(address), netmask) = (interface.address, interface.netmask) else {
            continue;
        };
        if let Some(v4) = address.as_sockaddr_in() {
            let ip = u32::from(v4.ip());
            let mask = netmask
                .as_ref()
                .and_then(|m| m.as_sockaddr_in())
                .map_or(u32::MAX, |m| u32::from(m.ip()));
            found.push(format!("{}/32", v4.ip()));
            found.push(format!(
                "{}/{}",
                std::net::Ipv4Addr::from(ip & mask),
                mask.count_ones()
            ));
        } else if let Some(v6) = address.as_sockaddr_in6() {
            let ip = u128::from(v6.ip());
            let mask = netmask
                .as_ref()
                .and_then(|m| m.as_sockaddr_in6())
                .map_or(u128::MAX, |m| u128::from(m.ip()));
            found.push(format!("{}/128", v6.ip()));
            found.push(format!(
                "{}/{}",
                std::net::Ipv6Addr::from(ip & mask),
                mask.count_ones()
            ));
        }
    }
    found.sort();
    found.dedup();
    found
}

/// `public` mode's tools, found at start.
#[derive(Debug)]
pub struct Egress {
    pasta: PathBuf,
    nft: PathBuf,
    resolv_conf: PathBuf,
}

impl Egress {
    /// Finds `pasta` and `nft` and writes the `/etc/resolv.conf` of `public` views into
    /// `dir`; the error says why `public` cannot work here. Blocking.
    pub fn detect(dir: &Path) -> Result<Self, String> {
        if !nix::unistd::geteuid().is_root() {
            return Err("the runtime is not root".to_owned());
        }
        let find = |name: &str| {
            [
                "/usr/bin",
                "/usr/sbin",
                "/bin",
                "/sbin",
                "/usr/local/bin",
                "/usr/local/sbin",
            ]
            .iter()
            .map(|dir| Path::new(dir).join(name))
            .find(|path| path.is_file())
            .ok_or_else(|| format!("`{name}` not found (Debian: apt-get install passt nftables)"))
        };
        let pasta = find("pasta")?;
        let nft = find("nft")?;
        std::fs::create_dir_all(dir).map_err(|err| format!("{}: {err}", dir.display()))?;
        let resolv_conf = dir.join("resolv.conf");
        std::fs::write(&resolv_conf, format!("nameserver {DNS_FORWARD}\n"))
            .map_err(|err| format!("{}: {err}", resolv_conf.display()))?;
        Ok(Self {
            pasta,
            nft,
            resolv_conf,
        })
    }

    /// What `public` views show as `/etc/resolv.conf`.
    pub fn resolv_conf(&self) -> &Path {
        &self.resolv_conf
    }

    /// Puts the filter in the network namespace of `pid` — the server's own child (a
    /// zygote's keeper), which runs nothing of a workspace yet — and connects it to the
    /// outside through pasta, which lives as long as the returned `Connection` (and dies
    /// with the server). Both are forked from the runtime's worker threads, which live as
    /// long as the server (a parent-death signal follows the forking thread).
    pub async fn attach(&self, pid: u32) -> Result<Connection, String> {
        let netns = std::fs::File::open(format!("/proc/{pid}/ns/net"))
            .map_err(|err| format!("the zygote's network namespace: {err}"))?;
        let netns_fd = netns.as_raw_fd();
        let mut nft = tokio::process::Command::new(&self.nft);
        nft.args(["-f", "-"])
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // SAFETY: setns(2) is async-signal-safe; the descriptor is open in the parent.
        unsafe {
            nft.pre_exec(move || {
                if libc::setns(netns_fd, libc::CLONE_NEWNET) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = nft.spawn().map_err(|err| format!("nft: {err}"))?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(rules(&host_networks()).as_bytes())
                .await
                .map_err(|err| format!("nft: {err}"))?;
        }
        let output = child
            .wait_with_output()
            .await
            .map_err(|err| format!("nft: {err}"))?;
        if !output.status.success() {
            return Err(format!(
                "nft refused the egress filter: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        drop(netns);
        // pasta runs as root so as to join the namespace (and confines itself), in the
        // foreground: the server's own child, killed with the zygote.
        let target = pid.to_string();
        let mut pasta = tokio::process::Command::new(&self.pasta);
        pasta
            .args([
                "--runas",
                "0",
                "--config-net",
                "--no-map-gw",
                "--dns-forward",
                DNS_FORWARD,
                "-T",
                "none",
                "-U",
                "none",
                "-t",
                "none",
                "-u",
                "none",
                "-q",
                "-f",
                &target,
            ])
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        // SAFETY: prctl(2) is async-signal-safe.
        unsafe {
            pasta.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = pasta.spawn().map_err(|err| format!("pasta: {err}"))?;
        // pasta configures the namespace before it serves: ready with the default route.
        let routes = format!("/proc/{pid}/net/route");
        let deadline = std::time::Instant::now() + ATTACH_TIMEOUT;
        loop {
            let ready = std::fs::read_to_string(&routes).is_ok_and(|table| {
                table
                    .lines()
                    .skip(1)
                    .any(|line| line.split_whitespace().nth(1) == Some("00000000"))
            });
            if ready {
                return Ok(Connection { _pasta: child });
            }
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!("pasta could not connect the zygote ({status})"));
            }
            if std::time::Instant::now() > deadline {
                return Err("pasta did not configure the zygote's network in time".to_owned());
            }
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    }
}

/// How long pasta may take to configure a zygote's namespace.
const ATTACH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// A zygote's way out: its pasta, killed when this is dropped (with the zygote).
#[derive(Debug)]
pub struct Connection {
    _pasta: tokio::process::Child,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse() {
        assert_eq!(NetworkMode::parse("public"), Ok(NetworkMode::Public));
        assert_eq!(NetworkMode::parse(" Deny "), Ok(NetworkMode::Deny));
        assert!(NetworkMode::parse("open").is_err());
        assert!(NetworkMode::Public.zygote_namespace() && !NetworkMode::Public.run_namespace());
        assert!(!NetworkMode::Allow.zygote_namespace());
        assert!(NetworkMode::Deny.run_namespace());
    }

    #[test]
    fn the_filter_names_the_host_and_every_private_range() {
        let host = vec![
            "192.0.2.2/32".to_owned(),
            "192.0.2.0/24".to_owned(),
            "2001:db8::5/128".to_owned(),
        ];
        let text = rules(&host);
        for needle in [
            "ip daddr 192.0.2.2/32 reject",
            "ip daddr 192.0.2.0/24 reject",
            "ip6 daddr 2001:db8::5/128 reject",
            "ip daddr 10.0.0.0/8 reject",
            "ip daddr 169.254.0.0/16 reject",
            "ip6 daddr fc00::/7 reject",
            "ip6 daddr ::ffff:0:0/96 reject",
        ] {
            assert!(text.contains(needle), "{needle}");
        }
        let dns = text.find(&format!("ip daddr {DNS_FORWARD} udp dport 53 accept"));
        let first_reject = text.find("reject");
        assert!(
            dns.is_some() && dns < first_reject,
            "DNS to the forwarder passes first"
        );
    }

    #[test]
    fn the_host_is_always_in_its_own_filter() {
        let networks = host_networks();
        assert!(networks.iter().any(|n| n == "127.0.0.1/32"), "{networks:?}");
    }
}
