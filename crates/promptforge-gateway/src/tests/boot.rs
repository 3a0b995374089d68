//! Boot: CLI, profiles, env files, interpolation, includes, allowlist, [server] ownership,
//! strict parsing and model rules.

use super::harness::*;

async fn models_of(gw: &Gateway) -> Vec<String> {
    let (status, body) = gw.get("/v1/models").await;
    assert_eq!(status, 200);
    body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn unknown_profile_lists_the_available_ones() {
    let dir = ConfigDir::new();
    dir.write("gateway.toml", &standard_boot("http://127.0.0.1:9"));
    dir.write("profiles/main.toml", MAIN_PROFILE);
    dir.write("profiles/dev.toml", MAIN_PROFILE);
    let stderr = boot_failure(&dir, "nope").await;
    assert!(stderr.contains("unknown profile `nope`"), "{stderr}");
    assert!(stderr.contains("available profiles: dev, main"), "{stderr}");
}

#[tokio::test]
async fn missing_profiles_directory_or_file_is_a_startup_error() {
    let dir = ConfigDir::new();
    dir.write("gateway.toml", &standard_boot("http://127.0.0.1:9"));
    let stderr = boot_failure(&dir, "main").await;
    assert!(
        stderr.contains("profiles directory does not exist"),
        "{stderr}"
    );
    dir.write("profiles/other.toml", MAIN_PROFILE);
    let stderr = boot_failure(&dir, "main").await;
    assert!(
        stderr.contains("main.toml") && stderr.contains("available profiles: other"),
        "{stderr}"
    );
    let stderr = boot_failure(&dir, "../gateway").await;
    assert!(stderr.contains("single path component"), "{stderr}");
}

#[tokio::test]
async fn env_files_fill_only_unset_variables_profile_first() {
    let upstream = Upstream::start().await;
    let dir = ConfigDir::new();
    dir.write("gateway.toml", &standard_boot(&upstream.url));
    dir.write("profiles/main.toml", MAIN_PROFILE);
    dir.write(
        "profiles/main.env",
        "# profile env\nGW_UPSTREAM_KEY=from-profile\n",
    );
    dir.write(
        "gateway.env",
        "GW_UPSTREAM_KEY=from-boot\nexport GW_TEST_KEY=\"test-gateway-key\"\n",
    );
    // Neither variable in the process: the profile's file wins over the boot file's.
    let gw = Gateway::start(&dir.boot(), "main", &[]).await;
    let body =
        serde_json::json!({"model": "fast-draft", "messages": [{"role": "user", "content": "x"}]});
    assert_eq!(gw.post("/v1/chat/completions", &body).await.0, 200);
    assert_eq!(
        upstream.last().authorization.as_deref(),
        Some("Bearer from-profile")
    );
    gw.kill().await;
    // The process environment wins over both files.
    let gw = Gateway::start(
        &dir.boot(),
        "main",
        &[("GW_UPSTREAM_KEY".into(), "from-process".into())],
    )
    .await;
    assert_eq!(gw.post("/v1/chat/completions", &body).await.0, 200);
    assert_eq!(
        upstream.last().authorization.as_deref(),
        Some("Bearer from-process")
    );
}

#[tokio::test]
async fn unresolved_variable_fails_naming_file_and_key() {
    let dir = ConfigDir::new();
    let boot =
        standard_boot("http://127.0.0.1:9").replace("${GW_UPSTREAM_KEY}", "${GW_SURELY_UNSET_1}");
    dir.write("gateway.toml", &boot);
    dir.write("profiles/main.toml", MAIN_PROFILE);
    let stderr = boot_failure(&dir, "main").await;
    assert!(stderr.contains("gateway.toml"), "{stderr}");
    assert!(stderr.contains("endpoint[0].api_key"), "{stderr}");
    assert!(stderr.contains("GW_SURELY_UNSET_1"), "{stderr}");
}

#[tokio::test]
async fn dollar_escape_and_no_implicit_vendor_keys() {
    let upstream = Upstream::start().await;
    let dir = ConfigDir::new();
    let boot = standard_boot(&upstream.url)
        .replace("api_key = \"${GW_UPSTREAM_KEY}\"\n", "")
        .replace("A fast drafting model", "Costs $$5 per ${GW_TEST_KEY}");
    dir.write("gateway.toml", &boot);
    dir.write("profiles/main.toml", MAIN_PROFILE);
    let mut env = base_env();
    env.push(("OPENAI_API_KEY".into(), "sk-ambient".into()));
    env.push(("ANTHROPIC_API_KEY".into(), "sk-ambient".into()));
    let gw = Gateway::start(&dir.boot(), "main", &env).await;
    let (_, body) = gw.get("/v1/models").await;
    let fast = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == "fast-draft")
        .unwrap()
        .clone();
    assert_eq!(fast["description"], format!("Costs $5 per {KEY}"));
    let req =
        serde_json::json!({"model": "fast-draft", "messages": [{"role": "user", "content": "x"}]});
    assert_eq!(gw.post("/v1/chat/completions", &req).await.0, 200);
    assert_eq!(upstream.last().authorization, None);
}

#[tokio::test]
async fn includes_merge_depth_first_with_replacement_and_later_wins() {
    let upstream = Upstream::start().await;
    let dir = ConfigDir::new();
    dir.write("gateway.toml", &standard_boot(&upstream.url));
    // base.toml includes the boot file, moves bind away, then the profile moves it back.
    dir.write(
        "profiles/shared/base.toml",
        r#"include = ["../../gateway.toml"]
[server]
bind = "127.0.0.1:1"

[[model]]
name = "fast-draft"
description = "Replaced by base"
context = 4096
upstream = "up-fast-2"
endpoints = ["up"]

[[model]]
name = "extra"
description = "Added by base"
context = 4096
upstream = "up-extra"
endpoints = ["up"]
"#,
    );
    dir.write(
        "profiles/main.toml",
        "include = [\"shared/base.toml\"]\n[server]\nbind = \"127.0.0.1:0\"\n",
    );
    let gw = Gateway::start(&dir.boot(), "main", &base_env()).await;
    let names = models_of(&gw).await;
    assert_eq!(
        names,
        [
            "reasoning-large",
            "fast-draft",
            "gemma-remote",
            "embed-large",
            "rerank-large",
            "unreachable",
            "extra"
        ]
    );
    let (_, body) = gw.get("/v1/models").await;
    assert_eq!(body["data"][1]["description"], "Replaced by base");
    let logs = gw.logs();
    assert!(logs.contains("resolved include chain"), "{logs}");
    assert!(
        !logs.contains("boot file is not in the profile's include chain"),
        "{logs}"
    );
    let (_, status) = gw.get("/admin/status").await;
    let chain: Vec<String> = status["include_chain"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(chain.len(), 3);
    assert!(
        chain[0].ends_with("gateway.toml")
            && chain[1].ends_with("base.toml")
            && chain[2].ends_with("main.toml")
    );
}

#[tokio::test]
async fn include_cycles_are_rejected() {
    let dir = ConfigDir::new();
    dir.write("gateway.toml", &standard_boot("http://127.0.0.1:9"));
    dir.write("profiles/a.toml", "include = [\"b.toml\"]\n");
    dir.write(
        "profiles/b.toml",
        "include = [\"a.toml\", \"../gateway.toml\"]\n",
    );
    dir.write("profiles/main.toml", "include = [\"a.toml\"]\n");
    let stderr = boot_failure(&dir, "main").await;
    assert!(stderr.contains("include cycle"), "{stderr}");
    assert!(
        stderr.contains("a.toml -> ") && stderr.contains("b.toml"),
        "{stderr}"
    );
}

#[tokio::test]
async fn includes_nest_at_most_sixteen_deep() {
    let upstream = Upstream::start().await;
    let dir = ConfigDir::new();
    dir.write("gateway.toml", &standard_boot(&upstream.url));
    // main -> d1 -> ... -> d16 -> gateway.toml is 17 levels below main: too deep.
    dir.write("profiles/main.toml", "include = [\"d1.toml\"]\n");
    for i in 1..=16 {
        let next = if i == 16 {
            "../gateway.toml".to_owned()
        } else {
            format!("d{}.toml", i + 1)
        };
        dir.write(
            &format!("profiles/d{i}.toml"),
            &format!("include = [\"{next}\"]\n"),
        );
    }
    let stderr = boot_failure(&dir, "main").await;
    assert!(stderr.contains("deeper than 16"), "{stderr}");
    // Starting one level lower (d2 ... d16 -> gateway.toml) is exactly 16 deep: accepted.
    dir.write("profiles/main.toml", "include = [\"d2.toml\"]\n");
    let gw = Gateway::start(&dir.boot(), "main", &base_env()).await;
    assert_eq!(
        gw.get("/admin/status").await.1["include_chain"]
            .as_array()
            .unwrap()
            .len(),
        17
    );
}

#[tokio::test]
async fn allowlist_later_wins_and_filters_before_validation() {
    let upstream = Upstream::start().await;
    let dir = ConfigDir::new();
    // A catalog entry with a dangling endpoint reference: fine when filtered out.
    let boot = format!(
        "{}\n[[model]]\nname = \"dangling\"\ndescription = \"d\"\ncontext = 10\nupstream = \"x\"\nendpoints = [\"nowhere\"]\n",
        standard_boot(&upstream.url)
    );
    dir.write("gateway.toml", &boot);
    dir.write(
        "profiles/base.toml",
        "include = [\"../gateway.toml\"]\nmodels = [\"reasoning-large\"]\n",
    );
    dir.write(
        "profiles/main.toml",
        "include = [\"base.toml\"]\nmodels = [\"fast-draft\", \"embed-large\"]\n",
    );
    let gw = Gateway::start(&dir.boot(), "main", &base_env()).await;
    assert_eq!(models_of(&gw).await, ["fast-draft", "embed-large"]);
    let (_, status) = gw.get("/admin/status").await;
    assert_eq!(
        status["model_allowlist"],
        serde_json::json!(["fast-draft", "embed-large"])
    );
    let req = serde_json::json!({"model": "reasoning-large", "messages": [{"role": "user", "content": "x"}]});
    assert_eq!(
        gw.post("/v1/chat/completions", &req).await.1["error"]["code"],
        "model_not_found"
    );
    gw.kill().await;

    dir.write(
        "profiles/main.toml",
        "include = [\"base.toml\"]\nmodels = [\"fast-draft\", \"no-such-model\"]\n",
    );
    let stderr = boot_failure(&dir, "main").await;
    assert!(
        stderr.contains("main.toml")
            && stderr.contains("models[1]")
            && stderr.contains("no-such-model"),
        "{stderr}"
    );

    // Without an allowlist the dangling reference is validated and fails.
    dir.write("profiles/base.toml", "include = [\"../gateway.toml\"]\n");
    dir.write("profiles/main.toml", "include = [\"base.toml\"]\n");
    let stderr = boot_failure(&dir, "main").await;
    assert!(
        stderr.contains("model[dangling].endpoints[0]")
            && stderr.contains("unknown endpoint `nowhere`"),
        "{stderr}"
    );
}

#[tokio::test]
async fn boot_file_owns_server() {
    let dir = ConfigDir::new();
    dir.write("gateway.toml", &standard_boot("http://127.0.0.1:9"));
    dir.write(
        "profiles/main.toml",
        "include = [\"../gateway.toml\"]\n[server]\nbind = \"127.0.0.1:7\"\n",
    );
    let stderr = boot_failure(&dir, "main").await;
    assert!(
        stderr.contains("server.bind")
            && stderr.contains("127.0.0.1:7")
            && stderr.contains("127.0.0.1:0"),
        "{stderr}"
    );

    dir.write(
        "profiles/main.toml",
        "include = [\"../gateway.toml\"]\n[server]\napi_key = \"other-key-value\"\n",
    );
    let stderr = boot_failure(&dir, "main").await;
    assert!(
        stderr.contains("server.api_key") && stderr.contains("[redacted]"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("other-key-value") && !stderr.contains(KEY),
        "{stderr}"
    );
}

#[tokio::test]
async fn self_contained_profile_boots_with_a_warning() {
    let upstream = Upstream::start().await;
    let dir = ConfigDir::new();
    dir.write("gateway.toml", &standard_boot(&upstream.url));
    dir.write("profiles/solo.toml", &standard_boot(&upstream.url));
    let gw = Gateway::start(&dir.boot(), "solo", &base_env()).await;
    assert_eq!(gw.get("/health").await.0, 200);
    assert!(
        gw.logs()
            .contains("boot file is not in the profile's include chain"),
        "{}",
        gw.logs()
    );
}

/// A catalog snippet appended to the standard boot file, and what the error must mention.
async fn assert_rejected(snippet: &str, expected: &[&str]) {
    let dir = ConfigDir::new();
    dir.write(
        "gateway.toml",
        &format!("{}\n{snippet}", standard_boot("http://127.0.0.1:9")),
    );
    dir.write("profiles/main.toml", MAIN_PROFILE);
    let stderr = boot_failure(&dir, "main").await;
    assert!(
        stderr.contains("gateway.toml"),
        "no file named for {snippet}: {stderr}"
    );
    for needle in expected {
        assert!(
            stderr.contains(needle),
            "`{needle}` missing for {snippet}: {stderr}"
        );
    }
}

const M: &str =
    "[[model]]\nname = \"m\"\ndescription = \"d\"\nupstream = \"u\"\nendpoints = [\"up\"]\n";

#[tokio::test]
async fn unknown_keys_are_rejected_everywhere() {
    assert_rejected(&format!("{M}context = 10\ncontxt = 5\n"), &["contxt"]).await;
    assert_rejected(
        "[tools.web_search]\nprovider = \"brave\"\napi_key = \"k\"\ncount = 3\n",
        &["count"],
    )
    .await;
    assert_rejected("[local]\ncache = \"x\"\n", &["cache"]).await;
    assert_rejected(
        "[[dominion]]\nid = \"d\"\nkind = \"remote\"\nmax_conc = 1\n",
        &["max_conc"],
    )
    .await;
    assert_rejected(
        "[[endpoint]]\nid = \"e\"\nbase_url = \"http://x\"\nkey = \"k\"\n",
        &["key"],
    )
    .await;
    assert_rejected("[[local_model]]\nname = \"l\"\ndescription = \"d\"\nsource = \"/m.gguf\"\ncontext = 5\ngpu = 1\n", &["gpu"]).await;
    assert_rejected("toplevel = 1\n", &["toplevel"]).await;
}

#[tokio::test]
async fn model_kind_and_field_rules() {
    for field in [
        "thinking = \"always\"",
        "default_max_tokens = 5",
        "tool_dialect = \"gemma3_tool_code\"",
        "effort_levels = [\"low\"]",
        "default_effort = \"low\"",
        "adaptive_thinking = true",
    ] {
        let name = field.split(' ').next().unwrap();
        assert_rejected(
            &format!("{M}context = 10\nkind = \"embedding\"\n{field}\n"),
            &[&format!("model[m].{name}"), "chat-only"],
        )
        .await;
    }
    assert_rejected(
        &format!("{M}context = 10\nkind = \"classifier\"\nthinking = \"never\"\n"),
        &["chat-only"],
    )
    .await;
    assert_rejected(
        &format!("{M}context = 10\neffort_levels = [\"low\"]\n"),
        &["model[m].effort_levels", "thinking = \"never\""],
    )
    .await;
    assert_rejected(
        &format!("{M}context = 10\nthinking = \"never\"\ndefault_effort = \"low\"\n"),
        &["model[m].default_effort"],
    )
    .await;
    assert_rejected(
        &format!("{M}context = 10\nmax_output = 11\n"),
        &["model[m].max_output", "exceeds context"],
    )
    .await;
    assert_rejected(&format!("{M}context = 10\nthinking = \"always\"\neffort_levels = [\"low\"]\ndefault_effort = \"high\"\n"), &["default_effort", "not one of effort_levels"]).await;
    assert_rejected(&format!("{M}context = 0\n"), &["model[m].context"]).await;
    assert_rejected(
        &format!("{M}context = 10\nkind = \"vision\"\n"),
        &["model[m].kind"],
    )
    .await;
    assert_rejected("[[model]]\nname = \"m\"\ndescription = \"d\"\nupstream = \"u\"\nendpoints = []\ncontext = 1\n", &["model[m].endpoints"]).await;
    assert_rejected(
        "[[endpoint]]\nid = \"e\"\nbase_url = \"ftp://x\"\n",
        &["endpoint[e].base_url"],
    )
    .await;
    assert_rejected(
        "[[endpoint]]\nid = \"e\"\nbase_url = \"http://x\"\ntimeout = \"soon\"\n",
        &["endpoint[e].timeout"],
    )
    .await;
    assert_rejected(
        "[[endpoint]]\nid = \"up\"\nbase_url = \"http://x\"\n",
        &["endpoint.id", "defined twice"],
    )
    .await;
}

#[tokio::test]
async fn local_models_and_dominions_parse_and_validate() {
    let upstream = Upstream::start().await;
    let dir = ConfigDir::new();
    let extra = r#"
[local]
cache_dir = "/tmp/pf-cache"
llama_server = "/opt/llama-server"

[[dominion]]
id = "pool"
kind = "remote"
max_concurrency = 4
max_queue = 50
policy = "reject"
fair_scheduling = false

[[dominion]]
id = "gpu0"
kind = "local"
vram_gb = 24

[[local_model]]
name = "qwen-local"
description = "A careful local model"
source = "/models/qwen.gguf"
sha256 = "9465e63a22add5354d9bb4b99e90117043c7124007664907259bd16d043bb031"
context = 65536
max_output = 8192
thinking = "switchable"
effort_levels = ["low"]
gpu_layers = 99
flash_attention = true
cache_type_k = "q8_0"
cache_type_v = "q8_0"
parallel = 4
vram_gb = 14
dominion = "gpu0"

[[local_model]]
name = "bge-local"
kind = "embedding"
description = "Local embeddings"
source = "/models/bge.gguf"
context = 512
vram_gb = 1
dominion = "gpu0"
"#;
    let boot = standard_boot(&upstream.url).replace(
        "api_key = \"${GW_UPSTREAM_KEY}\"",
        "api_key = \"${GW_UPSTREAM_KEY}\"\ndominion = \"pool\"",
    );
    dir.write("gateway.toml", &format!("{boot}{extra}"));
    dir.write("profiles/main.toml", MAIN_PROFILE);
    // The configuration is valid; provisioning runs before the socket is bound and
    // refuses the missing binary, so nothing ever listens.
    let err = boot_failure(&dir, "main").await;
    assert!(
        err.contains("[local] llama_server /opt/llama-server is not a file"),
        "{err}"
    );
    assert!(!err.contains("listening on"), "{err}");

    let local = "[[dominion]]\nid = \"gpu0\"\nkind = \"local\"\nvram_gb = 10\n[[dominion]]\nid = \"pool\"\nkind = \"remote\"\n";
    let lm =
        "[[local_model]]\nname = \"l\"\ndescription = \"d\"\nsource = \"/m.gguf\"\ncontext = 100\n";
    assert_rejected(
        &format!("{local}{lm}dominion = \"pool\"\n"),
        &[
            "local_model[l].dominion",
            "local model must bind a local dominion",
        ],
    )
    .await;
    assert_rejected(
        &format!("{local}{lm}dominion = \"nope\"\n"),
        &["unknown dominion `nope`"],
    )
    .await;
    assert_rejected(
        &format!("{local}{lm}dominion = \"gpu0\"\n"),
        &["local_model[l].vram_gb", "must declare vram_gb"],
    )
    .await;
    assert_rejected(
        &format!("{local}{lm}dominion = \"gpu0\"\nvram_gb = 11\n"),
        &["dominion[gpu0].vram_gb", "over the budget"],
    )
    .await;
    assert_rejected(
        &format!("{local}{lm}kind = \"embedding\"\nchat_template_file = \"t.md\"\n"),
        &["local_model[l].chat_template_file", "chat-only"],
    )
    .await;
    assert_rejected(
        &format!("{local}{lm}sha256 = \"abc\"\n"),
        &["local_model[l].sha256"],
    )
    .await;
    assert_rejected(
        &format!("{local}{lm}parallel = 0\n"),
        &["local_model[l].parallel"],
    )
    .await;
    assert_rejected(
        &format!("{local}{lm}max_output = 101\n"),
        &["local_model[l].max_output"],
    )
    .await;
    assert_rejected(
        &format!("{local}{lm}threads = 0\n"),
        &["local_model[l].threads", "must be between 1"],
    )
    .await;
    assert_rejected(
        "[local]\nllama_server_url = \"https://mirror/llama-server\"\n",
        &["local.llama_server_url", "must be set together"],
    )
    .await;
    assert_rejected(
        "[local]\nllama_server_url = \"https://mirror/llama-server\"\nllama_server_sha256 = \"xyz\"\n",
        &["local.llama_server_sha256", "64 hexadecimal digits"],
    )
    .await;
    assert_rejected(
        "[local]\nready_timeout = \"soon\"\n",
        &["local.ready_timeout", "is not a duration"],
    )
    .await;
    assert_rejected(
        "[[dominion]]\nid = \"r\"\nkind = \"remote\"\nvram_gb = 4\n",
        &["dominion[r].vram_gb"],
    )
    .await;
    assert_rejected(
        "[[dominion]]\nid = \"r\"\nkind = \"remote\"\nmax_concurrency = 0\n",
        &["dominion[r].max_concurrency"],
    )
    .await;
    assert_rejected(
        "[[dominion]]\nid = \"r\"\nkind = \"remote\"\nmax_queue = 0\n",
        &["dominion[r].max_queue"],
    )
    .await;
    assert_rejected(
        "[[dominion]]\nid = \"\"\nkind = \"remote\"\n",
        &["dominion.id"],
    )
    .await;
    assert_rejected(
        &format!("{local}[[endpoint]]\nid = \"e\"\nbase_url = \"http://x\"\ndominion = \"gpu0\"\n"),
        &[
            "endpoint[e].dominion",
            "endpoint must bind a remote dominion",
        ],
    )
    .await;
}
