//! Regression tests for issue #12 (core findings): nothing a prompt does may hang a run,
//! exhaust memory past a documented limit, or produce an error without a location.
//!
//! Every run happens on its own thread with a deadline, so a regression fails instead of
//! hanging the suite.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod bounded;

use bounded::expect;

use std::num::{NonZeroU64, NonZeroUsize};
use std::time::Duration;

use promptforge_core::{
    CancelHandle, NullObserver, Prompt, ResolutionContext, RunConfig, RunError, RunErrorKind,
    RunLimits, StoreRef, run,
};

/// The bound on any one run in this file; the runs take milliseconds when fixed.
const DEADLINE: Duration = Duration::from_secs(60);

fn source(body: &str) -> String {
    format!(
        "---\nname: t\ndescription: t\npromptforge: 1\n---\n\n# T\n\n## Main\n\n```lua\n{body}\n```\n\n## Worker\n\n```lua\nreturn store.read('payload.txt')\n```\n"
    )
}

fn parse(body: &str) -> Prompt {
    Prompt::parse_named("t.md", &source(body), "test", &NullObserver)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Runs `body` (the `## Main` block) with `limits` on its own thread, bounded by DEADLINE.
fn run_bounded(
    body: &str,
    limits: RunLimits,
    cancel: Option<CancelHandle>,
) -> Result<String, RunError> {
    run_prompt(parse(body), limits, cancel)
}

fn run_prompt(
    prompt: Prompt,
    limits: RunLimits,
    cancel: Option<CancelHandle>,
) -> Result<String, RunError> {
    let body = prompt.origin().to_owned();
    bounded::on_own_runtime(DEADLINE, move || async move {
        let mut config = RunConfig::new("test").limits(limits);
        if let Some(cancel) = cancel {
            config = config.cancel(cancel);
        }
        let store = StoreRef::memory();
        run(&prompt, "", ResolutionContext::empty(), &store, config).await
    })
    .unwrap_or_else(|| panic!("the run did not end within {DEADLINE:?}: {body}"))
}

fn small_budget() -> RunLimits {
    RunLimits::new().lua_instructions(NonZeroU64::new(200_000).unwrap())
}

// ---- Finding 1: budget and cancellation cannot be caught ----

#[test]
fn pcall_cannot_swallow_the_instruction_budget() {
    for body in [
        "while true do pcall(function() while true do end end) end",
        "while true do xpcall(function() while true do end end, function(e) return e end) end",
        "while true do pcall(pcall, function() while true do end end) end",
        "while true do xpcall(function() while true do end end, function() while true do end end) end",
        // The error value is swallowed and a different error raised: the budget still wins.
        "pcall(function() while true do end end)\nerror('something else')",
        // The error is swallowed and the block returns normally: it still failed.
        "pcall(function() while true do end end)\nreturn 'escaped'",
    ] {
        expect(
            run_bounded(body, small_budget(), None),
            RunErrorKind::InstructionBudget,
            &["RunLimits::lua_instructions"],
        );
    }
}

#[test]
fn pcall_cannot_swallow_cancellation() {
    let cancel = CancelHandle::new();
    let trigger = cancel.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        trigger.cancel();
    });
    let body = "while true do pcall(function() while true do end end) end";
    let limits = RunLimits::new().lua_instructions(NonZeroU64::new(u64::MAX).unwrap());
    let error = run_bounded(body, limits, Some(cancel)).unwrap_err();
    assert!(error.is_cancelled(), "{error}");
}

#[test]
fn pcall_still_catches_ordinary_errors_as_plain_messages() {
    let body = "local ok, e = pcall(error, 'boom')\nlocal ok2, e2 = pcall(store.read, 'missing.txt')\nreturn tostring(ok) .. '|' .. e .. '|' .. tostring(e2)";
    let result = run_bounded(body, RunLimits::new(), None).unwrap();
    assert!(result.starts_with("false|boom|"), "{result}");
    assert!(result.contains("no such file"), "{result}");
    assert!(!result.contains("__mlua"), "{result}");
    assert!(!result.contains("stack traceback"), "{result}");
}

// ---- Finding 2: pattern functions are metered ----

#[test]
fn catastrophic_patterns_hit_the_budget() {
    for body in [
        "return string.find(string.rep('a', 30000), string.rep('a*', 30) .. 'b')",
        "return string.find(string.rep('a', 22), string.rep('a*', 22) .. 'b')",
        "return (string.rep('a', 30000)):match(string.rep('a-', 20) .. 'b')",
        "for w in string.gmatch(string.rep('a', 5000), string.rep('a?', 40) .. 'b') do end",
        "return (string.gsub(string.rep('a', 5000), string.rep('.-', 15) .. 'b', 'x'))",
    ] {
        expect(
            run_bounded(body, small_budget(), None),
            RunErrorKind::InstructionBudget,
            &["RunLimits::lua_instructions"],
        );
    }
}

#[test]
fn other_unbounded_library_loops_are_charged() {
    for body in [
        "return string.rep('', 1e15)",
        "return #string.rep('', 2^53, '')",
        "table.move({}, 1, 2^50, 1, {})",
        "local t = setmetatable({}, {__len = function() return 2^60 end})\ntable.insert(t, 1, 'x')",
        "local t = setmetatable({}, {__len = function() return 2^60 end})\ntable.remove(t, 1)",
    ] {
        expect(
            run_bounded(body, small_budget(), None),
            RunErrorKind::InstructionBudget,
            &[],
        );
    }
}

#[test]
fn metered_patterns_keep_lua_semantics() {
    // Checked against Lua 5.4's own results; the unit tests compare more cases with C.
    let body = r#"
local out = {}
local function add(...) local t = table.pack(...) for i = 1, t.n do out[#out + 1] = tostring(t[i]) end end
add(string.find("hello world", "o w"))
add(string.find("hello", "l+"))
add(string.find("a.b", ".", 1, true))
add(string.find("abc", "b", -1))
add(("key = value"):match("(%w+)%s*=%s*(%w+)"))
add(string.match("  trim  ", "^%s*(.-)%s*$"))
add(string.match("hello", "()ll()"))
add(string.gsub("hello world", "o", "0"))
add(string.gsub("abc", "%w", "%0%0"))
add(string.gsub("$name is $age", "%$(%w+)", {name = "Ann", age = 7}))
add(string.gsub("abc", "", "-"))
add(string.gsub("hello", "l", function(c) return c:upper() end, 1))
for k, v in string.gmatch("a=1, b=2", "(%w+)=(%w+)") do add(k, v) end
for w in ("one two"):gmatch("%a+") do add(w) end
add(string.match("f(a(b)c)d", "%b()"))
add(string.find("THE (quick) fox", "%f[%a]%a+", 5))
add(string.match("2024-01-02", "(%d+)-(%d+)-(%d+)"))
return table.concat(out, ",")
"#;
    let result = run_bounded(body, RunLimits::new(), None).unwrap();
    assert_eq!(
        result,
        "5,7,3,4,2,2,nil,key,value,trim,3,5,hell0 w0rld,2,aabbcc,3,Ann is 7,2,-a-b-c-,4,heLlo,1,a,1,b,2,one,two,(a(b)c),6,10,2024,01,02"
    );
}

#[test]
fn malformed_patterns_are_lua_errors_with_a_location() {
    let error = expect(
        run_bounded(
            "local x = 1\nreturn string.find('abc', '[a')",
            RunLimits::new(),
            None,
        ),
        RunErrorKind::Lua,
        &["t.md:", "malformed pattern (missing ']')"],
    );
    assert!(error.message().starts_with("t.md:"), "{error}");
}

// ---- Finding 3: no finalizers ----

#[test]
fn gc_metamethods_are_refused() {
    for body in [
        "setmetatable({}, {__gc = function() while true do end end})",
        "local t = setmetatable({}, {__gc = true})\ngetmetatable(t).__gc = function() while true do end end",
    ] {
        expect(
            run_bounded(body, RunLimits::new(), None),
            RunErrorKind::Lua,
            &["__gc metamethods are not available"],
        );
    }
    // Adding `__gc` after the fact does not register a finalizer in Lua 5.4: harmless.
    let body = "local mt = {}\nlocal t = setmetatable({}, mt)\nmt.__gc = function() while true do end end\nt = nil\nreturn 'ok'";
    assert_eq!(run_bounded(body, RunLimits::new(), None).unwrap(), "ok");
}

// ---- Finding 7: store and fanout results are bounded ----

#[test]
fn the_store_has_a_run_wide_byte_limit() {
    let limits = RunLimits::new().max_store_bytes(NonZeroU64::new(1024 * 1024).unwrap());
    let body = "local chunk = string.rep('x', 100000)\nfor i = 1, 100 do store.write('f' .. i .. '.txt', chunk) end";
    expect(
        run_bounded(body, limits.clone(), None),
        RunErrorKind::Limit,
        &["RunLimits::max_store_bytes", "1048576"],
    );
    let body = "for i = 1, 100 do store.append('log.txt', string.rep('y', 100000)) end";
    expect(
        run_bounded(body, limits.clone(), None),
        RunErrorKind::Limit,
        &["RunLimits::max_store_bytes"],
    );
    // Overwriting and deleting free their bytes.
    let body = "local chunk = string.rep('x', 400000)\nfor i = 1, 20 do store.write('same.txt', chunk) end\nfor i = 1, 20 do store.write('tmp.txt', chunk) store.delete('tmp.txt') end\nreturn 'ok'";
    assert_eq!(run_bounded(body, limits, None).unwrap(), "ok");
}

#[test]
fn fanout_results_count_against_a_limit() {
    let limits = RunLimits::new().max_fanout_result_bytes(NonZeroU64::new(1024 * 1024).unwrap());
    let body = "store.write('payload.txt', string.rep('r', 100000))\nlocal items = {}\nfor i = 1, 40 do items[i] = i end\nfanout('## Worker', items)";
    expect(
        run_bounded(body, limits, None),
        RunErrorKind::Limit,
        &["RunLimits::max_fanout_result_bytes", "1048576"],
    );
}

// ---- Finding 8: limit errors say which limit ----

#[test]
fn a_huge_fanout_names_the_section_entry_limit() {
    let limits = RunLimits::new().max_section_entries(NonZeroU64::new(50).unwrap());
    let body = "store.write('payload.txt', 'x')\nlocal items = {}\nfor i = 1, 100 do items[i] = i end\nfanout('## Worker', items)";
    expect(
        run_bounded(body, limits, None),
        RunErrorKind::Limit,
        &["100 items", "RunLimits::max_section_entries", "50"],
    );
}

#[test]
fn a_long_walk_names_the_section_entry_limit() {
    let limits = RunLimits::new().max_section_entries(NonZeroU64::new(1).unwrap());
    let error = expect(
        run_bounded("store.write('payload.txt', 'x')", limits, None),
        RunErrorKind::Limit,
        &["RunLimits::max_section_entries", "1"],
    );
    assert!(
        !error.to_string().contains("cycle missing its exit"),
        "{error}"
    );
    let cycle = "---\nname: t\ndescription: t\npromptforge: 1\n---\n\n# T\n\n## A\n\n```lua\njump('## B')\n```\n\n## B\n\n```lua\njump('## A')\n```\n";
    let prompt = Prompt::parse_named("cycle.md", cycle, "test", &NullObserver).unwrap();
    let limits = RunLimits::new().max_section_entries(NonZeroU64::new(10).unwrap());
    expect(
        run_prompt(prompt, limits, None),
        RunErrorKind::Limit,
        &[
            "limit of 10 section entries",
            "RunLimits::max_section_entries",
        ],
    );
}

// ---- Finding 17: errors carry a location ----

#[test]
fn error_with_non_string_values_has_a_location() {
    for (body, kind) in [
        ("local a = 1\nerror({})", "table"),
        ("local a = 1\nerror(nil)", "nil"),
        ("local a = 1\nerror(42)", "number"),
        (
            "local a = 1\nerror(setmetatable({}, {__tostring = function() return 'custom' end}))",
            "table",
        ),
    ] {
        let error = expect(
            run_bounded(body, RunLimits::new(), None),
            RunErrorKind::Lua,
            &["t.md:13:", kind],
        );
        assert!(!error.to_string().contains("0x"), "{error}");
    }
    // pcall still sees the original value.
    let body = "local ok, e = pcall(error, {code = 7})\nreturn e.code";
    assert_eq!(run_bounded(body, RunLimits::new(), None).unwrap(), "7");
}

#[test]
fn execute_errors_have_a_location_and_no_mlua_internals() {
    let error = expect(
        run_bounded("local a = 1\nexecute('## Nope')", RunLimits::new(), None),
        RunErrorKind::Control,
        &["t.md:13:", "no section `## Nope`"],
    );
    assert!(!error.to_string().contains("__mlua"), "{error}");
    let body = "local ok, e = pcall(execute, '## Nope')\nreturn e";
    let message = run_bounded(body, RunLimits::new(), None).unwrap();
    assert!(message.contains("t.md:12:"), "{message}");
    assert!(message.contains("no section `## Nope`"), "{message}");
    assert!(!message.contains("__mlua"), "{message}");
    assert!(!message.contains("traceback"), "{message}");
}

#[test]
fn argument_conversion_errors_name_the_function_and_line() {
    for (body, function) in [
        ("local a = 1\nstore.read('a.txt', 1.5, 0/0)", "store.read"),
        ("local a = 1\nstore.write('a.txt', {})", "store.write"),
        ("local a = 1\nlog({})", "log"),
    ] {
        let error = expect(
            run_bounded(body, RunLimits::new(), None),
            RunErrorKind::Lua,
            &["t.md:13:", function],
        );
        assert!(!error.to_string().contains("traceback"), "{error}");
    }
}

#[test]
fn deep_var_tables_are_an_error_with_a_line() {
    let body = "local a = 1\nlocal t = {}\nlocal cur = t\nfor i = 1, 300 do cur.x = {} cur = cur.x end\nvar.deep = t";
    expect(
        run_bounded(body, RunLimits::new(), None),
        RunErrorKind::Lua,
        &["t.md:16:", "var.deep", "nest"],
    );
}

// ---- Finding 19: messages are capped and escaped ----

#[test]
fn huge_error_messages_are_capped() {
    let error = run_bounded(
        "error(string.rep('x', 10 * 1024 * 1024))",
        RunLimits::new(),
        None,
    )
    .unwrap_err();
    assert!(
        error.to_string().len() < 8 * 1024,
        "{} bytes",
        error.to_string().len()
    );
    assert!(
        error.to_string().contains("bytes in all"),
        "{}",
        &error.to_string()[..100]
    );
}

#[test]
fn store_path_errors_escape_control_characters() {
    let error = expect(
        run_bounded("store.read('a\\nb\\0c')", RunLimits::new(), None),
        RunErrorKind::Store,
        &["control character"],
    );
    let text = error.to_string();
    assert!(!text.contains('\n') && !text.contains('\0'), "{text:?}");
    let error =
        run_bounded("store.read(string.rep('p', 5000))", RunLimits::new(), None).unwrap_err();
    assert!(
        error.to_string().len() < 1024,
        "{}",
        error.to_string().len()
    );
}

#[test]
fn section_addresses_in_errors_are_escaped() {
    let error = expect(
        run_bounded(
            "jump('## A\\0B\\n' .. string.rep('z', 5000))",
            RunLimits::new(),
            None,
        ),
        RunErrorKind::Control,
        &[],
    );
    let text = error.to_string();
    assert!(!text.contains('\0') && text.len() < 2048, "{text:?}");
}

#[test]
fn limits_have_documented_defaults() {
    // The defaults the READMEs list.
    let limits = RunLimits::new();
    let shown = format!("{limits:?}");
    assert!(shown.contains("max_store_bytes: 268435456"), "{shown}");
    assert!(
        shown.contains("max_fanout_result_bytes: 67108864"),
        "{shown}"
    );
    assert!(
        shown.contains("max_run_instructions: 1000000000"),
        "{shown}"
    );
    let _ = NonZeroUsize::MIN;
}

// ---- The metered pattern functions agree with Lua's C implementation ----

fn lua_literal(bytes: &str) -> String {
    let mut out = String::from("\"");
    for b in bytes.bytes() {
        out.push_str(&format!("\\{b:03}"));
    }
    out.push('"');
    out
}

fn pattern_program(subject: &str, pattern: &str) -> String {
    format!(
        r#"local s, p = {}, {}
local out = {{}}
local function add(ok, ...)
  if not ok then out[#out + 1] = "err" return end
  local t = table.pack(...)
  for i = 1, t.n do out[#out + 1] = tostring(t[i]) end
end
add(pcall(string.find, s, p))
add(pcall(string.find, s, p, 2))
add(pcall(string.find, s, p, -3, true))
add(pcall(string.match, s, p))
add(pcall(string.match, s, p, 3))
add(pcall(function()
  local r = {{}}
  for a, b in string.gmatch(s, p) do
    r[#r + 1] = tostring(a) .. "/" .. tostring(b)
    if #r > 50 then break end
  end
  return table.concat(r, ",")
end))
add(pcall(string.gsub, s, p, "<%0>"))
add(pcall(string.gsub, s, p, "[%1]", 2))
add(pcall(string.gsub, s, p, {{a = "A", ["1"] = false}}))
add(pcall(string.gsub, s, p, function(a) if a == "b" then return nil end return "{{" .. tostring(a) .. "}}" end))
return table.concat(out, "|")"#,
        lua_literal(subject),
        lua_literal(pattern)
    )
}

fn pattern_item() -> impl proptest::strategy::Strategy<Value = &'static str> {
    proptest::sample::select(vec![
        "a", "b", ".", "%a", "%d", "%s", "%W", "[ab]", "[^a]", "[a-c]", "%b()", "%f[%a]", "(", ")",
        "()", "%1", "^", "$", "*", "+", "-", "?", "%", "[", "]", "%%", "%(",
    ])
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: 96, failure_persistence: None, ..proptest::prelude::ProptestConfig::default()
    })]

    #[test]
    fn metered_patterns_agree_with_c(
        subject in "[ab1 ()]{0,12}",
        items in proptest::collection::vec(pattern_item(), 1..7),
    ) {
        let pattern = items.concat();
        let program = pattern_program(&subject, &pattern);
        let expected: String = mlua::Lua::new().load(&program).eval().unwrap();
        let actual = run_bounded(&program, RunLimits::new(), None).unwrap();
        proptest::prop_assert_eq!(actual, expected, "subject {:?} pattern {:?}", subject, pattern);
    }
}

#[test]
fn expensive_instructions_hit_the_block_time_limit() {
    // Each iteration is a few instructions, each copying megabytes: the instruction budget
    // alone would allow hours of this.
    let limits = RunLimits::new()
        .lua_instructions(NonZeroU64::new(u64::MAX).unwrap())
        .lua_block_time(Duration::from_millis(500));
    let body = "local s = string.rep('a', 4000000)\nfor i = 1, 1e9 do local t = s .. 'x' end";
    expect(
        run_bounded(body, limits, None),
        RunErrorKind::InstructionBudget,
        &["RunLimits::lua_block_time"],
    );
}
