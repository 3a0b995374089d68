//! The `promptforge` command line.
#![forbid(unsafe_code)]

fn main() {}
