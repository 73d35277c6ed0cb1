//! Table maintenance: the work that keeps a Delta table tidy after the jobs have written it,
//! run beside the jobs rather than inside them (`docs/design/delta.md` sections 9 and 10).
//!
//! - [`compact()`]: rewrites small files into files of a target size, as a job of its own
//!   whose rounds are checkpoints (`filesink compact`);
//! - [`vacuum()`]: deletes the data files no table version within the retention needs, and the
//!   log entries no reader needs any more (`filesink vacuum`).
//!
//! Maintenance reads the table through its log (`crate::table`) and the jobs through their
//! manifests ([`crate::job`]), and changes the store only through the [`Storage`]
//! methods that refuse anything but the sink's own part names
//! ([`Storage::remove_data_file`](crate::storage::Listing::remove_data_file)) or the log's files ([`Storage::delete_metadata`](crate::storage::MetadataStore::delete_metadata)), and, for
//! compaction, through a coordinator job.
//!
//! `maintain` sits above [`crate::job`]: a compaction round *is* a coordinator job
//! (lease, manifest, restore), and `table` stays below the coordinator. It may use `error`,
//! `protocol`, `bucket`, `format`, `storage`, `sink`, `table` and `checkpoint`, and `ingest`
//! may use it (`scripts/check-layers`).
//!
//! [`Storage`]: crate::storage::Storage
//! [`Storage::remove_data_file`](crate::storage::Listing::remove_data_file): crate::storage::Storage::remove_data_file
//! [`Storage::delete_metadata`](crate::storage::MetadataStore::delete_metadata): crate::storage::Storage::delete_metadata

pub mod compact;
pub mod vacuum;

pub use compact::{compact, compaction_round, Bin, CompactOptions, CompactReport};
pub use vacuum::{vacuum, VacuumOptions, VacuumReport};
