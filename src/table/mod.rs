//! Table formats: checkpoints committed into a table's log, so readers see each checkpoint as
//! one atomic table version.
//!
//! [Delta Lake](delta) is the one table format: appends with exactly-once `txn`s, concurrent
//! writers where the store can refuse to replace, log checkpoints. The design, with its
//! invariants, crash cases and the protocol features filesink writes, accepts and refuses, is
//! `docs/design/delta.md`; vacuum is in [`crate::maintain`], compaction and the pre-commit
//! merge are still to come (its section 14).
//!
//! `table` sits beside [`crate::sink`]: it may use `error`, `protocol`, `bucket`, `format` and
//! `storage`, never a writer or the coordinator (`scripts/check-layers`).

pub mod delta;
