//! Decision thresholds: always valid, changed one checked setter at a time.

use std::fmt;
use std::num::NonZeroUsize;

/// The picker's decision thresholds.
///
/// Every `Config` is valid: thresholds are finite and in `0.0..=1.0`, `top_k` is nonzero.
/// The setters check their argument and return [`ConfigError`] naming the field otherwise,
/// so there is no `validate` method. The defaults were calibrated on third-party data (see
/// the crate README); a caller who has not measured their own catalog should change none.
///
/// Scores are the picker's relevance scores: a weighted mix of the cosine similarity of
/// the need and tool embeddings and a lexical overlap score (see
/// [`lexical_weight`](Config::lexical_weight)).
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(try_from = "RawConfig"))]
pub struct Config {
    similarity_floor: f32,
    solo_floor: f32,
    duplicate_threshold: f32,
    margin: f32,
    top_k: NonZeroUsize,
    lexical_weight: f32,
}

/// The default [`Config::similarity_floor`].
pub const DEFAULT_SIMILARITY_FLOOR: f32 = 0.425;
/// The default [`Config::solo_floor`].
pub const DEFAULT_SOLO_FLOOR: f32 = 0.425;
/// The default [`Config::duplicate_threshold`].
pub const DEFAULT_DUPLICATE_THRESHOLD: f32 = 0.95;
/// The default [`Config::margin`].
pub const DEFAULT_MARGIN: f32 = 0.05;
/// The default [`Config::top_k`].
pub const DEFAULT_TOP_K: usize = 5;
/// The default [`Config::lexical_weight`].
pub const DEFAULT_LEXICAL_WEIGHT: f32 = 0.3;

impl Default for Config {
    fn default() -> Self {
        Self {
            similarity_floor: DEFAULT_SIMILARITY_FLOOR,
            solo_floor: DEFAULT_SOLO_FLOOR,
            duplicate_threshold: DEFAULT_DUPLICATE_THRESHOLD,
            margin: DEFAULT_MARGIN,
            top_k: NonZeroUsize::MIN.saturating_add(DEFAULT_TOP_K - 1),
            lexical_weight: DEFAULT_LEXICAL_WEIGHT,
        }
    }
}

/// Names a [`Config`] field, for [`ConfigError::field`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConfigField {
    /// [`Config::similarity_floor`].
    SimilarityFloor,
    /// [`Config::solo_floor`].
    SoloFloor,
    /// [`Config::duplicate_threshold`].
    DuplicateThreshold,
    /// [`Config::margin`].
    Margin,
    /// [`Config::top_k`].
    TopK,
    /// [`Config::lexical_weight`].
    LexicalWeight,
}

impl ConfigField {
    /// The field's name as it is spelled in Rust and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SimilarityFloor => "similarity_floor",
            Self::SoloFloor => "solo_floor",
            Self::DuplicateThreshold => "duplicate_threshold",
            Self::Margin => "margin",
            Self::TopK => "top_k",
            Self::LexicalWeight => "lexical_weight",
        }
    }
}

impl fmt::Display for ConfigField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A setter or deserialisation received a value outside its field's domain.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid picker configuration: {field} = {value} ({expected})")]
pub struct ConfigError {
    field: ConfigField,
    value: String,
    expected: &'static str,
}

impl ConfigError {
    fn threshold(field: ConfigField, value: f64) -> Self {
        Self {
            field,
            value: value.to_string(),
            expected: "must be a finite number in 0.0..=1.0",
        }
    }

    /// The rejected field.
    pub fn field(&self) -> ConfigField {
        self.field
    }
}

fn checked_threshold(field: ConfigField, value: f64) -> Result<f32, ConfigError> {
    if value.is_finite() && (0.0..=1.0).contains(&value) {
        // In range, so the conversion cannot overflow; it rounds to the nearest f32.
        Ok(value as f32)
    } else {
        Err(ConfigError::threshold(field, value))
    }
}

fn checked_top_k(value: usize) -> Result<NonZeroUsize, ConfigError> {
    NonZeroUsize::new(value).ok_or(ConfigError {
        field: ConfigField::TopK,
        value: value.to_string(),
        expected: "must be at least 1",
    })
}

impl Config {
    /// The least score a tool needs to be a candidate (inclusive). Below it a need is
    /// absent, except for the solo-candidate rule.
    pub fn similarity_floor(&self) -> f32 {
        self.similarity_floor
    }

    /// The solo-candidate floor (inclusive): a leader scoring at or above it but below the
    /// similarity floor binds when no runner-up reaches it. At or above the similarity floor
    /// the rule never applies.
    pub fn solo_floor(&self) -> f32 {
        self.solo_floor
    }

    /// The tool-to-tool similarity (inclusive) at which two tools of one server are twins.
    pub fn duplicate_threshold(&self) -> f32 {
        self.duplicate_threshold
    }

    /// How far (inclusive) the leader must be ahead of the runner-up to bind.
    pub fn margin(&self) -> f32 {
        self.margin
    }

    /// The most candidates an `Ambiguous` group carries (a group always has at least two).
    pub fn top_k(&self) -> NonZeroUsize {
        self.top_k
    }

    /// The weight of the lexical overlap score in the relevance score: `0.0` is the dense
    /// cosine alone, `1.0` lexical overlap alone.
    pub fn lexical_weight(&self) -> f32 {
        self.lexical_weight
    }

    /// Sets [`similarity_floor`](Self::similarity_floor); `0.0..=1.0`.
    pub fn with_similarity_floor(mut self, value: f64) -> Result<Self, ConfigError> {
        self.similarity_floor = checked_threshold(ConfigField::SimilarityFloor, value)?;
        Ok(self)
    }

    /// Sets [`solo_floor`](Self::solo_floor); `0.0..=1.0`.
    pub fn with_solo_floor(mut self, value: f64) -> Result<Self, ConfigError> {
        self.solo_floor = checked_threshold(ConfigField::SoloFloor, value)?;
        Ok(self)
    }

    /// Sets [`duplicate_threshold`](Self::duplicate_threshold); `0.0..=1.0`.
    pub fn with_duplicate_threshold(mut self, value: f64) -> Result<Self, ConfigError> {
        self.duplicate_threshold = checked_threshold(ConfigField::DuplicateThreshold, value)?;
        Ok(self)
    }

    /// Sets [`margin`](Self::margin); `0.0..=1.0`.
    pub fn with_margin(mut self, value: f64) -> Result<Self, ConfigError> {
        self.margin = checked_threshold(ConfigField::Margin, value)?;
        Ok(self)
    }

    /// Sets [`top_k`](Self::top_k); at least 1.
    pub fn with_top_k(mut self, value: usize) -> Result<Self, ConfigError> {
        self.top_k = checked_top_k(value)?;
        Ok(self)
    }

    /// Sets [`lexical_weight`](Self::lexical_weight); `0.0..=1.0`.
    pub fn with_lexical_weight(mut self, value: f64) -> Result<Self, ConfigError> {
        self.lexical_weight = checked_threshold(ConfigField::LexicalWeight, value)?;
        Ok(self)
    }
}

/// The wire form: absent fields take their defaults, then every field is checked.
#[cfg(feature = "serde")]
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    similarity_floor: Option<f64>,
    solo_floor: Option<f64>,
    duplicate_threshold: Option<f64>,
    margin: Option<f64>,
    top_k: Option<usize>,
    lexical_weight: Option<f64>,
}

#[cfg(feature = "serde")]
impl TryFrom<RawConfig> for Config {
    type Error = ConfigError;

    fn try_from(raw: RawConfig) -> Result<Self, ConfigError> {
        let mut config = Config::default();
        if let Some(v) = raw.similarity_floor {
            config = config.with_similarity_floor(v)?;
        }
        if let Some(v) = raw.solo_floor {
            config = config.with_solo_floor(v)?;
        }
        if let Some(v) = raw.duplicate_threshold {
            config = config.with_duplicate_threshold(v)?;
        }
        if let Some(v) = raw.margin {
            config = config.with_margin(v)?;
        }
        if let Some(v) = raw.top_k {
            config = config.with_top_k(v)?;
        }
        if let Some(v) = raw.lexical_weight {
            config = config.with_lexical_weight(v)?;
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_in_domain_and_ordered() {
        let c = Config::default();
        assert_eq!(c.similarity_floor(), DEFAULT_SIMILARITY_FLOOR);
        assert_eq!(c.solo_floor(), DEFAULT_SOLO_FLOOR);
        assert_eq!(c.duplicate_threshold(), DEFAULT_DUPLICATE_THRESHOLD);
        assert_eq!(c.margin(), DEFAULT_MARGIN);
        assert_eq!(c.top_k().get(), DEFAULT_TOP_K);
        assert_eq!(c.lexical_weight(), DEFAULT_LEXICAL_WEIGHT);
        // Calibrated off by default (solo floor = similarity floor): on BFCL every lower
        // solo floor raised held-out wrong binds (see the README).
        assert!(c.solo_floor() <= c.similarity_floor());
        assert!(c.similarity_floor() < c.duplicate_threshold());
    }

    #[test]
    fn setters_accept_inclusive_bounds() {
        let c = Config::default()
            .with_similarity_floor(0.0)
            .unwrap()
            .with_solo_floor(1.0)
            .unwrap()
            .with_margin(0.0)
            .unwrap()
            .with_duplicate_threshold(1.0)
            .unwrap()
            .with_lexical_weight(0.0)
            .unwrap()
            .with_top_k(1)
            .unwrap();
        assert_eq!(c.similarity_floor(), 0.0);
        assert_eq!(c.solo_floor(), 1.0);
        assert_eq!(c.margin(), 0.0);
        assert_eq!(c.duplicate_threshold(), 1.0);
        assert_eq!(c.lexical_weight(), 0.0);
        assert_eq!(c.top_k().get(), 1);
    }

    #[test]
    fn setters_reject_out_of_domain_values_naming_the_field() {
        let base = Config::default();
        let cases: [(Result<Config, ConfigError>, ConfigField); 9] = [
            (
                base.with_similarity_floor(2.0),
                ConfigField::SimilarityFloor,
            ),
            (
                base.with_similarity_floor(f64::NAN),
                ConfigField::SimilarityFloor,
            ),
            (base.with_solo_floor(-0.01), ConfigField::SoloFloor),
            (
                base.with_duplicate_threshold(f64::INFINITY),
                ConfigField::DuplicateThreshold,
            ),
            (base.with_margin(1.5), ConfigField::Margin),
            (base.with_margin(f64::NEG_INFINITY), ConfigField::Margin),
            (base.with_top_k(0), ConfigField::TopK),
            (base.with_lexical_weight(1.01), ConfigField::LexicalWeight),
            (base.with_lexical_weight(-1.0), ConfigField::LexicalWeight),
        ];
        for (result, field) in cases {
            let error = result.expect_err("out of domain");
            assert_eq!(error.field(), field);
            assert!(error.to_string().contains(field.as_str()), "{error}");
        }
    }

    #[test]
    fn guide_example() {
        let config = Config::default()
            .with_similarity_floor(0.85)
            .unwrap()
            .with_top_k(5)
            .unwrap();
        assert_eq!(config.top_k().get(), 5);
        assert_eq!(config.similarity_floor(), 0.85);
    }

    #[cfg(feature = "serde")]
    #[test]
    fn serde_defaults_round_trip_and_checked_deserialisation() {
        let c: Config = serde_json::from_str(r#"{"similarity_floor": 0.85, "top_k": 5}"#).unwrap();
        assert_eq!(c.similarity_floor(), 0.85);
        assert_eq!(c.top_k().get(), 5);
        assert_eq!(c.margin(), DEFAULT_MARGIN);

        let empty: Config = serde_json::from_str("{}").unwrap();
        assert_eq!(empty, Config::default());

        let custom = Config::default()
            .with_margin(0.125)
            .unwrap()
            .with_solo_floor(0.25)
            .unwrap();
        let text = serde_json::to_string(&custom).unwrap();
        let back: Config = serde_json::from_str(&text).unwrap();
        assert_eq!(back, custom);

        for bad in [
            r#"{"similarity_floor": 2.0}"#,
            r#"{"top_k": 0}"#,
            r#"{"margin": -0.5}"#,
            r#"{"top_k": -1}"#,
            r#"{"similarity_flor": 0.5}"#,
        ] {
            assert!(serde_json::from_str::<Config>(bad).is_err(), "{bad}");
        }
        let message = serde_json::from_str::<Config>(r#"{"solo_floor": 7}"#)
            .unwrap_err()
            .to_string();
        assert!(message.contains("solo_floor"), "{message}");
    }
}
