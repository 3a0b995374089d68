//! The fuzz target on URL admission, as property tests (run with the ordinary test suite;
//! raise `PROPTEST_CASES` for a longer campaign).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use promptforge_webfetch::{AdmissionError, FetchConfig, admit, is_special_use, redacted};
use proptest::prelude::*;

fn open_policy() -> FetchConfig {
    FetchConfig::builder()
        .allow_http(true)
        .allow_ip_literals(true)
        .allow_ports([80, 443, 8080])
        .build()
        .unwrap()
}

/// Every spelling of an IPv4 address that WHATWG URL parsing accepts as that address.
fn spell_v4(ip: Ipv4Addr, style: u8) -> String {
    let n = u32::from(ip);
    let [a, b, c, d] = ip.octets();
    match style % 8 {
        0 => format!("{a}.{b}.{c}.{d}"),
        1 => format!("{n}"),
        2 => format!("0x{n:x}"),
        3 => format!("0{n:o}"),
        4 => format!("0{a:o}.0x{b:X}.{c}.0{d:o}"),
        5 => format!("{a}.{}", n & 0x00ff_ffff),
        6 => format!("{a}.{b}.{}", n & 0xffff),
        _ => format!("{a}.{b}.{c}.{d}."),
    }
}

fn arb_v4() -> impl Strategy<Value = Ipv4Addr> {
    prop_oneof![
        any::<u32>().prop_map(Ipv4Addr::from),
        // Bias towards the interesting ranges.
        (
            prop::sample::select(vec![
                0u8, 10, 100, 127, 169, 172, 192, 198, 203, 224, 240, 255
            ]),
            any::<[u8; 3]>()
        )
            .prop_map(|(a, [b, c, d])| Ipv4Addr::new(a, b, c, d)),
    ]
}

fn arb_v6() -> impl Strategy<Value = Ipv6Addr> {
    prop_oneof![
        any::<u128>().prop_map(Ipv6Addr::from),
        arb_v4().prop_map(|v4| v4.to_ipv6_mapped()),
        arb_v4().prop_map(|v4| Ipv6Addr::from(u128::from(u32::from(v4)))),
        arb_v4().prop_map(|v4| Ipv6Addr::from((0x64_ff9b_u128 << 96) | u128::from(u32::from(v4)))),
        (
            prop::sample::select(vec![
                0x2001u16, 0x2002, 0xfc00, 0xfd00, 0xfe80, 0xfec0, 0xff02, 0x3fff
            ]),
            any::<[u16; 7]>()
        )
            .prop_map(|(h, r)| Ipv6Addr::new(h, r[0], r[1], r[2], r[3], r[4], r[5], r[6])),
    ]
}

fn arb_url() -> impl Strategy<Value = String> {
    let scheme = prop::sample::select(vec![
        "http", "https", "HTTPS", "ftp", "file", "gopher", "ws",
    ]);
    let userinfo = prop::sample::select(vec!["", "u@", "u:p@", ":p@", "@", "a%40b@"]);
    let host = prop_oneof![
        "[a-z]{1,10}(\\.[a-z]{1,6}){0,2}\\.?",
        arb_v4().prop_map(|ip| ip.to_string()),
        arb_v6().prop_map(|ip| format!("[{ip}]")),
        "[0-9x.]{1,20}",
        "[ -~]{0,12}",
    ];
    let port = prop::sample::select(vec!["", ":80", ":443", ":8080", ":22", ":0", ":65536", ":"]);
    let path = "(/[ -~]{0,10}){0,3}";
    let query = prop::sample::select(vec!["", "?token=secret", "?a=b&token=secret"]);
    let frag = prop::sample::select(vec!["", "#secret", "#"]);
    (scheme, userinfo, host, port, path, query, frag)
        .prop_map(|(s, u, h, p, pa, q, f)| format!("{s}://{u}{h}{p}{pa}{q}{f}"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn admission_never_panics_on_any_text(raw in "\\PC{0,200}") {
        let _ = admit(&raw, &open_policy());
        let _ = admit(&raw, &FetchConfig::default());
    }

    #[test]
    fn every_ipv4_spelling_is_classified_as_its_address(ip in arb_v4(), style in 0u8..8) {
        let url = format!("http://{}/", spell_v4(ip, style));
        let got = admit(&url, &open_policy());
        if is_special_use(IpAddr::V4(ip)) {
            prop_assert_eq!(got, Err(AdmissionError::BlockedAddress), "{}", url);
        } else {
            let admitted = got.unwrap();
            prop_assert_eq!(admitted.host(), ip.to_string());
        }
        // The default policy admits no literal at all.
        prop_assert!(admit(&url, &FetchConfig::default()).is_err());
    }

    #[test]
    fn every_ipv6_literal_is_classified_with_embedded_ipv4(ip in arb_v6()) {
        let url = format!("https://[{ip}]/");
        let got = admit(&url, &open_policy());
        if is_special_use(IpAddr::V6(ip)) {
            prop_assert_eq!(got, Err(AdmissionError::BlockedAddress), "{}", url);
        } else {
            prop_assert!(got.is_ok(), "{}: {:?}", url, got);
        }
        if let Some(v4) = ip.to_ipv4_mapped() {
            prop_assert_eq!(is_special_use(IpAddr::V6(ip)), is_special_use(IpAddr::V4(v4)));
        }
    }

    #[test]
    fn admitted_urls_keep_every_invariant(raw in arb_url()) {
        let policy = open_policy();
        match admit(&raw, &policy) {
            Ok(a) => {
                let url = a.url();
                prop_assert!(matches!(url.scheme(), "http" | "https"), "{}", raw);
                prop_assert!(url.username().is_empty() && url.password().is_none(), "{}", raw);
                let port = url.port_or_known_default().unwrap();
                prop_assert!(policy.allow_ports().contains(&port), "{}", raw);
                prop_assert!(url.fragment().is_none(), "{}", raw);
                prop_assert!(!a.host().is_empty() && !a.host().ends_with('.'), "{}", raw);
                prop_assert_eq!(a.host(), a.host().to_ascii_lowercase());
                if let Ok(ip) = a.host().parse::<IpAddr>() {
                    prop_assert!(!is_special_use(ip), "{}", raw);
                }
                prop_assert!(!redacted(url).contains("secret"), "{}", raw);
            }
            Err(e) => {
                prop_assert!(!e.to_string().contains("secret"), "{}: {}", raw, e);
            }
        }
    }
}
