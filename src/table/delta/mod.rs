//! Delta Lake tables (`_delta_log/` beside `_filesink/`), written by filesink's own minimal log
//! writer against the Delta protocol (`PROTOCOL.md` of delta-io/delta).
//!
//! The design is `docs/design/delta.md`; sections 2–8 and 12 move here once the log reader and
//! the commit loop exist. The pieces so far are pure, with no storage I/O:
//!
//! - `schema`: Arrow schema → Delta `schemaString`, and the compatibility check of a job's
//!   schema against a table's (design section 7);
//! - `features`: which protocol versions, table features and table properties of an existing
//!   table filesink accepts, and the protocol it writes for a new one (design section 12);
//! - `actions`: the log actions (`commitInfo`, `protocol`, `metaData`, `txn`, `add`, `remove`,
//!   `domainMetadata`), tolerant reading of other engines' entries and rendering of ours;
//! - `stats`: the `stats` string of an `add`, its `partitionValues` and its URI-encoded `path`;
//! - `checkpoint`: classic Parquet log checkpoints read (any engine's, multi-part too) and
//!   written (design section 8), `_last_checkpoint`, and the names of the log's files.

// The commit loop (design section 14, step 6) is the first caller outside the tests; until it
// lands these modules are used by their unit tests only.
#![allow(dead_code)]

pub(crate) mod actions;
pub(crate) mod checkpoint;
pub(crate) mod features;
pub(crate) mod schema;
pub(crate) mod stats;
