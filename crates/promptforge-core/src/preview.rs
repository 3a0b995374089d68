//! Binding previews: what `tools.bind`, `models.bind` and `models.default` would bind,
//! decided before any run by the run's own resolution code (see [`Previewer`]).
//!
//! Editors use it to show, next to a binding call, the tool or model a run would get and
//! the picker's score, or the error the run would fail with.

pub use crate::agent::preview::{
    MAX_CONSTRAINTS_SOURCE_BYTES, ModelCall, ModelConstraints, Preview, Previewer,
};
