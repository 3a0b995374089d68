//! The address policy: which IP addresses a fetch may connect to.
//!
//! Every address is first normalised (an IPv4 address embedded in an IPv4-mapped,
//! IPv4-compatible, IPv4-translated or NAT64 well-known-prefix IPv6 address is pulled out
//! and classified as the IPv4 address it is), then checked against the built-in table of
//! special-use space ([`BLOCKED_V4`], [`BLOCKED_V6`]), then against the deployment's extra
//! `deny_cidr` ranges. Only the exact `(host, address)` pairs configured with
//! `allow_host_address` override a block.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// An IP network in CIDR notation (`10.0.0.0/8`, `fc00::/7`).
///
/// Parsing is strict: the prefix length must fit the address family and the address must
/// have no bits set past the prefix (`10.0.0.1/8` is refused as a likely typo).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

/// Why a CIDR string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CidrError {
    /// The text has no `/prefix` part.
    #[error("missing '/prefix' length")]
    MissingPrefix,
    /// The address part is not an IPv4 or IPv6 address.
    #[error("the address part is not an IP address")]
    BadAddress,
    /// The prefix part is not a number in range for the address family.
    #[error("the prefix length is not a number from 0 to {max}")]
    BadPrefix {
        /// The largest prefix the address family allows.
        max: u8,
    },
    /// The address has bits set beyond the prefix.
    #[error("the address has bits set beyond the prefix length")]
    HostBitsSet,
}

impl Cidr {
    /// The network address.
    pub fn network(&self) -> IpAddr {
        self.network
    }

    /// The prefix length in bits.
    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// Whether `ip` lies inside this network. Families never match each other.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.network, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = mask32(self.prefix);
                u32::from(ip) & mask == u32::from(net) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = mask128(self.prefix);
                u128::from(ip) & mask == u128::from(net) & mask
            }
            _ => false,
        }
    }
}

impl FromStr for Cidr {
    type Err = CidrError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (addr, prefix) = s.trim().split_once('/').ok_or(CidrError::MissingPrefix)?;
        let network: IpAddr = addr.parse().map_err(|_| CidrError::BadAddress)?;
        let max = if network.is_ipv4() { 32 } else { 128 };
        let prefix: u8 = prefix
            .parse()
            .ok()
            .filter(|p| *p <= max && !prefix.starts_with('+'))
            .ok_or(CidrError::BadPrefix { max })?;
        let exact = match network {
            IpAddr::V4(v4) => u32::from(v4) & !mask32(prefix) == 0,
            IpAddr::V6(v6) => u128::from(v6) & !mask128(prefix) == 0,
        };
        if !exact {
            return Err(CidrError::HostBitsSet);
        }
        Ok(Self { network, prefix })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

fn mask32(prefix: u8) -> u32 {
    u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0)
}

fn mask128(prefix: u8) -> u128 {
    u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0)
}

/// One row of the built-in blocked table.
#[derive(Debug, Clone, Copy)]
pub struct BlockedRange {
    /// The range.
    pub cidr: Cidr,
    /// What the range is (for documentation and tests; never shown to the model).
    pub reason: &'static str,
}

const fn v4(o: [u8; 4], prefix: u8, reason: &'static str) -> BlockedRange {
    BlockedRange {
        cidr: Cidr {
            network: IpAddr::V4(Ipv4Addr::new(o[0], o[1], o[2], o[3])),
            prefix,
        },
        reason,
    }
}

const fn v6(s: [u16; 8], prefix: u8, reason: &'static str) -> BlockedRange {
    BlockedRange {
        cidr: Cidr {
            network: IpAddr::V6(Ipv6Addr::new(
                s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7],
            )),
            prefix,
        },
        reason,
    }
}

/// IPv4 special-use space that is never fetched (IANA IPv4 Special-Purpose Address Registry
/// plus multicast and the reserved class E block).
pub const BLOCKED_V4: &[BlockedRange] = &[
    v4([0, 0, 0, 0], 8, "\"this network\" (RFC 791)"),
    v4([10, 0, 0, 0], 8, "private-use (RFC 1918)"),
    v4(
        [100, 64, 0, 0],
        10,
        "shared address space / CGNAT (RFC 6598)",
    ),
    v4([127, 0, 0, 0], 8, "loopback (RFC 1122)"),
    v4(
        [169, 254, 0, 0],
        16,
        "link-local, including 169.254.169.254 cloud metadata (RFC 3927)",
    ),
    v4([172, 16, 0, 0], 12, "private-use (RFC 1918)"),
    v4([192, 0, 0, 0], 24, "IETF protocol assignments (RFC 6890)"),
    v4([192, 0, 2, 0], 24, "documentation TEST-NET-1 (RFC 5737)"),
    v4(
        [192, 88, 99, 0],
        24,
        "deprecated 6to4 relay anycast (RFC 7526)",
    ),
    v4([192, 168, 0, 0], 16, "private-use (RFC 1918)"),
    v4([198, 18, 0, 0], 15, "benchmarking (RFC 2544)"),
    v4([198, 51, 100, 0], 24, "documentation TEST-NET-2 (RFC 5737)"),
    v4([203, 0, 113, 0], 24, "documentation TEST-NET-3 (RFC 5737)"),
    v4([224, 0, 0, 0], 4, "multicast (RFC 5771)"),
    v4(
        [240, 0, 0, 0],
        4,
        "reserved, including 255.255.255.255 broadcast (RFC 1112, RFC 919)",
    ),
];

/// IPv6 special-use space that is never fetched. Anything outside global unicast
/// `2000::/3` is blocked as well, except the embedding forms that are reclassified by their
/// IPv4 address (see [`normalize`]).
pub const BLOCKED_V6: &[BlockedRange] = &[
    v6([0, 0, 0, 0, 0, 0, 0, 0], 128, "unspecified (RFC 4291)"),
    v6([0, 0, 0, 0, 0, 0, 0, 0x1], 128, "loopback (RFC 4291)"),
    v6(
        [0x64, 0xff9b, 0x1, 0, 0, 0, 0, 0],
        48,
        "NAT64 local-use prefix (RFC 8215)",
    ),
    v6([0x100, 0, 0, 0, 0, 0, 0, 0], 64, "discard-only (RFC 6666)"),
    v6(
        [0x2001, 0, 0, 0, 0, 0, 0, 0],
        23,
        "IETF protocol assignments, including Teredo 2001::/32, benchmarking 2001:2::/48 and ORCHID (RFC 2928, RFC 4380, RFC 5180, RFC 7343)",
    ),
    v6(
        [0x2001, 0xdb8, 0, 0, 0, 0, 0, 0],
        32,
        "documentation (RFC 3849)",
    ),
    v6(
        [0x2002, 0, 0, 0, 0, 0, 0, 0],
        16,
        "6to4 (RFC 3056, deprecated by RFC 7526)",
    ),
    v6(
        [0x3fff, 0, 0, 0, 0, 0, 0, 0],
        20,
        "documentation (RFC 9637)",
    ),
    v6([0x5f00, 0, 0, 0, 0, 0, 0, 0], 16, "SRv6 SIDs (RFC 9602)"),
    v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, "unique-local (RFC 4193)"),
    v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, "link-local (RFC 4291)"),
    v6(
        [0xfec0, 0, 0, 0, 0, 0, 0, 0],
        10,
        "deprecated site-local (RFC 3879)",
    ),
    v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, "multicast (RFC 4291)"),
];

/// Returns the address a connection to `ip` really reaches for classification: an IPv4
/// address embedded in an IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible (`::a.b.c.d`),
/// IPv4-translated (`::ffff:0:a.b.c.d`) or NAT64 well-known-prefix (`64:ff9b::a.b.c.d`)
/// address is returned as that IPv4 address; everything else is returned unchanged.
///
/// `::` and `::1` are not IPv4-compatible addresses and stay IPv6.
pub fn normalize(ip: IpAddr) -> IpAddr {
    let IpAddr::V6(v6) = ip else {
        return ip;
    };
    let bits = u128::from(v6);
    let low32 = Ipv4Addr::from((bits & 0xffff_ffff) as u32);
    let high96 = bits >> 32;
    let embedded = match high96 {
        // IPv4-mapped ::ffff:0:0/96.
        0xffff => true,
        // IPv4-translated (SIIT) ::ffff:0:0:0/96.
        0xffff_0000 => true,
        // IPv4-compatible ::/96, but not :: or ::1.
        0 => (bits & 0xffff_ffff) > 1,
        // NAT64 well-known prefix 64:ff9b::/96.
        _ => high96 == (0x0064_ff9b_u128 << 64),
    };
    if embedded {
        IpAddr::V4(low32)
    } else {
        IpAddr::V6(v6)
    }
}

fn in_table(ip: IpAddr, table: &[BlockedRange]) -> bool {
    table.iter().any(|r| r.cidr.contains(ip))
}

/// Whether `ip` (after [`normalize`]) is in the built-in blocked table, or, for IPv6,
/// outside global unicast `2000::/3`.
pub fn is_special_use(ip: IpAddr) -> bool {
    match normalize(ip) {
        IpAddr::V4(v4) => in_table(IpAddr::V4(v4), BLOCKED_V4),
        IpAddr::V6(v6) => !is_global_unicast_v6(v6) || in_table(IpAddr::V6(v6), BLOCKED_V6),
    }
}

fn is_global_unicast_v6(v6: Ipv6Addr) -> bool {
    v6.segments()[0] & 0xe000 == 0x2000
}

/// The deployment's address policy: the built-in table, extra denied ranges and the exact
/// `(host, address)` pairs that may reach otherwise blocked space.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct AddressPolicy {
    deny: Vec<Cidr>,
    allow: Vec<(String, IpAddr)>,
}

impl AddressPolicy {
    pub(crate) fn new(deny: Vec<Cidr>, allow: Vec<(String, IpAddr)>) -> Self {
        Self { deny, allow }
    }

    /// Whether a connection to `ip` may be made for `host` (a canonical host name, or
    /// `None` for an IP-literal URL).
    pub(crate) fn permits(&self, host: Option<&str>, ip: IpAddr) -> bool {
        if let Some(host) = host {
            let target = normalize(ip);
            if self
                .allow
                .iter()
                .any(|(h, a)| h == host && (*a == ip || normalize(*a) == target))
            {
                return true;
            }
        }
        if is_special_use(ip) {
            return false;
        }
        let target = normalize(ip);
        !self
            .deny
            .iter()
            .any(|c| c.contains(ip) || c.contains(target))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn every_table_row_parses() {
        for r in BLOCKED_V4.iter().chain(BLOCKED_V6) {
            let c: Cidr = r.cidr.to_string().parse().unwrap();
            assert_eq!(c, r.cidr);
        }
    }

    #[test]
    fn cidr_parsing_is_strict() {
        assert_eq!("10.0.0.0".parse::<Cidr>(), Err(CidrError::MissingPrefix));
        assert_eq!("10.0.0.1/8".parse::<Cidr>(), Err(CidrError::HostBitsSet));
        assert_eq!(
            "10.0.0.0/33".parse::<Cidr>(),
            Err(CidrError::BadPrefix { max: 32 })
        );
        assert_eq!(
            "::/129".parse::<Cidr>(),
            Err(CidrError::BadPrefix { max: 128 })
        );
        assert_eq!("nope/8".parse::<Cidr>(), Err(CidrError::BadAddress));
        assert_eq!(
            "10.0.0.0/+8".parse::<Cidr>(),
            Err(CidrError::BadPrefix { max: 32 })
        );
        let any: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(any.contains(ip("8.8.8.8")));
        assert!(!any.contains(ip("::1")));
        let host: Cidr = "10.1.2.3/32".parse().unwrap();
        assert!(host.contains(ip("10.1.2.3")));
        assert!(!host.contains(ip("10.1.2.4")));
    }

    #[test]
    fn normalize_pulls_out_embedded_ipv4() {
        assert_eq!(normalize(ip("::ffff:127.0.0.1")), ip("127.0.0.1"));
        assert_eq!(normalize(ip("::10.0.0.1")), ip("10.0.0.1"));
        assert_eq!(normalize(ip("::ffff:0:10.0.0.1")), ip("10.0.0.1"));
        assert_eq!(normalize(ip("64:ff9b::192.168.1.1")), ip("192.168.1.1"));
        assert_eq!(normalize(ip("::1")), ip("::1"));
        assert_eq!(normalize(ip("::")), ip("::"));
        assert_eq!(normalize(ip("2606:4700::1")), ip("2606:4700::1"));
        assert_eq!(normalize(ip("8.8.8.8")), ip("8.8.8.8"));
    }

    #[test]
    fn special_use_table() {
        let blocked = [
            "0.0.0.0",
            "0.1.2.3",
            "10.0.0.1",
            "100.64.0.1",
            "100.127.255.254",
            "127.0.0.1",
            "127.255.255.255",
            "169.254.169.254",
            "172.16.0.1",
            "172.31.255.255",
            "192.0.0.8",
            "192.0.2.1",
            "192.88.99.1",
            "192.168.1.1",
            "198.18.0.1",
            "198.19.255.255",
            "198.51.100.7",
            "203.0.113.9",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "::ffff:0:10.0.0.1",
            "64:ff9b::10.0.0.1",
            "64:ff9b:1::1",
            "100::1",
            "2001::1",
            "2001:2::1",
            "2001:db8::1",
            "2002:7f00:1::1",
            "2002:808:808::1",
            "3fff::1",
            "5f00::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "febf::1",
            "fec0::1",
            "ff02::1",
            "1::1",
            "4000::1",
        ];
        for b in blocked {
            assert!(is_special_use(ip(b)), "{b} should be blocked");
        }
        let public = [
            "8.8.8.8",
            "1.1.1.1",
            "93.184.216.34",
            "100.63.255.255",
            "100.128.0.0",
            "172.15.255.255",
            "172.32.0.0",
            "192.0.3.1",
            "198.17.255.255",
            "198.20.0.0",
            "223.255.255.255",
            "2606:4700:4700::1111",
            "2a00:1450:4001::1",
            "::ffff:8.8.8.8",
            "64:ff9b::8.8.8.8",
        ];
        for p in public {
            assert!(!is_special_use(ip(p)), "{p} should be allowed");
        }
    }

    #[test]
    fn policy_pairs_are_exact_and_deny_applies_to_embedded() {
        let policy = AddressPolicy::new(
            vec!["93.184.0.0/16".parse().unwrap()],
            vec![("wiki.internal".to_owned(), ip("10.0.5.42"))],
        );
        assert!(policy.permits(Some("wiki.internal"), ip("10.0.5.42")));
        assert!(policy.permits(Some("wiki.internal"), ip("::ffff:10.0.5.42")));
        assert!(!policy.permits(Some("wiki.internal"), ip("10.0.5.43")));
        assert!(!policy.permits(Some("evil.example"), ip("10.0.5.42")));
        assert!(!policy.permits(None, ip("10.0.5.42")));
        assert!(!policy.permits(Some("a.example"), ip("93.184.216.34")));
        assert!(!policy.permits(Some("a.example"), ip("::ffff:93.184.216.34")));
        assert!(policy.permits(Some("a.example"), ip("8.8.8.8")));
    }
}
