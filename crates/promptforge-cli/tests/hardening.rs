//! Regression tests for issue #12 (CLI findings): Ctrl-C always ends a run with 130, prompt
//! files are bounded and regular, a result that cannot be written is an error, and error
//! messages are capped. Every child process has a deadline and is killed past it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(60);

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn promptforge() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_promptforge"));
    command
        .current_dir(repo())
        .env_remove("PROMPTFORGE_GATEWAY_URL")
        .env_remove("PROMPTFORGE_GATEWAY_API_KEY");
    command
}

/// Waits for the child, killing it (and failing) past the deadline.
fn wait_bounded(child: &mut Child) -> ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("promptforge did not exit within {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn run_bounded(mut command: Command) -> (ExitStatus, String, String) {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = out.read_to_string(&mut text);
        text
    });
    let err_reader = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = err.read_to_end(&mut text);
        String::from_utf8_lossy(&text).into_owned()
    });
    let status = wait_bounded(&mut child);
    (status, reader.join().unwrap(), err_reader.join().unwrap())
}

fn write(dir: &Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    path.display().to_string()
}

const BUSY: &str = "---\nname: busy\ndescription: never ends on its own\npromptforge: 1\n---\n\n# Busy\n\n## A\n\n```lua\npcall(function() for i = 1, 3000000 do end end)\njump('## B')\n```\n\n## B\n\n```lua\nwhile true do if pcall(function() for i = 1, 3000000 do end end) then break end end\njump('## A')\n```\n";

fn interrupt(pid: u32) {
    let _ = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status();
}

#[test]
fn ctrl_c_ends_a_busy_run_with_130() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "busy.md", BUSY);
    let mut command = promptforge();
    command.args(["run", &file]);
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The handler is registered before the file is read; give the run time to get busy.
    std::thread::sleep(Duration::from_millis(800));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the busy prompt ended on its own"
    );
    interrupt(child.id());
    let status = wait_bounded(&mut child);
    assert_eq!(status.code(), Some(130), "{status:?}");
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert_eq!(out, "");
}

#[test]
fn a_second_ctrl_c_ends_the_process_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "busy.md", BUSY);
    let mut child = promptforge()
        .args(["run", &file])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    interrupt(child.id());
    interrupt(child.id());
    let status = wait_bounded(&mut child);
    assert_eq!(status.code(), Some(130), "{status:?}");
}

#[test]
fn non_regular_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for target in ["/dev/zero".to_owned(), dir.path().display().to_string()] {
        let mut command = promptforge();
        command.args(["run", &target]);
        let (status, out, err) = run_bounded(command);
        assert_eq!(status.code(), Some(2), "{target}: {err}");
        assert_eq!(out, "");
        assert!(err.contains("not a regular file"), "{target}: {err}");
    }
    // A FIFO is refused without blocking on open.
    let fifo = dir.path().join("pipe.md");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let mut command = promptforge();
    command.args(["run", &fifo.display().to_string()]);
    let (status, _, err) = run_bounded(command);
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(err.contains("not a regular file"), "{err}");
}

#[test]
fn oversized_and_non_utf8_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.md");
    let file = std::fs::File::create(&big).unwrap();
    file.set_len(9 * 1024 * 1024).unwrap();
    let mut command = promptforge();
    command.args(["run", &big.display().to_string()]);
    let (status, _, err) = run_bounded(command);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("at most 8 MiB"), "{err}");

    let bad = dir.path().join("bad.md");
    std::fs::write(
        &bad,
        b"---\nname: b\ndescription: d\npromptforge: 1\n---\n\n# B\n\xc3\x28\n",
    )
    .unwrap();
    let mut command = promptforge();
    command.args(["run", &bad.display().to_string()]);
    let (status, _, err) = run_bounded(command);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("byte offset 51"), "{err}");
    assert!(err.contains("bad.md:8:"), "{err}");
}

#[test]
fn a_result_that_cannot_be_written_is_an_error() {
    // stdout closed (`>&-`).
    let mut closed = Command::new("sh");
    closed.args([
        "-c",
        "exec \"$0\" run prompts/echo.md hi >&-",
        env!("CARGO_BIN_EXE_promptforge"),
    ]);
    closed.current_dir(repo());
    let (status, _, err) = run_bounded(closed);
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(err.contains("stdout is closed"), "{err}");
    // A shell's `>/dev/null` is a fine place for a result nobody wants.
    let mut null = Command::new("sh");
    null.args([
        "-c",
        "exec \"$0\" run prompts/echo.md hi > /dev/null",
        env!("CARGO_BIN_EXE_promptforge"),
    ]);
    null.current_dir(repo());
    let (status, _, err) = run_bounded(null);
    assert_eq!(status.code(), Some(0), "{err}");
    // stdout full.
    let mut full = Command::new("sh");
    full.args([
        "-c",
        "exec \"$0\" run prompts/echo.md hi > /dev/full",
        env!("CARGO_BIN_EXE_promptforge"),
    ]);
    full.current_dir(repo());
    let (status, _, err) = run_bounded(full);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("cannot write the result"), "{err}");
}

/// Runs `promptforge <args>` under `sh` with `redirect` applied to its descriptors.
fn run_redirected(args: &str, redirect: &str) -> (ExitStatus, String, String) {
    let mut command = Command::new("sh");
    command.args([
        "-c",
        &format!("exec \"$0\" {args} {redirect}"),
        env!("CARGO_BIN_EXE_promptforge"),
    ]);
    command
        .current_dir(repo())
        .env_remove("PROMPTFORGE_GATEWAY_URL")
        .env_remove("PROMPTFORGE_GATEWAY_API_KEY");
    run_bounded(command)
}

#[test]
fn a_stdout_open_for_reading_only_loses_nothing() {
    // Issue 26: stdout opened read-only (`1<file`) used to end with 0 and no result: Rust's
    // `Stdout` takes the write's EBADF for a success.
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "readonly.txt", "");
    for args in [
        "run prompts/echo.md hi",
        "run prompts/echo.md ''",
        "check prompts/echo.md",
    ] {
        let (status, _, err) = run_redirected(args, &format!("1<'{file}'"));
        assert_eq!(status.code(), Some(2), "{args}: {err}");
        assert!(
            err.contains("stdout is open for reading only"),
            "{args}: {err}"
        );
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "");
    // The read end of a pipe as stdout: the same mistake through another descriptor.
    let (reader, _writer) = std::io::pipe().unwrap();
    let mut child = promptforge()
        .args(["run", "prompts/echo.md", "hi"])
        .stdout(reader)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = wait_bounded(&mut child);
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(err.contains("stdout is open for reading only"), "{err}");
}

#[test]
fn a_report_that_cannot_be_written_is_an_error() {
    let (status, _, err) = run_redirected("check prompts/echo.md", "> /dev/full");
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("cannot write the report"), "{err}");
}

#[test]
fn frontmatter_mistakes_are_not_called_a_missing_version() {
    let dir = tempfile::tempdir().unwrap();
    for (name, body, expected) in [
        (
            "unclosed.md",
            "---\nname: u\ndescription: d\npromptforge: 1\n\n# U\n",
            "no closing `---`",
        ),
        (
            "huge.md",
            "---\nname: h\ndescription: d\npromptforge: 99999999999999999999999\n---\n\n# H\n",
            "supports only major version 1",
        ),
    ] {
        let file = write(dir.path(), name, body);
        let mut command = promptforge();
        command.args(["run", &file]);
        let (status, _, err) = run_bounded(command);
        assert_eq!(status.code(), Some(1), "{err}");
        assert!(err.contains(expected), "{name}: {err}");
        assert!(!err.contains("declares no"), "{name}: {err}");
    }
}

#[test]
fn huge_error_messages_are_capped() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "loud.md",
        "---\nname: l\ndescription: d\npromptforge: 1\n---\n\n# L\n\n```lua\nerror(string.rep('x', 10 * 1024 * 1024))\n```\n",
    );
    let mut command = promptforge();
    command.args(["run", &file]);
    let (status, out, err) = run_bounded(command);
    assert_eq!(status.code(), Some(1));
    assert_eq!(out, "");
    assert!(err.len() < 16 * 1024, "{} bytes", err.len());
    assert!(err.contains("bytes in all"), "{}", &err[..200]);
}
