//! The command line and the socket: CONFIG and `--profile`, `PROMPTFORGE_GATEWAY_CONFIG`,
//! paths named as the user typed them from the working directory, and a port another
//! process holds. These need the real binary; everything else runs in process
//! (`src/tests/`).

use crate::harness::*;

#[tokio::test(flavor = "multi_thread")]
async fn config_path_is_required_and_names_both_sources() {
    let (code, stderr) = run_to_exit(&["serve", "--profile", "main"], &base_env()).await;
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("CONFIG") && stderr.contains("PROMPTFORGE_GATEWAY_CONFIG"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn profile_flag_is_required() {
    let (code, stderr) = run_to_exit(&["serve", "gateway.toml"], &base_env()).await;
    assert_eq!(code, Some(2));
    assert!(stderr.contains("--profile"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn config_comes_from_env_and_the_argument_wins() {
    let upstream = Upstream::start().await;
    let dir = ConfigDir::new();
    dir.write("gateway.toml", &standard_boot(&upstream.url));
    dir.write("profiles/main.toml", MAIN_PROFILE);
    let boot = dir.boot().to_str().unwrap().to_owned();

    let mut env = base_env();
    env.push(("PROMPTFORGE_GATEWAY_CONFIG".into(), boot.clone()));
    let gw = Gateway::start_args(&["serve", "--profile", "main"], &env).await;
    assert_eq!(gw.get("/health").await.0, 200);
    gw.kill().await;

    let mut env = base_env();
    env.push((
        "PROMPTFORGE_GATEWAY_CONFIG".into(),
        "/nonexistent/gateway.toml".into(),
    ));
    let gw = Gateway::start_args(&["serve", &boot, "--profile", "main"], &env).await;
    assert_eq!(gw.get("/health").await.0, 200);
}

/// Boots `serve <boot> --profile main` from `cwd` expecting a failure; returns stderr.
async fn boot_failure_from(cwd: &std::path::Path, boot: &str) -> String {
    let output = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        tokio::process::Command::new(env!("CARGO_BIN_EXE_promptforge-gateway"))
            .args(["serve", boot, "--profile", "main"])
            .current_dir(cwd)
            .envs(base_env())
            .env_remove("PROMPTFORGE_GATEWAY_CONFIG")
            .output(),
    )
    .await
    .expect("a broken config must never reach a listening socket")
    .unwrap();
    assert_eq!(output.status.code(), Some(1));
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn config_errors_name_files_as_the_user_gave_them() {
    let dir = ConfigDir::new();
    dir.write(
        "gateway.toml",
        "[server]\nbind = \"127.0.0.1:0\"\napi_key = \"k\"\n",
    );
    dir.write(
        "profiles/main.toml",
        "include = [\"../gateway.toml\"]\nfoo = 1\n",
    );
    let stderr = boot_failure_from(dir.path(), "gateway.toml").await;
    assert!(
        stderr.starts_with("error: profiles/main.toml: "),
        "{stderr}"
    );

    // An include's problems name it relative to the including file as given, tidied.
    dir.write(
        "profiles/main.toml",
        "include = [\"../gateway.toml\", \"../shared/models.toml\"]\n",
    );
    dir.write("shared/models.toml", "bogus = true\n");
    let stderr = boot_failure_from(dir.path(), "gateway.toml").await;
    assert!(
        stderr.starts_with("error: shared/models.toml: "),
        "{stderr}"
    );
    let parent = dir.path().parent().unwrap();
    let name = dir.path().file_name().unwrap().to_str().unwrap();
    let stderr = boot_failure_from(parent, &format!("{name}/gateway.toml")).await;
    assert!(
        stderr.starts_with(&format!("error: {name}/shared/models.toml: ")),
        "{stderr}"
    );
    let absolute = dir.path().canonicalize().unwrap();
    assert!(
        !stderr.contains(absolute.to_str().unwrap()),
        "an absolute path the user never typed: {stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_port_held_by_another_listener_is_a_startup_error() {
    // The gateway's listeners share their address with each other (SO_REUSEPORT, one per
    // I/O thread) but not with a socket that did not opt in.
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = held.local_addr().unwrap();
    let dir = ConfigDir::new();
    let boot = standard_boot("http://127.0.0.1:9").replacen(
        "bind = \"127.0.0.1:0\"",
        &format!("bind = \"{addr}\""),
        1,
    );
    dir.write("gateway.toml", &boot);
    dir.write("profiles/main.toml", MAIN_PROFILE);
    let stderr = boot_failure(&dir, "main").await;
    assert!(stderr.contains(&format!("cannot bind {addr}")), "{stderr}");
    drop(held);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_boot_file_given_relative_is_found_in_the_include_chain() {
    let upstream = Upstream::start().await;
    let dir = ConfigDir::new();
    dir.write("gateway.toml", &standard_boot(&upstream.url));
    dir.write("profiles/main.toml", MAIN_PROFILE);
    dir.write("profiles/solo.toml", &standard_boot(&upstream.url));
    let warning = "boot file is not in the profile's include chain";
    // `main` includes the boot file: no warning, however the boot file is named.
    let gw = Gateway::start_in(
        dir.path(),
        &["serve", "gateway.toml", "--profile", "main"],
        &base_env(),
    )
    .await;
    assert_eq!(gw.get("/health").await.0, 200);
    // Every boot log line is written before the one saying `listening`.
    assert!(eventually(|| gw.logs().contains("listening")).await);
    let logs = gw.logs();
    assert!(logs.contains("resolved include chain"), "{logs}");
    assert!(!logs.contains(warning), "{logs}");
    gw.kill().await;
    // `solo` does not include it: the warning, also for a relative boot path.
    let gw = Gateway::start_in(
        dir.path(),
        &["serve", "gateway.toml", "--profile", "solo"],
        &base_env(),
    )
    .await;
    assert_eq!(gw.get("/health").await.0, 200);
    assert!(eventually(|| gw.logs().contains("listening")).await);
    let logs = gw.logs();
    assert!(logs.contains(warning), "{logs}");
}
