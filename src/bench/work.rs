//! The work directory (removed afterwards) and the progress shown while a run goes.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::BoxError;

/// The fresh working directory, removed when dropped (also on errors).
/// The fresh directory the benchmark works in, and the directories above it that the
/// benchmark had to create (deepest first); all are removed at the end, nothing else.
pub(super) struct WorkDir(pub(super) PathBuf, pub(super) Vec<PathBuf>);

impl WorkDir {
    pub(super) fn create(parent: &Path) -> Result<WorkDir, BoxError> {
        let mut made = Vec::new();
        let mut missing = Some(parent);
        while let Some(p) = missing.filter(|p| !p.as_os_str().is_empty() && !p.exists()) {
            made.push(p.to_path_buf());
            missing = p.parent();
        }
        // Created outermost first, so that a failure leaves only what is listed to remove.
        let mut work = WorkDir(PathBuf::new(), Vec::new());
        for p in made.iter().rev() {
            std::fs::create_dir(p).map_err(|e| format!("cannot create `{}`: {e}", p.display()))?;
            work.1.insert(0, p.clone());
        }
        let dir = parent.join(format!("filesink-bench-{}", uuid::Uuid::now_v7().simple()));
        std::fs::create_dir(&dir).map_err(|e| format!("cannot create `{}`: {e}", dir.display()))?;
        work.0 = dir;
        Ok(work)
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if !self.0.as_os_str().is_empty() {
            if let Err(e) = std::fs::remove_dir_all(&self.0) {
                note(&format!("could not remove `{}`: {e}", self.0.display()));
                return;
            }
        }
        // Only if still empty: anything another process put there stays.
        for dir in &self.1 {
            if let Err(e) = std::fs::remove_dir(dir) {
                note(&format!("could not remove `{}`: {e}", dir.display()));
                return;
            }
        }
    }
}

/// A message on standard error (errors writing it are ignored).
pub(super) fn note(msg: &str) {
    let _ = writeln!(std::io::stderr(), "filesink bench: {msg}");
}

/// Progress on standard error: a bar on a terminal, a line per phase otherwise.
pub(super) struct Progress {
    pub(super) bar: Option<ProgressBar>,
    pub(super) label: String,
}

impl Progress {
    pub(super) fn start(label: &str, total: u64) -> Progress {
        let bar = if std::io::stderr().is_terminal() {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template(
                "{prefix:>36} [{elapsed_precise}] {wide_bar} {pos}/{len} ({per_sec})",
            ) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar.set_prefix(label.to_string());
            Some(bar)
        } else {
            note(&format!("{label}..."));
            None
        };
        Progress {
            bar,
            label: label.to_string(),
        }
    }

    pub(super) fn advance(&self, n: u64) {
        if let Some(bar) = &self.bar {
            bar.inc(n);
        }
    }

    pub(super) fn finish(&self, summary: &str) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        note(&format!("{}: {summary}", self.label));
    }
}
