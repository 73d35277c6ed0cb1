//! Which hidden files are a sink's own: part names of the exact shape filesink writes, by
//! writers of the sink's jobs ([`OwnNames`]).

use super::retired::Retired;
use crate::protocol::paths::validate_job_name;
use crate::protocol::{split_rel, PartName};
use crate::storage::Leftover;

/// The job a coordinator's writer id `<job>_<i>` belongs to; `None` for an id of another form.
pub fn job_of_writer(writer_id: &str) -> Option<&str> {
    let (job, index) = writer_id.rsplit_once('_')?;
    let canonical = !index.is_empty()
        && index.bytes().all(|b| b.is_ascii_digit())
        && (index == "0" || !index.starts_with('0'));
    (canonical && validate_job_name(job).is_ok()).then_some(job)
}

/// The names that are a sink's own, for cleanup that is not a writer's restore (`filesink
/// abort`): names of the exact shape filesink writes ([`crate::sink::state::PartName`]), with
/// one of the sink's prefixes and suffixes ([`crate::OutputFileConfig`]), by a writer
/// `<job>_<i>` of one of its jobs, those with a directory under `_filesink/jobs/`
/// ([`manifest::list_jobs`](super::manifest::list_jobs)).
///
/// Anything else is foreign, to be reported and never removed: another tool's file or
/// upload, a name that only looks like a part name, a writer no job of this sink knows. (A
/// library user without a [`Coordinator`](super::Coordinator) cleans up by restoring its writer, which removes
/// only that writer id's names.)
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwnNames {
    /// The sink's jobs.
    pub jobs: Vec<String>,
    /// The part file prefixes its writers use.
    pub prefixes: Vec<String>,
    /// The part file suffixes its writers use.
    pub suffixes: Vec<String>,
    /// Its retired jobs ([`super::retired`]): their files stay the sink's own.
    pub retired: Retired,
}

impl OwnNames {
    /// The names of `jobs` with the default prefix and the default suffix of every format;
    /// [`OwnNames::learn`] adds the ones a manifest shows.
    pub fn of_jobs(jobs: Vec<String>) -> OwnNames {
        OwnNames {
            jobs,
            prefixes: vec![crate::sink::OutputFileConfig::DEFAULT_PREFIX.into()],
            suffixes: [
                crate::format::FileFormat::parquet(),
                crate::format::FileFormat::json_lines(),
                crate::format::FileFormat::csv(),
            ]
            .iter()
            .map(|f| f.default_suffix().to_string())
            .collect(),
            retired: Retired::default(),
        }
    }

    /// Adds the sink's retired jobs, whose files stay its own (with the default prefix and
    /// suffixes, or those a latest manifest shows).
    pub fn with_retired(mut self, retired: Retired) -> Self {
        self.retired = retired;
        self
    }

    /// Adds the prefix and suffix of `final_path`, a final part name a manifest of the sink
    /// names (anything else is ignored).
    pub fn learn(&mut self, final_path: &str) {
        if let Some(n) = PartName::parse_final(split_rel(final_path).1) {
            if !self.prefixes.contains(&n.prefix) {
                self.prefixes.push(n.prefix);
            }
            if !self.suffixes.contains(&n.suffix) {
                self.suffixes.push(n.suffix);
            }
        }
    }

    /// Whether `leftover` is one of the sink's own.
    pub fn owns(&self, leftover: &Leftover) -> bool {
        leftover.name.as_ref().is_some_and(|n| self.owns_name(n))
    }

    /// Whether the visible file at `path` has a final part name of a writer of one of the
    /// sink's jobs (a file one of them committed, or one named exactly like it), whatever its
    /// prefix and suffix: a job's latest manifest shows only the names of its latest files,
    /// and a visible file is only counted by this, never removed.
    pub fn owns_final(&self, path: &str) -> bool {
        PartName::parse_final(split_rel(path).1).is_some_and(|n| self.of_a_job(&n))
    }

    pub(super) fn owns_name(&self, n: &PartName) -> bool {
        self.prefixes.contains(&n.prefix) && self.suffixes.contains(&n.suffix) && self.of_a_job(n)
    }

    pub(super) fn of_a_job(&self, n: &PartName) -> bool {
        job_of_writer(&n.writer_id).is_some_and(|job| {
            self.jobs.iter().any(|j| j == job) || self.retired.get(job).is_some()
        })
    }
}
