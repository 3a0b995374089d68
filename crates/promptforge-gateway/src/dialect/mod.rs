//! Tool-calling dialects emulated for backends without a native `tools` array.

pub(crate) mod gemma;
