//! Live reload through the library: generations, index reuse, lost watches, shutdown.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use promptforge_mcp_server::config::Config;
use promptforge_mcp_server::serve::{Transport, boot};
use promptforge_mcp_server::state::{Index, Shared};
use promptforge_mcp_server::watch::{Reloaded, Watcher, reload};
use support::{Knobs, Upstream, prompt, standard_prompts, write_config};

async fn booted(watch: bool) -> (tempfile::TempDir, Upstream, Config, Arc<Shared>) {
    let dir = tempfile::tempdir().unwrap();
    let upstream = Upstream::start().await;
    standard_prompts(dir.path());
    let path = write_config(
        dir.path(),
        &upstream.url,
        &Knobs {
            watch,
            ..Knobs::default()
        },
    );
    let config = Config::load(&path).unwrap();
    let booted = boot(config.clone(), Transport::Stdio).await.unwrap();
    (dir, upstream, config, booted.shared)
}

async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Saves `two.md` once and waits (bounded) for the catalog to list it. Once: a save
/// repeated faster than `watch_debounce` restarts the window on every event, so with a live
/// watch it would never settle (the old form of these tests passed only while the watch
/// was dead and their saves raised no event).
async fn save_two_and_see_it(prompts: &std::path::Path, shared: &Shared) {
    std::fs::write(prompts.join("two.md"), prompt("two", "Second", "return 2")).unwrap();
    eventually("a save after the directory came back", || {
        names(shared).contains(&"two".to_owned())
    })
    .await;
}

/// A booted server with its watcher running, once a first save (`one.md`) reached the
/// catalog through it.
async fn watching_with_one() -> (tempfile::TempDir, Upstream, Config, Arc<Shared>, Watcher) {
    let (dir, upstream, config, shared) = booted(true).await;
    let watcher = Watcher::start(config.clone(), Arc::clone(&shared)).unwrap();
    let one = dir.path().join("prompts/one.md");
    std::fs::write(one, prompt("one", "First", "return 1")).unwrap();
    eventually("one listed", || names(&shared).contains(&"one".to_owned())).await;
    (dir, upstream, config, shared, watcher)
}

fn names(shared: &Shared) -> Vec<String> {
    shared
        .current()
        .catalog
        .entries()
        .iter()
        .map(|e| e.name.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_only_edit_reuses_the_index_and_a_description_edit_rebuilds_it() {
    let (dir, _upstream, config, shared) = booted(false).await;
    eventually("the boot index is built", || {
        matches!(shared.current().index, Index::Ready(_))
    })
    .await;
    let first = shared.current();
    let echo = dir.path().join("prompts/echo.md");
    std::fs::write(
        &echo,
        prompt("echo", "Return the input unchanged", "return args .. '!'"),
    )
    .unwrap();
    assert_eq!(reload(&config, &shared), Reloaded::Published(2));
    assert!(
        shared.index_is_shared_with(&first),
        "body-only edit reuses the index"
    );
    let second = shared.current();
    std::fs::write(&echo, prompt("echo", "Shout the input back", "return args")).unwrap();
    assert_eq!(reload(&config, &shared), Reloaded::Published(3));
    assert!(
        !shared.index_is_shared_with(&second),
        "a description edit rebuilds it"
    );
    // Every generation's index was built over exactly its catalog's runnable entries.
    let third = shared.current();
    let Index::Ready(picker) = &third.index else {
        panic!("index missing")
    };
    let indexed: Vec<(String, String)> = picker
        .iter()
        .map(|t| (t.name().to_owned(), t.description().to_owned()))
        .collect();
    assert_eq!(indexed, third.catalog.index_key());
    // A run keeps the generation it started with.
    let held = second.catalog.lookup("echo").unwrap();
    assert_eq!(held.description, "Return the input unchanged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unresolvable_candidate_keeps_the_previous_catalog() {
    let (dir, _upstream, config, shared) = booted(false).await;
    std::fs::write(
        dir.path().join("prompts/dup.md"),
        prompt("echo", "A second echo", "return args"),
    )
    .unwrap();
    let Reloaded::Kept(faults) = reload(&config, &shared) else {
        panic!("published a catalog with a duplicate name")
    };
    assert!(faults[0].contains("more than one file"), "{faults:?}");
    assert_eq!(shared.current().number, 1);
    std::fs::remove_file(dir.path().join("prompts/dup.md")).unwrap();
    std::fs::write(&config.path, "[server\n").unwrap();
    assert!(matches!(reload(&config, &shared), Reloaded::Kept(_)));
    assert_eq!(shared.current().number, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_only_settings_are_not_applied() {
    let (_dir, _upstream, config, shared) = booted(false).await;
    let text = std::fs::read_to_string(&config.path).unwrap();
    std::fs::write(
        &config.path,
        text.replace("reply_deadline = \"60s\"", "reply_deadline = \"5s\""),
    )
    .unwrap();
    assert_eq!(reload(&config, &shared), Reloaded::Published(2));
    assert_eq!(shared.reply_deadline, Duration::from_secs(60));
}

/// Issue 38 item 11: the prompts directory moved away and back before the debounce window
/// settled (a `git checkout` under load). `notify` had dropped the directory's watch on the
/// move away and nothing re-added it, while the loop only re-registered a watch that reported
/// a removal or whose directory was missing when the window settled: live reload stopped for
/// good. Here both renames land in one window, which is what load did to the test below
/// (its first save then often landed in that same window and was reloaded with it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_moved_away_and_back_within_one_window_is_watched_again() {
    let (dir, _upstream, _config, shared, watcher) = watching_with_one().await;
    let prompts = dir.path().join("prompts");

    let before = shared.current().number;
    let aside = dir.path().join("aside");
    std::fs::rename(&prompts, &aside).unwrap();
    std::fs::rename(&aside, &prompts).unwrap();
    // The window of the two renames settles and reloads; only saves after it tell whether
    // the directory is still watched (a save in the same window is reloaded with it).
    eventually("the renames' window reloaded", || {
        shared.current().number > before
    })
    .await;
    save_two_and_see_it(&prompts, &shared).await;
    watcher.stop();
}

/// Saves that never pause (every 20 ms, against a 100 ms `watch_debounce`) would restart a
/// window forever; the window's hard limit (`MAX_WINDOW_PERIODS`) settles it anyway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_saved_without_pause_still_reach_the_catalog() {
    let (dir, _upstream, config, shared) = booted(true).await;
    let watcher = Watcher::start(config.clone(), Arc::clone(&shared)).unwrap();
    let busy = dir.path().join("prompts/busy.md");
    let saving = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let saver = {
        let saving = Arc::clone(&saving);
        let busy = busy.clone();
        tokio::spawn(async move {
            let mut n = 0u64;
            while saving.load(std::sync::atomic::Ordering::Acquire) {
                n += 1;
                std::fs::write(
                    &busy,
                    prompt("busy", "Saved again and again", &format!("return {n}")),
                )
                .unwrap();
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    eventually("a reload while saves never paused", || {
        names(&shared).contains(&"busy".to_owned())
    })
    .await;
    saving.store(false, std::sync::atomic::Ordering::Release);
    saver.await.unwrap();
    watcher.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_watch_is_registered_again_and_nothing_publishes_after_shutdown() {
    let (dir, _upstream, config, shared, watcher) = watching_with_one().await;
    let prompts = dir.path().join("prompts");

    // The directory disappears and comes back: the watch is re-registered.
    let before = shared.current().number;
    let aside = dir.path().join("aside");
    std::fs::rename(&prompts, &aside).unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    std::fs::rename(&aside, &prompts).unwrap();
    // The directory is back once a reload publishes it again (one that ran while it was
    // away kept the previous catalog); a save after that must reach the catalog.
    eventually("the directory's return reloaded", || {
        shared.current().number > before
    })
    .await;
    save_two_and_see_it(&prompts, &shared).await;

    watcher.stop();
    shared.close();
    let before = shared.current().number;
    std::fs::write(
        prompts.join("three.md"),
        prompt("three", "Third", "return 3"),
    )
    .unwrap();
    assert_eq!(reload(&config, &shared), Reloaded::Closed);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(shared.current().number, before);
}
