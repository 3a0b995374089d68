//! The picker: an embedded catalog and the decisions over it.

use std::collections::HashSet;

use crate::decision::{Decision, candidate_count, decide};
use crate::error::{IndexError, QueryError, SelectionError};
use crate::lexical::LexicalIndex;
use crate::model::EMBEDDING_DIM;
use crate::{BuildError, Catalog, Config, Model, ToolDescriptor, ToolId};

/// An immutable index of one catalog under one model and configuration.
///
/// Every answer borrows the picker's descriptors; nothing is deep-cloned.
#[derive(Clone)]
pub struct ToolPicker {
    model: Model,
    config: Config,
    catalog: Catalog,
    /// Row `i` (`EMBEDDING_DIM` values) is tool `i`'s unit embedding.
    embeddings: Vec<f32>,
    lexical: LexicalIndex,
}

impl std::fmt::Debug for ToolPicker {
    /// Shows the catalog size and configuration, not the embeddings.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolPicker")
            .field("tools", &self.catalog.len())
            .field("config", &self.config)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

/// What `resolve` decided for a need.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Outcome<'a> {
    /// One tool clearly covers the need.
    Bind(&'a ToolDescriptor),
    /// The leading tool's server publishes near-identical twins of it.
    Duplicate(CandidateGroup<'a>),
    /// Several tools cover the need about equally well.
    Ambiguous(CandidateGroup<'a>),
    /// No tool covers the need. A successful answer, not an error.
    Absent,
}

/// Two or more candidates, best first.
#[derive(Debug, Clone, PartialEq)]
pub struct CandidateGroup<'a> {
    tools: Vec<&'a ToolDescriptor>,
}

impl<'a> CandidateGroup<'a> {
    /// The leading candidate.
    pub fn first(&self) -> &'a ToolDescriptor {
        self.tools[0]
    }

    /// The runner-up.
    pub fn second(&self) -> &'a ToolDescriptor {
        self.tools[1]
    }

    /// The candidate at `index`, best first.
    pub fn get(&self, index: usize) -> Option<&'a ToolDescriptor> {
        self.tools.get(index).copied()
    }

    /// The number of candidates (at least two).
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Always `false`: a group has at least two candidates.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The candidates, best first.
    pub fn iter(&self) -> std::iter::Copied<std::slice::Iter<'_, &'a ToolDescriptor>> {
        self.tools.iter().copied()
    }
}

impl<'s, 'a> IntoIterator for &'s CandidateGroup<'a> {
    type Item = &'a ToolDescriptor;
    type IntoIter = std::iter::Copied<std::slice::Iter<'s, &'a ToolDescriptor>>;

    fn into_iter(self) -> Self::IntoIter {
        self.tools.iter().copied()
    }
}

/// Tools relevant to a need, best first; never contradicts [`ToolPicker::resolve`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Shortlist<'a> {
    tools: Vec<&'a ToolDescriptor>,
}

impl<'a> Shortlist<'a> {
    /// The number of tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether nothing is relevant.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The best tool.
    pub fn first(&self) -> Option<&'a ToolDescriptor> {
        self.tools.first().copied()
    }

    /// The tool at `index`, best first.
    pub fn get(&self, index: usize) -> Option<&'a ToolDescriptor> {
        self.tools.get(index).copied()
    }

    /// The tools, best first.
    pub fn iter(&self) -> std::iter::Copied<std::slice::Iter<'_, &'a ToolDescriptor>> {
        self.tools.iter().copied()
    }
}

impl<'s, 'a> IntoIterator for &'s Shortlist<'a> {
    type Item = &'a ToolDescriptor;
    type IntoIter = std::iter::Copied<std::slice::Iter<'s, &'a ToolDescriptor>>;

    fn into_iter(self) -> Self::IntoIter {
        self.tools.iter().copied()
    }
}

/// A tool with its relevance score for one need (from [`ToolPicker::rank`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scored<'a> {
    tool: &'a ToolDescriptor,
    score: f32,
}

impl<'a> Scored<'a> {
    /// The tool.
    pub fn tool(&self) -> &'a ToolDescriptor {
        self.tool
    }

    /// Its relevance score for the need.
    pub fn score(&self) -> f32 {
        self.score
    }
}

/// Two tools whose own descriptions are alike.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NearDuplicate<'a> {
    first: &'a ToolDescriptor,
    second: &'a ToolDescriptor,
    similarity: f32,
}

impl<'a> NearDuplicate<'a> {
    /// The earlier tool in catalog order.
    pub fn first(&self) -> &'a ToolDescriptor {
        self.first
    }

    /// The later tool in catalog order.
    pub fn second(&self) -> &'a ToolDescriptor {
        self.second
    }

    /// The cosine similarity of the two tools' embeddings.
    pub fn similarity(&self) -> f32 {
        self.similarity
    }
}

/// Near-duplicate pairs in catalog pair order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NearDuplicates<'a> {
    pairs: Vec<NearDuplicate<'a>>,
}

impl<'a> NearDuplicates<'a> {
    /// The number of pairs.
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    /// Whether no pair reaches the duplicate threshold.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// The pair at `index`.
    pub fn get(&self, index: usize) -> Option<&NearDuplicate<'a>> {
        self.pairs.get(index)
    }

    /// The pairs in catalog pair order.
    pub fn iter(&self) -> std::slice::Iter<'_, NearDuplicate<'a>> {
        self.pairs.iter()
    }
}

impl<'s, 'a> IntoIterator for &'s NearDuplicates<'a> {
    type Item = &'s NearDuplicate<'a>;
    type IntoIter = std::slice::Iter<'s, NearDuplicate<'a>>;

    fn into_iter(self) -> Self::IntoIter {
        self.pairs.iter()
    }
}

/// Most parameters of a tool's schema that its texts take in (the rest are ignored).
pub(crate) const SCHEMA_PARAMETERS: usize = 32;

/// Longest parameter text, in bytes, the lexical side reads from a tool's schema.
pub(crate) const SCHEMA_TEXT_BYTES: usize = 4096;

/// The top-level parameters of a tool's JSON Schema: name and property object, in the
/// schema's order, at most [`SCHEMA_PARAMETERS`].
fn parameters(tool: &ToolDescriptor) -> Vec<(&str, &serde_json::Value)> {
    tool.input_schema()
        .get("properties")
        .and_then(serde_json::Value::as_object)
        .map(|props| {
            props
                .iter()
                .take(SCHEMA_PARAMETERS)
                .map(|(k, v)| (k.as_str(), v))
                .collect()
        })
        .unwrap_or_default()
}

/// The text a tool is embedded by: its name in words, its description, then its
/// parameter names in words (`read file: Read a file from disk. Parameters: path.`).
pub(crate) fn tool_text(tool: &ToolDescriptor) -> String {
    let mut text = crate::lexical::words(tool.name());
    let description = tool.description().trim();
    if !description.is_empty() {
        text.push_str(": ");
        text.push_str(description);
    }
    push_parameters(&mut text, tool);
    text
}

/// The text two tools are compared by for near-duplicates: what they do, not what they are
/// called: the description, then the parameter names in words
/// (`Read a file from disk. Parameters: path.`).
pub(crate) fn duplicate_text(tool: &ToolDescriptor) -> String {
    let mut text = tool.description().trim().to_owned();
    push_parameters(&mut text, tool);
    text
}

fn push_parameters(text: &mut String, tool: &ToolDescriptor) {
    let names: Vec<String> = parameters(tool)
        .iter()
        .map(|(name, _)| crate::lexical::words(name))
        .filter(|w| !w.is_empty())
        .collect();
    if !names.is_empty() {
        if !text.is_empty() && !text.ends_with('.') {
            text.push('.');
        }
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str("Parameters: ");
        text.push_str(&names.join(", "));
        text.push('.');
    }
}

/// The texts a tool is matched by lexically: the primary field (name in words and
/// description) and the schema field (parameter names, their descriptions and string enum
/// values), the latter cut at [`SCHEMA_TEXT_BYTES`].
pub(crate) fn lexical_fields(tool: &ToolDescriptor) -> (String, String) {
    let primary = format!(
        "{} {}",
        crate::lexical::words(tool.name()),
        tool.description()
    );
    let mut schema = String::new();
    for (name, property) in parameters(tool) {
        schema.push_str(name);
        schema.push(' ');
        if let Some(d) = property
            .get("description")
            .and_then(serde_json::Value::as_str)
        {
            schema.push_str(d);
            schema.push(' ');
        }
        if let Some(values) = property.get("enum").and_then(serde_json::Value::as_array) {
            for v in values.iter().filter_map(serde_json::Value::as_str) {
                schema.push_str(v);
                schema.push(' ');
            }
        }
        if schema.len() >= SCHEMA_TEXT_BYTES {
            let mut cut = SCHEMA_TEXT_BYTES;
            while !schema.is_char_boundary(cut) {
                cut -= 1;
            }
            schema.truncate(cut);
            break;
        }
    }
    (primary, schema)
}

/// A deterministic dot product: eight fixed lanes, summed in a fixed order.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let mut chunks_a = a.chunks_exact(8);
    let mut chunks_b = b.chunks_exact(8);
    for (ca, cb) in (&mut chunks_a).zip(&mut chunks_b) {
        for k in 0..8 {
            lanes[k] += ca[k] * cb[k];
        }
    }
    let mut tail = 0.0f32;
    for (x, y) in chunks_a.remainder().iter().zip(chunks_b.remainder()) {
        tail += x * y;
    }
    ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3]))
        + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]))
        + tail
}

impl ToolPicker {
    /// Loads the compiled-in model and indexes `catalog`.
    pub fn build(catalog: Catalog, config: Config) -> Result<Self, BuildError> {
        let model = Model::load()?;
        Ok(Self::build_with_model(&model, catalog, config)?)
    }

    /// Indexes `catalog` with an already loaded model (shared, not copied).
    pub fn build_with_model(
        model: &Model,
        catalog: Catalog,
        config: Config,
    ) -> Result<Self, IndexError> {
        let mut embeddings = Vec::with_capacity(catalog.len() * EMBEDDING_DIM);
        for (position, tool) in catalog.iter().enumerate() {
            let vector = model
                .embed_cached(&tool_text(tool))
                .map_err(|e| IndexError::new(tool.id().clone(), position, e))?;
            embeddings.extend_from_slice(&vector);
        }
        let fields: Vec<(String, String)> = catalog.iter().map(lexical_fields).collect();
        let lexical = LexicalIndex::new(fields.iter().map(|(p, s)| (p.as_str(), s.as_str())));
        Ok(Self {
            model: model.clone(),
            config,
            catalog,
            embeddings,
            lexical,
        })
    }

    /// Indexes a new catalog with this picker's model and configuration. This picker is
    /// unchanged and still answers from its own catalog.
    pub fn rebuild(&self, catalog: Catalog) -> Result<Self, IndexError> {
        Self::build_with_model(&self.model, catalog, self.config)
    }

    /// Indexes a new catalog like [`ToolPicker::rebuild`], embedding only the tools whose
    /// embedded text (name, description and parameter names) this index does not already
    /// hold; the others reuse their vectors, which never depend on the rest of the catalog,
    /// so the result is the same as a full rebuild. Unlike the model's bounded per-text
    /// cache, this reuses every vector of this index however large it is.
    pub fn rebuild_reusing(&self, catalog: Catalog) -> Result<Self, IndexError> {
        let known: std::collections::HashMap<String, usize> = self
            .catalog
            .iter()
            .enumerate()
            .map(|(i, tool)| (tool_text(tool), i))
            .collect();
        let mut embeddings = Vec::with_capacity(catalog.len() * EMBEDDING_DIM);
        for (position, tool) in catalog.iter().enumerate() {
            let text = tool_text(tool);
            match known.get(&text) {
                Some(&i) => embeddings.extend_from_slice(
                    &self.embeddings[i * EMBEDDING_DIM..(i + 1) * EMBEDDING_DIM],
                ),
                None => {
                    let vector = self
                        .model
                        .embed_cached(&text)
                        .map_err(|e| IndexError::new(tool.id().clone(), position, e))?;
                    embeddings.extend_from_slice(&vector);
                }
            }
        }
        let fields: Vec<(String, String)> = catalog.iter().map(lexical_fields).collect();
        let lexical = LexicalIndex::new(fields.iter().map(|(p, s)| (p.as_str(), s.as_str())));
        Ok(Self {
            model: self.model.clone(),
            config: self.config,
            catalog,
            embeddings,
            lexical,
        })
    }

    /// The same index under another configuration: nothing is embedded again.
    #[must_use]
    pub fn with_config(&self, config: Config) -> Self {
        Self {
            config,
            ..self.clone()
        }
    }

    /// The number of tools.
    pub fn len(&self) -> usize {
        self.catalog.len()
    }

    /// Whether the catalog is empty (every need is then absent).
    pub fn is_empty(&self) -> bool {
        self.catalog.is_empty()
    }

    /// The tools in catalog order.
    pub fn iter(&self) -> std::slice::Iter<'_, ToolDescriptor> {
        self.catalog.iter()
    }

    /// The first tool with this identity.
    pub fn get(&self, id: &ToolId) -> Option<&ToolDescriptor> {
        self.catalog.get(id)
    }

    /// The indexed catalog.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The model (cheap to clone).
    pub fn model(&self) -> &Model {
        &self.model
    }

    fn embedding(&self, position: usize) -> &[f32] {
        &self.embeddings[position * EMBEDDING_DIM..(position + 1) * EMBEDDING_DIM]
    }

    /// Every tool's score for `need`, best first; ties go to annotations, then catalog order.
    fn ranked(&self, need: &str) -> Result<Vec<(usize, f32)>, QueryError> {
        let query = self.model.embed(need)?;
        let lexical = self.lexical.scores(need);
        let w = self.config.lexical_weight();
        let mut ranked: Vec<(usize, f32)> = (0..self.catalog.len())
            .map(|i| {
                let dense = dot(&query, self.embedding(i));
                let lex = lexical.get(i).copied().unwrap_or(0.0);
                (i, (1.0 - w) * dense + w * lex)
            })
            .collect();
        let tools = self.catalog.as_slice();
        ranked.sort_by(|&(a, sa), &(b, sb)| {
            sb.total_cmp(&sa)
                .then_with(|| {
                    tools[a]
                        .annotations()
                        .tie_break_key()
                        .cmp(&tools[b].annotations().tie_break_key())
                })
                .then(a.cmp(&b))
        });
        Ok(ranked)
    }

    fn twins(&self, a: usize, b: usize) -> bool {
        let tools = self.catalog.as_slice();
        tools[a].server() == tools[b].server()
            && (tools[a].id() == tools[b].id()
                || dot(self.embedding(a), self.embedding(b)) >= self.config.duplicate_threshold())
    }

    fn decide(&self, ranked: &[(usize, f32)]) -> Decision {
        decide(ranked, &self.config, |a, b| self.twins(a, b))
    }

    fn group(&self, positions: &[usize]) -> CandidateGroup<'_> {
        let tools = self.catalog.as_slice();
        CandidateGroup {
            tools: positions.iter().map(|&i| &tools[i]).collect(),
        }
    }

    /// Decides which tool covers `need`: bind, duplicate, ambiguous or absent.
    ///
    /// Precedence is fixed: absent, duplicate, bind, ambiguous; every threshold is inclusive.
    /// An `Err` means the need could not be embedded, so there is no answer at all.
    pub fn resolve(&self, need: &str) -> Result<Outcome<'_>, QueryError> {
        let ranked = self.ranked(need)?;
        let tools = self.catalog.as_slice();
        Ok(match self.decide(&ranked) {
            Decision::Absent => Outcome::Absent,
            Decision::Bind(i) => Outcome::Bind(&tools[i]),
            Decision::Duplicate(group) => Outcome::Duplicate(self.group(&group)),
            Decision::Ambiguous(group) => Outcome::Ambiguous(self.group(&group)),
        })
    }

    /// Up to `limit` tools relevant to `need`, best first, without a final decision.
    ///
    /// It never contradicts [`resolve`](Self::resolve): when `resolve` abstains the list is
    /// empty; when it binds, the list is exactly that tool; otherwise it holds the candidates
    /// at or above the similarity floor. A `limit` of zero embeds nothing.
    pub fn shortlist(&self, need: &str, limit: usize) -> Result<Shortlist<'_>, QueryError> {
        if limit == 0 {
            return Ok(Shortlist::default());
        }
        let ranked = self.ranked(need)?;
        let tools = self.catalog.as_slice();
        let positions: Vec<usize> = match self.decide(&ranked) {
            Decision::Absent => Vec::new(),
            Decision::Bind(i) => vec![i],
            Decision::Duplicate(_) | Decision::Ambiguous(_) => ranked
                [..candidate_count(&ranked, &self.config)]
                .iter()
                .map(|&(i, _)| i)
                .take(limit)
                .collect(),
        };
        Ok(Shortlist {
            tools: positions.into_iter().map(|i| &tools[i]).collect(),
        })
    }

    /// The `limit` best-scoring tools with their scores: a diagnostic ranking, not a
    /// decision (no floor, no margin). Calibration and retrieval use it.
    pub fn rank(&self, need: &str, limit: usize) -> Result<Vec<Scored<'_>>, QueryError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let tools = self.catalog.as_slice();
        Ok(self
            .ranked(need)?
            .into_iter()
            .take(limit)
            .map(|(i, score)| Scored {
                tool: &tools[i],
                score,
            })
            .collect())
    }

    /// Pairs among the selected tools whose own embeddings reach the duplicate threshold,
    /// in catalog pair order.
    ///
    /// Every requested identity must be in the picker; otherwise [`SelectionError`] names
    /// the first missing one and nothing is compared. Repeating an identity changes nothing.
    pub fn near_duplicates(&self, ids: &[ToolId]) -> Result<NearDuplicates<'_>, SelectionError> {
        if let Some(missing) = ids.iter().find(|id| self.catalog.get(id).is_none()) {
            return Err(SelectionError::new(missing.clone()));
        }
        let wanted: HashSet<&ToolId> = ids.iter().collect();
        let tools = self.catalog.as_slice();
        let selected: Vec<usize> = (0..tools.len())
            .filter(|&i| wanted.contains(tools[i].id()))
            .collect();
        let mut pairs = Vec::new();
        for (n, &a) in selected.iter().enumerate() {
            for &b in &selected[n + 1..] {
                let similarity = dot(self.embedding(a), self.embedding(b));
                if similarity >= self.config.duplicate_threshold() {
                    pairs.push(NearDuplicate {
                        first: &tools[a],
                        second: &tools[b],
                        similarity,
                    });
                }
            }
        }
        Ok(NearDuplicates { pairs })
    }
}

impl ToolPicker {
    /// Near-duplicate pairs among any tools, in or out of the catalog (for instance the
    /// catalog tools and local tools one prompt section offers), in the slice's pair order.
    ///
    /// Each tool is embedded by what it does, not what it is called: its description and
    /// parameter names (`Read a file from disk. Parameters: path.`), through the model's
    /// per-text cache, so a tool compared before costs no forward pass. A pair is reported when the cosine of the two
    /// embeddings reaches the duplicate threshold, whatever the servers. Fails closed: if
    /// any tool cannot be embedded, the error names it and no pair is reported.
    pub fn near_duplicates_among<'t>(
        &self,
        tools: &'t [ToolDescriptor],
    ) -> Result<NearDuplicates<'t>, IndexError> {
        let vectors = tools
            .iter()
            .enumerate()
            .map(|(position, tool)| {
                self.model
                    .embed_cached(&duplicate_text(tool))
                    .map_err(|e| IndexError::new(tool.id().clone(), position, e))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut pairs = Vec::new();
        for a in 0..tools.len() {
            for b in a + 1..tools.len() {
                let similarity = dot(&vectors[a], &vectors[b]);
                if similarity >= self.config.duplicate_threshold() {
                    pairs.push(NearDuplicate {
                        first: &tools[a],
                        second: &tools[b],
                        similarity,
                    });
                }
            }
        }
        Ok(NearDuplicates { pairs })
    }
}

impl<'a> IntoIterator for &'a ToolPicker {
    type Item = &'a ToolDescriptor;
    type IntoIter = std::slice::Iter<'a, ToolDescriptor>;

    fn into_iter(self) -> Self::IntoIter {
        self.catalog.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_does_not_dump_embeddings() {
        let picker = ToolPicker {
            model: Model::load().unwrap(),
            config: Config::default(),
            catalog: Catalog::default(),
            embeddings: vec![0.5; EMBEDDING_DIM],
            lexical: LexicalIndex::default(),
        };
        let text = format!("{picker:?}");
        assert!(text.starts_with("ToolPicker { tools: 0"), "{text}");
        assert!(!text.contains("0.5,"), "{text}");
    }

    fn tool(name: &str, description: &str) -> ToolDescriptor {
        ToolDescriptor::new(
            ToolId::new("s", name),
            description,
            serde_json::json!({"properties": {"path": {"type": "string", "description": "where", "enum": ["a", "b"]}}}),
        )
    }

    #[test]
    fn rebuilding_a_filtered_catalog_embeds_no_text_again() {
        let model = Model::load().unwrap();
        let catalog = Catalog::new(vec![
            tool("read_file", "Read a file from disk"),
            tool("fetch_url", "Fetch a web page over HTTP"),
        ]);
        let full = ToolPicker::build_with_model(&model, catalog, Config::default()).unwrap();
        assert_eq!(model.cached_embeddings(), 2);
        let filtered = full
            .rebuild(Catalog::new(vec![tool(
                "fetch_url",
                "Fetch a web page over HTTP",
            )]))
            .unwrap();
        assert_eq!(model.cached_embeddings(), 2, "nothing new was embedded");
        // Cached and freshly computed vectors are the same bits.
        let fresh = model
            .embed(&tool_text(filtered.iter().next().unwrap()))
            .unwrap();
        assert_eq!(filtered.embedding(0), fresh.as_slice());
        assert_eq!(filtered.embedding(0), full.embedding(1));
    }

    #[test]
    fn near_duplicates_among_compares_tools_outside_the_catalog() {
        let model = Model::load().unwrap();
        let catalog = Catalog::new(vec![tool("read_file", "Read a file from disk")]);
        let picker = ToolPicker::build_with_model(&model, catalog, Config::default()).unwrap();
        let offered = vec![
            tool("read_file", "Read a file from disk"),
            ToolDescriptor::new(
                ToolId::new("local", "read_file"),
                "Read one file from disk",
                serde_json::json!({"properties": {"path": {"type": "string"}}}),
            ),
            ToolDescriptor::new(
                ToolId::new("local", "weather"),
                "Current weather for a city",
                serde_json::json!({}),
            ),
        ];
        let pairs = picker.near_duplicates_among(&offered).unwrap();
        assert_eq!(pairs.len(), 1, "{pairs:?}");
        let pair = pairs.get(0).unwrap();
        assert_eq!(pair.first().name(), "read_file");
        assert_eq!(pair.second().server(), "local");
        assert!(pair.similarity() >= picker.config().duplicate_threshold());
        assert!(
            picker
                .near_duplicates_among(&offered[2..])
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn tool_texts_are_schema_aware() {
        let t = tool("readFile", "Read a file from disk");
        assert_eq!(
            tool_text(&t),
            "read file: Read a file from disk. Parameters: path."
        );
        let (primary, schema) = lexical_fields(&t);
        assert_eq!(primary, "read file Read a file from disk");
        assert_eq!(schema, "path where a b ");
        assert_eq!(
            duplicate_text(&t),
            "Read a file from disk. Parameters: path."
        );
        let bare = ToolDescriptor::new(ToolId::new("s", "x"), "", serde_json::json!({}));
        assert_eq!(tool_text(&bare), "x");
        assert_eq!(duplicate_text(&tool("y", "")), "Parameters: path.");
    }

    #[test]
    fn dot_is_exact_on_simple_vectors() {
        let a = vec![1.0f32; 10];
        let b = vec![2.0f32; 10];
        assert_eq!(dot(&a, &b), 20.0);
        assert_eq!(dot(&[], &[]), 0.0);
    }
}
