//! Resolve needs against a catalog file and show the decision with the top five scores.
//!
//! ```text
//! cargo run -p promptforge-tool-picker --example pick -- CATALOG.json "need" ["need" ...]
//! ```
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::process::ExitCode;

use promptforge_tool_picker::{Catalog, Config, Outcome, ToolPicker};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or("usage: pick CATALOG.json NEED [NEED ...]")?;
    let catalog: Catalog = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
    let picker = ToolPicker::build(catalog, Config::default())?;
    for need in args {
        let outcome = match picker.resolve(&need)? {
            Outcome::Bind(t) => format!("bind {}/{}", t.server(), t.name()),
            Outcome::Duplicate(g) => format!(
                "duplicate [{}]",
                g.iter().map(|t| t.name()).collect::<Vec<_>>().join(", ")
            ),
            Outcome::Ambiguous(g) => format!(
                "ambiguous [{}]",
                g.iter()
                    .map(|t| format!("{}/{}", t.server(), t.name()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Outcome::Absent => "absent".to_owned(),
            _ => "unknown outcome".to_owned(),
        };
        println!("{need:?} -> {outcome}");
        for scored in picker.rank(&need, 5)? {
            println!(
                "    {:.4}  {}/{}",
                scored.score(),
                scored.tool().server(),
                scored.tool().name()
            );
        }
    }
    Ok(())
}
