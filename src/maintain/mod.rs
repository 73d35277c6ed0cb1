//! Table maintenance: work on a Delta table that rearranges what it holds without changing
//! its data. [`compact`] rewrites small files into larger ones, as a job of its own.
//!
//! `maintain` sits above [`crate::checkpoint`]: a compaction round *is* a coordinator job
//! (lease, manifest, restore), and `table` stays below the coordinator
//! (`scripts/check-layers`).

pub mod compact;

pub use compact::{compact, Bin, CompactOptions, CompactReport};
