//! Decides which IP addresses an outbound request from a public chatflow may
//! reach. This is the SSRF guard for the `requestsGet` and `requestsPost` tools.
//! A model chooses those URLs, and anyone who can chat with the flow can steer
//! the model. So loopback, private networks, link-local addresses (including
//! the cloud metadata endpoint 169.254.169.254), and all other addresses that
//! are not on the public internet are refused.
//!
//! - [`AddressPolicy`]: the non-public addresses `ALLOW_PRIVATE_REQUESTS` lets
//!   requests reach anyway; every other address goes through [`forbidden`].
//! - [`forbidden`] judges one address. An IPv6 address that embeds an IPv4
//!   address (mapped, compatible, NAT64, 6to4) is judged by that IPv4 address,
//!   so `::ffff:127.0.0.1` counts as loopback.
//! - [`host_ip`] reads a URL host that is an IP literal. It accepts the legacy
//!   IPv4 spellings that browsers, curl and `inet_aton` accept
//!   (`2130706433`, `0x7f000001`, `0177.0.0.1`, `127.1`), so none of them can
//!   pass for a DNS name.
//!
//! A host that is a DNS name must still be resolved, and every address it
//! resolves to must pass [`forbidden`]. The connection should then go to the
//! address that was checked, not to a second lookup, or DNS rebinding gets past
//! the check.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Returns why `ip` must not be contacted, or `None` when it is a public
/// internet address.
pub fn forbidden(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => forbidden_v6(v6),
    }
}

/// Reads the host part of a URL as an IP address. The host may be bracketed
/// IPv6 (`[::1]`), plain IPv6 (`::1`), dotted IPv4 (`127.0.0.1`), or one of the
/// legacy IPv4 forms: a 32-bit number in decimal, hex or octal
/// (`2130706433`, `0x7f000001`, `017700000001`), parts in octal or hex
/// (`0177.0.0.1`, `0x7f.0.0.1`), or fewer than four parts (`127.1` and
/// `127.0.1`, where the last part fills the remaining bytes).
///
/// Returns `None` for a DNS name. A port must already be removed: pass
/// `127.0.0.1`, not `127.0.0.1:8080`.
pub fn host_ip(host: &str) -> Option<IpAddr> {
    if let Some(inner) = host.strip_prefix('[') {
        return parse_v6(inner.strip_suffix(']')?).map(IpAddr::V6);
    }
    if host.contains(':') {
        return parse_v6(host).map(IpAddr::V6);
    }
    parse_legacy_v4(host).map(IpAddr::V4)
}

// ---------------------------------------------------------------------------
// IPv4

/// A prefix written as address and length, e.g. 172.16.0.0/12.
struct V4Range {
    network: [u8; 4],
    prefix_length: u32,
    reason: &'static str,
}

impl V4Range {
    fn contains(&self, ip: Ipv4Addr) -> bool {
        // `checked_shl` returns None for /0. That would mean "every address",
        // but no entry in the table uses /0.
        let mask = u32::MAX.checked_shl(32 - self.prefix_length).unwrap_or(0);
        u32::from(ip) & mask == u32::from_be_bytes(self.network) & mask
    }
}

const fn v4(network: [u8; 4], prefix_length: u32, reason: &'static str) -> V4Range {
    V4Range {
        network,
        prefix_length,
        reason,
    }
}

/// The first match wins, so the more specific entries come first. For example,
/// the metadata address comes before the rest of link-local, and broadcast
/// comes before the rest of 240/4.
const FORBIDDEN_V4: &[V4Range] = &[
    v4([0, 0, 0, 0], 32, "unspecified address (0.0.0.0)"),
    v4([0, 0, 0, 0], 8, "\"this network\" (0.0.0.0/8)"),
    v4([127, 0, 0, 0], 8, "loopback (127.0.0.0/8)"),
    v4([10, 0, 0, 0], 8, "private network (10.0.0.0/8)"),
    v4([172, 16, 0, 0], 12, "private network (172.16.0.0/12)"),
    v4([192, 168, 0, 0], 16, "private network (192.168.0.0/16)"),
    v4(
        [100, 64, 0, 0],
        10,
        "shared address space for carrier-grade NAT (100.64.0.0/10)",
    ),
    v4(
        [169, 254, 169, 254],
        32,
        "cloud metadata endpoint (link-local 169.254.169.254)",
    ),
    v4([169, 254, 0, 0], 16, "link-local (169.254.0.0/16)"),
    v4(
        [192, 0, 0, 0],
        24,
        "IETF protocol assignments (192.0.0.0/24)",
    ),
    v4([192, 0, 2, 0], 24, "documentation (192.0.2.0/24)"),
    v4([198, 51, 100, 0], 24, "documentation (198.51.100.0/24)"),
    v4([203, 0, 113, 0], 24, "documentation (203.0.113.0/24)"),
    v4([198, 18, 0, 0], 15, "benchmarking (198.18.0.0/15)"),
    v4([224, 0, 0, 0], 4, "multicast (224.0.0.0/4)"),
    v4([255, 255, 255, 255], 32, "broadcast (255.255.255.255)"),
    v4([240, 0, 0, 0], 4, "reserved (240.0.0.0/4)"),
];

fn forbidden_v4(ip: Ipv4Addr) -> Option<&'static str> {
    FORBIDDEN_V4
        .iter()
        .find(|range| range.contains(ip))
        .map(|range| range.reason)
}

/// Parses IPv4 the way `inet_aton` and the WHATWG URL standard do. There are
/// one to four parts, separated by dots. A part is hex with `0x`, octal with a
/// leading `0`, and decimal otherwise. The last part fills all the bytes that
/// remain. One trailing dot is allowed (`127.0.0.1.`), as in URLs.
fn parse_legacy_v4(host: &str) -> Option<Ipv4Addr> {
    let host = host.strip_suffix('.').unwrap_or(host);
    let parts: Vec<&str> = host.split('.').collect();
    if parts.len() > 4 {
        return None;
    }
    let numbers = parts
        .iter()
        .map(|part| parse_v4_part(part))
        .collect::<Option<Vec<u64>>>()?;
    let (last, leading) = numbers.split_last()?;
    let mut address: u64 = 0;
    for (index, part) in leading.iter().enumerate() {
        // Each part before the last is exactly one byte.
        if *part > 0xff {
            return None;
        }
        address |= part << (8 * (3 - index));
    }
    let remaining_bytes = 4 - leading.len();
    if *last >= 1u64 << (8 * remaining_bytes) {
        return None;
    }
    let address = u32::try_from(address | last).ok()?;
    Some(Ipv4Addr::from(address))
}

/// One numeric part: `0x1F` (hex, where a bare `0x` means 0), `017` (octal),
/// `17` (decimal). Signs, empty parts and stray characters make it a DNS label,
/// not a number.
fn parse_v4_part(part: &str) -> Option<u64> {
    let (digits, radix) =
        if let Some(hex) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
            if hex.is_empty() {
                return Some(0);
            }
            (hex, 16)
        } else if part.len() > 1 && part.starts_with('0') {
            (&part[1..], 8)
        } else {
            (part, 10)
        };
    // Checking the characters first matters because `from_str_radix` also
    // accepts a leading '+'.
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    // Leading zeros do not overflow `from_str_radix`, but a real overflow (a
    // very long number) is an error. Such a value is far too large for IPv4
    // anyway.
    u64::from_str_radix(digits, radix).ok()
}

// ---------------------------------------------------------------------------
// IPv6

/// Parses IPv6 text, dropping a zone index (`fe80::1%eth0`, which a URL
/// writes as `%25eth0`). The zone only picks the interface, so the address
/// alone decides whether the destination is allowed.
fn parse_v6(text: &str) -> Option<Ipv6Addr> {
    let address = text.split('%').next().unwrap_or(text);
    address.parse().ok()
}

fn forbidden_v6(ip: Ipv6Addr) -> Option<&'static str> {
    if ip.is_unspecified() {
        return Some("unspecified address (::)");
    }
    if ip.is_loopback() {
        return Some("loopback (::1)");
    }
    if let Some(embedded) = embedded_v4(ip) {
        return forbidden_v4(embedded);
    }
    let segments = ip.segments();
    let first = segments[0];
    if first & 0xfe00 == 0xfc00 {
        return Some("unique local address (fc00::/7)");
    }
    if first & 0xffc0 == 0xfe80 {
        return Some("link-local (fe80::/10)");
    }
    if first & 0xffc0 == 0xfec0 {
        return Some("site-local (fec0::/10)");
    }
    if first & 0xff00 == 0xff00 {
        return Some("multicast (ff00::/8)");
    }
    if first == 0x2001 && segments[1] == 0x0db8 {
        return Some("documentation (2001:db8::/32)");
    }
    // Tunnels and translators whose real destination cannot be judged here.
    if first == 0x2001 && segments[1] == 0 {
        return Some("Teredo tunnel (2001::/32)");
    }
    if first == 0x64 && segments[1] == 0xff9b && segments[2] == 1 {
        return Some("local-use NAT64 (64:ff9b:1::/48)");
    }
    if first == 0x100 && segments[1..4] == [0, 0, 0] {
        return Some("discard-only (100::/64)");
    }
    None
}

/// The IPv4 address that the packets really go to, for the IPv6 forms that
/// carry one. Without this, `::ffff:169.254.169.254` would reach the metadata
/// endpoint.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let segments = ip.segments();
    let low_32_bits = || Ipv4Addr::from((u32::from(segments[6]) << 16) | u32::from(segments[7]));
    match segments {
        // ::ffff:0:0/96, IPv4-mapped.
        [0, 0, 0, 0, 0, 0xffff, _, _] => Some(low_32_bits()),
        // ::ffff:0:0:0/96, IPv4-translated (SIIT).
        [0, 0, 0, 0, 0xffff, 0, _, _] => Some(low_32_bits()),
        // ::/96, IPv4-compatible (deprecated). The caller handles :: and ::1
        // first.
        [0, 0, 0, 0, 0, 0, _, _] => Some(low_32_bits()),
        // 64:ff9b::/96, the well-known NAT64 prefix.
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(low_32_bits()),
        // 2002::/16, 6to4. The IPv4 address is in bits 16..48.
        [0x2002, high, low, ..] => Some(Ipv4Addr::from((u32::from(high) << 16) | u32::from(low))),
        _ => None,
    }
}

/// Which non-public addresses requests may reach anyway (`ALLOW_PRIVATE_REQUESTS`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AddressPolicy {
    allow_all: bool,
    /// Networks allowed despite being private: (network, prefix length).
    allowed: Vec<(IpAddr, u8)>,
}

impl AddressPolicy {
    /// `true`/`1` allows every address; a comma-separated list of addresses or
    /// CIDR networks allows those; empty, `false` or `0` allows none.
    pub fn parse(setting: &str) -> Result<Self, String> {
        let setting = setting.trim();
        match setting.to_ascii_lowercase().as_str() {
            "" | "false" | "0" | "no" => return Ok(AddressPolicy::default()),
            "true" | "1" | "yes" => {
                return Ok(AddressPolicy {
                    allow_all: true,
                    allowed: Vec::new(),
                });
            }
            _ => {}
        }
        let mut allowed = Vec::new();
        for item in setting.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (address, prefix) = match item.split_once('/') {
                Some((a, p)) => (a, Some(p)),
                None => (item, None),
            };
            let ip: IpAddr = address
                .parse()
                .map_err(|_| format!("'{item}' is not an IP address or CIDR network"))?;
            let max = if ip.is_ipv4() { 32 } else { 128 };
            let prefix = match prefix {
                None => max,
                Some(p) => p
                    .parse::<u8>()
                    .ok()
                    .filter(|p| *p <= max)
                    .ok_or_else(|| format!("'{item}' has a bad prefix length"))?,
            };
            allowed.push((ip, prefix));
        }
        Ok(AddressPolicy {
            allow_all: false,
            allowed,
        })
    }

    /// Why `ip` may not be reached, if it may not.
    pub fn refuse(&self, ip: IpAddr) -> Option<String> {
        if self.allow_all || self.allowed.iter().any(|(net, p)| contains(*net, *p, ip)) {
            return None;
        }
        forbidden(ip).map(|why| format!("{ip} is not a public address ({why})"))
    }
}

fn contains(network: IpAddr, prefix: u8, ip: IpAddr) -> bool {
    match (network, ip) {
        (IpAddr::V4(n), IpAddr::V4(a)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            u32::from(n) & mask == u32::from(a) & mask
        }
        (IpAddr::V6(n), IpAddr::V6(a)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            u128::from(n) & mask == u128::from(a) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_reads_its_setting() {
        let none = AddressPolicy::parse("").unwrap();
        assert!(none.refuse("127.0.0.1".parse().unwrap()).is_some());
        assert!(none.refuse("8.8.8.8".parse().unwrap()).is_none());
        let all = AddressPolicy::parse("true").unwrap();
        assert!(all.refuse("10.1.2.3".parse().unwrap()).is_none());
        let some = AddressPolicy::parse("127.0.0.2, 10.0.0.0/8").unwrap();
        assert!(some.refuse("127.0.0.2".parse().unwrap()).is_none());
        assert!(some.refuse("127.0.0.1".parse().unwrap()).is_some());
        assert!(some.refuse("10.200.0.1".parse().unwrap()).is_none());
        assert!(AddressPolicy::parse("10.0.0.0/33").is_err());
        assert!(AddressPolicy::parse("intranet").is_err());
    }

    fn check(address: &str) -> Option<&'static str> {
        match address.parse::<IpAddr>() {
            Ok(ip) => forbidden(ip),
            Err(error) => panic!("{address:?} is not an address: {error}"),
        }
    }

    fn assert_forbidden(address: &str, reason_fragment: &str) {
        match check(address) {
            Some(reason) => assert!(
                reason.contains(reason_fragment),
                "{address}: reason {reason:?} does not mention {reason_fragment:?}"
            ),
            None => panic!("{address} should be forbidden ({reason_fragment})"),
        }
    }

    fn assert_allowed(address: &str) {
        assert_eq!(check(address), None, "{address} should be allowed");
    }

    fn v4_host(host: &str) -> Option<Ipv4Addr> {
        match host_ip(host) {
            Some(IpAddr::V4(v4)) => Some(v4),
            Some(IpAddr::V6(v6)) => panic!("{host:?} parsed as IPv6 {v6}"),
            None => None,
        }
    }

    fn v6_host(host: &str) -> Option<Ipv6Addr> {
        match host_ip(host) {
            Some(IpAddr::V6(v6)) => Some(v6),
            Some(IpAddr::V4(v4)) => panic!("{host:?} parsed as IPv4 {v4}"),
            None => None,
        }
    }

    #[test]
    fn public_addresses_are_allowed() {
        assert_allowed("8.8.8.8");
        assert_allowed("1.1.1.1");
        assert_allowed("93.184.216.34");
        assert_allowed("2606:4700::1111");
        assert_allowed("2001:4860:4860::8888");
    }

    #[test]
    fn tunnels_and_translators_are_refused() {
        assert_forbidden("2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo");
        assert_forbidden("64:ff9b:1::a00:1", "NAT64");
        assert_forbidden("100::1", "discard");
        assert_forbidden("::ffff:0:7f00:1", "loopback");
    }

    #[test]
    fn this_network() {
        assert_forbidden("0.0.0.0", "unspecified");
        assert_forbidden("0.0.0.1", "this network");
        assert_forbidden("0.255.255.255", "this network");
        assert_allowed("1.0.0.0");
    }

    #[test]
    fn loopback_v4() {
        assert_allowed("126.255.255.255");
        assert_forbidden("127.0.0.0", "loopback");
        assert_forbidden("127.0.0.1", "loopback");
        assert_forbidden("127.255.255.255", "loopback");
        assert_allowed("128.0.0.0");
    }

    #[test]
    fn private_10() {
        assert_allowed("9.255.255.255");
        assert_forbidden("10.0.0.0", "private");
        assert_forbidden("10.255.255.255", "private");
        assert_allowed("11.0.0.0");
    }

    #[test]
    fn private_172_16() {
        assert_allowed("172.15.255.255");
        assert_forbidden("172.16.0.0", "private");
        assert_forbidden("172.31.255.255", "private");
        assert_allowed("172.32.0.0");
    }

    #[test]
    fn private_192_168() {
        assert_allowed("192.167.255.255");
        assert_forbidden("192.168.0.0", "private");
        assert_forbidden("192.168.255.255", "private");
        assert_allowed("192.169.0.0");
    }

    #[test]
    fn shared_address_space() {
        assert_allowed("100.63.255.255");
        assert_forbidden("100.64.0.0", "carrier-grade NAT");
        assert_forbidden("100.127.255.255", "carrier-grade NAT");
        assert_allowed("100.128.0.0");
    }

    #[test]
    fn link_local_and_cloud_metadata() {
        assert_allowed("169.253.255.255");
        assert_forbidden("169.254.0.0", "link-local");
        assert_forbidden("169.254.255.255", "link-local");
        assert_forbidden("169.254.169.254", "metadata");
        assert_forbidden("169.254.169.253", "link-local");
        assert_allowed("169.255.0.0");
    }

    #[test]
    fn ietf_protocol_assignments() {
        assert_allowed("191.255.255.255");
        assert_forbidden("192.0.0.0", "IETF");
        assert_forbidden("192.0.0.255", "IETF");
        assert_allowed("192.0.1.0");
    }

    #[test]
    fn documentation_v4() {
        assert_allowed("192.0.1.255");
        assert_forbidden("192.0.2.0", "documentation");
        assert_forbidden("192.0.2.255", "documentation");
        assert_allowed("192.0.3.0");

        assert_allowed("198.51.99.255");
        assert_forbidden("198.51.100.0", "documentation");
        assert_forbidden("198.51.100.255", "documentation");
        assert_allowed("198.51.101.0");

        assert_allowed("203.0.112.255");
        assert_forbidden("203.0.113.0", "documentation");
        assert_forbidden("203.0.113.255", "documentation");
        assert_allowed("203.0.114.0");
    }

    #[test]
    fn benchmarking() {
        assert_allowed("198.17.255.255");
        assert_forbidden("198.18.0.0", "benchmarking");
        assert_forbidden("198.19.255.255", "benchmarking");
        assert_allowed("198.20.0.0");
    }

    #[test]
    fn multicast_reserved_and_broadcast() {
        assert_allowed("223.255.255.255");
        assert_forbidden("224.0.0.0", "multicast");
        assert_forbidden("239.255.255.255", "multicast");
        assert_forbidden("240.0.0.0", "reserved");
        assert_forbidden("255.255.255.254", "reserved");
        assert_forbidden("255.255.255.255", "broadcast");
    }

    #[test]
    fn unspecified_and_loopback_v6() {
        assert_forbidden("::", "unspecified");
        assert_forbidden("::1", "loopback");
    }

    #[test]
    fn unique_local() {
        assert_allowed("fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
        assert_forbidden("fc00::", "unique local");
        assert_forbidden("fd12:3456::1", "unique local");
        assert_forbidden("fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "unique local");
        assert_allowed("fe00::");
    }

    #[test]
    fn link_local_and_site_local_v6() {
        assert_allowed("fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
        assert_forbidden("fe80::", "link-local");
        assert_forbidden("fe80::1", "link-local");
        assert_forbidden("febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "link-local");
        assert_forbidden("fec0::", "site-local");
        assert_forbidden("feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "site-local");
    }

    #[test]
    fn multicast_v6() {
        assert_forbidden("ff00::", "multicast");
        assert_forbidden("ff02::1", "multicast");
        assert_forbidden("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "multicast");
    }

    #[test]
    fn documentation_v6() {
        assert_allowed("2001:db7:ffff:ffff:ffff:ffff:ffff:ffff");
        assert_forbidden("2001:db8::", "documentation");
        assert_forbidden("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", "documentation");
        assert_allowed("2001:db9::");
    }

    #[test]
    fn ipv4_mapped_is_judged_by_the_embedded_address() {
        assert_forbidden("::ffff:127.0.0.1", "loopback");
        assert_forbidden("::ffff:169.254.169.254", "metadata");
        assert_forbidden("::ffff:10.0.0.1", "private");
        assert_forbidden("::ffff:0.0.0.0", "unspecified");
        assert_forbidden("::ffff:7f00:1", "loopback");
        assert_allowed("::ffff:8.8.8.8");
    }

    #[test]
    fn ipv4_compatible_is_judged_by_the_embedded_address() {
        assert_forbidden("::127.0.0.1", "loopback");
        assert_forbidden("::192.168.1.1", "private");
        assert_forbidden("::2", "this network");
        assert_allowed("::8.8.8.8");
        // One bit outside ::/96 ends the IPv4-compatible form.
        assert_allowed("::1:7f00:1");
    }

    #[test]
    fn nat64_is_judged_by_the_embedded_address() {
        assert_forbidden("64:ff9b::127.0.0.1", "loopback");
        assert_forbidden("64:ff9b::a9fe:a9fe", "metadata");
        assert_allowed("64:ff9b::8.8.8.8");
    }

    #[test]
    fn six_to_four_is_judged_by_the_embedded_address() {
        assert_forbidden("2002:7f00:1::", "loopback");
        assert_forbidden("2002:a9fe:a9fe::1", "metadata");
        assert_forbidden("2002:c0a8:0101:1::1", "private");
        assert_allowed("2002:0808:0808::1");
        assert_allowed("2003:7f00:1::");
    }

    #[test]
    fn host_ip_reads_dotted_ipv4() {
        assert_eq!(v4_host("127.0.0.1"), Some(Ipv4Addr::new(127, 0, 0, 1)));
        assert_eq!(v4_host("8.8.8.8"), Some(Ipv4Addr::new(8, 8, 8, 8)));
        assert_eq!(v4_host("0.0.0.0"), Some(Ipv4Addr::UNSPECIFIED));
        assert_eq!(v4_host("255.255.255.255"), Some(Ipv4Addr::BROADCAST));
        assert_eq!(v4_host("127.0.0.1."), Some(Ipv4Addr::new(127, 0, 0, 1)));
    }

    #[test]
    fn host_ip_reads_a_single_32_bit_number() {
        let loopback = Some(Ipv4Addr::new(127, 0, 0, 1));
        assert_eq!(v4_host("2130706433"), loopback);
        assert_eq!(v4_host("0x7f000001"), loopback);
        assert_eq!(v4_host("0X7F000001"), loopback);
        assert_eq!(v4_host("017700000001"), loopback);
        assert_eq!(v4_host("0x00000000007f000001"), loopback);
        assert_eq!(v4_host("0"), Some(Ipv4Addr::UNSPECIFIED));
        assert_eq!(v4_host("0x"), Some(Ipv4Addr::UNSPECIFIED));
        assert_eq!(v4_host("4294967295"), Some(Ipv4Addr::BROADCAST));
        assert_eq!(v4_host("4294967296"), None);
        assert_eq!(v4_host("0x100000000"), None);
        assert_eq!(v4_host("99999999999999999999999999"), None);
    }

    #[test]
    fn host_ip_reads_octal_and_hex_parts() {
        let loopback = Some(Ipv4Addr::new(127, 0, 0, 1));
        assert_eq!(v4_host("0177.0.0.1"), loopback);
        assert_eq!(v4_host("0x7f.0.0.1"), loopback);
        assert_eq!(v4_host("0x7F.0x0.0x0.0x1"), loopback);
        assert_eq!(v4_host("0177.0000.0000.0001"), loopback);
        assert_eq!(
            v4_host("0251.0376.0251.0376"),
            Some(Ipv4Addr::new(169, 254, 169, 254))
        );
        // Not valid octal, so not a number, so a DNS name.
        assert_eq!(v4_host("08.0.0.1"), None);
        assert_eq!(v4_host("0x7g.0.0.1"), None);
    }

    #[test]
    fn host_ip_reads_short_forms() {
        let loopback = Some(Ipv4Addr::new(127, 0, 0, 1));
        assert_eq!(v4_host("127.1"), loopback);
        assert_eq!(v4_host("127.0.1"), loopback);
        assert_eq!(v4_host("0x7f.1"), loopback);
        assert_eq!(
            v4_host("127.16777215"),
            Some(Ipv4Addr::new(127, 255, 255, 255))
        );
        assert_eq!(v4_host("127.16777216"), None);
        assert_eq!(v4_host("10.0.65535"), Some(Ipv4Addr::new(10, 0, 255, 255)));
        assert_eq!(v4_host("10.0.65536"), None);
        assert_eq!(
            v4_host("169.254.43518"),
            Some(Ipv4Addr::new(169, 254, 169, 254))
        );
    }

    #[test]
    fn host_ip_rejects_out_of_range_and_malformed_parts() {
        assert_eq!(v4_host("256.0.0.1"), None);
        assert_eq!(v4_host("1.2.3.256"), None);
        assert_eq!(v4_host("0x100.0.0.1"), None);
        assert_eq!(v4_host("1.2.3.4.5"), None);
        assert_eq!(v4_host("1..2.3"), None);
        assert_eq!(v4_host(".1.2.3"), None);
        assert_eq!(v4_host("1.2.3.4.."), None);
        assert_eq!(v4_host("+1.2.3.4"), None);
        assert_eq!(v4_host("-1"), None);
        assert_eq!(v4_host(""), None);
        assert_eq!(v4_host("."), None);
        assert_eq!(v4_host(" 127.0.0.1"), None);
    }

    #[test]
    fn host_ip_returns_none_for_dns_names() {
        assert_eq!(host_ip("example.com"), None);
        assert_eq!(host_ip("localhost"), None);
        assert_eq!(host_ip("1.2.3.com"), None);
        assert_eq!(host_ip("0x7f.example"), None);
        assert_eq!(host_ip("127.0.0.1.nip.io"), None);
        assert_eq!(host_ip("deadbeef"), None);
    }

    #[test]
    fn host_ip_reads_ipv6() {
        assert_eq!(v6_host("[::1]"), Some(Ipv6Addr::LOCALHOST));
        assert_eq!(v6_host("::1"), Some(Ipv6Addr::LOCALHOST));
        assert_eq!(
            v6_host("[::ffff:127.0.0.1]"),
            Some(Ipv4Addr::new(127, 0, 0, 1).to_ipv6_mapped())
        );
        assert_eq!(v6_host("[2606:4700::1111]"), "2606:4700::1111".parse().ok());
        assert_eq!(v6_host("[fe80::1%25eth0]"), "fe80::1".parse().ok());
        assert_eq!(v6_host("fe80::1%eth0"), "fe80::1".parse().ok());
    }

    #[test]
    fn host_ip_rejects_malformed_ipv6() {
        assert_eq!(host_ip("[::1"), None);
        assert_eq!(host_ip("[::1]:80"), None);
        assert_eq!(host_ip("[127.0.0.1]"), None);
        assert_eq!(host_ip("[not-an-address]"), None);
        assert_eq!(host_ip(":::1"), None);
    }

    #[test]
    fn every_legacy_spelling_of_loopback_is_forbidden() {
        for host in [
            "127.0.0.1",
            "2130706433",
            "0x7f000001",
            "017700000001",
            "0177.0.0.1",
            "0x7f.0.0.1",
            "127.1",
            "127.0.1",
            "[::1]",
            "[::ffff:127.0.0.1]",
            "[::ffff:7f00:1]",
            "[64:ff9b::7f00:1]",
            "[2002:7f00:1::]",
        ] {
            match host_ip(host) {
                Some(ip) => assert_eq!(
                    forbidden(ip).map(|r| r.contains("loopback")),
                    Some(true),
                    "{host}"
                ),
                None => panic!("{host} should parse as an IP literal"),
            }
        }
    }

    #[test]
    fn the_metadata_endpoint_is_forbidden_in_every_spelling() {
        for host in [
            "169.254.169.254",
            "2852039166",
            "0xa9fea9fe",
            "0251.0376.0251.0376",
            "169.254.43518",
            "[::ffff:169.254.169.254]",
            "[::ffff:a9fe:a9fe]",
        ] {
            match host_ip(host).and_then(forbidden) {
                Some(reason) => assert!(reason.contains("metadata"), "{host}: {reason}"),
                None => panic!("{host} should be forbidden"),
            }
        }
    }
}
