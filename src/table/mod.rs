//! Table formats: checkpoints committed into a table's log, so readers see each checkpoint as
//! one atomic table version.
//!
//! Only [Delta Lake](delta) is planned. The design, with its invariants, crash cases and the
//! protocol features filesink writes, accepts and refuses, is `docs/design/delta.md`; it
//! becomes the documentation of this module as the pieces land. What exists so far is the pure
//! part: schema conversion, feature acceptance, log actions and statistics, without storage.
//!
//! `table` sits beside [`crate::sink`]: it may use `error`, `protocol`, `bucket`, `format` and
//! `storage`, never a writer or the coordinator (`scripts/check-layers`).

pub mod delta;
