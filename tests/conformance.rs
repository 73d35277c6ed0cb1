//! One conformance suite, every backend runs it: local disk, the in-memory object store
//! (generic staged commit) and two real S3 servers (Garage, which ignores conditional writes,
//! and Ceph's radosgw, which honours them; `./scripts/test` starts both). The checks are the
//! library's own ([`filesink::conformance`], feature `test-util`), the ones a third-party
//! backend runs too.

mod common;

use common::backend::Backend;
use filesink::conformance::{self, *};

fn s3() -> Option<Backend> {
    common::backend::s3_or_explain()
}

fn ceph() -> Option<Backend> {
    common::backend::ceph_or_explain()
}

/// The probe behind [`filesink::storage::ObjectStorage::capabilities`] finds conditional puts
/// exactly where the store honours them: the in-memory store and Ceph refuse a second
/// `If-None-Match: *` put, Garage replaces the object.
async fn the_probe_finds_conditional_puts_where_the_store_honours_them(b: Backend) {
    let storage = b.object_storage().expect("an object store");
    let found = storage.capabilities().await.unwrap().conditional_put;
    assert_eq!(
        found, b.conditional_put,
        "[{}] the probe found conditional_put = {found}",
        b.name
    );
}

mod capabilities {
    use super::*;

    #[tokio::test]
    async fn memory() {
        the_probe_finds_conditional_puts_where_the_store_honours_them(Backend::memory()).await
    }

    #[tokio::test]
    async fn s3() {
        if let Some(b) = super::s3() {
            the_probe_finds_conditional_puts_where_the_store_honours_them(b).await
        }
    }

    #[tokio::test]
    async fn ceph() {
        if let Some(b) = super::ceph() {
            the_probe_finds_conditional_puts_where_the_store_honours_them(b).await
        }
    }
}

macro_rules! suite {
    ($($check:ident $(($arg:expr))?),* $(,)?) => {
        mod local {
            use super::*;
            $(#[tokio::test] async fn $check() { super::$check(&Backend::local() $(, $arg)?).await })*
        }
        mod memory {
            use super::*;
            $(#[tokio::test] async fn $check() { super::$check(&Backend::memory() $(, $arg)?).await })*
        }
        mod s3 {
            #[allow(unused_imports)]
            use super::*;
            $(#[tokio::test] async fn $check() { if let Some(b) = super::s3() { super::$check(&b $(, $arg)?).await } })*
        }
        mod ceph {
            #[allow(unused_imports)]
            use super::*;
            $(#[tokio::test] async fn $check() { if let Some(b) = super::ceph() { super::$check(&b $(, $arg)?).await } })*
        }
    };
}

async fn two_coordinators_racing_on_one_job_one_wins(b: &dyn Location) {
    conformance::two_coordinators_on_one_job_one_wins(b, true).await
}

async fn two_coordinators_one_after_the_other_on_one_job_one_wins(b: &dyn Location) {
    conformance::two_coordinators_on_one_job_one_wins(b, false).await
}

async fn crash_between_precommit_and_commit_completed(b: &dyn Location) {
    conformance::crash_between_precommit_and_commit(b, true).await
}

async fn crash_between_precommit_and_commit_not_completed(b: &dyn Location) {
    conformance::crash_between_precommit_and_commit(b, false).await
}

suite!(
    crash_before_precommit,
    crash_between_precommit_and_commit_completed,
    crash_between_precommit_and_commit_not_completed,
    crash_after_commit,
    commit_twice_and_from_a_fresh_process,
    crash_between_two_commits_of_one_call,
    abort_after_a_crash_leaves_nothing_behind,
    cleanup_stays_inside_the_exact_prefix,
    a_file_of_many_parts,
    small_files_commit_whole,
    two_coordinators_racing_on_one_job_one_wins,
    two_coordinators_one_after_the_other_on_one_job_one_wins,
    a_second_run_of_a_live_job_is_refused_and_changes_nothing,
    runs_starting_at_the_same_moment_never_both_own_a_job,
    a_zombie_writer_with_the_same_identity_cannot_overwrite_or_complete,
    two_jobs_on_one_prefix_never_touch_each_other,
    memory_stays_within_the_budget,
    hostile_paths_are_refused_by_every_storage_call,
    refuses_replace_is_the_stores_answer_and_decides_races,
    replace_metadata_swaps_the_whole_object,
    list_metadata_from_lists_the_names_after_one_in_order,
    committed_part_files_are_read_and_removed_by_their_final_names,
    pending_part_files_are_read_back_under_their_hidden_names,
);
