//! Embeds a list of texts with the compiled-in model and writes the vectors, for offline
//! ranking experiments (`scripts/bfcl_explore.py` keeps an on-disk cache of them, so a
//! ranking idea is tried in seconds). Not part of the test run.
//!
//! ```text
//! cargo run --release -p promptforge-tool-picker --example embed_texts -- IN.json OUT.f32
//! ```
//!
//! `IN.json` is a JSON array of strings; `OUT.f32` receives, for each text in order,
//! `EMBEDDING_DIM` little-endian `f32` values (unit vectors, the bits `Model::embed` gives).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::Write;
use std::process::ExitCode;

use promptforge_tool_picker::Model;

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
    let (Some(input), Some(output)) = (args.next(), args.next()) else {
        return Err("usage: embed_texts IN.json OUT.f32".into());
    };
    let texts: Vec<String> = serde_json::from_str(&std::fs::read_to_string(&input)?)?;
    let model = Model::load()?;
    let tmp = format!("{output}.tmp");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
    for text in &texts {
        for x in model.embed(text)? {
            out.write_all(&x.to_le_bytes())?;
        }
    }
    out.flush()?;
    drop(out);
    std::fs::rename(&tmp, &output)?;
    eprintln!("{} texts embedded", texts.len());
    Ok(())
}
