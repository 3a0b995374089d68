//! Issue 26: where the engine differed from the guide (fanout visibility, `{= … =}`, an empty
//! `tools.add`) and the robustness findings (a budget swallowed by `pcall` around a nested
//! call, limit messages that blamed the wrong cause). Every run is bounded, so a regression
//! fails instead of hanging the suite.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod bounded;

use bounded::expect;

use std::num::{NonZeroU64, NonZeroUsize};
use std::path::PathBuf;
use std::time::Duration;

use promptforge_core::{
    NullObserver, ParseErrorKind, Prompt, ResolutionContext, RunConfig, RunError, RunErrorKind,
    RunLimits, StoreRef, run,
};

const DEADLINE: Duration = Duration::from_secs(60);

fn fixture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/run")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Parses `source` and runs it with `input` and `limits` on a runtime of its own, bounded.
fn run_source(source: &str, input: &str, limits: RunLimits) -> Result<String, RunError> {
    let prompt = Prompt::parse_named("t.md", source, "test", &NullObserver)
        .unwrap_or_else(|e| panic!("{e}"));
    let input = input.to_owned();
    bounded::on_own_runtime(DEADLINE, move || async move {
        let config = RunConfig::new("test").limits(limits);
        run(
            &prompt,
            &input,
            ResolutionContext::empty(),
            &StoreRef::memory(),
            config,
        )
        .await
    })
    .unwrap_or_else(|| panic!("the run did not end within {DEADLINE:?}"))
}

fn prompt(sections: &str) -> String {
    format!("---\nname: t\ndescription: t\npromptforge: 1\n---\n\n# T\n\n{sections}")
}

// ---- Item 1: fanout arms resolve against the worker's visible set ----

#[test]
fn an_arm_of_a_child_worker_addresses_what_its_caller_can() {
    // `### Worker` under `## Main`: the arm sees `## Other` (Main's sibling) and Main's other
    // children, never Main or the worker; its own children too, and a nested fanout's arms
    // resolve the same way. `jump("## Other")` from an arm walks from `## Other`.
    assert_eq!(
        run_source(&fixture("fanout_visible_child.md"), "in", RunLimits::new()).unwrap(),
        "other:a|one+two|main-hidden|worker-hidden|1:other:s,2:other:t#other:in"
    );
}

#[test]
fn an_arm_of_a_top_level_worker_sees_the_callers_children_not_the_caller() {
    // `## Worker` fanned out by `## Main`: `### Helper` (Main's child) is visible, `## Main`
    // is not; the worker's own `### Same` shadows Main's; `sys.index` restarts at 1 in a
    // nested fanout; `jump("### Helper")` from an arm walks Main's children from Helper.
    assert_eq!(
        run_source(&fixture("fanout_visible_top.md"), "in", RunLimits::new()).unwrap(),
        "helper:a|main-hidden|worker-same|x+y|other:o|helper:n1,helper:m2@1#helper:in"
    );
}

#[test]
fn an_arm_naming_an_invisible_section_lists_the_arms_set() {
    let source = prompt(
        "## Main\n\n```lua\nfanout('## Worker', {1})\n```\n\n### Helper\n\n```lua\nreturn 1\n```\n\n## Worker\n\n---\n\n```lua\nexecute('## Main')\n```\n\n### Own\n\n```lua\nreturn 2\n```\n\n## Other\n\n---\n\n```lua\nreturn 3\n```\n",
    );
    let error = expect(
        run_source(&source, "", RunLimits::new()),
        RunErrorKind::Control,
        &["no section `## Main` is visible from a fanout arm of `## Worker`"],
    );
    let listing = error.message().split("visible sections: ").nth(1).unwrap();
    assert!(listing.starts_with("`### Own`"), "{listing}");
    for section in ["`### Own`", "`## Other`", "`### Helper`"] {
        assert!(listing.contains(section), "{listing}");
    }
    for hidden in ["`## Main`", "`## Worker`"] {
        assert!(!listing.contains(hidden), "{listing}");
    }
}

// ---- Item 2: `{= … =}` in prose ----

#[test]
fn an_equals_placeholder_is_a_located_parse_error_that_says_what_to_write() {
    // The guide's Getting Started example, as written there.
    let source = "---\nname: summarize_paper\ndescription: Summarize a paper\npromptforge: 1\n---\n\n# Summarize\n\n## Run\n\n```lua\nlocal content = store.read(\"paper.md\")\n```\n\nSummarize the following paper in exactly three bullet points:\n\n{= content =}\n";
    let error = Prompt::parse_named("guide.md", source, "t", &NullObserver).unwrap_err();
    assert_eq!(error.kind(), ParseErrorKind::Template);
    assert_eq!(error.line(), Some(17));
    let shown = error.to_string();
    for fragment in [
        "guide.md:17:",
        "`{= content =}`",
        "`{{ content }}`",
        "without `local`",
    ] {
        assert!(shown.contains(fragment), "{shown}");
    }
    assert_eq!(&source[error.span().unwrap()], "{= content =}");
    // `promptforge check` reports it with its column, and goes on to the next problem.
    let more = format!("{source}\n## Run\n");
    let found = promptforge_core::parse::check("guide.md", &more);
    let kinds: Vec<&str> = found.iter().map(|d| d.error().kind().as_str()).collect();
    assert_eq!(kinds, ["template", "duplicate_section"]);
    assert_eq!((found[0].line(), found[0].column()), (Some(17), Some(1)));
    // A literal `{=` is written `\{=`; a lone `{=` with no `=}` is text.
    for fine in ["Write \\{= x =} to the model.", "a set {=, <, >} of signs"] {
        let source = prompt(&format!("## A\n\n{fine}\n"));
        assert!(
            Prompt::parse_named("t.md", &source, "t", &NullObserver).is_ok(),
            "{fine}"
        );
    }
}

// ---- Item 6: an empty `tools.add` ----

#[test]
fn an_empty_tools_add_is_a_no_op() {
    let source =
        prompt("## A\n\n```lua\ntools.add()\ntools.add({})\nreturn 'added nothing'\n```\n");
    assert_eq!(
        run_source(&source, "", RunLimits::new()).unwrap(),
        "added nothing"
    );
}

// ---- Robustness: no budget is swallowed by `pcall` around a nested call ----

fn small_budget() -> RunLimits {
    RunLimits::new().lua_instructions(NonZeroU64::new(200_000).unwrap())
}

#[test]
fn pcall_around_a_nested_call_cannot_swallow_its_budget() {
    let burn = "## Burn\n\n---\n\n```lua\nwhile true do end\n```\n\n## Deeper\n\n---\n\n```lua\nexecute('## Burn')\n```\n";
    for body in [
        // The finding: an endless loop of pcall(execute) over a chain that runs out.
        "while true do pcall(execute, '## Burn') end",
        "while true do pcall(function() return execute('## Burn') end) end",
        "while true do xpcall(execute, function(e) return e end, '## Burn') end",
        "while true do pcall(pcall, execute, '## Burn') end",
        // Two levels down.
        "while true do pcall(execute, '## Deeper') end",
        // Siblings: a fanout arm that runs out, and a swallowed error that returns.
        "while true do pcall(fanout, '## Burn', {1, 2}) end",
        "pcall(execute, '## Burn')\nreturn 'escaped'",
    ] {
        let source = prompt(&format!("## Main\n\n```lua\n{body}\n```\n\n{burn}"));
        expect(
            run_source(&source, "", small_budget()),
            RunErrorKind::InstructionBudget,
            &["RunLimits::lua_instructions"],
        );
    }
}

#[test]
fn a_nested_chain_out_of_memory_ends_the_run() {
    // A sibling of the finding through another limit: each chain has a fresh VM, so a loop
    // retrying a memory bomb was bounded only by the section entries.
    let source = prompt(
        "## Main\n\n```lua\nwhile true do pcall(execute, '## Bomb') end\n```\n\n## Bomb\n\n---\n\n```lua\nlocal t = {}\nwhile true do t[#t + 1] = string.rep('x', 100000) .. #t end\n```\n",
    );
    let limits = RunLimits::new().lua_memory_bytes(NonZeroUsize::new(8 << 20).unwrap());
    expect(run_source(&source, "", limits), RunErrorKind::Memory, &[]);
    // Inside one VM a memory error is an ordinary Lua error, as in Lua.
    let local = prompt(
        "## Main\n\n```lua\nlocal ok = pcall(function() local t = {} while true do t[#t + 1] = string.rep('x', 100000) .. #t end end)\nreturn tostring(ok)\n```\n",
    );
    let limits = RunLimits::new().lua_memory_bytes(NonZeroUsize::new(8 << 20).unwrap());
    assert_eq!(run_source(&local, "", limits).unwrap(), "false");
}

#[test]
fn the_run_has_an_instruction_budget_of_its_own() {
    // Every chain stays under its block budget; together they do not.
    let source = prompt(
        "## Main\n\n```lua\nfor i = 1, 100000 do pcall(execute, '## Almost') end\nreturn 'finished'\n```\n\n## Almost\n\n---\n\n```lua\nfor i = 1, 20000 do end\n```\n",
    );
    let limits = RunLimits::new()
        .lua_instructions(NonZeroU64::new(200_000).unwrap())
        .max_run_instructions(NonZeroU64::new(2_000_000).unwrap());
    expect(
        run_source(&source, "", limits),
        RunErrorKind::InstructionBudget,
        &[
            "the run ran past its budget of 2000000 instructions",
            "(RunLimits::max_run_instructions)",
        ],
    );
}

#[test]
fn pcall_cannot_swallow_the_run_wide_section_entry_limit() {
    let source = prompt(
        "## Main\n\n```lua\nfor i = 1, 1000 do pcall(execute, '## Step') end\nreturn 'swallowed'\n```\n\n## Step\n\n---\n\n```lua\nreturn 1\n```\n",
    );
    let limits = RunLimits::new().max_section_entries(NonZeroU64::new(50).unwrap());
    expect(
        run_source(&source, "", limits),
        RunErrorKind::Limit,
        &["RunLimits::max_section_entries", "by execute"],
    );
}

// ---- Robustness: a limit message names the limit and what the prompt did ----

#[test]
fn the_section_entry_limit_names_what_the_prompt_did() {
    let source = fixture("limit_causes.md");
    let limit = |n| RunLimits::new().max_section_entries(NonZeroU64::new(n).unwrap());
    // The finding: a block calling execute() in a loop was blamed on a jump cycle.
    let error = expect(
        run_source(&source, "", limit(100)),
        RunErrorKind::Limit,
        &[
            "limit of 100 section entries (RunLimits::max_section_entries)",
            "when execute entered `## Step`",
            "100 by execute, 1 by the walk's fall-through",
            "a loop that calls execute() without end?",
        ],
    );
    assert!(!error.to_string().contains("jump"), "{error}");
    expect(
        run_source(&source, "jump", limit(100)),
        RunErrorKind::Limit,
        &[
            "when jump entered `## P",
            "101 by jump",
            "a jump cycle without an exit?",
        ],
    );
    expect(
        run_source(&source, "walk", limit(2)),
        RunErrorKind::Limit,
        &[
            "when the walk's fall-through entered `## Three`",
            "2 by the walk's fall-through, 1 by jump",
            "more sections walked than the limit allows?",
        ],
    );
}

#[test]
fn the_nesting_limit_names_the_call_that_went_too_deep() {
    let source = prompt(
        "## A\n\n```lua\nreturn execute('## B')\n```\n\n## B\n\n---\n\n```lua\nreturn execute('## A')\n```\n",
    );
    expect(
        run_source(&source, "", RunLimits::new()),
        RunErrorKind::Limit,
        &[
            "cannot execute `## ",
            "already runs 8 execute/fanout levels deep",
            "execute and fanout nest at most 8 levels",
        ],
    );
    // Five execute levels, then fanouts down the heading levels: the fourth fanout is
    // the ninth level.
    let mut sections = String::new();
    for i in 1..=5 {
        sections.push_str(&format!(
            "## R{i}\n\n{}```lua\nreturn execute('## R{}')\n```\n\n",
            if i == 1 { "" } else { "---\n\n" },
            i + 1
        ));
    }
    sections.push_str("## R6\n\n---\n\n```lua\nreturn fanout('### B', {1})[1].text\n```\n\n");
    for (level, name, next) in [(3, "B", "C"), (4, "C", "D"), (5, "D", "E")] {
        let hashes = "#".repeat(level);
        let deeper = "#".repeat(level + 1);
        sections.push_str(&format!(
            "{hashes} {name}\n\n```lua\nreturn fanout('{deeper} {next}', {{1}})[1].text\n```\n\n"
        ));
    }
    sections.push_str("###### E\n\n```lua\nreturn 'bottom'\n```\n");
    let fan = prompt(&sections);
    expect(
        run_source(&fan, "", RunLimits::new()),
        RunErrorKind::Limit,
        &[
            "`##### D` cannot fan out to `###### E`: it already runs 8",
            "execute and fanout nest at most 8 levels",
        ],
    );
}

#[test]
fn a_budget_message_says_what_ran_out() {
    let source = prompt("## A\n\n```lua\nwhile true do end\n```\n");
    expect(
        run_source(&source, "", small_budget()),
        RunErrorKind::InstructionBudget,
        &["a Lua block ran past its budget of 200000 instructions (RunLimits::lua_instructions)"],
    );
    let shared = "---\nname: t\ndescription: t\npromptforge: 1\n---\n\n# T\n\n```lua shared\nwhile true do end\n```\n\n## A\n\n```lua\nreturn 1\n```\n";
    expect(
        run_source(shared, "", small_budget()),
        RunErrorKind::InstructionBudget,
        &["the shared library (```lua shared```) ran past its budget"],
    );
}
