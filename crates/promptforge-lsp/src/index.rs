//! What one version of a document holds, for every request: core's outline (sections, Lua
//! blocks, placeholders, frontmatter keys), the Lua tokens of each block, and the sites
//! the features work on — section references, `var` definitions and uses, binding calls,
//! alias uses and store paths.
//!
//! Built once per version, on the thread that first needs it, in time linear in the
//! document.

use std::collections::HashMap;
use std::ops::Range;

use promptforge_core::parse::{Outline, Owner, Resolution, Scope, outline, parse_address};

use crate::lua::{Kind, Token, tokenize};

/// Which call addresses a section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RefCall {
    Jump,
    Execute,
    Fanout,
    ListFromSection,
}

impl RefCall {
    fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "jump" => Self::Jump,
            "execute" => Self::Execute,
            "fanout" => Self::Fanout,
            "list_from_section" => Self::ListFromSection,
            _ => return None,
        })
    }
}

/// A string literal argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Literal {
    /// The decoded value.
    pub(crate) value: String,
    /// The token, delimiters included.
    pub(crate) span: Range<usize>,
    /// The bytes between the delimiters.
    pub(crate) content: Range<usize>,
    /// The opening delimiter.
    pub(crate) open: String,
}

/// What a section reference resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// The section(s) it addresses: one from a section or the H1; from a shared block,
    /// every section with that address.
    Found(Vec<usize>),
    /// Not a heading address.
    NotAnAddress,
    /// No visible section has that address; the visible set from the call's section.
    NotVisible(Vec<usize>),
    /// From a shared block: no section anywhere has that address.
    Missing,
}

/// A `jump`/`execute`/`fanout`/`list_from_section` call with a literal target.
#[derive(Debug, Clone)]
pub(crate) struct SectionRef {
    pub(crate) call: RefCall,
    pub(crate) literal: Literal,
    pub(crate) owner: Owner,
    pub(crate) target: Target,
}

/// Where `var.NAME` appears.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VarRole {
    /// `var.NAME = …` in Lua.
    Assigned,
    /// Any other read or write through `var.NAME` in Lua.
    Lua,
    /// `{{ var.NAME }}` in prose.
    Placeholder,
}

/// One `var.NAME` site.
#[derive(Debug, Clone)]
pub(crate) struct VarSite {
    pub(crate) name: String,
    /// The bytes of `NAME` (inside the quotes for `var["NAME"]`).
    pub(crate) span: Range<usize>,
    pub(crate) role: VarRole,
}

/// Which binding call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BindingKind {
    ToolBind,
    ToolAlways,
    ModelBind,
    ModelDefault,
}

impl BindingKind {
    pub(crate) fn callee(self) -> &'static str {
        match self {
            Self::ToolBind => "tools.bind",
            Self::ToolAlways => "tools.always",
            Self::ModelBind => "models.bind",
            Self::ModelDefault => "models.default",
        }
    }
}

/// A model declaration's opts argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OptsArg {
    /// No third argument.
    Absent,
    /// A table constructor of literals, as written.
    Literal(String),
    /// Anything known only at run time.
    Dynamic,
}

/// A `tools.bind`, `tools.always`, `models.bind` or `models.default` call.
#[derive(Debug, Clone)]
pub(crate) struct Binding {
    pub(crate) kind: BindingKind,
    /// From the callee to the closing parenthesis (or the last argument).
    pub(crate) span: Range<usize>,
    /// The alias, when it is a literal.
    pub(crate) alias: Option<Literal>,
    /// The description, when it is a literal (`None` for the one-argument forms).
    pub(crate) description: Option<Literal>,
    /// Whether a description argument is present at all.
    pub(crate) has_description: bool,
    pub(crate) opts: OptsArg,
}

/// A literal alias naming a declared tool or model (`tools.add("search")`,
/// `models.use("writer")`, …).
#[derive(Debug, Clone)]
pub(crate) struct AliasUse {
    pub(crate) model: bool,
    pub(crate) literal: Literal,
}

/// A literal path given to a `store.*` call.
#[derive(Debug, Clone)]
pub(crate) struct StorePath {
    pub(crate) literal: Literal,
}

/// The tokens of one Lua block.
#[derive(Debug)]
pub(crate) struct Block {
    pub(crate) code: Range<usize>,
    pub(crate) owner: Owner,
    /// Every token but comments.
    pub(crate) tokens: Vec<Token>,
    /// The comments' spans.
    pub(crate) comments: Vec<Range<usize>>,
}

/// Everything the features read from one document version.
#[derive(Debug)]
pub(crate) struct Index {
    pub(crate) outline: Outline,
    pub(crate) blocks: Vec<Block>,
    pub(crate) refs: Vec<SectionRef>,
    pub(crate) vars: Vec<VarSite>,
    /// Whether some Lua writes `var[<expression>]`: then any name may be assigned.
    pub(crate) dynamic_var_write: bool,
    pub(crate) bindings: Vec<Binding>,
    pub(crate) aliases: Vec<AliasUse>,
    pub(crate) store_paths: Vec<StorePath>,
    /// Fanout workers and the sections (or `None`, the H1) that fan out to them.
    pub(crate) arm_callers: HashMap<usize, Vec<Option<usize>>>,
}

/// An argument of a call.
#[derive(Debug)]
enum Arg {
    Literal(Literal),
    /// A table constructor of literals only, as written.
    LiteralTable(Range<usize>, Vec<Literal>),
    Other,
}

/// A call site: a dotted callee path and its arguments.
#[derive(Debug)]
struct Call {
    path: Vec<String>,
    span: Range<usize>,
    args: Vec<Arg>,
}

impl Index {
    /// Indexes `text` (normalized; see [`promptforge_core::parse::normalized`]).
    pub(crate) fn build(text: &str) -> Self {
        let outline = outline(text);
        let blocks: Vec<Block> = outline
            .lua_blocks()
            .iter()
            .map(|block| {
                let (comments, tokens): (Vec<Token>, Vec<Token>) =
                    tokenize(&text[block.code()], block.code().start)
                        .into_iter()
                        .partition(|t| t.kind == Kind::Comment);
                Block {
                    code: block.code(),
                    owner: block.owner(),
                    tokens,
                    comments: comments.into_iter().map(|t| t.span).collect(),
                }
            })
            .collect();
        let mut index = Self {
            outline,
            blocks: Vec::new(),
            refs: Vec::new(),
            vars: Vec::new(),
            dynamic_var_write: false,
            bindings: Vec::new(),
            aliases: Vec::new(),
            store_paths: Vec::new(),
            arm_callers: HashMap::new(),
        };
        let mut pending: Vec<(RefCall, Literal, Owner)> = Vec::new();
        for block in &blocks {
            let source = &text[block.code.clone()];
            let base = block.code.start;
            for call in calls(&block.tokens, source, base) {
                index.record(call, block.owner, text, &mut pending);
            }
            index.scan_vars(&block.tokens, source, base);
        }
        for placeholder in index.outline.placeholders() {
            if let Some(path) = placeholder.path()
                && path.len() >= 2
                && path[0] == "var"
                && let Some(span) = placeholder.segment_span(1)
            {
                index.vars.push(VarSite {
                    name: path[1].clone(),
                    span,
                    role: VarRole::Placeholder,
                });
            }
        }
        index.vars.sort_by_key(|v| v.span.start);
        // Fanout arms first: their workers see more than a section does.
        for (call, literal, owner) in &pending {
            if *call != RefCall::Fanout {
                continue;
            }
            let caller = match owner {
                Owner::Preamble => None,
                Owner::Section(id) => Some(*id),
                Owner::Shared => continue,
            };
            let scope = caller.map_or(Scope::Preamble, Scope::Section);
            if let Resolution::Found(worker) = index.outline.resolve(scope, &literal.value) {
                let callers = index.arm_callers.entry(worker).or_default();
                if !callers.contains(&caller) {
                    callers.push(caller);
                }
            }
        }
        for (call, literal, owner) in pending {
            let target = index.resolve(owner, &literal.value);
            index.refs.push(SectionRef {
                call,
                literal,
                owner,
                target,
            });
        }
        index.blocks = blocks;
        index
    }

    /// Resolves a section address written in Lua owned by `owner`.
    pub(crate) fn resolve(&self, owner: Owner, address: &str) -> Target {
        let scope = match owner {
            Owner::Preamble => Scope::Preamble,
            Owner::Section(id) => Scope::Section(id),
            Owner::Shared => {
                let Some((level, name)) = parse_address(address) else {
                    return Target::NotAnAddress;
                };
                let all: Vec<usize> = self
                    .outline
                    .sections()
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| s.level() == level && s.name() == name)
                    .map(|(i, _)| i)
                    .collect();
                return if all.is_empty() {
                    Target::Missing
                } else {
                    Target::Found(all)
                };
            }
        };
        match self.outline.resolve(scope, address) {
            Resolution::Found(id) => Target::Found(vec![id]),
            Resolution::NotAnAddress => Target::NotAnAddress,
            Resolution::NotVisible => {
                if let Scope::Section(worker) = scope {
                    for &caller in self.arm_callers.get(&worker).map_or(&[][..], Vec::as_slice) {
                        let arm = Scope::Arm { worker, caller };
                        if let Resolution::Found(id) = self.outline.resolve(arm, address) {
                            return Target::Found(vec![id]);
                        }
                    }
                }
                Target::NotVisible(self.outline.visible(scope))
            }
        }
    }

    /// Every address a call owned by `owner` may name (arm sets included), for completion.
    pub(crate) fn addressable(&self, owner: Owner) -> Vec<usize> {
        let mut ids = match owner {
            Owner::Preamble => self.outline.visible(Scope::Preamble),
            Owner::Section(id) => {
                let mut ids = self.outline.visible(Scope::Section(id));
                for &caller in self.arm_callers.get(&id).map_or(&[][..], Vec::as_slice) {
                    ids.extend(self.outline.visible(Scope::Arm { worker: id, caller }));
                }
                ids
            }
            Owner::Shared => (0..self.outline.sections().len()).collect(),
        };
        let mut seen = std::collections::HashSet::new();
        ids.retain(|id| seen.insert(*id));
        ids
    }

    /// The Lua block holding byte `offset` (its code, end included: a cursor sits there).
    pub(crate) fn block_at(&self, offset: usize) -> Option<&Block> {
        let after = self.blocks.partition_point(|b| b.code.start <= offset);
        let block = self.blocks.get(after.checked_sub(1)?)?;
        (offset <= block.code.end).then_some(block)
    }

    /// The heading of section `id` or of the H1 for `owner`, as run errors name it.
    pub(crate) fn scope_heading(&self, owner: Owner) -> String {
        match owner {
            Owner::Section(id) => self
                .outline
                .sections()
                .get(id)
                .map(|s| s.address())
                .unwrap_or_default(),
            Owner::Preamble | Owner::Shared => self
                .outline
                .title()
                .map_or_else(|| "the H1".to_owned(), |t| t.address()),
        }
    }

    /// The section ids whose name span or heading holds `offset`.
    pub(crate) fn heading_at(&self, offset: usize) -> Option<usize> {
        self.outline
            .sections()
            .iter()
            .position(|s| s.heading().span().contains(&offset) || s.heading().span().end == offset)
    }

    /// Every reference that resolves to section `id`.
    pub(crate) fn refs_to(&self, id: usize) -> impl Iterator<Item = &SectionRef> {
        self.refs
            .iter()
            .filter(move |r| matches!(&r.target, Target::Found(ids) if ids.contains(&id)))
    }

    fn record(
        &mut self,
        call: Call,
        owner: Owner,
        text: &str,
        pending: &mut Vec<(RefCall, Literal, Owner)>,
    ) {
        let path: Vec<&str> = call.path.iter().map(String::as_str).collect();
        let literal = |i: usize| match call.args.get(i) {
            Some(Arg::Literal(l)) => Some(l.clone()),
            _ => None,
        };
        match path.as_slice() {
            [name] => {
                if let Some(kind) = RefCall::from_name(name)
                    && let Some(target) = literal(0)
                {
                    pending.push((kind, target, owner));
                }
            }
            ["tools", "bind"] => self.bindings.push(Binding {
                kind: BindingKind::ToolBind,
                span: call.span.clone(),
                alias: literal(0),
                description: literal(1),
                has_description: call.args.len() > 1,
                opts: OptsArg::Absent,
            }),
            ["tools", "always"] => {
                if let Some(alias) = literal(0) {
                    self.aliases.push(AliasUse {
                        model: false,
                        literal: alias.clone(),
                    });
                }
                self.bindings.push(Binding {
                    kind: BindingKind::ToolAlways,
                    span: call.span.clone(),
                    alias: literal(0),
                    description: None,
                    has_description: false,
                    opts: OptsArg::Absent,
                });
            }
            ["tools", "add"] => match call.args.first() {
                Some(Arg::Literal(alias)) => self.aliases.push(AliasUse {
                    model: false,
                    literal: alias.clone(),
                }),
                Some(Arg::LiteralTable(_, items)) => {
                    self.aliases.extend(items.iter().map(|l| AliasUse {
                        model: false,
                        literal: l.clone(),
                    }));
                }
                _ => {}
            },
            ["models", kind @ ("bind" | "default")] => {
                let one_argument = *kind == "default" && call.args.len() == 1;
                if one_argument && let Some(alias) = literal(0) {
                    self.aliases.push(AliasUse {
                        model: true,
                        literal: alias,
                    });
                }
                let opts = match call.args.get(2) {
                    None => OptsArg::Absent,
                    Some(Arg::LiteralTable(span, _)) => {
                        OptsArg::Literal(text.get(span.clone()).unwrap_or_default().to_owned())
                    }
                    Some(_) => OptsArg::Dynamic,
                };
                self.bindings.push(Binding {
                    kind: if *kind == "bind" {
                        BindingKind::ModelBind
                    } else {
                        BindingKind::ModelDefault
                    },
                    span: call.span.clone(),
                    alias: literal(0),
                    description: literal(1),
                    has_description: call.args.len() > 1,
                    opts,
                });
            }
            ["models", "use" | "get"] => {
                if let Some(alias) = literal(0) {
                    self.aliases.push(AliasUse {
                        model: true,
                        literal: alias,
                    });
                }
            }
            [
                "store",
                "read" | "read_numbered" | "write" | "append" | "str_replace" | "exists" | "delete",
            ] => {
                if let Some(path) = literal(0) {
                    self.store_paths.push(StorePath { literal: path });
                }
            }
            _ => {}
        }
    }

    /// Records `var.NAME` and `var["NAME"]` sites, and whether `var[expr]` is written.
    fn scan_vars(&mut self, tokens: &[Token], source: &str, base: usize) {
        let punct = |i: usize, p: &str| tokens.get(i).is_some_and(|t| t.is_punct(source, base, p));
        for (i, token) in tokens.iter().enumerate() {
            if token.kind != Kind::Name || token.text(source, base) != "var" {
                continue;
            }
            if i > 0 && (punct(i - 1, ".") || punct(i - 1, ":")) {
                continue;
            }
            if punct(i + 1, ".")
                && let Some(name) = tokens.get(i + 2).filter(|t| t.kind == Kind::Name)
            {
                let assigned = punct(i + 3, "=");
                self.vars.push(VarSite {
                    name: name.text(source, base).to_owned(),
                    span: name.span.clone(),
                    role: if assigned {
                        VarRole::Assigned
                    } else {
                        VarRole::Lua
                    },
                });
            } else if punct(i + 1, "[") {
                let literal = tokens.get(i + 2).filter(|_| punct(i + 3, "]"));
                match literal.map(|t| (&t.kind, t.string_value())) {
                    Some((Kind::Str { content, .. }, Some(value))) => {
                        self.vars.push(VarSite {
                            name: value.to_owned(),
                            span: content.clone(),
                            role: if punct(i + 4, "=") {
                                VarRole::Assigned
                            } else {
                                VarRole::Lua
                            },
                        });
                    }
                    _ => {
                        if let Some(close) = matching(tokens, source, base, i + 1)
                            && punct(close + 1, "=")
                        {
                            self.dynamic_var_write = true;
                        }
                    }
                }
            }
        }
    }
}

/// The index of the token closing the bracket opened at `open`.
fn matching(tokens: &[Token], source: &str, base: usize, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, token) in tokens.iter().enumerate().skip(open) {
        if token.kind != Kind::Punct {
            continue;
        }
        match token.text(source, base) {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

fn literal_of(token: &Token) -> Option<Literal> {
    match &token.kind {
        Kind::Str {
            value: Some(value),
            content,
            open,
            ..
        } => Some(Literal {
            value: value.clone(),
            span: token.span.clone(),
            content: content.clone(),
            open: open.clone(),
        }),
        _ => None,
    }
}

/// Every call with a dotted callee (`name(…)`, `a.b(…)`, `name "…"`), its arguments read
/// as literals where they are.
fn calls(tokens: &[Token], source: &str, base: usize) -> Vec<Call> {
    let punct = |i: usize, p: &str| tokens.get(i).is_some_and(|t| t.is_punct(source, base, p));
    let mut out = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        if token.kind != Kind::Name || (i > 0 && (punct(i - 1, ".") || punct(i - 1, ":"))) {
            continue;
        }
        let mut path = vec![token.text(source, base).to_owned()];
        let mut j = i + 1;
        while punct(j, ".") && tokens.get(j + 1).is_some_and(|t| t.kind == Kind::Name) {
            path.push(tokens[j + 1].text(source, base).to_owned());
            j += 2;
        }
        let callee = token.span.start..tokens[j - 1].span.end;
        if let Some(literal) = tokens.get(j).and_then(literal_of) {
            out.push(Call {
                path,
                span: callee.start..literal.span.end,
                args: vec![Arg::Literal(literal)],
            });
            continue;
        }
        if !punct(j, "(") {
            continue;
        }
        let close = matching(tokens, source, base, j);
        let end = close.unwrap_or(tokens.len());
        let mut args = Vec::new();
        let mut start = j + 1;
        let mut depth = 0usize;
        for k in j + 1..=end {
            let at_end = k == end;
            let comma = !at_end && depth == 0 && punct(k, ",");
            if !at_end && tokens[k].kind == Kind::Punct {
                match tokens[k].text(source, base) {
                    "(" | "[" | "{" => depth += 1,
                    ")" | "]" | "}" => depth = depth.saturating_sub(1),
                    _ => {}
                }
            }
            if comma || at_end {
                if k > start {
                    args.push(argument(&tokens[start..k], source, base));
                }
                start = k + 1;
            }
        }
        let last = close
            .and_then(|c| tokens.get(c))
            .or_else(|| tokens.get(end.saturating_sub(1)))
            .map_or(callee.end, |t| t.span.end);
        out.push(Call {
            path,
            span: callee.start..last.max(callee.end),
            args,
        });
    }
    out
}

/// Reads one argument: a lone string literal, a table constructor of literals, or other.
fn argument(tokens: &[Token], source: &str, base: usize) -> Arg {
    if let [single] = tokens
        && let Some(literal) = literal_of(single)
    {
        return Arg::Literal(literal);
    }
    let is_table = tokens
        .first()
        .is_some_and(|t| t.is_punct(source, base, "{"))
        && tokens.last().is_some_and(|t| t.is_punct(source, base, "}"))
        && matching(tokens, source, base, 0) == Some(tokens.len() - 1);
    if !is_table {
        return Arg::Other;
    }
    let inner = &tokens[1..tokens.len() - 1];
    let literal_only = inner.iter().enumerate().all(|(k, t)| match &t.kind {
        Kind::Str { value: Some(_), .. } | Kind::Number => true,
        Kind::Name => {
            let text = t.text(source, base);
            matches!(text, "true" | "false" | "nil")
                || inner
                    .get(k + 1)
                    .is_some_and(|n| n.is_punct(source, base, "="))
        }
        Kind::Punct => matches!(t.text(source, base), "," | ";" | "=" | "-"),
        _ => false,
    });
    if !literal_only {
        return Arg::Other;
    }
    let span = tokens[0].span.start..tokens[tokens.len() - 1].span.end;
    let items = inner.iter().filter_map(literal_of).collect();
    Arg::LiteralTable(span, items)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "---\nname: x\ndescription: d\npromptforge: 1\n---\n\n# T\n\n";

    fn index(body: &str) -> (String, Index) {
        let text = format!("{HEAD}{body}");
        let index = Index::build(&text);
        (text, index)
    }

    #[test]
    fn references_resolve_with_visibility() {
        let (_, index) = index(
            "```lua\njump(\"## A\")\n```\n\n## A\n\n```lua\nexecute(\"## B\", args)\njump \"### Kid\"\nfanout('### Nope', {})\nlist_from_section([[## A]])\n```\n\n### Kid\n\n## B\n",
        );
        let found: Vec<(RefCall, &str, &Target)> = index
            .refs
            .iter()
            .map(|r| (r.call, r.literal.value.as_str(), &r.target))
            .collect();
        assert_eq!(found[0], (RefCall::Jump, "## A", &Target::Found(vec![0])));
        assert_eq!(
            found[1],
            (RefCall::Execute, "## B", &Target::Found(vec![2]))
        );
        assert_eq!(
            found[2],
            (RefCall::Jump, "### Kid", &Target::Found(vec![1]))
        );
        assert_eq!(
            found[3],
            (RefCall::Fanout, "### Nope", &Target::NotVisible(vec![2, 1]))
        );
        assert_eq!(found[4].2, &Target::NotVisible(vec![2, 1]));
    }

    #[test]
    fn fanout_workers_see_their_callers_set() {
        let (_, index) = index(
            "## Main\n\n```lua\nfanout(\"### Worker\", {1, 2})\n```\n\n### Worker\n\n```lua\nexecute(\"## Other\")\n```\n\n## Other\n",
        );
        assert_eq!(index.arm_callers.get(&1), Some(&vec![Some(0)]));
        let execute = index.refs.iter().find(|r| r.call == RefCall::Execute);
        assert_eq!(execute.map(|r| &r.target), Some(&Target::Found(vec![2])));
    }

    #[test]
    fn vars_bindings_and_aliases() {
        let (text, index) = index(
            "```lua\nvar.topic = 'x'\nvar[\"count\"] = 1\nlocal k = var.topic .. var.missing\ntools.bind(\"search\", \"search the web\")\nmodels.default(\"m\", \"a writer\", { thinking = true, context = 8000 })\nmodels.bind(\"n\", \"a critic\", opts)\ntools.always(\"search\")\n```\n\n## A\n\nWrite about {{ var.topic }} and {{ var.count }}.\n\n```lua\ntools.add({\"search\"})\nstore.read(\"paper.md\")\n```\n",
        );
        let vars: Vec<(&str, VarRole)> = index
            .vars
            .iter()
            .map(|v| (v.name.as_str(), v.role))
            .collect();
        assert_eq!(
            vars,
            [
                ("topic", VarRole::Assigned),
                ("count", VarRole::Assigned),
                ("topic", VarRole::Lua),
                ("missing", VarRole::Lua),
                ("topic", VarRole::Placeholder),
                ("count", VarRole::Placeholder),
            ]
        );
        assert!(!index.dynamic_var_write);
        let kinds: Vec<BindingKind> = index.bindings.iter().map(|b| b.kind).collect();
        assert_eq!(
            kinds,
            [
                BindingKind::ToolBind,
                BindingKind::ModelDefault,
                BindingKind::ModelBind,
                BindingKind::ToolAlways
            ]
        );
        assert_eq!(
            index.bindings[1].opts,
            OptsArg::Literal("{ thinking = true, context = 8000 }".to_owned())
        );
        assert_eq!(index.bindings[2].opts, OptsArg::Dynamic);
        assert_eq!(
            &text[index.bindings[0].span.clone()],
            "tools.bind(\"search\", \"search the web\")"
        );
        let aliases: Vec<&str> = index
            .aliases
            .iter()
            .map(|a| a.literal.value.as_str())
            .collect();
        assert_eq!(aliases, ["search", "search"]);
        assert_eq!(index.store_paths[0].literal.value, "paper.md");
    }

    #[test]
    fn dynamic_var_writes_are_noticed() {
        let (_, index) = index("```lua\nvar[key] = 1\nlocal x = var[key]\n```\n");
        assert!(index.dynamic_var_write);
    }

    #[test]
    fn half_typed_calls_do_not_confuse_the_index() {
        let (_, index) = index("## A\n\n```lua\njump(\"## \nexecute(\nmodels.bind(\"m\", \n```\n");
        assert!(index.refs.iter().all(|r| r.literal.value == "## "));
        assert_eq!(index.bindings.len(), 1);
    }
}
