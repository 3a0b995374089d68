//! Property test over configuration loading: whatever the files say, loading returns a
//! value or a [`ConfigError`], never panics. A fixed number of cases keeps it inside the
//! normal `cargo test` run.

use proptest::prelude::*;

use super::{EnvLayers, load_boot_server, load_profile, profile_source};

/// Lines the generator assembles files from: valid keys with odd values, wrong types,
/// includes (missing, cyclic, devices, directories), interpolation, huge numbers.
const FRAGMENTS: &[&str] = &[
    "[server]",
    "bind = \"127.0.0.1:0\"",
    "api_key = \"k\"",
    "api_key = \"${KEY}\"",
    "api_key = \"a\\nb\"",
    "api_key = \"\"",
    "max_connections = 0",
    "max_connections = 99999999999999",
    "header_read_timeout = \"0s\"",
    "keep_alive_timeout = \"1ms\"",
    "drain_timeout = \"forever\"",
    "max_header_bytes = -1",
    "[[endpoint]]",
    "id = \"up\"",
    "id = \"\"",
    "base_url = \"http://127.0.0.1:1/v1\"",
    "base_url = \"ftp://x\"",
    "base_url = \"http://u:p@h/\"",
    "stream_first_byte_timeout = \"10ms\"",
    "stream_idle_timeout = \"\"",
    "max_response_bytes = 0",
    "max_stream_event_bytes = 9223372036854775807",
    "dominion = \"pool\"",
    "[[model]]",
    "name = \"m\"",
    "description = \"d\"",
    "context = 100",
    "context = -5",
    "max_output = 1000",
    "default_max_tokens = 50",
    "upstream = \"u\"",
    "endpoints = [\"up\"]",
    "endpoints = []",
    "thinking = \"sometimes\"",
    "effort_levels = [\"low\", \"low\"]",
    "default_temperature = nan",
    "kind = \"embedding\"",
    "[[local_model]]",
    "source = \"x.gguf\"",
    "vram_gb = 1e308",
    "[[dominion]]",
    "kind = \"remote\"",
    "kind = \"local\"",
    "max_concurrency = 1",
    "vram_gb = 4.0",
    "[tools.web_search]",
    "provider = \"brave\"",
    "models = [\"m\", \"nope\"]",
    "include = [\"../gateway.toml\"]",
    "include = [\"a.toml\"]",
    "include = [\"/dev/zero\"]",
    "include = [\"..\"]",
    "include = [\"../profiles/main.toml\"]",
    "x = ${",
    "= = =",
    "[server",
    "\u{0}\u{7f}\u{fffd}",
    "\"\"\"",
    "a.b.c = { d = [1, \"2\", 3.0] }",
];

fn file() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::collection::vec(prop::sample::select(FRAGMENTS), 0..24)
            .prop_map(|lines| lines.join("\n")),
        1 => ".{0,200}",
    ]
}

/// A boot file that usually gets past `[server]`, so the profile's include graph and the
/// validation rules are exercised too.
fn boot_file() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => file().prop_map(|rest| format!(
            "[server]\nbind = \"127.0.0.1:0\"\napi_key = \"k\"\n\n{rest}"
        )),
        1 => file(),
    ]
}

/// A profile that usually includes the boot file.
fn profile_file() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => file().prop_map(|rest| format!("include = [\"../gateway.toml\", \"a.toml\"]\n{rest}")),
        1 => file(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn loading_any_configuration_never_panics(
        boot in boot_file(),
        profile in profile_file(),
        include in file(),
        env in ".{0,40}",
    ) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("profiles")).unwrap();
        std::fs::write(root.join("gateway.toml"), &boot).unwrap();
        std::fs::write(root.join("profiles/main.toml"), &profile).unwrap();
        std::fs::write(root.join("profiles/a.toml"), &include).unwrap();
        std::fs::write(root.join("profiles/main.env"), format!("KEY={env}\n{env}\n")).unwrap();
        let boot_path = root.join("gateway.toml");
        let Ok(source) = profile_source(&boot_path, "main") else {
            return Ok(());
        };
        let mut layers = EnvLayers::new();
        if layers.load_file(&source.env_file).is_err() {
            return Ok(());
        }
        if let Ok(server) = load_boot_server(&boot_path, &layers) {
            let _ = load_profile(&source, &boot_path, &server, &layers);
        }
    }
}
