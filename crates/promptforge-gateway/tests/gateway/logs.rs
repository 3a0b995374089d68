//! Log output on a non-terminal stderr: no colour codes; `--log-format json` and
//! `PROMPTFORGE_LOG_FORMAT=json` give one JSON object a line.

use serde_json::Value;

use crate::harness::*;

/// Makes the gateway log a request line or two, then stops it and returns its stderr.
async fn logs_of(args_before: &[&str], env: &[(String, String)]) -> String {
    let upstream = Upstream::start().await;
    let dir = ConfigDir::new();
    dir.write("gateway.toml", &standard_boot(&upstream.url));
    dir.write("profiles/main.toml", MAIN_PROFILE);
    let boot = dir.boot();
    let mut args: Vec<&str> = args_before.to_vec();
    args.extend(["serve", boot.to_str().unwrap(), "--profile", "main"]);
    let mut gw = Gateway::start_args(&args, env).await;
    // An unknown model is answered with an error that the gateway logs.
    let (status, _) = gw
        .post(
            "/v1/chat/completions",
            &serde_json::json!({"model": "no-such-model", "messages": [{"role": "user", "content": "x"}]}),
        )
        .await;
    assert_eq!(status, 404);
    assert_eq!(gw.terminate().await, Some(0));
    gw.logs()
}

#[tokio::test(flavor = "multi_thread")]
async fn text_logs_carry_no_colour_codes_off_a_terminal() {
    let logs = logs_of(&[], &base_env()).await;
    assert!(logs.contains("INFO"), "{logs}");
    assert!(
        !logs.contains('\u{1b}'),
        "ANSI escapes in piped logs: {logs:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn json_logs_are_one_object_a_line() {
    for (args, env) in [
        (vec!["--log-format", "json"], base_env()),
        (Vec::new(), {
            let mut env = base_env();
            env.push(("PROMPTFORGE_LOG_FORMAT".into(), "json".into()));
            env
        }),
    ] {
        let logs = logs_of(&args, &env).await;
        let lines: Vec<&str> = logs.lines().filter(|l| !l.trim().is_empty()).collect();
        assert!(lines.len() >= 2, "{logs}");
        for line in lines {
            let entry: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not a JSON log line ({e}): {line:?}"));
            assert!(entry["level"].is_string(), "{line}");
            assert!(entry["timestamp"].is_string(), "{line}");
        }
        assert!(!logs.contains('\u{1b}'));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_log_format_is_a_usage_error() {
    let (code, stderr) = run_to_exit(
        &[
            "--log-format",
            "xml",
            "serve",
            "x.toml",
            "--profile",
            "main",
        ],
        &base_env(),
    )
    .await;
    assert_eq!(code, Some(2));
    assert!(stderr.contains("xml"), "{stderr}");
}
