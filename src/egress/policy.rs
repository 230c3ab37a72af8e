//! Which destinations a generation may reach through the egress proxy: a
//! pure decision over a host name, the addresses it resolved to and the
//! owner's policy (`TENERAL_EGRESS`).
//!
//! Invariants: an address of the host's own networks (loopback, link-local,
//! private, shared CGNAT space, unspecified, multicast, broadcast, reserved)
//! is never reached, whatever the policy and whatever name led to it; a name
//! is refused when *any* address it resolved to is such an address (the
//! proxy connects only to the addresses it checked, so a second resolution
//! cannot swap them). The one exception is the tests' resolver hook, whose
//! names the owner mapped in `.env` and which are marked as stand-ins.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// What the owner lets out (`TENERAL_EGRESS`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Policy {
    /// Any public internet host (the default, `public`).
    #[default]
    Public,
    /// Only hosts whose name is one of these or ends in `.<one of these>`,
    /// and then only at public addresses.
    Allow(Vec<String>),
    /// Nothing (`off`).
    Off,
}

impl Policy {
    /// Reads the setting's value: `public`, `off`, or a comma-separated
    /// list of host names (`crates.io,github.com`). `Err` says what is wrong.
    pub fn parse(text: &str) -> Result<Policy, String> {
        match text.trim() {
            "public" => return Ok(Policy::Public),
            "off" => return Ok(Policy::Off),
            _ => {}
        }
        let mut names = Vec::new();
        for word in text.split(',') {
            let name = normal(word.trim());
            let fine = !name.is_empty()
                && name.len() <= 253
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
                && !name.starts_with('.')
                && !name.contains("..");
            if !fine {
                return Err(format!("{word:?} is not a host name"));
            }
            names.push(name);
        }
        Ok(Policy::Allow(names))
    }

    /// How the log and the docs name it.
    pub fn describe(&self) -> String {
        match self {
            Policy::Public => "public internet hosts".into(),
            Policy::Allow(names) => format!("only {}", names.join(", ")),
            Policy::Off => "nothing".into(),
        }
    }
}

/// Whether a connection may be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    /// Refused, with the reason (one line, for the log and the 403).
    Refuse(String),
}

/// Decides whether `host` (as the client named it), which resolved to
/// `addrs`, may be reached under `policy`. `stand_in` is true only for a
/// name of the tests' resolver hook: its addresses count as public.
pub fn decide(host: &str, addrs: &[SocketAddr], policy: &Policy, stand_in: bool) -> Verdict {
    let host = normal(host);
    if *policy == Policy::Off {
        return Verdict::Refuse("TENERAL_EGRESS=off lets nothing out".into());
    }
    if addrs.is_empty() {
        return Verdict::Refuse(format!("{host} resolved to no address"));
    }
    for addr in addrs.iter().filter(|_| !stand_in) {
        if let Some(class) = host_only(addr.ip()) {
            return Verdict::Refuse(format!(
                "{host} is {} ({class}), which a generation never reaches",
                addr.ip()
            ));
        }
    }
    match policy {
        Policy::Allow(names) if !names.iter().any(|n| suffix_match(&host, n)) => {
            Verdict::Refuse(format!("{host} is not in TENERAL_EGRESS"))
        }
        _ => Verdict::Allow,
    }
}

/// The kind of non-public address `ip` is, or `None` for a public one.
pub fn host_only(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_class(v4),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => v4_class(v4).or(v6_class(v6)),
            None => v6_class(v6),
        },
    }
}

fn v4_class(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    Some(match () {
        _ if ip.is_loopback() => "loopback",
        _ if ip.is_unspecified() || a == 0 => "unspecified",
        _ if ip.is_link_local() => "link-local",
        _ if ip.is_private() => "private",
        _ if a == 100 && (64..128).contains(&b) => "shared address space (CGNAT)",
        _ if ip.is_broadcast() => "broadcast",
        _ if ip.is_multicast() => "multicast",
        _ if a >= 240 => "reserved",
        _ => return None,
    })
}

fn v6_class(ip: Ipv6Addr) -> Option<&'static str> {
    let first = ip.segments()[0];
    Some(match () {
        _ if ip.is_loopback() => "loopback",
        _ if ip.is_unspecified() => "unspecified",
        _ if first & 0xffc0 == 0xfe80 => "link-local",
        _ if first & 0xffc0 == 0xfec0 => "site-local",
        _ if first & 0xfe00 == 0xfc00 => "unique local (private)",
        _ if ip.is_multicast() => "multicast",
        _ => return None,
    })
}

/// The IPv4 address inside an IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible
/// (`::a.b.c.d`) or NAT64 (`64:ff9b::a.b.c.d`) address.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let low = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s {
        [0, 0, 0, 0, 0, 0xffff, ..] => Some(low),
        [0, 0, 0, 0, 0, 0, ..] if !ip.is_loopback() && !ip.is_unspecified() => Some(low),
        [0x64, 0xff9b, 0, 0, 0, 0, ..] => Some(low),
        _ => None,
    }
}

/// A host name as compared: lower case, without a final dot.
fn normal(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

fn suffix_match(host: &str, name: &str) -> bool {
    host == name || host.strip_suffix(name).is_some_and(|rest| rest.ends_with('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ip: &str) -> Vec<SocketAddr> {
        vec![SocketAddr::new(ip.parse().expect("an address in the table"), 443)]
    }

    #[test]
    fn the_hosts_own_networks_are_refused_under_every_policy() {
        let allow_all = Policy::Allow(vec!["example.com".into()]);
        let table: &[(&str, Option<&str>)] = &[
            ("93.184.215.14", None),
            ("2606:2800:21f:cb07:6820:80da:af6b:8b2c", None),
            ("127.0.0.1", Some("loopback")),
            ("127.9.9.9", Some("loopback")),
            ("::1", Some("loopback")),
            ("169.254.169.254", Some("link-local")),
            ("fe80::1", Some("link-local")),
            ("10.1.2.3", Some("private")),
            ("172.16.0.1", Some("private")),
            ("172.31.255.255", Some("private")),
            ("172.32.0.1", None),
            ("192.168.1.1", Some("private")),
            ("fc00::1", Some("unique local (private)")),
            ("fd12:3456::1", Some("unique local (private)")),
            ("100.64.0.1", Some("shared address space (CGNAT)")),
            ("100.127.255.255", Some("shared address space (CGNAT)")),
            ("100.128.0.1", None),
            ("0.0.0.0", Some("unspecified")),
            ("0.1.2.3", Some("unspecified")),
            ("::", Some("unspecified")),
            ("224.0.0.1", Some("multicast")),
            ("ff02::1", Some("multicast")),
            ("255.255.255.255", Some("broadcast")),
            ("240.0.0.1", Some("reserved")),
            ("::ffff:127.0.0.1", Some("loopback")),
            ("::ffff:10.0.0.1", Some("private")),
            ("::127.0.0.1", Some("loopback")),
            ("64:ff9b::a9fe:a9fe", Some("link-local")),
            ("::ffff:93.184.215.14", None),
        ];
        for (ip, want) in table {
            let addr: IpAddr = ip.parse().expect("an address in the table");
            assert_eq!(host_only(addr), *want, "{ip}");
            for policy in [&Policy::Public, &allow_all] {
                let verdict = decide("example.com", &at(ip), policy, false);
                match want {
                    None => assert_eq!(verdict, Verdict::Allow, "{ip} {policy:?}"),
                    Some(class) => assert!(
                        matches!(&verdict, Verdict::Refuse(r) if r.contains(class)),
                        "{ip} {policy:?}: {verdict:?}"
                    ),
                }
            }
        }
    }

    #[test]
    fn a_name_with_one_private_address_among_public_ones_is_refused() {
        let mut addrs = at("93.184.215.14");
        addrs.extend(at("10.0.0.5"));
        let verdict = decide("mixed.example", &addrs, &Policy::Public, false);
        assert!(matches!(&verdict, Verdict::Refuse(r) if r.contains("10.0.0.5")), "{verdict:?}");
        let verdict = decide("nowhere.example", &[], &Policy::Public, false);
        assert!(matches!(&verdict, Verdict::Refuse(r) if r.contains("no address")), "{verdict:?}");
    }

    #[test]
    fn the_allowlist_matches_names_by_suffix() {
        let policy = Policy::parse("crates.io, GitHub.com.").expect("a valid list");
        assert_eq!(policy, Policy::Allow(vec!["crates.io".into(), "github.com".into()]));
        let public = at("93.184.215.14");
        let table = [
            ("crates.io", true),
            ("static.crates.io", true),
            ("CRATES.IO.", true),
            ("evilcrates.io", false),
            ("crates.io.evil.com", false),
            ("api.github.com", true),
            ("example.com", false),
        ];
        for (host, allowed) in table {
            let verdict = decide(host, &public, &policy, false);
            assert_eq!(verdict == Verdict::Allow, allowed, "{host}: {verdict:?}");
            if !allowed {
                assert!(
                    matches!(&verdict, Verdict::Refuse(r) if r.contains("not in TENERAL_EGRESS"))
                );
            }
        }
    }

    #[test]
    fn off_refuses_everything_and_stand_ins_only_pass_the_address_check() {
        let public = at("93.184.215.14");
        assert!(matches!(decide("example.com", &public, &Policy::Off, false), Verdict::Refuse(_)));
        assert!(matches!(decide("allowed.test", &public, &Policy::Off, true), Verdict::Refuse(_)));
        let loopback = at("127.0.0.1");
        assert_eq!(decide("allowed.test", &loopback, &Policy::Public, true), Verdict::Allow);
        assert!(matches!(
            decide("allowed.test", &loopback, &Policy::Public, false),
            Verdict::Refuse(_)
        ));
        let only = Policy::Allow(vec!["allowed.test".into()]);
        assert!(matches!(decide("denied.test", &loopback, &only, true), Verdict::Refuse(_)));
    }

    #[test]
    fn malformed_policies_are_refused() {
        assert_eq!(Policy::parse("public"), Ok(Policy::Public));
        assert_eq!(Policy::parse("off"), Ok(Policy::Off));
        for bad in ["", "crates.io,", "a b", "*.github.com", ".github.com", "a..b", "http://x"] {
            assert!(Policy::parse(bad).is_err(), "{bad:?}");
        }
    }
}
