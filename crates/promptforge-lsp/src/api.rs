//! The Lua API a prompt's sandbox exposes, with signatures and one-line docs, for hover and
//! completion. Names and behaviour follow the guide and core's sandbox (`engine/api.rs`,
//! `agent/lua_tools.rs`, `agent/lua_models.rs`, the prelude); a test below checks every
//! function and table against a real sandbox VM.

/// What an API entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ApiKind {
    Function,
    Table,
    Field,
}

/// One documented name.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ApiEntry {
    /// The dotted name (`tools.bind`).
    pub(crate) name: &'static str,
    pub(crate) kind: ApiKind,
    /// The signature as a user writes the call.
    pub(crate) signature: &'static str,
    pub(crate) doc: &'static str,
}

macro_rules! entries {
    ($($name:literal $kind:ident $signature:literal $doc:literal;)*) => {
        /// Every documented name of the sandbox.
        pub(crate) const API: &[ApiEntry] = &[
            $(ApiEntry { name: $name, kind: ApiKind::$kind, signature: $signature, doc: $doc },)*
        ];
    };
}

entries! {
    "jump" Function "jump(target: string)"
        "Transfers control to a visible section by address (`## Name`): the walk continues there, the conversation is cleared and `reply` is kept. Not available in a local tool handler or while the shared library loads.";
    "execute" Function "execute(target: string, input?: any) -> string?"
        "Runs a contained chain starting at a visible section, with `input` as its `args`, and returns the chain's final reply; the outer walk does not move. Nests at most 8 deep.";
    "fanout" Function "fanout(worker: string, collection: table) -> results"
        "Runs the worker section once per member of `collection`, in parallel arms (8 at once by default), each with `item` and `sys.index`; results come back in collection order with `.text`, `.ok`, `.item` and `.exhausted`.";
    "list_from_section" Function "list_from_section(target: string) -> {string}"
        "The pre-parsed list items (bullets or numbered lines) of a visible section, without running it.";
    "log" Function "log(message: string)"
        "Records a message in the run's observations: one line of at most 256 characters; at most 1024 per run (later ones are dropped).";
    "untrusted" Function "untrusted(text: string) -> string"
        "Wraps text in the run's untrusted-input envelope (a per-run nonce; forged tags escaped) before it reaches a model.";
    "args" Field "args: string | table"
        "The run's input, or the input `execute` was given (a table stays a table).";
    "var" Table "var: table"
        "The walk-local clipboard: JSON data that persists across the sections of a walk, the H1 included; `execute` and `fanout` get a copy and their writes never come back.";
    "reply" Field "reply: string?"
        "The last model reply on this walk, kept across `jump`; `nil` when a chain starts.";
    "item" Field "item: any"
        "The member this fanout arm processes (fanout arms only): array members as they are, hash members as `{key, value}`.";
    "sys" Table "sys: table (read-only)"
        "Facts about the run: `when`, `now`, `id`, `index`, `section_name`, `execution`, `section_count`, `model`, `reply_finish_reason`. Writing to it is an error.";
    "sys.when" Field "sys.when: string" "When the run started (RFC 3339, UTC).";
    "sys.now" Field "sys.now: string" "When the current section started (RFC 3339, UTC).";
    "sys.id" Field "sys.id: integer"
        "The run-wide execution-unit counter: the H1 is 0, every section entry and fanout arm takes the next value.";
    "sys.index" Field "sys.index: integer"
        "The arm's 1-based position in its fanout (fanout arms only; reading it elsewhere raises).";
    "sys.section_name" Field "sys.section_name: string" "The heading text of the current section, without `#` marks.";
    "sys.execution" Field "sys.execution: string" "The run's execution id.";
    "sys.section_count" Field "sys.section_count: integer" "How many sections the run has entered so far.";
    "sys.model" Field "sys.model: string?" "The model of the latest model turn in this section.";
    "sys.reply_finish_reason" Field "sys.reply_finish_reason: string?" "The finish reason of the latest model turn.";
    "store" Table "store: table" "The run's store: a virtual file system shared by every section and arm of the run.";
    "store.read" Function "store.read(path: string, first?: integer, last?: integer) -> string"
        "Reads a store file, or lines `first` to `last` of it (1-based, inclusive, joined by newlines).";
    "store.read_numbered" Function "store.read_numbered(path: string, first?: integer, last?: integer) -> string"
        "Reads lines prefixed with their absolute number (`20| …`), right-aligned.";
    "store.write" Function "store.write(path: string, text: string)"
        "Writes a store file, replacing it. Two arms of one fanout writing one path is an error.";
    "store.append" Function "store.append(path: string, text: string)" "Appends to a store file (creating it).";
    "store.str_replace" Function "store.str_replace(path: string, old: string, new: string)"
        "Replaces the one occurrence of `old` in a store file; refused when it occurs more than once.";
    "store.glob" Function "store.glob(pattern: string) -> {string}"
        "The store paths matching a glob (`*` within a segment, `**` across segments).";
    "store.exists" Function "store.exists(path: string) -> boolean" "Whether a store file exists.";
    "store.delete" Function "store.delete(path: string)" "Deletes a store file (silent when it is missing).";
    "tools" Table "tools: table" "Declares and scopes tools: `bind`, `always`, `add`, `add_local`, `calls`.";
    "tools.bind" Function "tools.bind(alias: string, description: string, facing?: string) -> tool"
        "Declares a tool run-wide by what it does: the picker resolves the description against the tools available (absent, duplicate and ambiguous fail). Not offered to the model until `tools.always` or `tools.add`.";
    "tools.always" Function "tools.always(alias: string | tool, facing?: string) -> tool"
        "Offers a declared tool in every section from now on; `facing` overrides the description the model sees.";
    "tools.add" Function "tools.add(alias: string | tool | {string | tool}, facing?: string)"
        "Offers declared tools in this section only (atomic: one unknown alias adds nothing).";
    "tools.add_local" Function "tools.add_local(alias: string, description: string, params: table, handler: function)"
        "Declares a tool backed by a Lua function in this section: `params` maps names to `\"string\"`, `\"integer\"`, `\"number\"`, `\"boolean\"` or `{type, description}`; offered from the next prose block.";
    "tools.calls" Table "tools.calls: table (read-only)" "`tools.calls.alias`: how many times the model called a tool in this section, failures included.";
    "models" Table "models: table" "Declares and selects models: `bind`, `default`, `use`, `get`, `infer`.";
    "models.bind" Function "models.bind(alias: string, description: string, opts?: {thinking?, context?, temperature?, max_tokens?}) -> model"
        "Declares a model run-wide by what it does: `opts` filters the catalog's chat models (thinking, minimum context, temperature 0..2, max_tokens), then the picker resolves the description.";
    "models.default" Function "models.default(alias: string, description?: string, opts?: table) -> model"
        "Sets the run's default model: declares and designates in one call, or designates a model already declared with `models.bind`. Once per run.";
    "models.use" Function "models.use(alias: string) -> model" "Selects a declared model for this section (once per section).";
    "models.get" Function "models.get(alias: string) -> model" "The handle of a declared model, without selecting it.";
    "models.infer" Function "models.infer(prompt: string) -> string"
        "One tool-free model round on a fresh conversation with the section's model; never sets `reply` or `sys`.";
    "string" Table "string: table" "Lua's string library (patterns are metered against the instruction budget).";
    "table" Table "table: table" "Lua's table library.";
    "math" Table "math: table" "Lua's math library.";
    "pcall" Function "pcall(f, ...) -> boolean, ..." "Calls `f` in protected mode; a budget or cancellation error still ends the block.";
    "xpcall" Function "xpcall(f, handler, ...) -> boolean, ..." "`pcall` with a message handler.";
    "error" Function "error(message, level?)" "Raises an error; a non-string value says where it was raised.";
    "assert" Function "assert(v, message?)" "Raises `message` when `v` is false or nil.";
    "type" Function "type(v) -> string" "The type name of a value.";
    "tostring" Function "tostring(v) -> string" "A value as text.";
    "tonumber" Function "tonumber(v, base?) -> number?" "A value as a number, or nil.";
    "pairs" Function "pairs(t)" "Iterates over every key of a table.";
    "ipairs" Function "ipairs(t)" "Iterates over the array part of a table.";
    "next" Function "next(t, key?)" "The next key of a table after `key`.";
    "select" Function "select(n, ...)" "Arguments from the `n`th on, or their count with `\"#\"`.";
    "setmetatable" Function "setmetatable(t, meta) -> t" "Sets a metatable (`__gc` is refused).";
    "getmetatable" Function "getmetatable(v) -> table?" "A value's metatable.";
    "rawequal" Function "rawequal(a, b) -> boolean" "Equality without metamethods.";
    "rawlen" Function "rawlen(v) -> integer" "Length without metamethods.";
}

/// Fields of a model handle (`models.get(alias)`, a declared alias global).
pub(crate) const MODEL_HANDLE_FIELDS: &[(&str, &str)] = &[
    ("name", "The alias."),
    ("model_id", "The catalog model it resolved to."),
    ("description", "The model's catalog description."),
    ("context", "Its context window, when the catalog says."),
    ("thinking", "Whether requests ask it to think."),
    ("temperature", "The declared temperature."),
    ("max_tokens", "The declared output cap."),
    (
        "infer",
        "`handle:infer(prompt)`: one tool-free round with this model.",
    ),
];

/// The members of `string`, `table` and `math` the sandbox keeps.
pub(crate) const LIBRARY_MEMBERS: &[(&str, &[&str])] = &[
    (
        "string",
        &[
            "byte", "char", "find", "format", "gmatch", "gsub", "len", "lower", "match", "pack",
            "packsize", "rep", "reverse", "sub", "unpack", "upper",
        ],
    ),
    (
        "table",
        &[
            "concat", "insert", "move", "pack", "remove", "sort", "unpack",
        ],
    ),
    (
        "math",
        &[
            "abs",
            "ceil",
            "cos",
            "deg",
            "exp",
            "floor",
            "fmod",
            "huge",
            "log",
            "max",
            "maxinteger",
            "min",
            "mininteger",
            "modf",
            "pi",
            "rad",
            "random",
            "randomseed",
            "sin",
            "sqrt",
            "tan",
            "tointeger",
            "type",
            "ult",
        ],
    ),
];

/// The entry for a dotted name.
pub(crate) fn lookup(name: &str) -> Option<&'static ApiEntry> {
    API.iter().find(|e| e.name == name)
}

/// The documented members of a table (`tools` → `tools.bind`, …), by their last segment.
pub(crate) fn members(table: &str) -> Vec<&'static ApiEntry> {
    API.iter()
        .filter(|e| {
            e.name
                .strip_prefix(table)
                .and_then(|rest| rest.strip_prefix('.'))
                .is_some_and(|rest| !rest.contains('.'))
        })
        .collect()
}

/// The documented globals (names without a dot).
pub(crate) fn globals() -> impl Iterator<Item = &'static ApiEntry> {
    API.iter().filter(|e| !e.name.contains('.'))
}

/// Markdown hover text for an entry.
pub(crate) fn markdown(entry: &ApiEntry) -> String {
    format!("```lua\n{}\n```\n{}", entry.signature, entry.doc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_are_one_level_deep() {
        let names: Vec<&str> = members("tools").iter().map(|e| e.name).collect();
        assert_eq!(
            names,
            [
                "tools.bind",
                "tools.always",
                "tools.add",
                "tools.add_local",
                "tools.calls"
            ]
        );
        assert!(lookup("models.default").is_some_and(|e| e.kind == ApiKind::Function));
        assert!(globals().any(|e| e.name == "jump"));
        assert!(globals().all(|e| !e.name.contains('.')));
    }

    /// Every documented function and table exists in a real run's VM, every library member
    /// listed too, and nothing the sandbox removes is documented.
    #[test]
    fn the_documented_api_is_the_sandboxs() {
        let mut checks = String::new();
        for entry in API.iter().filter(|e| e.kind != ApiKind::Field) {
            let want = if entry.kind == ApiKind::Function {
                "function"
            } else {
                "table"
            };
            checks.push_str(&format!(
                "if type({0}) ~= \"{want}\" then return \"{0} is a \" .. type({0}) end\n",
                entry.name
            ));
        }
        for (library, members) in LIBRARY_MEMBERS {
            for member in *members {
                checks.push_str(&format!(
                    "if {library}.{member} == nil then return \"{library}.{member} is missing\" end\n"
                ));
            }
        }
        for removed in [
            "print",
            "load",
            "require",
            "dofile",
            "rawget",
            "rawset",
            "collectgarbage",
        ] {
            assert!(lookup(removed).is_none(), "{removed} is documented");
            checks.push_str(&format!(
                "if {removed} ~= nil then return \"{removed} exists\" end\n"
            ));
        }
        let source = format!(
            "---\nname: api\ndescription: d\npromptforge: 1\n---\n\n# Api\n\n```lua\n{checks}return \"ok\"\n```\n"
        );
        let prompt =
            promptforge_core::Prompt::parse(&source, "api", &promptforge_core::NullObserver);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build();
        let result = match (prompt, runtime) {
            (Ok(prompt), Ok(runtime)) => runtime
                .block_on(promptforge_core::run(
                    &prompt,
                    "",
                    promptforge_core::ResolutionContext::empty(),
                    &promptforge_core::StoreRef::memory(),
                    promptforge_core::RunConfig::new("api"),
                ))
                .map_err(|e| e.to_string()),
            (prompt, runtime) => Err(format!("{:?} {:?}", prompt.err(), runtime.err())),
        };
        assert_eq!(result, Ok("ok".to_owned()));
    }
}
