//! ARCHITECTURE.md's Boundaries list names exactly what `lib.rs` exports: every
//! `promptforge_core::…` path there starts with a name `lib.rs` makes public (`pub mod` or
//! `pub use`), and every such name appears in the list.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::PathBuf;

const CRATE: &str = "promptforge_core::";

fn read(relative: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The names `lib.rs` makes public at the crate root: `pub mod name;` and the last segment
/// (or the `as` alias) of every item of a `pub use` (one-line or braced, over lines).
fn lib_exports(lib: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let code: String = lib
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    for statement in code.split(';') {
        let statement = statement.trim();
        if let Some(module) = statement.strip_prefix("pub mod ") {
            names.insert(module.trim().to_owned());
        } else if let Some(path) = statement.strip_prefix("pub use ") {
            let items = match (path.find('{'), path.rfind('}')) {
                (Some(open), Some(close)) => path[open + 1..close].to_owned(),
                _ => path.to_owned(),
            };
            for item in items.split(',').map(str::trim).filter(|i| !i.is_empty()) {
                let name = match item.split_once(" as ") {
                    Some((_, alias)) => alias.trim(),
                    None => item.rsplit("::").next().unwrap_or(item).trim(),
                };
                names.insert(name.to_owned());
            }
        }
    }
    names
}

/// The first segment of every `promptforge_core::…` path in the `## Boundaries` section:
/// each name of a `promptforge_core::{A, B::c}` group, or `x` of `promptforge_core::x::y`.
fn boundary_names(architecture: &str) -> BTreeSet<String> {
    let start = architecture
        .find("\n## Boundaries")
        .expect("ARCHITECTURE.md has a `## Boundaries` section");
    let rest = &architecture[start + 1..];
    let section = match rest[3..].find("\n## ") {
        Some(end) => &rest[..end + 3],
        None => rest,
    };
    let mut names = BTreeSet::new();
    let mut text = section;
    while let Some(at) = text.find(CRATE) {
        text = &text[at + CRATE.len()..];
        if let Some(group) = text.strip_prefix('{') {
            let close = group
                .find('}')
                .expect("an unclosed promptforge_core::{ group");
            for item in group[..close].split(',') {
                let first: String = item.trim().chars().take_while(|&c| is_ident(c)).collect();
                if !first.is_empty() {
                    names.insert(first);
                }
            }
        } else {
            let first: String = text.chars().take_while(|&c| is_ident(c)).collect();
            if !first.is_empty() {
                names.insert(first);
            }
        }
    }
    names
}

#[test]
fn the_boundaries_list_matches_what_lib_rs_exports() {
    let exported = lib_exports(&read("src/lib.rs"));
    let listed = boundary_names(&read("../../ARCHITECTURE.md"));
    assert!(
        exported.contains("run") && exported.contains("tools"),
        "{exported:?}"
    );
    let unlisted: Vec<_> = exported.difference(&listed).collect();
    let unexported: Vec<_> = listed.difference(&exported).collect();
    assert!(
        unlisted.is_empty() && unexported.is_empty(),
        "ARCHITECTURE.md's Boundaries list and lib.rs disagree:\n  exported by lib.rs but not \
         listed: {unlisted:?}\n  listed but not exported by lib.rs: {unexported:?}"
    );
}

#[test]
fn the_checker_reads_groups_paths_and_renames() {
    let lib = "//! doc: pub use nothing::Here;\npub mod tools;\nmod hidden;\n\
               pub use a::b::{C, D as E,\n    F};\npub use g::H;\n";
    let expected: BTreeSet<String> = ["C", "E", "F", "H", "tools"]
        .map(str::to_owned)
        .into_iter()
        .collect();
    assert_eq!(lib_exports(lib), expected);
    let doc = "# X\n\n## Code map\n`promptforge_core::Nope`\n\n## Boundaries\n\n\
               - `promptforge_core::{C, E,\n  F::new}` and `promptforge_core::tools::Tool`.\n\
               - `promptforge_core::H`\n\n## Later\n`promptforge_core::Gone`\n";
    assert_eq!(boundary_names(doc), expected);
}
