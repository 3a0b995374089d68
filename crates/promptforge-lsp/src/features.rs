//! The requests a document answers from its index alone: hover, completion, definition,
//! references, rename, document symbols, code actions, and the binding calls that inlay
//! hints and hovers ask the picker about.
//!
//! Every function takes byte offsets into the normalized text and returns LSP values whose
//! positions [`DocText`](crate::text::DocText) computed.

use std::collections::{BTreeSet, HashMap};
use std::ops::Range;

use lsp_types::{
    CodeAction, CodeActionKind, CompletionItem, CompletionItemKind, CompletionTextEdit,
    DocumentSymbol, Documentation, Hover, HoverContents, MarkupContent, MarkupKind,
    PrepareRenameResponse, Range as LspRange, SymbolKind, TextEdit, Url, WorkspaceEdit,
};
use promptforge_core::parse::{FRONTMATTER_FIELDS, Owner};
use promptforge_core::preview::ModelCall;

use crate::analysis::Analysis;
use crate::api::{self, ApiKind};
use crate::index::{
    Binding, BindingKind, Block, Index, Literal, OptsArg, RefCall, Target, VarRole,
};
use crate::lua::{Kind, escape_for};

/// At most this many completion items are returned.
pub(crate) const MAX_COMPLETIONS: usize = 1000;

/// What a picker preview is asked for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Query {
    Tool {
        alias: String,
        description: String,
    },
    Model {
        call: ModelCall,
        alias: String,
        description: String,
        /// The opts table as written, when there is one.
        opts: Option<String>,
    },
}

/// What a binding call shows: a picker question, or an answer known without one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BindingQuery {
    Ask(Query),
    Known { label: String, detail: String },
}

/// The binding call a position or a hint stands for.
#[derive(Debug, Clone)]
pub(crate) struct BindingSite {
    /// Where a hint goes: after the call.
    pub(crate) end: usize,
    /// The call's span, for a hover's range.
    pub(crate) span: Range<usize>,
    pub(crate) query: BindingQuery,
    /// The call's API entry (markdown), the base of a hover.
    pub(crate) doc: String,
}

/// The query a binding call stands for.
pub(crate) fn binding_query(index: &Index, binding: &Binding) -> BindingQuery {
    let dynamic = |what: &str| BindingQuery::Known {
        label: "→ decided at run time".to_owned(),
        detail: format!("The {what} is not a string literal, so only the run knows what it binds."),
    };
    let Some(alias) = &binding.alias else {
        return dynamic("alias");
    };
    let declared = |model: bool| {
        index.bindings.iter().find(|b| {
            let kind_matches = if model {
                matches!(b.kind, BindingKind::ModelBind | BindingKind::ModelDefault)
                    && b.has_description
            } else {
                b.kind == BindingKind::ToolBind
            };
            kind_matches && b.alias.as_ref().is_some_and(|a| a.value == alias.value)
        })
    };
    match binding.kind {
        BindingKind::ToolBind => match &binding.description {
            Some(description) => BindingQuery::Ask(Query::Tool {
                alias: alias.value.clone(),
                description: description.value.clone(),
            }),
            None => dynamic("description"),
        },
        BindingKind::ToolAlways => match declared(false) {
            Some(bind) => binding_query(index, bind),
            None => BindingQuery::Known {
                label: "→ not declared".to_owned(),
                detail: format!(
                    "No `tools.bind(\"{}\", …)` in this file: the run fails unless the alias is declared before this call.",
                    alias.value
                ),
            },
        },
        BindingKind::ModelBind | BindingKind::ModelDefault if binding.has_description => {
            let Some(description) = &binding.description else {
                return dynamic("description");
            };
            let opts = match &binding.opts {
                OptsArg::Absent => None,
                OptsArg::Literal(text) => Some(text.clone()),
                OptsArg::Dynamic => return dynamic("opts table"),
            };
            BindingQuery::Ask(Query::Model {
                call: if binding.kind == BindingKind::ModelBind {
                    ModelCall::Bind
                } else {
                    ModelCall::Default
                },
                alias: alias.value.clone(),
                description: description.value.clone(),
                opts,
            })
        }
        BindingKind::ModelBind | BindingKind::ModelDefault => match declared(true) {
            Some(bind) => binding_query(index, bind),
            None => BindingQuery::Known {
                label: "→ not declared".to_owned(),
                detail: format!(
                    "No `models.bind(\"{}\", …)` in this file: the run fails unless the model is declared before this call.",
                    alias.value
                ),
            },
        },
    }
}

fn binding_site(index: &Index, binding: &Binding) -> BindingSite {
    BindingSite {
        end: binding.span.end,
        span: binding.span.clone(),
        query: binding_query(index, binding),
        doc: api::lookup(binding.kind.callee())
            .map(api::markdown)
            .unwrap_or_default(),
    }
}

/// The binding calls whose span meets `range`, for inlay hints.
pub(crate) fn binding_sites(index: &Index, range: Range<usize>) -> Vec<BindingSite> {
    index
        .bindings
        .iter()
        .filter(|b| b.span.start <= range.end && b.span.end >= range.start)
        .map(|b| binding_site(index, b))
        .collect()
}

/// What a hover at a position shows.
#[derive(Debug)]
pub(crate) enum HoverAnswer {
    /// Nothing, or a hover known now.
    Now(Option<Hover>),
    /// A binding call: the picker adds what it binds to.
    Binding(BindingSite),
}

fn markdown_hover(value: String, range: Option<LspRange>) -> Hover {
    Hover {
        contents: HoverContents::Markup(MarkupContent {
            kind: MarkupKind::Markdown,
            value,
        }),
        range,
    }
}

/// The index of the token at `offset` in a block (a cursor right after a token is on it).
fn token_at(block: &Block, offset: usize) -> Option<usize> {
    block
        .tokens
        .iter()
        .position(|t| t.span.start <= offset && offset < t.span.end)
        .or_else(|| {
            block
                .tokens
                .iter()
                .position(|t| t.span.end == offset && t.kind == Kind::Name)
        })
}

/// The dotted path ending at name token `i` (`tools.bind` for `bind`), and its span.
fn dotted_path(block: &Block, text: &str, i: usize) -> (Vec<String>, Range<usize>) {
    let tokens = &block.tokens;
    let is = |k: usize, p: &str| {
        tokens
            .get(k)
            .is_some_and(|t| t.kind == Kind::Punct && &text[t.span.clone()] == p)
    };
    let mut start = i;
    while start >= 2 && is(start - 1, ".") && tokens[start - 2].kind == Kind::Name {
        start -= 2;
    }
    let path = (start..=i)
        .step_by(2)
        .map(|k| text[tokens[k].span.clone()].to_owned())
        .collect();
    (path, tokens[start].span.start..tokens[i].span.end)
}

fn section_markdown(index: &Index, id: usize) -> String {
    let Some(section) = index.outline.sections().get(id) else {
        return String::new();
    };
    let mut facts = vec![format!("line {}", section.line())];
    if section.is_off_walk() {
        facts.push("off the walk".to_owned());
    }
    if !section.children().is_empty() {
        facts.push(format!("{} child sections", section.children().len()));
    }
    if section.has_items() {
        facts.push("list items".to_owned());
    }
    let blocks = index
        .blocks
        .iter()
        .filter(|b| b.owner == Owner::Section(id))
        .count();
    facts.push(format!("{blocks} Lua blocks"));
    let references = index.refs_to(id).count();
    facts.push(format!("referenced {references} times"));
    format!("**`{}`**\n\n{}", section.address(), facts.join(" · "))
}

fn var_markdown(index: &Index, analysis: &Analysis, name: &str) -> String {
    let assigned: Vec<String> = index
        .vars
        .iter()
        .filter(|v| v.name == name && v.role == VarRole::Assigned)
        .map(|v| (analysis.text.position(v.span.start).line + 1).to_string())
        .collect();
    let where_ = if assigned.is_empty() {
        "never assigned in this file".to_owned()
    } else {
        format!("assigned on line {}", assigned.join(", "))
    };
    format!(
        "```lua\nvar.{name}\n```\nA walk variable: {where_}. `var` persists across the sections of a walk; `execute` and `fanout` get a copy."
    )
}

fn placeholder_root_doc(root: &str) -> Option<String> {
    match root {
        "args" | "reply" | "var" | "sys" | "item" => api::lookup(root).map(api::markdown),
        _ => Some(format!(
            "`{root}`: a section-local Lua global (assigned without `local` in this section's Lua); a missing one fails the render."
        )),
    }
}

/// The hover at `offset`.
pub(crate) fn hover(analysis: &Analysis, offset: usize) -> HoverAnswer {
    let index = analysis.index();
    let text = analysis.text.normalized();
    let range = |span: Range<usize>| Some(analysis.text.range(span));
    if let Some(id) = index.heading_at(offset) {
        let span = index.outline.sections()[id].heading().span();
        return HoverAnswer::Now(Some(markdown_hover(
            section_markdown(index, id),
            range(span),
        )));
    }
    if let Some(front) = index.outline.frontmatter()
        && front.yaml().contains(&offset)
    {
        let entries = front.entries();
        let entry = entries
            .iter()
            .find(|e| e.key_span().start <= offset && offset <= e.key_span().end);
        let answer = entry.and_then(|entry| {
            let key = match entry.parent().and_then(|p| entries.get(p)) {
                Some(parent) => format!("{}.{}", parent.key(), entry.key()),
                None => entry.key().to_owned(),
            };
            let field = FRONTMATTER_FIELDS.iter().find(|f| f.key == key)?;
            let required = if field.required {
                "required"
            } else {
                "optional"
            };
            Some(markdown_hover(
                format!(
                    "**`{}`** ({required}): {}\n\n{}",
                    field.key, field.kind, field.doc
                ),
                range(entry.key_span()),
            ))
        });
        return HoverAnswer::Now(answer);
    }

    if let Some(block) = index.block_at(offset) {
        if let Some(binding) = index
            .bindings
            .iter()
            .find(|b| b.span.start <= offset && offset < b.span.end)
        {
            return HoverAnswer::Binding(binding_site(index, binding));
        }
        if let Some(reference) = index.refs.iter().find(|r| r.literal.span.contains(&offset)) {
            let value = match &reference.target {
                Target::Found(ids) => ids
                    .iter()
                    .map(|&id| section_markdown(index, id))
                    .collect::<Vec<_>>()
                    .join("\n\n---\n\n"),
                _ => format!("No visible section is `{}`.", reference.literal.value),
            };
            return HoverAnswer::Now(Some(markdown_hover(
                value,
                range(reference.literal.span.clone()),
            )));
        }
        if let Some(site) = index.vars.iter().find(|v| {
            v.role != VarRole::Placeholder && v.span.start <= offset && offset <= v.span.end
        }) {
            return HoverAnswer::Now(Some(markdown_hover(
                var_markdown(index, analysis, &site.name),
                range(site.span.clone()),
            )));
        }
        let Some(i) = token_at(block, offset) else {
            return HoverAnswer::Now(None);
        };
        if block.tokens[i].kind != Kind::Name {
            return HoverAnswer::Now(None);
        }
        let (path, span) = dotted_path(block, text, i);
        let name = path.join(".");
        if let Some(entry) = api::lookup(&name) {
            return HoverAnswer::Now(Some(markdown_hover(api::markdown(entry), range(span))));
        }
        if path.len() == 1
            && let Some(binding) = declaration_of(index, &path[0], None)
        {
            let what = if matches!(binding.kind, BindingKind::ToolBind) {
                "tool"
            } else {
                "model"
            };
            let description = binding
                .description
                .as_ref()
                .map_or_else(String::new, |d| format!(": \"{}\"", d.value));
            return HoverAnswer::Now(Some(markdown_hover(
                format!(
                    "`{}`: the declared {what} alias{description} (line {})",
                    path[0],
                    analysis.text.position(binding.span.start).line + 1
                ),
                range(span),
            )));
        }
        return HoverAnswer::Now(None);
    }
    if let Some(placeholder) = index
        .outline
        .placeholders()
        .iter()
        .find(|p| p.span().contains(&offset))
    {
        let Some(path) = placeholder.path() else {
            return HoverAnswer::Now(None);
        };
        let value = if path.len() >= 2 && path[0] == "var" {
            Some(var_markdown(index, analysis, &path[1]))
        } else if path.len() >= 2 && path[0] == "sys" {
            api::lookup(&format!("sys.{}", path[1])).map(api::markdown)
        } else {
            placeholder_root_doc(&path[0])
        };
        return HoverAnswer::Now(value.map(|v| markdown_hover(v, range(placeholder.span()))));
    }
    HoverAnswer::Now(None)
}

/// The declaring `tools.bind` / `models.bind` / `models.default(alias, description)` call
/// of `alias` (of either kind when `model` is `None`).
fn declaration_of<'i>(index: &'i Index, alias: &str, model: Option<bool>) -> Option<&'i Binding> {
    index.bindings.iter().find(|b| {
        let is_model = matches!(b.kind, BindingKind::ModelBind | BindingKind::ModelDefault);
        let declares = b.kind == BindingKind::ToolBind || (is_model && b.has_description);
        declares
            && model.is_none_or(|m| m == is_model)
            && b.alias.as_ref().is_some_and(|a| a.value == alias)
    })
}

/// What the cursor is on, for navigation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Symbol {
    Sections(Vec<usize>),
    Var(String),
    Alias { model: bool, name: String },
    StorePath(String),
}

/// The symbol at `offset` and the span it occupies there.
pub(crate) fn symbol_at(analysis: &Analysis, offset: usize) -> Option<(Symbol, Range<usize>)> {
    let index = analysis.index();
    let within = |span: &Range<usize>| span.start <= offset && offset <= span.end;
    if let Some(id) = index.heading_at(offset) {
        return Some((
            Symbol::Sections(vec![id]),
            index.outline.sections()[id].heading().name_span(),
        ));
    }
    if let Some(reference) = index.refs.iter().find(|r| within(&r.literal.span)) {
        return match &reference.target {
            Target::Found(ids) => Some((
                Symbol::Sections(ids.clone()),
                reference.literal.content.clone(),
            )),
            _ => None,
        };
    }
    if let Some(site) = index.vars.iter().find(|v| within(&v.span)) {
        return Some((Symbol::Var(site.name.clone()), site.span.clone()));
    }
    if let Some(alias) = index.aliases.iter().find(|a| within(&a.literal.span)) {
        return Some((
            Symbol::Alias {
                model: alias.model,
                name: alias.literal.value.clone(),
            },
            alias.literal.content.clone(),
        ));
    }
    for binding in &index.bindings {
        if let Some(alias) = binding.alias.as_ref().filter(|a| within(&a.span)) {
            let model = !matches!(
                binding.kind,
                BindingKind::ToolBind | BindingKind::ToolAlways
            );
            return Some((
                Symbol::Alias {
                    model,
                    name: alias.value.clone(),
                },
                alias.content.clone(),
            ));
        }
    }
    if let Some(path) = index.store_paths.iter().find(|p| within(&p.literal.span)) {
        return Some((
            Symbol::StorePath(path.literal.value.clone()),
            path.literal.content.clone(),
        ));
    }
    let block = index.block_at(offset)?;
    let i = token_at(block, offset)?;
    let token = &block.tokens[i];
    if token.kind == Kind::Name {
        let (path, _) = dotted_path(block, analysis.text.normalized(), i);
        if let [name] = path.as_slice()
            && let Some(binding) = declaration_of(index, name, None)
        {
            let model = binding.kind != BindingKind::ToolBind;
            return Some((
                Symbol::Alias {
                    model,
                    name: name.clone(),
                },
                token.span.clone(),
            ));
        }
    }
    None
}

/// Where a symbol is defined.
pub(crate) fn definition(analysis: &Analysis, offset: usize) -> Vec<Range<usize>> {
    let index = analysis.index();
    let Some((symbol, _)) = symbol_at(analysis, offset) else {
        return Vec::new();
    };
    match symbol {
        Symbol::Sections(ids) => ids
            .iter()
            .filter_map(|&id| index.outline.sections().get(id))
            .map(|s| s.heading().span())
            .collect(),
        Symbol::Var(name) => index
            .vars
            .iter()
            .filter(|v| v.name == name && v.role == VarRole::Assigned)
            .map(|v| v.span.clone())
            .collect(),
        Symbol::Alias { model, name } => declaration_of(index, &name, Some(model))
            .and_then(|b| b.alias.as_ref())
            .map(|a| vec![a.content.clone()])
            .unwrap_or_default(),
        Symbol::StorePath(path) => declared_paths(analysis)
            .into_iter()
            .filter(|(value, _)| *value == path)
            .map(|(_, span)| span)
            .collect(),
    }
}

/// The `path:` values of the frontmatter's `input` and `output`, with their spans.
fn declared_paths(analysis: &Analysis) -> Vec<(String, Range<usize>)> {
    let index = analysis.index();
    let text = analysis.text.normalized();
    let Some(front) = index.outline.frontmatter() else {
        return Vec::new();
    };
    let entries = front.entries();
    entries
        .iter()
        .filter(|e| {
            e.key() == "path"
                && e.parent()
                    .and_then(|p| entries.get(p))
                    .is_some_and(|p| matches!(p.key(), "input" | "output"))
        })
        .filter_map(|e| {
            let rest = &text[e.key_span().end..];
            let line = &rest[..rest.find('\n').unwrap_or(rest.len())];
            let after_colon = line.find(':')? + 1;
            let raw = &line[after_colon..];
            let value = raw.split(" #").next().unwrap_or("").trim();
            let unquoted = value.trim_matches(|c| c == '"' || c == '\'');
            let start = e.key_span().end + after_colon + raw.find(unquoted)?;
            Some((unquoted.to_owned(), start..start + unquoted.len()))
        })
        .collect()
}

/// Every place a symbol appears.
pub(crate) fn references(
    analysis: &Analysis,
    offset: usize,
    include_declaration: bool,
) -> Vec<Range<usize>> {
    let index = analysis.index();
    let Some((symbol, _)) = symbol_at(analysis, offset) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    match symbol {
        Symbol::Sections(ids) => {
            for id in ids {
                if include_declaration && let Some(section) = index.outline.sections().get(id) {
                    out.push(section.heading().name_span());
                }
                out.extend(index.refs_to(id).map(|r| r.literal.content.clone()));
            }
        }
        Symbol::Var(name) => out.extend(
            index
                .vars
                .iter()
                .filter(|v| v.name == name && (include_declaration || v.role != VarRole::Assigned))
                .map(|v| v.span.clone()),
        ),
        Symbol::Alias { model, name } => {
            if include_declaration
                && let Some(alias) =
                    declaration_of(index, &name, Some(model)).and_then(|b| b.alias.as_ref())
            {
                out.push(alias.content.clone());
            }
            out.extend(
                index
                    .aliases
                    .iter()
                    .filter(|a| a.model == model && a.literal.value == name)
                    .map(|a| a.literal.content.clone()),
            );
        }
        Symbol::StorePath(path) => {
            if include_declaration {
                out.extend(
                    declared_paths(analysis)
                        .into_iter()
                        .filter(|(v, _)| *v == path)
                        .map(|(_, s)| s),
                );
            }
            out.extend(
                index
                    .store_paths
                    .iter()
                    .filter(|p| p.literal.value == path)
                    .map(|p| p.literal.content.clone()),
            );
        }
    }
    out.sort_by_key(|r| r.start);
    out.dedup();
    out
}

/// The section a rename at `offset` renames, and the span the client shows.
fn rename_target(analysis: &Analysis, offset: usize) -> Option<(usize, Range<usize>)> {
    match symbol_at(analysis, offset)? {
        (Symbol::Sections(ids), span) if ids.len() == 1 => Some((ids[0], span)),
        _ => None,
    }
}

/// `textDocument/prepareRename`: the name under the cursor, when it names a section.
pub(crate) fn prepare_rename(analysis: &Analysis, offset: usize) -> Option<PrepareRenameResponse> {
    let (id, span) = rename_target(analysis, offset)?;
    let name = analysis
        .index()
        .outline
        .sections()
        .get(id)?
        .name()
        .to_owned();
    let range = analysis.text.range(span);
    Some(PrepareRenameResponse::RangeWithPlaceholder {
        range,
        placeholder: name,
    })
}

/// `textDocument/rename` of a section: its heading and every reference that resolves to
/// it. The new name is the heading text without `#` marks.
pub(crate) fn rename(
    analysis: &Analysis,
    offset: usize,
    new_name: &str,
) -> Result<Vec<(Range<usize>, String)>, String> {
    let index = analysis.index();
    let Some((id, _)) = rename_target(analysis, offset) else {
        return Err("only a section heading or a section reference can be renamed here".to_owned());
    };
    let name = new_name.trim();
    if name.is_empty() || name.contains(['\n', '\r']) {
        return Err("a section name is one non-empty line".to_owned());
    }
    if name.starts_with('#') {
        return Err("give the heading text without its `#` marks (the level stays)".to_owned());
    }
    let sections = index.outline.sections();
    let Some(section) = sections.get(id) else {
        return Err("the section is gone".to_owned());
    };
    let siblings: &[usize] = match section.parent() {
        Some(parent) => sections.get(parent).map_or(&[][..], |p| p.children()),
        None => index.outline.roots(),
    };
    if let Some(twin) = siblings
        .iter()
        .filter(|&&s| s != id)
        .filter_map(|&s| sections.get(s))
        .find(|s| s.name() == name)
    {
        return Err(format!(
            "`{}` already has a sibling named `{name}` (line {}); sibling names must be unique",
            section.address(),
            twin.line()
        ));
    }
    let address = format!("{} {name}", "#".repeat(usize::from(section.level())));
    let mut edits = vec![(section.heading().name_span(), name.to_owned())];
    for reference in index.refs_to(id) {
        let only_this = matches!(&reference.target, Target::Found(ids) if ids.len() == 1);
        if only_this {
            edits.push((
                reference.literal.content.clone(),
                escape_for(&reference.literal.open, &address),
            ));
        }
    }
    edits.sort_by_key(|(span, _)| span.start);
    Ok(edits)
}

/// Turns span edits into a workspace edit on one document.
pub(crate) fn workspace_edit(
    analysis: &Analysis,
    uri: &Url,
    edits: Vec<(Range<usize>, String)>,
) -> WorkspaceEdit {
    let edits = edits
        .into_iter()
        .map(|(span, new_text)| TextEdit::new(analysis.text.range(span), new_text))
        .collect();
    WorkspaceEdit::new(HashMap::from([(uri.clone(), edits)]))
}

/// The section outline.
pub(crate) fn document_symbols(analysis: &Analysis) -> Vec<DocumentSymbol> {
    let index = analysis.index();
    let sections = index.outline.sections();
    let text_len = analysis.text.normalized().len();
    // The end of a section with its descendants: the start of the next section that is
    // not a descendant, or the end of the text.
    let extent = |id: usize| -> usize {
        let level = sections[id].level();
        sections[id + 1..]
            .iter()
            .find(|s| s.level() <= level)
            .map_or(text_len, |s| s.heading().span().start)
    };
    #[allow(deprecated)]
    fn build(
        analysis: &Analysis,
        ids: &[usize],
        extent: &dyn Fn(usize) -> usize,
    ) -> Vec<DocumentSymbol> {
        let sections = analysis.index().outline.sections();
        ids.iter()
            .filter_map(|&id| {
                let section = sections.get(id)?;
                let heading = section.heading();
                let mut detail = vec![section.address()];
                if section.is_off_walk() {
                    detail.push("off the walk".to_owned());
                }
                let name = if section.name().is_empty() {
                    "(empty heading)".to_owned()
                } else {
                    section.name().to_owned()
                };
                Some(DocumentSymbol {
                    name,
                    detail: Some(detail.join(" · ")),
                    kind: SymbolKind::NAMESPACE,
                    tags: None,
                    deprecated: None,
                    range: analysis.text.range(heading.span().start..extent(id)),
                    selection_range: analysis.text.range(heading.span()),
                    children: Some(build(analysis, section.children(), extent)),
                })
            })
            .collect()
    }
    build(analysis, index.outline.roots(), &extent)
}

/// The quick fixes whose diagnostic meets `range`.
pub(crate) fn code_actions(analysis: &Analysis, uri: &Url, range: Range<usize>) -> Vec<CodeAction> {
    analysis
        .fixes()
        .into_iter()
        .filter(|fix| fix.diagnostic.start <= range.end && fix.diagnostic.end >= range.start)
        .map(|fix| CodeAction {
            title: fix.title.clone(),
            kind: Some(CodeActionKind::QUICKFIX),
            is_preferred: Some(true),
            edit: Some(workspace_edit(
                analysis,
                uri,
                vec![(fix.edit.clone(), fix.new_text.clone())],
            )),
            ..CodeAction::default()
        })
        .collect()
}

fn item(
    label: &str,
    kind: CompletionItemKind,
    detail: Option<String>,
    doc: Option<String>,
) -> CompletionItem {
    CompletionItem {
        label: label.to_owned(),
        kind: Some(kind),
        detail,
        documentation: doc.map(|value| {
            Documentation::MarkupContent(MarkupContent {
                kind: MarkupKind::Markdown,
                value,
            })
        }),
        ..CompletionItem::default()
    }
}

fn with_edit(mut item: CompletionItem, range: LspRange, new_text: String) -> CompletionItem {
    item.filter_text = Some(new_text.clone());
    item.text_edit = Some(CompletionTextEdit::Edit(TextEdit::new(range, new_text)));
    item
}

fn api_item(entry: &api::ApiEntry, label: &str) -> CompletionItem {
    let kind = match entry.kind {
        ApiKind::Function => CompletionItemKind::FUNCTION,
        ApiKind::Table => CompletionItemKind::MODULE,
        ApiKind::Field => CompletionItemKind::FIELD,
    };
    item(
        label,
        kind,
        Some(entry.signature.to_owned()),
        Some(entry.doc.to_owned()),
    )
}

/// The completions at `offset`.
pub(crate) fn completion(analysis: &Analysis, offset: usize) -> Vec<CompletionItem> {
    let index = analysis.index();
    let mut items = if index
        .outline
        .frontmatter()
        .is_some_and(|f| f.yaml().start <= offset && offset <= f.yaml().end)
    {
        frontmatter_completion(analysis, offset)
    } else if let Some(block) = index.block_at(offset) {
        lua_completion(analysis, block, offset)
    } else {
        prose_completion(analysis, offset)
    };
    items.truncate(MAX_COMPLETIONS);
    items
}

fn frontmatter_completion(analysis: &Analysis, offset: usize) -> Vec<CompletionItem> {
    let index = analysis.index();
    let text = analysis.text.normalized();
    let line_start = text[..offset].rfind('\n').map_or(0, |at| at + 1);
    let before = &text[line_start..offset];
    if before.contains(':') || before.trim_start().starts_with(['#', '-']) {
        return Vec::new();
    }
    let indent = before.len() - before.trim_start().len();
    let Some(front) = index.outline.frontmatter() else {
        return Vec::new();
    };
    let entries = front.entries();
    let parent = if indent == 0 {
        None
    } else {
        let Some(parent) = entries
            .iter()
            .rev()
            .find(|e| e.parent().is_none() && e.key_span().start < line_start)
        else {
            return Vec::new();
        };
        Some(parent.key())
    };
    let present: BTreeSet<String> = entries
        .iter()
        .filter(|e| e.parent().and_then(|p| entries.get(p)).map(|p| p.key()) == parent)
        .filter(|e| !(e.key_span().start <= offset && offset <= e.key_span().end))
        .map(|e| e.key().to_owned())
        .collect();
    let range = analysis.text.range(line_start + indent..offset);
    FRONTMATTER_FIELDS
        .iter()
        .filter_map(|field| {
            let key = match (parent, field.key.split_once('.')) {
                (None, None) => field.key,
                (Some(p), Some((head, child))) if head == p => child,
                _ => return None,
            };
            if present.contains(key) || !key.starts_with(before.trim_start()) {
                return None;
            }
            let required = if field.required {
                "required"
            } else {
                "optional"
            };
            let completion = item(
                key,
                CompletionItemKind::PROPERTY,
                Some(format!("{} ({required})", field.kind)),
                Some(field.doc.to_owned()),
            );
            Some(with_edit(completion, range, format!("{key}: ")))
        })
        .collect()
}

fn lua_completion(analysis: &Analysis, block: &Block, offset: usize) -> Vec<CompletionItem> {
    let index = analysis.index();
    let text = analysis.text.normalized();
    if block
        .comments
        .iter()
        .any(|c| c.start < offset && offset <= c.end)
    {
        return Vec::new();
    }
    let tokens = &block.tokens;
    let is = |k: usize, p: &str| {
        tokens
            .get(k)
            .is_some_and(|t| t.kind == Kind::Punct && &text[t.span.clone()] == p)
    };
    let name_at = |k: usize| {
        tokens
            .get(k)
            .filter(|t| t.kind == Kind::Name)
            .map(|t| &text[t.span.clone()])
    };
    // Inside a string literal: a section address or an alias.
    if let Some(i) = tokens.iter().position(|t| match &t.kind {
        Kind::Str { content, .. } => content.start <= offset && offset <= content.end,
        _ => false,
    }) {
        let Kind::Str { content, open, .. } = &tokens[i].kind else {
            return Vec::new();
        };
        // The callee: `f("…")` or `f "…"`, not preceded by `.` or `:` for a global.
        let callee_at = if i >= 1 && is(i - 1, "(") {
            i.checked_sub(2)
        } else {
            i.checked_sub(1)
        };
        let Some(callee_at) = callee_at else {
            return Vec::new();
        };
        let first_argument = callee_at + 1 == i || (callee_at + 2 == i && is(callee_at + 1, "("));
        if !first_argument {
            return Vec::new();
        }
        let Some(callee) = name_at(callee_at) else {
            return Vec::new();
        };
        let (path, _) = dotted_path(block, text, callee_at);
        let global = path.len() == 1;
        let range = analysis.text.range(content.clone());
        let escape = |value: &str| escape_for(open, value);
        if global && let Some(call) = ref_call(callee) {
            return index
                .addressable(block.owner)
                .into_iter()
                .filter_map(|id| index.outline.sections().get(id))
                .filter(|s| call != RefCall::ListFromSection || s.has_items())
                .map(|s| {
                    let address = s.address();
                    let completion = item(
                        &address,
                        CompletionItemKind::REFERENCE,
                        Some(format!("line {}", s.line())),
                        None,
                    );
                    with_edit(completion, range, escape(&address))
                })
                .collect();
        }
        let model = match path.join(".").as_str() {
            "tools.add" | "tools.always" => false,
            "models.use" | "models.get" | "models.default" => true,
            _ => return Vec::new(),
        };
        return declared_aliases(index, model)
            .into_iter()
            .map(|alias| {
                let kind = if model { "model" } else { "tool" };
                with_edit(
                    item(
                        &alias,
                        CompletionItemKind::VALUE,
                        Some(format!("declared {kind}")),
                        None,
                    ),
                    range,
                    escape(&alias),
                )
            })
            .collect();
    }
    // After `table.` (with or without a started name).
    let before = tokens.iter().rposition(|t| t.span.end <= offset);
    let (typed, dot_at) = match before {
        Some(k) if tokens[k].kind == Kind::Name && tokens[k].span.end == offset => (
            &text[tokens[k].span.clone()],
            k.checked_sub(1).filter(|&d| is(d, ".")),
        ),
        Some(k) if is(k, ".") && tokens[k].span.end == offset => ("", Some(k)),
        // Right after a number, a string or an unknown character: nothing to complete.
        Some(k)
            if tokens[k].span.end == offset
                && matches!(
                    tokens[k].kind,
                    Kind::Number | Kind::Str { .. } | Kind::Unknown
                ) =>
        {
            return Vec::new();
        }
        _ => ("", None),
    };
    let start = offset - typed.len();
    let range = analysis.text.range(start..offset);
    let named =
        |label: &str, kind: CompletionItemKind, detail: Option<String>, doc: Option<String>| {
            with_edit(item(label, kind, detail, doc), range, label.to_owned())
        };
    let mut out = Vec::new();
    if let Some(dot) = dot_at {
        let Some(table_at) = dot.checked_sub(1).filter(|&t| tokens[t].kind == Kind::Name) else {
            return Vec::new();
        };
        let (path, _) = dotted_path(block, text, table_at);
        let table = path.join(".");
        match table.as_str() {
            "var" => {
                let names: BTreeSet<&str> = index.vars.iter().map(|v| v.name.as_str()).collect();
                out.extend(names.into_iter().map(|n| {
                    named(
                        n,
                        CompletionItemKind::VARIABLE,
                        Some("var".to_owned()),
                        None,
                    )
                }));
            }
            "tools.calls" => out.extend(declared_aliases(index, false).iter().map(|a| {
                named(
                    a,
                    CompletionItemKind::FIELD,
                    Some("call count".to_owned()),
                    None,
                )
            })),
            _ => {
                for entry in api::members(&table) {
                    let label = entry.name.rsplit('.').next().unwrap_or(entry.name);
                    out.push(with_edit(api_item(entry, label), range, label.to_owned()));
                }
                if let Some((_, members)) =
                    api::LIBRARY_MEMBERS.iter().find(|(lib, _)| *lib == table)
                {
                    out.extend(members.iter().map(|m| {
                        named(
                            m,
                            CompletionItemKind::FUNCTION,
                            Some(format!("{table}.{m}")),
                            None,
                        )
                    }));
                }
                if path.len() == 1 && declared_aliases(index, true).contains(&table) {
                    out.extend(api::MODEL_HANDLE_FIELDS.iter().map(|(field, doc)| {
                        named(
                            field,
                            CompletionItemKind::FIELD,
                            None,
                            Some((*doc).to_owned()),
                        )
                    }));
                }
            }
        }
    } else {
        for entry in api::globals() {
            out.push(with_edit(
                api_item(entry, entry.name),
                range,
                entry.name.to_owned(),
            ));
        }
        for (model, kind) in [(false, "tool"), (true, "model")] {
            out.extend(declared_aliases(index, model).iter().map(|a| {
                named(
                    a,
                    CompletionItemKind::VARIABLE,
                    Some(format!("declared {kind} alias")),
                    None,
                )
            }));
        }
    }
    out.retain(|i| i.label.starts_with(typed));
    out
}

/// The aliases declared in the file with a literal (tools or models).
fn declared_aliases(index: &Index, model: bool) -> Vec<String> {
    let mut seen = BTreeSet::new();
    index
        .bindings
        .iter()
        .filter(|b| {
            if model {
                matches!(b.kind, BindingKind::ModelBind | BindingKind::ModelDefault)
                    && b.has_description
            } else {
                b.kind == BindingKind::ToolBind
            }
        })
        .filter_map(|b| b.alias.as_ref().map(|a: &Literal| a.value.clone()))
        .filter(|a| seen.insert(a.clone()))
        .collect()
}

fn ref_call(name: &str) -> Option<RefCall> {
    match name {
        "jump" => Some(RefCall::Jump),
        "execute" => Some(RefCall::Execute),
        "fanout" => Some(RefCall::Fanout),
        "list_from_section" => Some(RefCall::ListFromSection),
        _ => None,
    }
}

fn prose_completion(analysis: &Analysis, offset: usize) -> Vec<CompletionItem> {
    let index = analysis.index();
    let text = analysis.text.normalized();
    let line_start = text[..offset].rfind('\n').map_or(0, |at| at + 1);
    let before = &text[line_start..offset];
    let Some(open) = before.rfind("{{") else {
        return Vec::new();
    };
    if before[open..].contains("}}") || (open > 0 && before.as_bytes()[open - 1] == b'\\') {
        return Vec::new();
    }
    let typed = before[open + 2..].trim_start();
    if typed.contains(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.')) {
        return Vec::new();
    }
    let (root, prefix) = match typed.rsplit_once('.') {
        Some((root, prefix)) => (Some(root), prefix),
        None => (None, typed),
    };
    let range = analysis.text.range(offset - prefix.len()..offset);
    let named = |label: &str, kind: CompletionItemKind, doc: Option<String>| {
        with_edit(item(label, kind, None, doc), range, label.to_owned())
    };
    let mut out: Vec<CompletionItem> = match root {
        None => ["args", "reply", "var", "sys", "item"]
            .iter()
            .map(|r| {
                named(
                    r,
                    CompletionItemKind::VARIABLE,
                    api::lookup(r).map(api::markdown),
                )
            })
            .collect(),
        Some("var") => index
            .vars
            .iter()
            .map(|v| v.name.as_str())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .map(|n| {
                named(
                    n,
                    CompletionItemKind::VARIABLE,
                    Some(var_markdown(index, analysis, n)),
                )
            })
            .collect(),
        Some("sys") => api::members("sys")
            .into_iter()
            .map(|e| {
                let label = e.name.rsplit('.').next().unwrap_or(e.name);
                named(label, CompletionItemKind::FIELD, Some(api::markdown(e)))
            })
            .collect(),
        Some(_) => Vec::new(),
    };
    out.retain(|i| i.label.starts_with(prefix));
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::text::LineIndex;

    const HEAD: &str = "---\nname: x\ndescription: d\npromptforge: 1\n---\n\n# T\n\n";

    fn analyse(body: &str) -> (String, Analysis) {
        let text = format!("{HEAD}{body}");
        let analysis = Analysis::new(
            1,
            text.clone(),
            Arc::new(LineIndex::new(&text)),
            "t.md".to_owned(),
        );
        (text, analysis)
    }

    fn at(text: &str, needle: &str, shift: usize) -> usize {
        text.find(needle).map_or(usize::MAX, |i| i + shift)
    }

    #[test]
    fn definition_and_references_of_a_section() {
        let (text, analysis) = analyse(
            "## A\n\n```lua\njump(\"## B\")\n```\n\n## B\n\n```lua\nexecute(\"## A\")\n```\n",
        );
        let found = definition(&analysis, at(&text, "## B\"", 1));
        assert_eq!(
            found.iter().map(|r| &text[r.clone()]).collect::<Vec<_>>(),
            ["## B"]
        );
        let refs = references(&analysis, at(&text, "## A\n", 3), true);
        assert_eq!(
            refs.iter().map(|r| &text[r.clone()]).collect::<Vec<_>>(),
            ["A", "## A"]
        );
    }

    #[test]
    fn rename_rewrites_the_heading_and_its_references() {
        let (text, analysis) =
            analyse("## A\n\n```lua\njump('## B')\n```\n\n## B\n\n### B\n\n```lua\nx = 1\n```\n");
        let edits = rename(&analysis, at(&text, "## B\n", 3), "Beta").unwrap_or_default();
        let shown: Vec<(&str, &str)> = edits
            .iter()
            .map(|(r, t)| (&text[r.clone()], t.as_str()))
            .collect();
        assert_eq!(shown, [("## B", "## Beta"), ("B", "Beta")]);
        assert!(rename(&analysis, at(&text, "## A", 3), "B").is_err());
        assert!(rename(&analysis, at(&text, "## A", 3), "## C").is_err());
    }

    #[test]
    fn completion_offers_visible_sections_inside_a_target() {
        let (text, analysis) = analyse("## A\n\n```lua\njump(\"\")\n```\n\n### Kid\n\n## B\n");
        let labels: Vec<String> = completion(&analysis, at(&text, "jump(\"", 6))
            .into_iter()
            .map(|i| i.label)
            .collect();
        assert_eq!(labels, ["## B", "### Kid"]);
    }

    #[test]
    fn completion_offers_api_members_and_frontmatter_keys() {
        let (text, analysis) = analyse("## A\n\n```lua\ntools.b\n```\n");
        let labels: Vec<String> = completion(&analysis, at(&text, "tools.b", 7))
            .into_iter()
            .map(|i| i.label)
            .collect();
        assert_eq!(labels, ["bind"]);
        let source = "---\nname: x\nmax\n---\n\n# T\n";
        let analysis = Analysis::new(
            1,
            source.to_owned(),
            Arc::new(LineIndex::new(source)),
            "t.md".to_owned(),
        );
        let labels: Vec<String> = completion(&analysis, at(source, "max", 3))
            .into_iter()
            .map(|i| i.label)
            .collect();
        assert!(
            labels.contains(&"max_tool_iterations".to_owned())
                && !labels.contains(&"name".to_owned()),
            "{labels:?}"
        );
    }

    #[test]
    fn placeholders_complete_var_names() {
        let (text, analysis) = analyse("```lua\nvar.topic = 1\n```\n\n## A\n\nAbout {{ var.to\n");
        let labels: Vec<String> = completion(&analysis, at(&text, "var.to\n", 6))
            .into_iter()
            .map(|i| i.label)
            .collect();
        assert_eq!(labels, ["topic"]);
    }

    #[test]
    fn binding_queries_follow_aliases() {
        let (_, analysis) = analyse(
            "```lua\ntools.bind(\"s\", \"search the web\")\ntools.always(\"s\")\nmodels.default(\"w\")\n```\n",
        );
        let index = analysis.index();
        let queries: Vec<BindingQuery> = index
            .bindings
            .iter()
            .map(|b| binding_query(index, b))
            .collect();
        let tool = BindingQuery::Ask(Query::Tool {
            alias: "s".to_owned(),
            description: "search the web".to_owned(),
        });
        assert_eq!(queries[0], tool);
        assert_eq!(queries[1], tool);
        assert!(
            matches!(&queries[2], BindingQuery::Known { label, .. } if label == "→ not declared")
        );
    }
}
