//! What every unit's Lua VM shares, below both the walk (`engine`) and the model and tool
//! layer (`agent`): the per-VM prelude and the registry keys of its pieces, and the
//! conversions between Lua values, JSON, result text and errors ([`values`]).
//!
//! Depends on neither layer: `parse` compiles [`PRELUDE`] at parse time, the walk builds
//! VMs over it, and the agent layer builds its frozen handles with the prelude's helpers.

pub(crate) mod values;

/// The per-VM prelude source (compiled once per prompt at parse time).
pub(crate) const PRELUDE: &str = include_str!("prelude.lua");

/// The registry key of the prelude's helper table (`var`, `sys`, `tool_handle`, ...).
pub(crate) const HELPERS_KEY: &str = "promptforge.helpers";
/// The registry key of the raw `var` data behind the `var` proxy.
pub(crate) const VAR_KEY: &str = "promptforge.var";
/// The registry key of the raw `sys` table behind the sealed `sys` global.
pub(crate) const SYS_KEY: &str = "promptforge.sys";
