//! Routing by `Content-Type`, decided from the response headers before the body is read.

/// How a response body is processed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// `text/html`, `application/xhtml+xml`: readability, or the whole page, as Markdown.
    Html,
    /// JSON and XML (including `+json` / `+xml` suffixes): decoded text, verbatim.
    Structured,
    /// Any other `text/*`: decoded text, verbatim; a body over the byte cap keeps its prefix.
    Text,
}

/// A parsed `Content-Type`: the lowercase `type/subtype` and the `charset` parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ContentType {
    pub(crate) essence: String,
    pub(crate) charset: Option<String>,
}

/// Why a response was refused by its type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TypeRefusal {
    /// The response has no `Content-Type` (the tool does not sniff).
    #[error("the response has no Content-Type header, and the tool does not guess types")]
    Missing,
    /// The type is not one the tool reads.
    #[error("the content type {0} is not supported (only HTML, JSON, XML and text are read)")]
    Unsupported(String),
}

/// The longest type name echoed in a message.
const MAX_SHOWN: usize = 80;

impl ContentType {
    /// Parses a header value. `None` when there is no usable `type/subtype`.
    pub(crate) fn parse(header: &str) -> Option<Self> {
        let mut parts = header.split(';');
        let essence = parts.next()?.trim().to_ascii_lowercase();
        let (ty, sub) = essence.split_once('/')?;
        let token = |s: &str| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
        };
        if !token(ty) || !token(sub) || essence.len() > MAX_SHOWN {
            return None;
        }
        let charset = parts.find_map(|p| {
            let (k, v) = p.split_once('=')?;
            k.trim()
                .eq_ignore_ascii_case("charset")
                .then(|| v.trim().trim_matches('"').to_ascii_lowercase())
        });
        Some(Self { essence, charset })
    }

    /// The route for this type, or the refusal naming it.
    pub(crate) fn route(&self) -> Result<Route, TypeRefusal> {
        let e = self.essence.as_str();
        let (ty, sub) = e.split_once('/').unwrap_or((e, ""));
        match (ty, sub) {
            ("text", "html") | ("application", "xhtml+xml") => Ok(Route::Html),
            ("application", "json" | "xml") | ("text", "xml") => Ok(Route::Structured),
            (_, s) if s.ends_with("+json") || s.ends_with("+xml") => Ok(Route::Structured),
            ("text", _) => Ok(Route::Text),
            _ => Err(TypeRefusal::Unsupported(self.essence.clone())),
        }
    }
}

/// Routes a response by its raw `Content-Type` header (`None` when absent).
pub(crate) fn route(header: Option<&[u8]>) -> Result<(Route, Option<String>), TypeRefusal> {
    let Some(raw) = header else {
        return Err(TypeRefusal::Missing);
    };
    let text = std::str::from_utf8(raw).unwrap_or("");
    if text.trim().is_empty() {
        return Err(TypeRefusal::Missing);
    }
    let ct = ContentType::parse(text)
        .ok_or_else(|| TypeRefusal::Unsupported("(unparseable Content-Type)".to_owned()))?;
    let route = ct.route()?;
    Ok((route, ct.charset))
}

/// Decodes a body by its charset (UTF-8 when absent or unknown; a byte-order mark wins).
/// When `cut` is set the body was truncated mid-stream, so a trailing partial character is
/// dropped rather than rendered as U+FFFD.
pub(crate) fn decode(body: &[u8], charset: Option<&str>, cut: bool) -> String {
    let encoding = charset
        .and_then(|c| encoding_rs::Encoding::for_label(c.as_bytes()))
        .unwrap_or(encoding_rs::UTF_8);
    let (text, _, _) = encoding.decode(body);
    let mut text = text.into_owned();
    if cut {
        while text.ends_with('\u{FFFD}') {
            text.pop();
        }
    }
    text
}

/// How far into an HTML body a `<meta charset>` declaration is looked for (the HTML
/// standard's prescan window).
const META_PRESCAN: usize = 1024;

/// Finds a `<meta charset=...>` or `<meta http-equiv content="...; charset=...">` label in
/// the first 1024 bytes of an HTML body, for pages whose `Content-Type` names no charset.
/// This reads the encoding only; the type itself is never sniffed. A UTF-16 label is read as
/// UTF-8, as the HTML standard prescribes for the prescan.
pub(crate) fn html_meta_charset(body: &[u8]) -> Option<String> {
    let head = &body[..body.len().min(META_PRESCAN)];
    let lower: Vec<u8> = head.iter().map(u8::to_ascii_lowercase).collect();
    let mut from = 0;
    while let Some(pos) = find(&lower[from..], b"<meta") {
        let start = from + pos;
        let end = lower[start..]
            .iter()
            .position(|b| *b == b'>')
            .map_or(lower.len(), |e| start + e);
        let tag = &lower[start..end];
        if let Some(at) = find(tag, b"charset=") {
            let value: String = tag[at + 8..]
                .iter()
                .skip_while(|b| matches!(b, b'"' | b'\'' | b' '))
                .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b':' | b'.'))
                .map(|b| char::from(*b))
                .collect();
            if let Some(enc) = encoding_rs::Encoding::for_label(value.as_bytes()) {
                return Some(enc.output_encoding().name().to_ascii_lowercase());
            }
        }
        from = end;
    }
    None
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(h: &str) -> Result<Route, TypeRefusal> {
        route(Some(h.as_bytes())).map(|(r, _)| r)
    }

    #[test]
    fn routes() {
        assert_eq!(r("text/html; charset=utf-8"), Ok(Route::Html));
        assert_eq!(r("TEXT/HTML"), Ok(Route::Html));
        assert_eq!(r("application/xhtml+xml"), Ok(Route::Html));
        assert_eq!(r("application/json"), Ok(Route::Structured));
        assert_eq!(r("application/ld+json"), Ok(Route::Structured));
        assert_eq!(r("application/xml"), Ok(Route::Structured));
        assert_eq!(r("text/xml"), Ok(Route::Structured));
        assert_eq!(r("application/atom+xml"), Ok(Route::Structured));
        assert_eq!(r("image/svg+xml"), Ok(Route::Structured));
        assert_eq!(r("text/plain"), Ok(Route::Text));
        assert_eq!(r("text/csv"), Ok(Route::Text));
        assert_eq!(r("text/markdown"), Ok(Route::Text));
        for refused in [
            "application/pdf",
            "image/png",
            "audio/mpeg",
            "video/mp4",
            "application/octet-stream",
            "application/zip",
        ] {
            assert_eq!(
                r(refused),
                Err(TypeRefusal::Unsupported(refused.into())),
                "{refused}"
            );
        }
        assert_eq!(route(None), Err(TypeRefusal::Missing));
        assert_eq!(r("  "), Err(TypeRefusal::Missing));
        assert!(matches!(r("garbage"), Err(TypeRefusal::Unsupported(_))));
        assert!(matches!(
            r("text/<script>"),
            Err(TypeRefusal::Unsupported(_))
        ));
    }

    #[test]
    fn meta_charset_prescan() {
        let html = b"<html><head><META charset='windows-1252'><title>x</title>";
        assert_eq!(html_meta_charset(html).as_deref(), Some("windows-1252"));
        let equiv = b"<meta http-equiv=\"Content-Type\" content=\"text/html; charset=Shift_JIS\">";
        assert_eq!(html_meta_charset(equiv).as_deref(), Some("shift_jis"));
        assert_eq!(
            html_meta_charset(b"<meta charset=utf-16>").as_deref(),
            Some("utf-8")
        );
        assert_eq!(
            html_meta_charset(b"<meta name=x><p>charset=latin1</p>"),
            None
        );
        assert_eq!(html_meta_charset(b"<meta charset=bogus>"), None);
        let late = [vec![b' '; 2000], b"<meta charset=latin1>".to_vec()].concat();
        assert_eq!(html_meta_charset(&late), None);
    }

    #[test]
    fn charset_is_read_and_applied() {
        let (_, cs) = route(Some(b"text/plain; Charset=\"ISO-8859-1\"")).unwrap();
        assert_eq!(cs.as_deref(), Some("iso-8859-1"));
        assert_eq!(
            decode(&[0x63, 0x61, 0x66, 0xe9], cs.as_deref(), false),
            "caf\u{e9}"
        );
        assert_eq!(decode("caf\u{e9}".as_bytes(), None, false), "caf\u{e9}");
        assert_eq!(decode(&"caf\u{e9}".as_bytes()[..4], None, true), "caf");
    }
}
