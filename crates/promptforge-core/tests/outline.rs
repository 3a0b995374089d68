//! `parse::outline` agrees with a run: every section address resolves statically exactly
//! as the walk resolves it (`list_from_section` from every section, for every address),
//! and the outline of every parse fixture lists the sections and Lua blocks the parser
//! compiles.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::PathBuf;

use promptforge_core::parse::{Owner, Resolution, Scope, outline};
use promptforge_core::{NullObserver, Prompt, ResolutionContext, RunConfig, StoreRef, run};

/// The section tree, `(level, name)` in document order.
const TREE: [(u8, &str); 8] = [
    (2, "A"),
    (3, "A1"),
    (4, "Deep"),
    (3, "A2"),
    (2, "B"),
    (3, "B1"),
    (3, "A1"),
    (2, "C"),
];

fn address(level: u8, name: &str) -> String {
    format!("{} {name}", "#".repeat(usize::from(level)))
}

#[tokio::test]
async fn static_resolution_matches_the_walk() {
    // Every address any section could write, plus ones no section has.
    let mut addresses: BTreeSet<String> = TREE.iter().map(|(l, n)| address(*l, n)).collect();
    addresses.extend(["## Deep".to_owned(), "### C".to_owned(), "Nope".to_owned()]);
    let list = addresses
        .iter()
        .map(|a| format!("{a:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    // The H1 runs each top-level section as a chain; each section probes every address,
    // runs each of its children the same way, and returns before its list (prose that
    // would need a model), so every section is visited once per chain that reaches it.
    let children = |k: usize| -> Vec<String> {
        let level = TREE[k].0;
        TREE[k + 1..]
            .iter()
            .take_while(|(l, _)| *l > level)
            .filter(|(l, _)| *l == level + 1)
            .map(|(l, n)| address(*l, n))
            .collect()
    };
    let roots: String = TREE
        .iter()
        .filter(|(l, _)| *l == 2)
        .map(|(l, n)| format!("execute({:?})\n", address(*l, n)))
        .collect();
    let mut source = format!(
        "---\nname: o\ndescription: d\npromptforge: 1\n---\n\n# Outline\n\n```lua\n{roots}return store.read(\"seen\")\n```\n\n"
    );
    for (k, (level, name)) in TREE.iter().enumerate() {
        let visit: String = children(k)
            .iter()
            .map(|c| format!("execute({c:?})\n"))
            .collect();
        source.push_str(&format!(
            "{} {name}\n\n```lua\nfor _, probe in ipairs({{{list}}}) do\n  local ok = pcall(list_from_section, probe)\n  store.append(\"seen\", sys.section_name .. \"|\" .. probe .. \"|\" .. tostring(ok) .. \"\\n\")\nend\n{visit}return \"ok\"\n```\n\n- item\n\n",
            "#".repeat(usize::from(*level))
        ));
    }
    let prompt = Prompt::parse(&source, "outline", &NullObserver).unwrap();
    let seen = run(
        &prompt,
        "",
        ResolutionContext::empty(),
        &StoreRef::memory(),
        RunConfig::new("outline"),
    )
    .await
    .unwrap();
    let map = outline(&source);
    let mut checked = 0;
    // `sys.section_name` does not tell the two `### A1` apart: a run's answers for a name
    // must match one of the sections carrying it.
    for line in seen.lines() {
        let parts: Vec<&str> = line.split('|').collect();
        let (name, probe, found) = (parts[0], parts[1], parts[2] == "true");
        let agrees = map
            .sections()
            .iter()
            .enumerate()
            .filter(|(_, s)| s.name() == name)
            .any(|(id, _)| {
                matches!(map.resolve(Scope::Section(id), probe), Resolution::Found(_)) == found
            });
        assert!(
            agrees,
            "from `{name}`, `{probe}`: the run says found = {found}"
        );
        checked += 1;
    }
    assert!(checked >= TREE.len() * addresses.len(), "{checked} probes");
}

#[test]
fn the_outline_lists_what_the_parser_compiles() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/parse/valid");
    let mut files = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let source = std::fs::read_to_string(&path).unwrap();
        let prompt = Prompt::parse(&source, "fixture", &NullObserver).unwrap();
        let map = outline(&source);
        let sections: Vec<(u8, String, usize, bool)> = prompt
            .sections()
            .map(|s| (s.level(), s.name().to_owned(), s.line(), s.is_off_walk()))
            .collect();
        let outlined: Vec<(u8, String, usize, bool)> = map
            .sections()
            .iter()
            .map(|s| (s.level(), s.name().to_owned(), s.line(), s.is_off_walk()))
            .collect();
        assert_eq!(outlined, sections, "{}", path.display());
        let blocks: usize = prompt.sections().map(|s| s.lua_block_count()).sum();
        let outlined_blocks = map
            .lua_blocks()
            .iter()
            .filter(|b| matches!(b.owner(), Owner::Section(_)))
            .count();
        assert_eq!(outlined_blocks, blocks, "{}", path.display());
        let shared = map
            .lua_blocks()
            .iter()
            .filter(|b| b.owner() == Owner::Shared)
            .count();
        assert_eq!(shared, prompt.shared_block_count(), "{}", path.display());
        files += 1;
    }
    assert!(files >= 5);
}
