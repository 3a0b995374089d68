//! Admin routes: status and profile switch.

use serde_json::{Value, json};

use super::harness::*;

async fn setup(upstream: &Upstream) -> (Gateway, ConfigDir) {
    let dir = ConfigDir::new();
    dir.write("gateway.toml", &standard_boot(&upstream.url));
    dir.write("profiles/main.toml", MAIN_PROFILE);
    dir.write(
        "profiles/analytical.toml",
        "include = [\"../gateway.toml\"]\nmodels = [\"reasoning-large\", \"embed-large\"]\n",
    );
    // Only loadable with its own env file (switch loads the new profile's env file).
    dir.write(
        "profiles/envy.toml",
        "include = [\"../gateway.toml\"]\nmodels = [\"envy\"]\n[[model]]\nname = \"envy\"\ndescription = \"${GW_ENVY_DESC}\"\ncontext = 10\nupstream = \"u\"\nendpoints = [\"up\"]\n",
    );
    dir.write("profiles/envy.env", "GW_ENVY_DESC=from the envy env file\n");
    dir.write("profiles/broken.toml", "include = [\"../gateway.toml\"]\n[[model]]\nname = \"b\"\ndescription = \"d\"\ncontext = 10\nmax_output = 20\nupstream = \"u\"\nendpoints = [\"up\"]\n");
    dir.write(
        "profiles/overbooked.toml",
        "include = [\"../gateway.toml\"]\n[[dominion]]\nid = \"gpu\"\nkind = \"local\"\nvram_gb = 8\n\
         [[local_model]]\nname = \"l1\"\ndescription = \"d\"\nsource = \"/a.gguf\"\ncontext = 10\nvram_gb = 5\ndominion = \"gpu\"\n\
         [[local_model]]\nname = \"l2\"\ndescription = \"d\"\nsource = \"/b.gguf\"\ncontext = 10\nvram_gb = 5\ndominion = \"gpu\"\n",
    );
    dir.write(
        "profiles/rebind.toml",
        "include = [\"../gateway.toml\"]\n[server]\nbind = \"127.0.0.1:9\"\n",
    );
    let gw = Gateway::start(&dir.boot(), "main", &base_env()).await;
    (gw, dir)
}

async fn switch(gw: &Gateway, name: &str) -> (u16, Value) {
    gw.post("/admin/switch-profile", &json!({"name": name}))
        .await
}

fn names(status: &Value) -> Vec<String> {
    status["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn status_reports_the_active_profile() {
    let upstream = Upstream::start().await;
    let (gw, _dir) = setup(&upstream).await;
    let (code, status) = gw.get("/admin/status").await;
    assert_eq!(code, 200);
    assert_eq!(status["profile"], "main");
    assert_eq!(status["model_allowlist"], Value::Null);
    assert_eq!(names(&status).len(), 6);
    assert_eq!(
        status["models"][3],
        json!({"name": "embed-large", "kind": "embedding"})
    );
}

#[tokio::test]
async fn switch_swaps_the_loaded_set() {
    let upstream = Upstream::start().await;
    let (gw, _dir) = setup(&upstream).await;
    let (code, reply) = switch(&gw, "analytical").await;
    assert_eq!(code, 200, "{reply}");
    assert_eq!(reply["profile"], "analytical");
    let (_, status) = gw.get("/admin/status").await;
    assert_eq!(status["profile"], "analytical");
    assert_eq!(
        status["model_allowlist"],
        json!(["reasoning-large", "embed-large"])
    );
    let (_, models) = gw.get("/v1/models").await;
    assert_eq!(models["data"].as_array().unwrap().len(), 2);
    let req = json!({"model": "fast-draft", "messages": [{"role": "user", "content": "x"}]});
    assert_eq!(gw.post("/v1/chat/completions", &req).await.0, 404);

    let (code, reply) = switch(&gw, "envy").await;
    assert_eq!(code, 200, "{reply}");
    let (_, models) = gw.get("/v1/models").await;
    assert_eq!(models["data"][0]["description"], "from the envy env file");

    assert_eq!(switch(&gw, "main").await.0, 200);
    assert_eq!(gw.post("/v1/chat/completions", &req).await.0, 200);
}

#[tokio::test]
async fn failed_switches_leave_the_old_state_intact() {
    let upstream = Upstream::start().await;
    let (gw, _dir) = setup(&upstream).await;
    for name in ["", ".", "..", "../gateway", "a/b", "/etc/passwd", "a\\b"] {
        let (code, body) = switch(&gw, name).await;
        assert_eq!(code, 400, "{name:?}: {body}");
        assert_eq!(body["error"]["code"], "invalid_profile_name");
    }
    let (code, body) = switch(&gw, "nope").await;
    assert_eq!(code, 404);
    assert_eq!(body["error"]["code"], "profile_not_found");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("analytical, broken, envy, main, overbooked, rebind"),
        "{body}"
    );
    let (code, body) = switch(&gw, "broken").await;
    assert_eq!(code, 400);
    assert_eq!(body["error"]["code"], "profile_invalid");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("broken.toml") && message.contains("model[b].max_output"),
        "{message}"
    );
    let (code, body) = switch(&gw, "overbooked").await;
    assert_eq!(code, 400);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("over the budget"),
        "{body}"
    );
    let (code, body) = switch(&gw, "rebind").await;
    assert_eq!(code, 400);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("server.bind"),
        "{body}"
    );
    let (code, body) = gw
        .post("/admin/switch-profile", &json!({"profile": "main"}))
        .await;
    assert_eq!(
        (code, body["error"]["code"].clone()),
        (400, json!("invalid_request"))
    );

    let (_, status) = gw.get("/admin/status").await;
    assert_eq!(status["profile"], "main");
    assert_eq!(names(&status).len(), 6);
    let req = json!({"model": "fast-draft", "messages": [{"role": "user", "content": "x"}]});
    assert_eq!(gw.post("/v1/chat/completions", &req).await.0, 200);
}

#[tokio::test]
async fn concurrent_switches_are_serialised_and_traffic_never_sees_a_torn_state() {
    let upstream = Upstream::start().await;
    let (gw, _dir) = setup(&upstream).await;
    let gw = std::sync::Arc::new(gw);
    let mut tasks = Vec::new();
    for i in 0..12 {
        let switcher = gw.clone();
        tasks.push(tokio::spawn(async move {
            let name = if i % 2 == 0 { "analytical" } else { "main" };
            switch(&switcher, name).await.0
        }));
        let caller = gw.clone();
        tasks.push(tokio::spawn(async move {
            // reasoning-large is in both profiles: it must always be served.
            let req =
                json!({"model": "reasoning-large", "messages": [{"role": "user", "content": "x"}]});
            caller.post("/v1/chat/completions", &req).await.0
        }));
    }
    for task in tasks {
        assert_eq!(task.await.unwrap(), 200);
    }
    let (_, status) = gw.get("/admin/status").await;
    let expected = if status["profile"] == "main" { 6 } else { 2 };
    assert_eq!(names(&status).len(), expected);
}
