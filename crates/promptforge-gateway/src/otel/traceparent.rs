//! The W3C Trace Context `traceparent` header: the caller's span a request continues.

use opentelemetry::trace::{SpanId, TraceId};

/// The caller's span, as a valid `traceparent` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Parent {
    /// The trace the request belongs to.
    pub trace_id: TraceId,
    /// The caller's span (the gateway's request span hangs under it).
    pub span_id: SpanId,
    /// The caller's `sampled` flag.
    pub sampled: bool,
}

/// Lowercase hex digits, exactly `len` of them.
fn hex(field: &str, len: usize) -> bool {
    field.len() == len
        && field
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Reads `version-traceid-parentid-flags` (W3C Trace Context level 1): version `00` with
/// exactly four fields, or a later version with at least four (its extra fields ignored);
/// version `ff`, an all-zero trace or span id, upper-case hex or a wrong length is
/// `None` (the request then starts a new trace).
pub(crate) fn parse(value: &[u8]) -> Option<Parent> {
    let text = std::str::from_utf8(value).ok()?.trim();
    let mut fields = text.split('-');
    let (version, trace, span, flags) = (
        fields.next()?,
        fields.next()?,
        fields.next()?,
        fields.next()?,
    );
    if !hex(version, 2) || version == "ff" || (version == "00" && fields.next().is_some()) {
        return None;
    }
    if !(hex(trace, 32) && hex(span, 16) && hex(flags, 2)) {
        return None;
    }
    let trace_id = TraceId::from_bytes(u128::from_str_radix(trace, 16).ok()?.to_be_bytes());
    let span_id = SpanId::from_bytes(u64::from_str_radix(span, 16).ok()?.to_be_bytes());
    if trace_id == TraceId::INVALID || span_id == SpanId::INVALID {
        return None;
    }
    let flags = u8::from_str_radix(flags, 16).ok()?;
    Some(Parent {
        trace_id,
        span_id,
        sampled: flags & 1 == 1,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_valid_traceparent_names_the_trace_the_span_and_the_flag() {
        let parent = parse(b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
        assert_eq!(
            parent.trace_id,
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap()
        );
        assert_eq!(
            parent.span_id,
            SpanId::from_hex("00f067aa0ba902b7").unwrap()
        );
        assert!(parent.sampled);
        let unsampled = parse(b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00").unwrap();
        assert!(!unsampled.sampled);
        // A later version may carry more fields.
        assert!(parse(b"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-xyz").is_some());
    }

    #[test]
    fn anything_else_starts_a_new_trace() {
        for bad in [
            "",
            "00",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-+bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
        ] {
            assert_eq!(parse(bad.as_bytes()), None, "{bad}");
        }
    }
}
