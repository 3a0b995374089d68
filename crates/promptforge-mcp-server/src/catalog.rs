//! The prompt catalog: glob resolution, parsing once per generation, name lookup.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use globset::{Glob, GlobBuilder, GlobMatcher};
use promptforge_core::{NullObserver, Prompt, promptforge_version};

use crate::config::CatalogConfig;

/// The four tool names no prompt may take.
pub const RESERVED: [&str; 4] = ["list_prompts", "run_prompt", "need_prompt", "check_run"];

/// The largest prompt file the catalog reads: 1 MiB.
pub const MAX_PROMPT_BYTES: u64 = 1024 * 1024;

/// The most files the catalog walk looks at under the prompts directory.
pub const MAX_WALK_FILES: usize = 20_000;

/// The deepest directory level the catalog walk descends to.
pub const MAX_WALK_DEPTH: usize = 32;

/// Whether `name` has the prompt-name shape `^[a-z][a-z0-9_]{0,47}$`.
pub fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some('a'..='z'))
        && name.len() <= 48
        && chars.all(|c| matches!(c, 'a'..='z' | '0'..='9' | '_'))
}

/// Folds a requested name: lower case, `-` as `_`.
pub fn normalize(name: &str) -> String {
    name.trim()
        .chars()
        .map(|c| {
            if c == '-' {
                '_'
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect()
}

/// Compiles a catalog glob: `*` stays within a path segment, `**` crosses segments.
pub fn glob(pattern: &str) -> Result<GlobMatcher, String> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map(|g: Glob| g.compile_matcher())
        .map_err(|e| format!("`{pattern}` is not a valid glob: {e}"))
}

/// A declared store file (`input` or `output`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Declared {
    /// The store path.
    pub path: String,
    /// What it holds.
    pub description: String,
}

/// One catalog entry: a runnable prompt or a broken one with its problem.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The frontmatter name (for a broken prompt, the best name that could be read).
    pub name: String,
    /// The frontmatter description (may be empty for a broken prompt).
    pub description: String,
    /// The file, relative to the prompts directory.
    pub file: String,
    /// The declared input.
    pub input: Option<Declared>,
    /// The declared output.
    pub output: Option<Declared>,
    /// The parsed prompt, or why it cannot run.
    pub prompt: Result<Prompt, String>,
    /// The file's text as parsed (absent when it could not be read): a reload reuses the
    /// entry of a file whose text did not change instead of parsing it again.
    pub source: Option<Arc<str>>,
}

impl Entry {
    /// Why the prompt cannot run, if it cannot.
    pub fn problem(&self) -> Option<&str> {
        self.prompt.as_ref().err().map(String::as_str)
    }
}

/// One resolved catalog: entries sorted by name.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    entries: Vec<Arc<Entry>>,
}

/// Whether faults in single prompts stop the resolution (boot) or become broken entries
/// (reload).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Every fault is fatal and all of them are reported.
    Boot,
    /// A broken prompt stays listed with its problem.
    Reload,
}

impl Catalog {
    /// Builds a catalog from entries (sorted by name here).
    pub fn from_entries(mut entries: Vec<Entry>) -> Self {
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Self {
            entries: entries.into_iter().map(Arc::new).collect(),
        }
    }

    /// Every entry, sorted by name.
    pub fn entries(&self) -> &[Arc<Entry>] {
        &self.entries
    }

    /// The entry whose name matches `requested` with case folded and `-` as `_`.
    pub fn lookup(&self, requested: &str) -> Option<&Arc<Entry>> {
        let wanted = normalize(requested);
        self.entries.iter().find(|e| e.name == wanted)
    }

    /// Every enabled name, nearest to `requested` first (edit distance, then name).
    pub fn nearest(&self, requested: &str) -> Vec<String> {
        let wanted = normalize(requested);
        let mut names: Vec<(usize, &str)> = self
            .entries
            .iter()
            .map(|e| (edit_distance(&wanted, &e.name), e.name.as_str()))
            .collect();
        names.sort();
        names.into_iter().map(|(_, n)| n.to_owned()).collect()
    }

    /// `(name, description)` of every runnable entry, the retrieval index's key.
    pub fn index_key(&self) -> Vec<(String, String)> {
        self.entries
            .iter()
            .filter(|e| e.prompt.is_ok())
            .map(|e| (e.name.clone(), e.description.clone()))
            .collect()
    }
}

/// Levenshtein distance over chars.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (prev + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            prev = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

/// Resolves the catalog: include globs minus exclude globs, then the `[prompts.*]` blocks.
///
/// At [`Mode::Boot`] every fault is returned together; at [`Mode::Reload`] a prompt that
/// cannot be read, parsed or named becomes a broken entry, and only catalog-wide faults
/// (duplicates, stale overrides, an empty catalog, an unreadable directory) are returned.
pub fn resolve(config: &CatalogConfig, dir: &Path, mode: Mode) -> Result<Catalog, Vec<String>> {
    resolve_with(config, dir, mode, None)
}

/// [`resolve`], reusing the entries of `previous` whose file text is unchanged.
pub fn resolve_with(
    config: &CatalogConfig,
    dir: &Path,
    mode: Mode,
    previous: Option<&Catalog>,
) -> Result<Catalog, Vec<String>> {
    let known: std::collections::HashMap<&str, &Arc<Entry>> = previous
        .map(|c| c.entries().iter().map(|e| (e.file.as_str(), e)).collect())
        .unwrap_or_default();
    let mut faults = Vec::new();
    let include = compile(&config.include, &mut faults);
    let exclude = compile(&config.exclude, &mut faults);
    let mut files: BTreeSet<String> = BTreeSet::new();
    match walk(dir) {
        Ok(found) => {
            for rel in found {
                if include.iter().any(|g| g.is_match(&rel))
                    && !exclude.iter().any(|g| g.is_match(&rel))
                {
                    files.insert(rel);
                }
            }
        }
        Err(e) => faults.push(e),
    }
    let mut explicit: BTreeMap<String, String> = BTreeMap::new();
    for (name, block) in &config.overrides {
        if let Some(file) = &block.file {
            let rel = file.replace('\\', "/");
            explicit.insert(rel.clone(), name.clone());
            files.insert(rel);
        }
    }

    let mut entries: Vec<Entry> = Vec::new();
    for rel in &files {
        let forced = explicit.get(rel);
        match load_entry(dir, rel, forced.is_some(), known.get(rel.as_str()).copied()) {
            Loaded::Skip => {}
            Loaded::Entry(entry) => {
                if let (Some(key), Ok(_)) = (forced, &entry.prompt)
                    && entry.name != *key
                {
                    faults.push(format!(
                        "[prompts.{key}].file = \"{rel}\" declares the name `{}`, not `{key}`",
                        entry.name
                    ));
                    continue;
                }
                if let (Mode::Boot, Err(problem)) = (mode, &entry.prompt) {
                    faults.push(problem.clone());
                    continue;
                }
                entries.push(*entry);
            }
        }
    }

    let mut by_name: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for entry in &entries {
        by_name.entry(&entry.name).or_default().push(&entry.file);
    }
    for (name, files) in &by_name {
        if files.len() > 1 {
            faults.push(format!(
                "the prompt name `{name}` is declared by more than one file: {}",
                files.join(" and ")
            ));
        }
    }
    for (name, block) in &config.overrides {
        if block.file.is_none() && !by_name.contains_key(name.as_str()) {
            faults.push(format!(
                "[prompts.{name}] names no prompt in the catalog (a stale override?)"
            ));
        }
    }
    entries.retain(|e| config.overrides.get(&e.name).is_none_or(|o| o.enabled));
    if faults.is_empty() && entries.is_empty() {
        faults.push(format!(
            "the catalog is empty: no prompt under {} matches [catalog].include",
            dir.display()
        ));
    }
    if faults.is_empty() {
        Ok(Catalog::from_entries(entries))
    } else {
        Err(faults)
    }
}

fn compile(patterns: &[String], faults: &mut Vec<String>) -> Vec<GlobMatcher> {
    patterns
        .iter()
        .filter_map(|p| glob(p).map_err(|e| faults.push(e)).ok())
        .collect()
}

/// Every regular file under `dir`, as `/`-separated paths relative to it, bounded by
/// [`MAX_WALK_FILES`] and [`MAX_WALK_DEPTH`]. Symbolic links to directories are not
/// followed.
fn walk(dir: &Path) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut stack: Vec<(PathBuf, String, usize)> = vec![(dir.to_path_buf(), String::new(), 0)];
    while let Some((path, prefix, depth)) = stack.pop() {
        let read = std::fs::read_dir(&path)
            .map_err(|e| format!("cannot read the prompts directory {}: {e}", path.display()))?;
        for item in read.flatten() {
            let name = item.file_name().to_string_lossy().into_owned();
            let rel = if prefix.is_empty() {
                name
            } else {
                format!("{prefix}/{name}")
            };
            let Ok(kind) = item.file_type() else { continue };
            if kind.is_dir() {
                if depth + 1 < MAX_WALK_DEPTH {
                    stack.push((item.path(), rel, depth + 1));
                }
            } else if kind.is_file() || (kind.is_symlink() && item.path().is_file()) {
                out.push(rel);
                if out.len() > MAX_WALK_FILES {
                    return Err(format!(
                        "the prompts directory {} holds more than {MAX_WALK_FILES} files",
                        dir.display()
                    ));
                }
            }
        }
    }
    Ok(out)
}

enum Loaded {
    Skip,
    Entry(Box<Entry>),
}

fn broken(rel: &str, name: String, description: String, problem: String) -> Loaded {
    Loaded::Entry(Box::new(Entry {
        name,
        description,
        file: rel.to_owned(),
        input: None,
        output: None,
        prompt: Err(problem),
        source: None,
    }))
}

fn load_entry(dir: &Path, rel: &str, forced: bool, previous: Option<&Arc<Entry>>) -> Loaded {
    let path = dir.join(rel);
    let fallback = fallback_name(rel);
    let source = match read_prompt(&path) {
        Ok(s) => s,
        Err(e) => {
            return broken(
                rel,
                fallback,
                String::new(),
                format!("cannot read {rel}: {e}"),
            );
        }
    };
    if let Some(previous) = previous
        && previous.source.as_deref() == Some(source.as_str())
    {
        return Loaded::Entry(Box::new(Entry::clone(previous)));
    }
    if promptforge_version(&source).is_none() {
        if forced {
            return broken(
                rel,
                fallback,
                String::new(),
                format!(
                    "{rel} is not a promptforge prompt: its frontmatter declares no `promptforge:` version"
                ),
            );
        }
        return Loaded::Skip;
    }
    let (light_name, light_description) = light_frontmatter(&source);
    let name = light_name
        .filter(|n| valid_name(n))
        .unwrap_or_else(|| fallback.clone());
    let description = light_description.unwrap_or_default();
    let prompt = match Prompt::parse_named(rel, &source, "catalog", &NullObserver) {
        Ok(p) => p,
        Err(e) => return broken(rel, name, description, format!("parse error in {e}")),
    };
    let declared = prompt.name().to_owned();
    if !valid_name(&declared) {
        return broken(
            rel,
            name,
            prompt.description().to_owned(),
            format!("{rel}: the name `{declared}` does not match ^[a-z][a-z0-9_]{{0,47}}$"),
        );
    }
    if RESERVED.contains(&declared.as_str()) {
        return broken(
            rel,
            declared.clone(),
            prompt.description().to_owned(),
            format!("{rel}: the name `{declared}` is reserved for one of the server's own tools"),
        );
    }
    let front = prompt.frontmatter();
    let declare = |d: Option<&promptforge_core::FileDeclaration>| {
        d.map(|d| Declared {
            path: d.path().to_owned(),
            description: d.description().to_owned(),
        })
    };
    Loaded::Entry(Box::new(Entry {
        name: declared,
        description: prompt.description().to_owned(),
        file: rel.to_owned(),
        input: declare(front.input()),
        output: declare(front.output()),
        prompt: Ok(prompt.clone()),
        source: Some(Arc::from(source.as_str())),
    }))
}

fn read_prompt(path: &Path) -> Result<String, String> {
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if meta.len() > MAX_PROMPT_BYTES {
        return Err(format!(
            "the file is {} bytes, over the {MAX_PROMPT_BYTES}-byte limit",
            meta.len()
        ));
    }
    std::fs::read_to_string(path).map_err(|e| e.to_string())
}

/// A name for a file whose frontmatter name cannot be used: its stem, folded to the shape.
fn fallback_name(rel: &str) -> String {
    let stem = Path::new(rel)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut name: String = normalize(&stem)
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        name.insert_str(0, "p_");
    }
    name.truncate(48);
    name
}

/// `name:` and `description:` read from plain top-level frontmatter lines, for listing a
/// prompt that does not parse.
fn light_frontmatter(source: &str) -> (Option<String>, Option<String>) {
    let mut lines = source.lines();
    if lines.next().map(str::trim_end) != Some("---") {
        return (None, None);
    }
    let (mut name, mut description) = (None, None);
    for line in lines {
        if line.trim_end() == "---" {
            break;
        }
        let unquote = |v: &str| v.trim().trim_matches(['"', '\'']).to_owned();
        if let Some(v) = line.strip_prefix("name:") {
            name = Some(unquote(v));
        } else if let Some(v) = line.strip_prefix("description:") {
            description = Some(unquote(v));
        }
    }
    (name, description)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::config::PromptOverride;

    fn prompt(name: &str, description: &str) -> String {
        format!(
            "---\nname: {name}\ndescription: {description}\npromptforge: 1\n---\n\n# T\n\n```lua\nreturn args\n```\n"
        )
    }

    fn config(include: &[&str], exclude: &[&str]) -> CatalogConfig {
        CatalogConfig {
            include: include.iter().map(|s| (*s).to_owned()).collect(),
            exclude: exclude.iter().map(|s| (*s).to_owned()).collect(),
            overrides: BTreeMap::new(),
        }
    }

    fn write(dir: &Path, rel: &str, text: &str) {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn names(c: &Catalog) -> Vec<&str> {
        c.entries().iter().map(|e| e.name.as_str()).collect()
    }

    #[test]
    fn names_have_the_shape_and_fold() {
        assert!(valid_name("a"));
        assert!(valid_name("research_person2"));
        assert!(!valid_name("Research"));
        assert!(!valid_name("2x"));
        assert!(!valid_name("a-b"));
        assert!(!valid_name(&"a".repeat(49)));
        assert!(valid_name(&"a".repeat(48)));
        assert_eq!(normalize("Research-Person"), "research_person");
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn single_star_stays_in_a_segment_and_double_star_crosses() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "top.md", &prompt("top", "d"));
        write(dir.path(), "gov/deep/inner.md", &prompt("inner", "d"));
        write(dir.path(), "drafts/draft.md", &prompt("draft", "d"));
        write(dir.path(), "_private.md", &prompt("private", "d"));
        write(dir.path(), "notes.md", "# just notes, no frontmatter\n");
        let c = resolve(&config(&["*.md"], &[]), dir.path(), Mode::Boot).unwrap();
        assert_eq!(names(&c), ["private", "top"]);
        let c = resolve(
            &config(&["**/*.md"], &["_*.md", "drafts/**"]),
            dir.path(),
            Mode::Boot,
        )
        .unwrap();
        assert_eq!(names(&c), ["inner", "top"]);
    }

    #[test]
    fn boot_faults_are_all_reported_together() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.md", &prompt("same", "d"));
        write(dir.path(), "b.md", &prompt("same", "d"));
        write(dir.path(), "bad.md", &prompt("Bad-Name", "d"));
        write(dir.path(), "reserved.md", &prompt("run_prompt", "d"));
        write(
            dir.path(),
            "broken.md",
            "---\nname: broken\npromptforge: 1\nbogus: 2\n---\n# T\n",
        );
        let mut cfg = config(&["*.md"], &[]);
        cfg.overrides.insert(
            "ghost".into(),
            PromptOverride {
                enabled: false,
                file: None,
            },
        );
        let faults = resolve(&cfg, dir.path(), Mode::Boot).unwrap_err();
        let all = faults.join("\n");
        assert!(
            all.contains("`same` is declared by more than one file: a.md and b.md"),
            "{all}"
        );
        assert!(all.contains("Bad-Name"), "{all}");
        assert!(all.contains("reserved"), "{all}");
        assert!(all.contains("broken.md"), "{all}");
        assert!(all.contains("[prompts.ghost]"), "{all}");
        assert_eq!(faults.len(), 5, "{all}");
    }

    #[test]
    fn reload_keeps_broken_prompts_listed_with_their_problem() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "good.md", &prompt("good", "fine"));
        write(
            dir.path(),
            "broken.md",
            "---\nname: broken\ndescription: oops\npromptforge: 1\nbogus: 2\n---\n# T\n",
        );
        let c = resolve(&config(&["*.md"], &[]), dir.path(), Mode::Reload).unwrap();
        assert_eq!(names(&c), ["broken", "good"]);
        let broken = c.lookup("BROKEN").unwrap();
        assert_eq!(broken.description, "oops");
        assert!(broken.problem().unwrap().contains("broken.md"));
        assert_eq!(c.index_key(), vec![("good".to_owned(), "fine".to_owned())]);
    }

    #[test]
    fn overrides_disable_and_add_files() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.md", &prompt("alpha", "d"));
        write(dir.path(), "b.md", &prompt("beta", "d"));
        write(dir.path(), "x/staker-v3.md", &prompt("staker", "d"));
        let mut cfg = config(&["*.md"], &[]);
        cfg.overrides.insert(
            "beta".into(),
            PromptOverride {
                enabled: false,
                file: None,
            },
        );
        cfg.overrides.insert(
            "staker".into(),
            PromptOverride {
                enabled: true,
                file: Some("x/staker-v3.md".into()),
            },
        );
        let c = resolve(&cfg, dir.path(), Mode::Boot).unwrap();
        assert_eq!(names(&c), ["alpha", "staker"]);
        assert_eq!(c.nearest("stakr")[0], "staker");
        assert!(c.lookup("Alpha").is_some());
    }

    #[test]
    fn a_reload_reuses_the_entries_of_unchanged_files() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.md", &prompt("alpha", "d"));
        write(dir.path(), "b.md", &prompt("beta", "d"));
        let cfg = config(&["*.md"], &[]);
        let first = resolve(&cfg, dir.path(), Mode::Boot).unwrap();
        write(dir.path(), "b.md", &prompt("beta", "changed"));
        let second = resolve_with(&cfg, dir.path(), Mode::Reload, Some(&first)).unwrap();
        let source = |c: &Catalog, name: &str| c.lookup(name).unwrap().source.clone().unwrap();
        assert!(Arc::ptr_eq(
            &source(&first, "alpha"),
            &source(&second, "alpha")
        ));
        assert!(!Arc::ptr_eq(
            &source(&first, "beta"),
            &source(&second, "beta")
        ));
        assert_eq!(second.lookup("beta").unwrap().description, "changed");
    }

    #[test]
    fn an_empty_catalog_is_a_fault() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "readme.md", "# not a prompt\n");
        let faults = resolve(&config(&["*.md"], &[]), dir.path(), Mode::Boot).unwrap_err();
        assert!(faults[0].contains("the catalog is empty"), "{faults:?}");
        let faults = resolve(
            &config(&["*.md"], &[]),
            &dir.path().join("missing"),
            Mode::Boot,
        )
        .unwrap_err();
        assert!(
            faults[0].contains("cannot read the prompts directory"),
            "{faults:?}"
        );
    }
}
