//! One upstream endpoint as the relay uses it: the URL parsed once, the wire chosen once,
//! the bounds as typed values.

use std::fmt;
use std::sync::Arc;

use crate::config::EndpointConfig;
use crate::secret::Secret;

/// The API routes below an endpoint's base URL the gateway calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ApiPath {
    /// `/chat/completions`.
    ChatCompletions,
    /// `/embeddings`.
    Embeddings,
    /// `/rerank`.
    Rerank,
}

impl ApiPath {
    /// Every path, in the order of [`ApiPath::index`].
    const ALL: [Self; 3] = [Self::ChatCompletions, Self::Embeddings, Self::Rerank];

    /// The path below the base URL.
    pub(crate) fn suffix(self) -> &'static str {
        match self {
            Self::ChatCompletions => "/chat/completions",
            Self::Embeddings => "/embeddings",
            Self::Rerank => "/rerank",
        }
    }

    /// Whether an upstream without this route (404, 405, 501) cannot serve the model's
    /// kind at all, rather than failing one request (embeddings and rerank are optional
    /// capabilities of an OpenAI-compatible server; chat is not).
    pub(crate) fn is_capability(self) -> bool {
        !matches!(self, Self::ChatCompletions)
    }

    fn index(self) -> usize {
        match self {
            Self::ChatCompletions => 0,
            Self::Embeddings => 1,
            Self::Rerank => 2,
        }
    }
}

/// An endpoint's bounds.
pub(crate) use crate::config::EndpointLimits as Limits;

/// A plain `http://` target the inline HTTP/1.1 client can reach: where to connect and
/// each request head, written once.
#[derive(Clone)]
pub(crate) struct PlainTarget {
    /// `host:port` to connect to.
    connect: Arc<str>,
    /// The request head up to (not including) `content-length`, per [`ApiPath`]: request
    /// line, `host`, content type, accept headers and, when the endpoint has a key, the
    /// bearer.
    heads: [Box<[u8]>; 3],
    /// `http://authority/path` of each [`ApiPath`], for messages.
    shown: [Box<str>; 3],
}

impl fmt::Debug for PlainTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The heads carry the bearer: never printed.
        f.debug_struct("PlainTarget")
            .field("connect", &self.connect)
            .finish_non_exhaustive()
    }
}

impl PlainTarget {
    /// `url` as a plain target; `None` unless it is `http://` without credentials, query
    /// or fragment.
    fn parse(url: &reqwest::Url, api_key: Option<&Secret>) -> Option<Self> {
        if url.scheme() != "http"
            || url.query().is_some()
            || url.fragment().is_some()
            || !url.username().is_empty()
            || url.password().is_some()
        {
            return None;
        }
        let host = url.host_str()?;
        let port = url.port_or_known_default()?;
        let authority = match url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        };
        let base_path = url.path().trim_end_matches('/');
        let head = |path: ApiPath| {
            let mut head = format!(
                "POST {base_path}{} HTTP/1.1\r\nhost: {authority}\r\ncontent-type: application/json\r\naccept: */*\r\naccept-encoding: identity\r\n",
                path.suffix()
            );
            if let Some(key) = api_key {
                head.push_str("authorization: Bearer ");
                head.push_str(key.expose());
                head.push_str("\r\n");
            }
            head.into_bytes().into_boxed_slice()
        };
        let shown = |path: ApiPath| {
            format!("http://{authority}{base_path}{}", path.suffix()).into_boxed_str()
        };
        Some(Self {
            connect: format!("{host}:{port}").into(),
            heads: ApiPath::ALL.map(head),
            shown: ApiPath::ALL.map(shown),
        })
    }

    /// `host:port` to connect to.
    pub(crate) fn connect(&self) -> &str {
        &self.connect
    }

    /// `host:port` to connect to, shared (the inline client's pool key).
    pub(crate) fn connect_key(&self) -> &Arc<str> {
        &self.connect
    }

    /// The request head of `path`, up to its `content-length` line.
    pub(crate) fn head(&self, path: ApiPath) -> &[u8] {
        &self.heads[path.index()]
    }

    /// The URL of `path`, for messages.
    pub(crate) fn shown(&self, path: ApiPath) -> &str {
        &self.shown[path.index()]
    }
}

/// How an endpoint's requests travel.
#[derive(Debug, Clone)]
pub(crate) enum Wire {
    /// A plain `http://` endpoint and no proxy variable: buffered requests may take the
    /// inline HTTP/1.1 client (streams still take reqwest).
    Plain(PlainTarget),
    /// `https://`, or a proxy variable is set: every request takes reqwest.
    Pooled,
}

/// One upstream endpoint, ready for requests.
#[derive(Debug)]
pub(crate) struct Endpoint {
    /// The endpoint's id (a local child's is `local:<model>`).
    pub id: Arc<str>,
    /// The upstream credential, sent as `Authorization: Bearer`.
    pub api_key: Option<Secret>,
    /// The bounds.
    pub limits: Limits,
    /// How requests travel.
    pub wire: Wire,
    /// The full URL of each [`ApiPath`].
    urls: [reqwest::Url; 3],
}

impl Endpoint {
    /// Builds an endpoint from its validated settings.
    pub(crate) fn new(
        id: &str,
        base: &reqwest::Url,
        api_key: Option<Secret>,
        limits: Limits,
    ) -> Self {
        let base_path = base.path().trim_end_matches('/').to_owned();
        let url = |path: ApiPath| {
            let mut url = base.clone();
            url.set_path(&format!("{base_path}{}", path.suffix()));
            url
        };
        let wire = match PlainTarget::parse(base, api_key.as_ref()) {
            Some(plain) if !proxy_configured() => Wire::Plain(plain),
            _ => Wire::Pooled,
        };
        Self {
            id: id.into(),
            api_key,
            limits,
            wire,
            urls: ApiPath::ALL.map(url),
        }
    }

    /// The endpoint of a validated `[[endpoint]]`.
    pub(crate) fn from_config(config: &EndpointConfig) -> Self {
        Self::new(
            &config.id,
            &config.base_url,
            config.api_key.clone(),
            config.limits,
        )
    }

    /// The full URL of `path`.
    pub(crate) fn url(&self, path: ApiPath) -> &reqwest::Url {
        &self.urls[path.index()]
    }

    /// The plain target, when buffered requests may take the inline client.
    pub(crate) fn plain(&self) -> Option<&PlainTarget> {
        match &self.wire {
            Wire::Plain(plain) => Some(plain),
            Wire::Pooled => None,
        }
    }
}

/// Whether a proxy variable reqwest honours is set (the inline client knows no proxies).
fn proxy_configured() -> bool {
    ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"]
        .iter()
        .any(|name| std::env::var_os(name).is_some_and(|v| !v.is_empty()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::time::Duration;

    use super::*;

    fn url(text: &str) -> reqwest::Url {
        reqwest::Url::parse(text).unwrap()
    }

    fn limits() -> Limits {
        Limits {
            connect_timeout: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            stream_first_byte_timeout: Duration::from_secs(1),
            stream_idle_timeout: Duration::from_secs(1),
            max_response_bytes: 1,
            max_stream_event_bytes: 1,
            failover_cooldown: Duration::from_secs(1),
        }
    }

    #[test]
    fn plain_targets_write_their_heads_once() {
        if proxy_configured() {
            return;
        }
        let key = Secret::new("k1");
        let e = Endpoint::new("up", &url("http://127.0.0.1:8080/v1/"), Some(key), limits());
        let plain = e.plain().unwrap();
        assert_eq!(plain.connect(), "127.0.0.1:8080");
        let head = std::str::from_utf8(plain.head(ApiPath::Embeddings)).unwrap();
        assert!(head.starts_with("POST /v1/embeddings HTTP/1.1\r\nhost: 127.0.0.1:8080\r\n"));
        assert!(head.ends_with("authorization: Bearer k1\r\n"), "{head}");
        assert_eq!(
            plain.shown(ApiPath::Rerank),
            "http://127.0.0.1:8080/v1/rerank"
        );
        assert!(!format!("{e:?}").contains("k1"), "the bearer never prints");
        // The default port is implied in the Host header.
        let e = Endpoint::new("up", &url("http://example.test/api"), None, limits());
        let plain = e.plain().unwrap();
        assert_eq!(plain.connect(), "example.test:80");
        let head = std::str::from_utf8(plain.head(ApiPath::ChatCompletions)).unwrap();
        assert!(head.contains("\r\nhost: example.test\r\n"), "{head}");
        assert!(!head.contains("authorization"));
        assert_eq!(
            e.url(ApiPath::ChatCompletions).as_str(),
            "http://example.test/api/chat/completions"
        );
    }

    #[test]
    fn https_endpoints_take_the_pooled_client() {
        let e = Endpoint::new("up", &url("https://api.example.test/v1"), None, limits());
        assert!(e.plain().is_none());
        assert!(ApiPath::Rerank.is_capability() && !ApiPath::ChatCompletions.is_capability());
    }
}
