//! Execution rules, each checked by running a real `.md` fixture through the public API.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod bounded;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use promptforge_core::{
    CancelHandle, NullObserver, Observation, Observer, Prompt, ResolutionContext, RunConfig,
    RunError, RunErrorKind, RunLimits, StoreRef, run,
};

fn load(name: &str) -> Prompt {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/run")
        .join(name);
    let source = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
    Prompt::parse_named(name, &source, "test", &NullObserver).unwrap_or_else(|e| panic!("{e}"))
}

async fn exec_with(name: &str, input: &str, config: RunConfig) -> Result<String, RunError> {
    let prompt = load(name);
    run(
        &prompt,
        input,
        ResolutionContext::empty(),
        &StoreRef::memory(),
        config,
    )
    .await
}

async fn exec(name: &str, input: &str) -> Result<String, RunError> {
    exec_with(name, input, RunConfig::new("test")).await
}

#[track_caller]
fn expect_error(result: Result<String, RunError>, kind: RunErrorKind, fragment: &str) -> RunError {
    let error = match result {
        Ok(value) => panic!("expected a {kind} error, got Ok({value:?})"),
        Err(error) => error,
    };
    assert_eq!(error.kind(), kind, "{error}");
    assert!(
        error.to_string().contains(fragment),
        "`{error}` lacks `{fragment}`"
    );
    error
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sections_fall_through_and_skip_off_walk_ones() {
    assert_eq!(exec("walk_fallthrough.md", "").await.unwrap(), "HAC");
}

#[tokio::test]
async fn a_scalar_h1_return_is_the_result() {
    assert_eq!(exec("h1_return.md", "").await.unwrap(), "42");
}

#[tokio::test]
async fn falling_off_the_end_prefers_default_return_then_reply_then_done() {
    assert_eq!(exec("default_return.md", "").await.unwrap(), "finished");
    assert_eq!(
        exec("last_reply.md", "").await.unwrap(),
        "first then second"
    );
    assert_eq!(exec("done.md", "").await.unwrap(), "done");
}

#[tokio::test]
async fn jump_keeps_reply_and_skips_the_rest_of_the_section() {
    assert_eq!(exec("jump.md", "").await.unwrap(), "kept across the jump");
    assert_eq!(exec("jump_back.md", "").await.unwrap(), "counted 3");
}

#[tokio::test]
async fn a_jump_to_a_child_walks_the_child_level_then_resumes() {
    assert_eq!(
        exec("child_walk.md", "").await.unwrap(),
        "parent > kid > sibling > after"
    );
}

#[tokio::test]
async fn execute_runs_a_contained_chain() {
    assert_eq!(
        exec("execute.md", "").await.unwrap(),
        "helper got input text and var changed by the chain | c1+c3 | true | outer | caller reply"
    );
}

#[tokio::test]
async fn unknown_targets_list_only_the_visible_sections() {
    let error = expect_error(
        exec("not_found.md", "").await,
        RunErrorKind::Control,
        "`## Missing`",
    );
    let text = error.to_string();
    assert!(
        text.contains("visible sections: `## Peer`, `### Child`"),
        "{text}"
    );
    assert!(text.contains("not_found.md:12:"), "{text}");
    assert_eq!(error.section(), Some("## Parent"));
    expect_error(
        exec("self_not_visible.md", "").await,
        RunErrorKind::Control,
        "visible sections: none",
    );
}

#[tokio::test]
async fn nesting_is_capped_at_eight_levels() {
    expect_error(
        exec("depth.md", "").await,
        RunErrorKind::Limit,
        "at most 8 levels",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fanout_maps_a_worker_over_a_collection_in_order() {
    assert_eq!(exec("fanout_map.md", "").await.unwrap(), "A1,B2,C3");
    assert_eq!(
        exec("fanout_hash.md", "").await.unwrap(),
        "first;colour=red;colour"
    );
    assert_eq!(
        exec("fanout_list.md", "").await.unwrap(),
        "[rust] / [lua] / [markdown]"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fanout_rejects_bad_collections_and_propagates_arm_errors() {
    expect_error(
        exec("fanout_errors.md", "string").await,
        RunErrorKind::Control,
        "list_from_section",
    );
    expect_error(
        exec("fanout_errors.md", "empty").await,
        RunErrorKind::Control,
        "empty collection",
    );
    expect_error(
        exec("fanout_errors.md", "function").await,
        RunErrorKind::Control,
        "member 2 is a function",
    );
    expect_error(
        exec("fanout_errors.md", "nolist").await,
        RunErrorKind::Control,
        "no list items",
    );
    let error = expect_error(
        exec("fanout_errors.md", "arm").await,
        RunErrorKind::Lua,
        "arm exploded",
    );
    assert_eq!(error.section(), Some("### W"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arms_may_append_but_not_both_write_one_path() {
    assert_eq!(
        exec("fanout_store.md", "append").await.unwrap(),
        "appended 4"
    );
    expect_error(
        exec("fanout_store.md", "write").await,
        RunErrorKind::Store,
        "write-write race",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arms_start_from_the_callers_section_start_reply() {
    assert_eq!(
        exec("fanout_reply.md", "").await.unwrap(),
        "section start reply |  | 0"
    );
}

#[tokio::test]
async fn store_operations_from_lua() {
    assert_eq!(
        exec("store_ops.md", "").await.unwrap(),
        "two\nthree|four\nfive|4| four\n5| five|THREE|notes/a.md|notes/a.md,notes/deep/b.md|true|false|false"
    );
}

#[tokio::test]
async fn store_errors_are_run_errors() {
    expect_error(
        exec("store_errors.md", "missing").await,
        RunErrorKind::Store,
        "no such file",
    );
    expect_error(
        exec("store_errors.md", "traversal").await,
        RunErrorKind::Store,
        "`..`",
    );
    expect_error(
        exec("store_errors.md", "glob").await,
        RunErrorKind::Store,
        "***",
    );
    expect_error(
        exec("store_errors.md", "start").await,
        RunErrorKind::Store,
        "1 or more",
    );
}

#[tokio::test]
async fn store_errors_keep_the_store_error_as_their_source() {
    use std::error::Error as _;
    let error = exec("store_errors.md", "missing").await.unwrap_err();
    let source = error
        .source()
        .and_then(|s| s.downcast_ref::<promptforge_core::StoreError>())
        .unwrap_or_else(|| panic!("no StoreError source: {error:?}"));
    assert!(source.is_not_found(), "{source}");
    assert!(error.message().contains(&source.to_string()), "{error}");
}

#[tokio::test]
async fn sys_is_sealed_and_complete() {
    let result = exec_with("sys.md", "", RunConfig::new("sys-test"))
        .await
        .unwrap();
    assert_eq!(result, "sys ok");
}

#[tokio::test]
async fn var_holds_json_only_and_fails_at_the_assigning_line() {
    assert_eq!(exec("var_json.md", "").await.unwrap(), "assigned");
    let error = expect_error(
        exec("var_json.md", "function").await,
        RunErrorKind::Lua,
        "cannot hold a function",
    );
    assert!(error.to_string().contains("var_json.md:15:"), "{error}");
    expect_error(
        exec("var_json.md", "nested").await,
        RunErrorKind::Lua,
        "var.bad.inner.f",
    );
}

#[tokio::test]
async fn the_sandbox_offers_only_string_table_and_math() {
    assert_eq!(exec("sandbox.md", "").await.unwrap(), "sandboxed");
}

#[tokio::test]
async fn runaway_blocks_hit_the_instruction_budget_and_memory_ceiling() {
    expect_error(
        exec("runaway.md", "").await,
        RunErrorKind::InstructionBudget,
        "budget",
    );
    expect_error(
        exec("runaway.md", "pcall").await,
        RunErrorKind::InstructionBudget,
        "budget",
    );
    let limits = RunLimits::new().lua_memory_bytes(std::num::NonZeroUsize::new(16 << 20).unwrap());
    let config = RunConfig::new("mem").limits(limits);
    expect_error(
        exec_with("runaway.md", "memory", config).await,
        RunErrorKind::Memory,
        "memory",
    );
}

#[derive(Default)]
struct Recorder(Mutex<Vec<String>>);

impl Observer for Recorder {
    fn observe(&self, execution: &str, section: &str, event: Observation<'_>) {
        let line = match event {
            Observation::LuaLog { message, .. } => format!("log {execution} {section} {message}"),
            Observation::SectionStarted { id } => format!("start {section} {id}"),
            Observation::RunSucceeded { result, .. } => format!("ok {result}"),
            _ => return,
        };
        self.0.lock().unwrap().push(line);
    }
}

#[tokio::test]
async fn log_reports_checkpoints_and_validates_messages() {
    let recorder = Arc::new(Recorder::default());
    let config = RunConfig::new("logs").observer(recorder.clone());
    assert_eq!(exec_with("log.md", "", config).await.unwrap(), "logged");
    let lines = recorder.0.lock().unwrap().clone();
    assert_eq!(lines[0], "start # Log 0");
    assert_eq!(lines[1], "start ## Main 1");
    assert_eq!(lines[2], "log logs ## Main checkpoint one");
    assert_eq!(lines.last().unwrap(), "ok logged");
    expect_error(
        exec("log.md", "long").await,
        RunErrorKind::Lua,
        "at most 256",
    );
    expect_error(
        exec("log.md", "newline").await,
        RunErrorKind::Lua,
        "no newlines",
    );

    let capped = Arc::new(Recorder::default());
    let limits = RunLimits::new().lua_log_events(std::num::NonZeroU32::new(1).unwrap());
    let config = RunConfig::new("logs")
        .observer(capped.clone())
        .limits(limits);
    exec_with("log.md", "", config).await.unwrap();
    let logs = capped
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.starts_with("log"))
        .count();
    assert_eq!(logs, 1);
}

#[tokio::test]
async fn the_shared_library_replays_into_every_section() {
    // Loaded once per section VM (so `loaded` is 1 in each) and its return is discarded.
    assert_eq!(exec("shared_lib.md", "hi").await.unwrap(), "HI! TWO! 1 xx");
    expect_error(
        exec("shared_jump.md", "").await,
        RunErrorKind::Control,
        "jump is not available during shared library load",
    );
}

#[tokio::test]
async fn templates_render_before_the_model_and_name_bad_placeholders() {
    // Rendering succeeded, so the failure is the missing model.
    expect_error(
        exec("templates.md", "in").await,
        RunErrorKind::NoModel,
        "no model is bound",
    );
    for (name, fragment) in [
        ("template_missing.md", "`nowhere` is not defined"),
        ("template_function.md", "function"),
        ("template_reply.md", "`reply` is not defined"),
        ("template_item.md", "`item` is not defined"),
        ("template_deep.md", "`var.topic.x` is not defined"),
    ] {
        expect_error(exec(name, "").await, RunErrorKind::Template, fragment);
    }
}

#[tokio::test]
async fn untrusted_wraps_and_escapes_forged_tags() {
    let wrapped = exec("untrusted.md", "").await.unwrap();
    assert!(
        wrapped.starts_with("<untrusted-input nonce=\""),
        "{wrapped}"
    );
    assert!(
        wrapped.contains("&lt;/untrusted-input nonce=\"forged\">"),
        "{wrapped}"
    );
    assert_eq!(wrapped.matches("</untrusted-input").count(), 1);
}

/// How long a cancelled run may take to end before the test fails instead of hanging.
const CANCEL_DEADLINE: Duration = Duration::from_secs(30);

#[test]
fn cancellation_stops_a_busy_run() {
    let cancel = CancelHandle::new();
    let trigger = cancel.clone();
    let limits = RunLimits::new().lua_instructions(std::num::NonZeroU64::new(u64::MAX).unwrap());
    let config = RunConfig::new("cancel").cancel(cancel).limits(limits);
    // The endless Lua loop runs on its own runtime and thread: should cancellation break,
    // this thread still gets control back and the test fails at the deadline.
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        trigger.cancel();
    });
    let result =
        bounded::on_own_runtime(CANCEL_DEADLINE, move || exec_with("runaway.md", "", config))
            .unwrap_or_else(|| panic!("the cancelled run did not end within {CANCEL_DEADLINE:?}"));
    canceller.join().unwrap();
    let error = result.unwrap_err();
    assert!(error.is_cancelled(), "{error}");
    assert!(!error.is_retryable());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_runs_in_one_process_do_not_interfere() {
    let prompt = load("shared_lib.md");
    let mut handles = Vec::new();
    for i in 0..24 {
        let prompt = prompt.clone();
        handles.push(tokio::spawn(async move {
            let store = StoreRef::memory();
            let input = format!("run{i}");
            let result = run(
                &prompt,
                &input,
                ResolutionContext::empty(),
                &store,
                RunConfig::new(input.clone()),
            )
            .await
            .unwrap();
            (i, result)
        }));
    }
    for handle in handles {
        let (i, result) = handle.await.unwrap();
        assert_eq!(result, format!("RUN{i}! TWO! 1 xx"));
    }
}

#[tokio::test]
async fn runtime_errors_in_later_blocks_carry_absolute_lines() {
    let error = expect_error(
        exec("lines.md", "").await,
        RunErrorKind::Lua,
        "late failure",
    );
    assert!(
        error.to_string().contains("lines.md:28: late failure"),
        "{error}"
    );
}
