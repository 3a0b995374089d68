//! W3C Trace Context identifiers: a 16-byte trace id and 8-byte span ids, random and never
//! all zero, rendered as lowercase hex.

use std::fmt;

/// A trace id: 16 random bytes (32 lowercase hex digits), never all zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceId(u128);

impl TraceId {
    pub(crate) fn random() -> Self {
        loop {
            let bits: u128 = rand::random();
            if bits != 0 {
                return Self(bits);
            }
        }
    }

    /// The id as a number (big-endian bytes).
    pub fn to_u128(self) -> u128 {
        self.0
    }

    /// The id as 16 big-endian bytes.
    pub fn to_bytes(self) -> [u8; 16] {
        self.0.to_be_bytes()
    }
}

impl fmt::Display for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

/// A span id: 8 random bytes (16 lowercase hex digits), never all zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpanId(u64);

impl SpanId {
    pub(crate) fn random() -> Self {
        loop {
            let bits: u64 = rand::random();
            if bits != 0 {
                return Self(bits);
            }
        }
    }

    /// The id as a number (big-endian bytes).
    pub fn to_u64(self) -> u64 {
        self.0
    }

    /// The id as 8 big-endian bytes.
    pub fn to_bytes(self) -> [u8; 8] {
        self.0.to_be_bytes()
    }
}

impl fmt::Display for SpanId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// The `traceparent` header value (W3C Trace Context, version `00`, sampled) naming `span`
/// of `trace` as the caller.
pub fn traceparent(trace: TraceId, span: SpanId) -> String {
    format!("00-{trace}-{span}-01")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_render_as_fixed_width_lowercase_hex() {
        assert_eq!(TraceId(0xab).to_string(), format!("{:0>32}", "ab"));
        assert_eq!(SpanId(0xcd).to_string(), format!("{:0>16}", "cd"));
        let header = traceparent(TraceId(1), SpanId(2));
        assert_eq!(
            header,
            "00-00000000000000000000000000000001-0000000000000002-01"
        );
        assert_ne!(TraceId::random(), TraceId::random());
        assert_ne!(SpanId::random().to_u64(), 0);
    }
}
