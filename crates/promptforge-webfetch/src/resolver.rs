//! Layer 2 of the SSRF boundary: the guarded DNS resolver plugged into the HTTP client.
//!
//! The client calls [`GuardedResolver`] at connect time for every hop (connection pooling
//! is off, so every request connects afresh). It looks the host up through a
//! [`HostLookup`], keeps only the answers the address policy permits for that host, and
//! fails when none is left. Nothing is cached: a rebinding answer is classified on the hop
//! that receives it.

use std::error::Error as StdError;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use async_trait::async_trait;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::address_policy::AddressPolicy;

/// Looks a host name up. The default is the system resolver ([`SystemLookup`]); tests and
/// deployments with their own DNS inject another through
/// [`crate::WebFetch::try_with_lookup`].
///
/// Whatever a lookup answers is filtered through the address policy before any connection
/// is made, so a lookup can never widen what is reachable.
#[async_trait]
pub trait HostLookup: Send + Sync {
    /// Returns the addresses `host` resolves to (a canonical, lowercase host name).
    async fn lookup(&self, host: &str) -> std::io::Result<Vec<IpAddr>>;
}

/// The operating system's resolver (`getaddrinfo`, run off the async threads by tokio).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemLookup;

#[async_trait]
impl HostLookup for SystemLookup {
    async fn lookup(&self, host: &str) -> std::io::Result<Vec<IpAddr>> {
        let addrs = tokio::net::lookup_host((host, 0)).await?;
        Ok(addrs.map(|a| a.ip()).collect())
    }
}

/// Why the guarded resolver gave the client no address. Carried inside the client's error
/// so the fetch can tell a policy refusal from an ordinary DNS failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ResolveRefusal {
    /// Every answer was in blocked space.
    Blocked {
        /// The canonical host name.
        host: String,
    },
    /// The lookup failed or answered nothing.
    NotFound {
        /// The canonical host name.
        host: String,
    },
}

impl fmt::Display for ResolveRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Blocked { host } => write!(f, "no allowed address for host {host}"),
            Self::NotFound { host } => write!(f, "DNS lookup failed for host {host}"),
        }
    }
}

impl StdError for ResolveRefusal {}

/// Finds a [`ResolveRefusal`] anywhere in an error's source chain.
pub(crate) fn find_refusal<'a>(err: &'a (dyn StdError + 'static)) -> Option<&'a ResolveRefusal> {
    let mut cur: Option<&(dyn StdError + 'static)> = Some(err);
    while let Some(e) = cur {
        if let Some(r) = e.downcast_ref::<ResolveRefusal>() {
            return Some(r);
        }
        cur = e.source();
    }
    None
}

/// Lower-cases a host and strips one trailing dot, the form allowlist pairs are stored in.
pub(crate) fn canonical_host(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// The `reqwest` resolver that enforces the address policy at connect time.
pub(crate) struct GuardedResolver {
    lookup: Arc<dyn HostLookup>,
    policy: AddressPolicy,
}

impl GuardedResolver {
    pub(crate) fn new(lookup: Arc<dyn HostLookup>, policy: AddressPolicy) -> Self {
        Self { lookup, policy }
    }

    /// Resolves and filters `host`; the core of [`Resolve::resolve`], usable in tests.
    pub(crate) async fn allowed_addresses(
        lookup: &dyn HostLookup,
        policy: &AddressPolicy,
        host: &str,
    ) -> Result<Vec<IpAddr>, ResolveRefusal> {
        let host = canonical_host(host);
        // A literal never reaches a resolver from the client, but classify it all the same.
        let answers = match host.parse::<IpAddr>() {
            Ok(ip) => vec![ip],
            Err(_) => match lookup.lookup(&host).await {
                Ok(a) => a,
                Err(e) => {
                    tracing::debug!(%host, error = %e, "DNS lookup failed");
                    return Err(ResolveRefusal::NotFound { host });
                }
            },
        };
        if answers.is_empty() {
            return Err(ResolveRefusal::NotFound { host });
        }
        let total = answers.len();
        let allowed: Vec<IpAddr> = answers
            .into_iter()
            .filter(|ip| policy.permits(Some(&host), *ip))
            .collect();
        tracing::debug!(%host, answers = total, allowed = allowed.len(), "resolved");
        if allowed.is_empty() {
            return Err(ResolveRefusal::Blocked { host });
        }
        Ok(allowed)
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let lookup = Arc::clone(&self.lookup);
        let policy = self.policy.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let allowed = Self::allowed_addresses(lookup.as_ref(), &policy, &host)
                .await
                .map_err(|r| Box::new(r) as Box<dyn StdError + Send + Sync>)?;
            let addrs: Addrs = Box::new(allowed.into_iter().map(|ip| SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed(Vec<IpAddr>);

    #[async_trait]
    impl HostLookup for Fixed {
        async fn lookup(&self, _host: &str) -> std::io::Result<Vec<IpAddr>> {
            Ok(self.0.clone())
        }
    }

    fn ips(list: &[&str]) -> Vec<IpAddr> {
        list.iter().map(|s| s.parse().unwrap()).collect()
    }

    #[tokio::test]
    async fn mixed_answers_keep_only_public_ones() {
        let lookup = Fixed(ips(&["10.0.0.1", "93.184.216.34", "::1", "2606:4700::1"]));
        let got = GuardedResolver::allowed_addresses(&lookup, &AddressPolicy::default(), "a.test")
            .await
            .unwrap();
        assert_eq!(got, ips(&["93.184.216.34", "2606:4700::1"]));
    }

    #[tokio::test]
    async fn all_blocked_fails_and_names_only_the_host() {
        let lookup = Fixed(ips(&["10.0.0.1", "169.254.169.254"]));
        let err = GuardedResolver::allowed_addresses(&lookup, &AddressPolicy::default(), "A.test.")
            .await
            .unwrap_err();
        assert_eq!(
            err,
            ResolveRefusal::Blocked {
                host: "a.test".into()
            }
        );
        let shown = err.to_string();
        assert!(
            !shown.contains("10.0.0.1") && !shown.contains("169.254"),
            "{shown}"
        );
    }

    #[tokio::test]
    async fn empty_answer_is_not_found() {
        let err =
            GuardedResolver::allowed_addresses(&Fixed(vec![]), &AddressPolicy::default(), "x")
                .await
                .unwrap_err();
        assert_eq!(err, ResolveRefusal::NotFound { host: "x".into() });
    }
}
