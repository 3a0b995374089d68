//! End-to-end behaviour with the compiled-in model over a small fixture catalog.
// Helpers outside `#[test]` functions unwrap too; a failure there is a test failure.
#![allow(clippy::unwrap_used)]

use std::sync::OnceLock;

use promptforge_tool_picker::{
    Catalog, Config, MODEL_REPOSITORY, MODEL_REVISION, MODEL_SHA256, Model, Outcome,
    ToolAnnotations, ToolDescriptor, ToolId, ToolPicker,
};
use serde_json::json;

fn model() -> &'static Model {
    static MODEL: OnceLock<Model> = OnceLock::new();
    MODEL.get_or_init(|| Model::load().unwrap())
}

fn fixture() -> Catalog {
    serde_json::from_str(include_str!("fixtures/catalog.json")).unwrap()
}

fn picker() -> &'static ToolPicker {
    static PICKER: OnceLock<ToolPicker> = OnceLock::new();
    PICKER.get_or_init(|| {
        ToolPicker::build_with_model(model(), fixture(), Config::default()).unwrap()
    })
}

fn tool(server: &str, name: &str, description: &str) -> ToolDescriptor {
    ToolDescriptor::new(ToolId::new(server, name), description, json!({}))
}

fn id(server: &str, name: &str) -> ToolId {
    ToolId::new(server, name)
}

/// The need's two best scores in `picker`, with the leader's identity.
fn top_two(picker: &ToolPicker, need: &str) -> (ToolId, f32, f32) {
    let ranked = picker.rank(need, 2).unwrap();
    (
        ranked[0].tool().id().clone(),
        ranked[0].score(),
        ranked[1].score(),
    )
}

#[test]
fn model_is_shareable_and_pinned() {
    fn assert_traits<T: Clone + Send + Sync + 'static>() {}
    assert_traits::<Model>();
    assert_traits::<ToolPicker>();
    let provenance = model().provenance();
    assert_eq!(provenance.repository(), MODEL_REPOSITORY);
    assert_eq!(provenance.revision(), MODEL_REVISION);
    assert_eq!(provenance.source_sha256(), MODEL_SHA256);
    let v = model().embed("read a file").unwrap();
    assert_eq!(v.len(), promptforge_tool_picker::EMBEDDING_DIM);
    let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-4, "{norm}");
}

#[test]
fn build_loads_the_model_and_indexes_in_order() {
    let picker = ToolPicker::build(fixture(), Config::default()).unwrap();
    assert_eq!(picker.len(), 10);
    assert!(!picker.is_empty());
    let names: Vec<&str> = picker.iter().map(ToolDescriptor::name).collect();
    assert_eq!(names[..3], ["read_file", "write_file", "delete_file"]);
    assert_eq!((&picker).into_iter().count(), 10);
    assert_eq!(
        picker
            .get(&id("net", "fetch_url"))
            .map(ToolDescriptor::description),
        Some("Fetch a web page over HTTP and return its body")
    );
    assert!(picker.get(&id("net", "nope")).is_none());
}

#[test]
fn a_clear_need_binds() {
    for (need, expected) in [
        ("read a file from disk", id("files", "read_file")),
        ("delete a file from the disk", id("files", "delete_file")),
        ("send an email to Bob", id("mail", "send_email")),
        (
            "get the weather forecast for Paris",
            id("weather", "get_forecast"),
        ),
    ] {
        match picker().resolve(need).unwrap() {
            Outcome::Bind(tool) => assert_eq!(tool.id(), &expected, "{need}"),
            other => panic!("{need}: {other:?}"),
        }
    }
}

#[test]
fn an_unrelated_need_is_absent() {
    for need in ["bake a chocolate cake", "play some jazz music", ""] {
        assert_eq!(picker().resolve(need).unwrap(), Outcome::Absent, "{need:?}");
        assert!(picker().shortlist(need, 5).unwrap().is_empty(), "{need:?}");
    }
}

#[test]
fn same_server_twins_are_a_duplicate() {
    match picker()
        .resolve("create a calendar event for the team meeting")
        .unwrap()
    {
        Outcome::Duplicate(group) => {
            let mut names: Vec<&str> = group.iter().map(ToolDescriptor::name).collect();
            names.sort_unstable();
            assert_eq!(names, ["add_event", "create_event"]);
            assert_eq!(group.len(), 2);
            assert!(!group.is_empty());
            assert_eq!(group.first().server(), "calendar");
            assert_eq!(group.second().server(), "calendar");
            assert_eq!(group.get(0), Some(group.first()));
            assert!(group.get(2).is_none());
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn identical_identities_are_a_duplicate_too() {
    let catalog: Catalog = vec![
        tool("files", "read_file", "Read a file from disk"),
        tool("files", "read_file", "Read the contents of a file"),
        tool("mail", "send_email", "Send an email"),
    ]
    .into();
    let picker = ToolPicker::build_with_model(model(), catalog, Config::default()).unwrap();
    match picker.resolve("read a file from disk").unwrap() {
        Outcome::Duplicate(group) => {
            assert!(group.iter().all(|t| t.id() == &id("files", "read_file")));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn cross_server_ties_are_ambiguous_and_annotations_break_exact_ties() {
    let description = "Fetch a web page over HTTP and return its body";
    let catalog: Catalog = vec![
        tool("mirror", "fetch_url", description),
        tool("net", "fetch_url", description)
            .with_annotations(ToolAnnotations::new().with_read_only(true)),
        tool("files", "read_file", "Read a file from disk"),
    ]
    .into();
    let picker = ToolPicker::build_with_model(model(), catalog, Config::default()).unwrap();
    let need = "fetch the web page at this URL";
    let ranked = picker.rank(need, 3).unwrap();
    assert_eq!(ranked[0].score().to_bits(), ranked[1].score().to_bits());
    match picker.resolve(need).unwrap() {
        Outcome::Ambiguous(group) => {
            // Identical scores: the positive read-only claim ranks first.
            assert_eq!(group.first().id(), &id("net", "fetch_url"));
            assert_eq!(group.second().id(), &id("mirror", "fetch_url"));
            assert_eq!(group.len(), 2);
        }
        other => panic!("{other:?}"),
    }
    let shortlist = picker.shortlist(need, 5).unwrap();
    assert_eq!(
        shortlist.first().map(|t| t.id()),
        Some(&id("net", "fetch_url"))
    );
    assert_eq!(
        shortlist.get(1).map(|t| t.id()),
        Some(&id("mirror", "fetch_url"))
    );
    // Limits cut the list.
    assert_eq!(picker.shortlist(need, 1).unwrap().len(), 1);
}

#[test]
fn destructive_and_idempotent_hints_break_ties_in_order() {
    let description = "Store a value under a key";
    let catalog: Catalog = vec![
        tool("a", "put", description),
        tool("b", "put", description)
            .with_annotations(ToolAnnotations::new().with_idempotent(true)),
        tool("c", "put", description)
            .with_annotations(ToolAnnotations::new().with_destructive(false)),
    ]
    .into();
    let picker = ToolPicker::build_with_model(model(), catalog, Config::default()).unwrap();
    let order: Vec<&str> = picker
        .rank("store a value under a key", 3)
        .unwrap()
        .iter()
        .map(|s| s.tool().server())
        .collect();
    assert_eq!(order, ["c", "b", "a"]);
}

#[test]
fn similarity_floor_is_inclusive_on_real_scores() {
    let need = "read a file from disk";
    let (leader, top, second) = top_two(picker(), need);
    let at_floor = Config::default()
        .with_similarity_floor(f64::from(top))
        .unwrap()
        .with_solo_floor(0.0)
        .unwrap()
        .with_margin(0.0)
        .unwrap();
    assert!(second < top);
    match picker().with_config(at_floor).resolve(need).unwrap() {
        Outcome::Bind(tool) => assert_eq!(tool.id(), &leader),
        other => panic!("{other:?}"),
    }
    // Just above the leader's score, with the solo rule off: absent.
    let above = at_floor
        .with_similarity_floor(f64::from(top.next_up()))
        .unwrap()
        .with_solo_floor(f64::from(top.next_up()))
        .unwrap();
    assert_eq!(
        picker().with_config(above).resolve(need).unwrap(),
        Outcome::Absent
    );
}

#[test]
fn solo_candidate_rule_on_real_scores() {
    let need = "send an email to Bob";
    let (leader, top, second) = top_two(picker(), need);
    assert!(second < top);
    // The leader sits between the floors and no runner-up reaches the solo floor: bind.
    let solo = Config::default()
        .with_similarity_floor(f64::from(top.next_up()))
        .unwrap()
        .with_solo_floor(f64::from(top))
        .unwrap();
    match picker().with_config(solo).resolve(need).unwrap() {
        Outcome::Bind(tool) => assert_eq!(tool.id(), &leader),
        other => panic!("{other:?}"),
    }
    let solo_picker = picker().with_config(solo);
    let shortlist = solo_picker.shortlist(need, 3).unwrap();
    assert_eq!(shortlist.len(), 1);
    assert_eq!(shortlist.first().map(|t| t.id()), Some(&leader));
    // The runner-up reaches the solo floor too: two candidates between the floors abstain.
    let two = solo.with_solo_floor(f64::from(second)).unwrap();
    assert_eq!(
        picker().with_config(two).resolve(need).unwrap(),
        Outcome::Absent
    );
    assert!(
        picker()
            .with_config(two)
            .shortlist(need, 3)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn margin_is_inclusive_on_real_scores() {
    let need = "save text to a file";
    let (leader, top, second) = top_two(picker(), need);
    let gap = top - second;
    assert!(gap > 0.0);
    let base = Config::default()
        .with_similarity_floor(f64::from(second))
        .unwrap();
    let exact = base.with_margin(f64::from(gap)).unwrap();
    match picker().with_config(exact).resolve(need).unwrap() {
        Outcome::Bind(tool) => assert_eq!(tool.id(), &leader),
        other => panic!("{other:?}"),
    }
    let wider = base.with_margin(f64::from(gap.next_up())).unwrap();
    match picker().with_config(wider).resolve(need).unwrap() {
        Outcome::Ambiguous(group) => {
            assert_eq!(group.first().id(), &leader);
            assert_eq!(group.len(), 2);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn shortlist_never_contradicts_resolve() {
    let needs = [
        "read a file from disk",
        "save text to a file",
        "create a calendar event for the team meeting",
        "bake a chocolate cake",
        "look something up on the internet",
        "how many euros is 100 dollars",
        "download a web page",
        "file",
    ];
    let configs = [
        Config::default(),
        Config::default()
            .with_similarity_floor(0.2)
            .unwrap()
            .with_margin(0.3)
            .unwrap(),
        Config::default()
            .with_similarity_floor(0.9)
            .unwrap()
            .with_solo_floor(0.3)
            .unwrap(),
    ];
    for config in configs {
        let picker = picker().with_config(config);
        for need in needs {
            let outcome = picker.resolve(need).unwrap();
            let shortlist = picker.shortlist(need, 10).unwrap();
            match outcome {
                Outcome::Absent => assert!(shortlist.is_empty(), "{need}"),
                Outcome::Bind(tool) => {
                    assert_eq!(shortlist.len(), 1, "{need}");
                    assert_eq!(shortlist.first(), Some(tool), "{need}");
                }
                Outcome::Duplicate(group) | Outcome::Ambiguous(group) => {
                    assert!(shortlist.len() >= 2, "{need}");
                    assert_eq!(shortlist.first(), Some(group.first()), "{need}");
                    for t in &group {
                        assert!(shortlist.iter().any(|s| s == t), "{need}");
                    }
                    for t in &shortlist {
                        let score = picker
                            .rank(need, picker.len())
                            .unwrap()
                            .into_iter()
                            .find(|s| std::ptr::eq(s.tool(), t))
                            .map(|s| s.score())
                            .unwrap();
                        assert!(score >= config.similarity_floor(), "{need}");
                    }
                }
                other => panic!("{other:?}"),
            }
        }
    }
}

#[test]
fn zero_limit_shortlist_is_empty() {
    let shortlist = picker().shortlist("read a file from disk", 0).unwrap();
    assert!(shortlist.is_empty());
    assert_eq!(shortlist.len(), 0);
    assert!(shortlist.first().is_none());
    assert!(picker().rank("read a file", 0).unwrap().is_empty());
}

#[test]
fn the_same_need_gives_bit_identical_scores() {
    let bits = |p: &ToolPicker| -> Vec<(String, u32)> {
        p.rank("fetch a web page and read it", p.len())
            .unwrap()
            .iter()
            .map(|s| (s.tool().name().to_owned(), s.score().to_bits()))
            .collect()
    };
    let first = bits(picker());
    assert_eq!(first, bits(picker()));
    // A separately loaded model and a separately built index agree bit for bit.
    let fresh = ToolPicker::build(fixture(), Config::default()).unwrap();
    assert_eq!(first, bits(&fresh));
    // So does another thread.
    let from_thread = std::thread::spawn(move || bits(&fresh)).join().unwrap();
    assert_eq!(first, from_thread);
    // A tool's vector does not depend on its neighbours in the catalog.
    let need = "fetch a web page and read it";
    let dense_only = Config::default().with_lexical_weight(0.0).unwrap();
    let fetch = picker().get(&id("net", "fetch_url")).unwrap().clone();
    let alone = ToolPicker::build_with_model(model(), vec![fetch].into(), dense_only).unwrap();
    let alone = alone.rank(need, 1).unwrap()[0].score();
    let in_full = picker()
        .with_config(dense_only)
        .rank(need, 10)
        .unwrap()
        .into_iter()
        .find(|s| s.tool().name() == "fetch_url")
        .unwrap()
        .score();
    assert_eq!(alone.to_bits(), in_full.to_bits());
}

#[test]
fn near_duplicates_compare_tools_to_tools_in_catalog_pair_order() {
    let pairs = picker()
        .near_duplicates(&[
            id("calendar", "add_event"),
            id("calendar", "create_event"),
            id("files", "read_file"),
            id("calendar", "add_event"),
        ])
        .unwrap();
    assert_eq!(pairs.len(), 1);
    assert!(!pairs.is_empty());
    let pair = pairs.get(0).unwrap();
    // Catalog order, not request order.
    assert_eq!(pair.first().name(), "create_event");
    assert_eq!(pair.second().name(), "add_event");
    assert!(pair.similarity() >= Config::default().duplicate_threshold());
    assert!(pair.similarity() <= 1.0 + 1e-5);
    assert_eq!((&pairs).into_iter().count(), 1);
    assert_eq!(pairs.iter().count(), 1);

    // A threshold just above the pair's similarity drops it: inclusive boundary.
    let at = picker().with_config(
        Config::default()
            .with_duplicate_threshold(f64::from(pair.similarity()))
            .unwrap(),
    );
    assert_eq!(
        at.near_duplicates(&[id("calendar", "create_event"), id("calendar", "add_event")])
            .unwrap()
            .len(),
        1
    );
    let above = picker().with_config(
        Config::default()
            .with_duplicate_threshold(f64::from(pair.similarity().next_up()).min(1.0))
            .unwrap(),
    );
    if pair.similarity() < 1.0 {
        assert!(
            above
                .near_duplicates(&[id("calendar", "create_event"), id("calendar", "add_event")])
                .unwrap()
                .is_empty()
        );
    }

    assert!(picker().near_duplicates(&[]).unwrap().is_empty());
    assert!(
        picker()
            .near_duplicates(&[id("files", "read_file"), id("mail", "send_email")])
            .unwrap()
            .is_empty()
    );
}

#[test]
fn near_duplicates_name_the_first_missing_identity() {
    let error = picker()
        .near_duplicates(&[
            id("files", "read_file"),
            id("ghost", "one"),
            id("ghost", "two"),
        ])
        .unwrap_err();
    assert_eq!(error.missing_id(), &id("ghost", "one"));
    assert!(error.to_string().contains(r#""ghost"/"one""#), "{error}");
}

#[test]
fn rebuild_keeps_model_and_config_and_leaves_the_original_alone() {
    let config = Config::default().with_top_k(3).unwrap();
    let original = picker().with_config(config);
    let updated = original
        .rebuild(vec![tool("music", "play_song", "Play a song by name")].into())
        .unwrap();
    assert_eq!(updated.len(), 1);
    assert_eq!(updated.config(), &config);
    assert_eq!(original.len(), 10);
    match updated.resolve("play the song Yesterday").unwrap() {
        Outcome::Bind(tool) => assert_eq!(tool.name(), "play_song"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        original.resolve("play the song Yesterday").unwrap(),
        Outcome::Absent
    );
}

#[test]
fn empty_catalog_answers_absent() {
    let empty =
        ToolPicker::build_with_model(model(), Catalog::default(), Config::default()).unwrap();
    assert!(empty.is_empty());
    assert_eq!(empty.resolve("read a file").unwrap(), Outcome::Absent);
    assert!(empty.shortlist("read a file", 3).unwrap().is_empty());
    assert!(empty.near_duplicates(&[]).unwrap().is_empty());
}

#[test]
fn results_borrow_the_picker_and_ids_can_be_kept() {
    let kept: ToolId = match picker().resolve("read a file from disk").unwrap() {
        Outcome::Bind(tool) => tool.id().clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(kept, id("files", "read_file"));
}

#[test]
fn long_needs_are_truncated_not_refused() {
    let need = "read a file from disk ".repeat(400);
    assert!(picker().resolve(&need).is_ok());
}

/// The forward pass against vectors recorded from the previous implementation (candle 0.11's
/// BERT over the same fp16 weights): every component within 1e-4, cosine above 0.9999.
#[test]
fn embeddings_match_the_recorded_reference() {
    let reference: Vec<serde_json::Value> =
        serde_json::from_str(include_str!("fixtures/reference_embeddings.json")).unwrap();
    assert!(reference.len() >= 8);
    for entry in &reference {
        let text = entry["text"].as_str().unwrap();
        let expected: Vec<f32> = entry["embedding"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap() as f32)
            .collect();
        let actual = model().embed(text).unwrap();
        assert_eq!(actual.len(), expected.len(), "{text:?}");
        let max_diff = actual
            .iter()
            .zip(&expected)
            .map(|(a, e)| (a - e).abs())
            .fold(0.0_f32, f32::max);
        let cosine: f32 = actual.iter().zip(&expected).map(|(a, e)| a * e).sum();
        assert!(max_diff < 1e-4, "{text:?}: max difference {max_diff}");
        assert!(cosine > 0.9999, "{text:?}: cosine {cosine}");
        // Embedding the same text again gives the same bits.
        let again = model().embed(text).unwrap();
        assert!(
            actual
                .iter()
                .zip(&again)
                .all(|(a, b)| a.to_bits() == b.to_bits())
        );
    }
}

#[test]
fn rebuild_reusing_matches_a_full_rebuild() {
    let tool = |server: &str, name: &str, description: &str| {
        ToolDescriptor::new(
            ToolId::new(server, name),
            description,
            serde_json::json!({}),
        )
    };
    let first = Catalog::new(vec![
        tool("a", "read_file", "Read a file from disk"),
        tool("a", "fetch_url", "Fetch a web page over HTTP"),
    ]);
    let picker = ToolPicker::build(first, Config::default()).unwrap();
    let second = Catalog::new(vec![
        tool("a", "fetch_url", "Fetch a web page over HTTP"),
        tool("a", "send_mail", "Send an email to a recipient"),
        tool("a", "read_file", "Read a text file from the local disk"),
    ]);
    let reused = picker.rebuild_reusing(second.clone()).unwrap();
    let full = picker.rebuild(second).unwrap();
    for need in ["download a web page", "email someone", "open a local file"] {
        let a: Vec<(String, f32)> = reused
            .rank(need, 3)
            .unwrap()
            .iter()
            .map(|s| (s.tool().name().to_owned(), s.score()))
            .collect();
        let b: Vec<(String, f32)> = full
            .rank(need, 3)
            .unwrap()
            .iter()
            .map(|s| (s.tool().name().to_owned(), s.score()))
            .collect();
        assert_eq!(a, b, "{need}");
    }
}
