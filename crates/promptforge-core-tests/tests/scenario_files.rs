//! The scenario prompts parse offline, each binds one of the profile's two models by its exact
//! description, and every file in `scenarios/` belongs to a scenario.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use promptforge_core::{NullObserver, Prompt};

#[test]
fn every_scenario_prompt_parses_and_binds_a_profile_model() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .collect();
    files.sort();
    let names: Vec<&str> = promptforge_core_tests::scenarios::all()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    for file in &files {
        let source = std::fs::read_to_string(dir.join(file)).unwrap();
        Prompt::parse_named(file, &source, "check", &NullObserver)
            .unwrap_or_else(|e| panic!("{e}"));
        let binds = |d: &str| source.contains(&format!("\"{d}\""));
        let text = binds(promptforge_core_tests::gateway::MODEL_DESCRIPTION);
        let tool = binds(promptforge_core_tests::gateway::TOOL_MODEL_DESCRIPTION);
        assert!(
            text != tool,
            "{file} must bind exactly one of the profile's model descriptions"
        );
        let stem = file.trim_end_matches(".md");
        assert!(names.contains(&stem), "{file} is not run by any scenario");
    }
    // The raw streaming scenario is the only one without a prompt file.
    assert_eq!(files.len() + 1, names.len(), "{files:?} vs {names:?}");
}
