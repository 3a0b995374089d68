//! Extraction benchmark (placeholder).
fn main() {}
