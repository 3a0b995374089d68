//! What to do with a run trace (`promptforge_core::trace`): show it, write it, export it.
//!
//! - [`viewer`]: the self-contained HTML viewer (no network, works from `file://`), with a
//!   trace embedded or in live mode for `promptforge-dev --ui`;
//! - [`write`]: trace files checked before a run and written atomically after it;
//! - [`otlp`]: a span listener that exports a run's spans over OTLP/HTTP (protobuf) with
//!   the OpenTelemetry GenAI semantic conventions, off unless the standard
//!   `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set.
#![forbid(unsafe_code)]

pub mod otlp;
pub mod viewer;
pub mod write;
