//! The system calls [`LocalStorage`](super::LocalStorage) makes, behind one small trait.
//!
//! [`RealFs`] is the operating system. The other implementation is
//! `storage::power_loss::PowerLossDisk` (feature `test-util`), a disk simulator that forgets
//! whatever was not flushed when the power goes: the same commit path runs on both, so the
//! power-loss tests exercise the code users run, down to the order of its flushes.
//!
//! # Contract
//!
//! The calls mean what their POSIX namesakes mean, and no more:
//!
//! - [`Fs::create_new`], [`Fs::create_dir`], [`Fs::rename_noreplace`] and [`Fs::remove_file`]
//!   change a directory's entries; they are durable only after [`Fs::sync_dirs`] of that
//!   directory returns `Ok`. A new directory's own entry is in its parent.
//! - [`FsFile::write_all`] appends; the bytes are durable only after [`Fs::sync_files`] of that
//!   file returns `Ok`. Flushing a file says nothing about its name.
//! - [`Fs::rename_noreplace`] is atomic and never replaces: it fails with
//!   [`io::ErrorKind::AlreadyExists`] if the target exists.
//! - [`Fs::rename_replace`] is atomic and replaces a file at the target: the name holds the old
//!   file or the new one, never neither. Only metadata pointers use it
//!   (`Storage::replace_metadata`); part files and manifests never do.
//! - [`Fs::sync_files`] and [`Fs::sync_dirs`] flush a whole group and answer for each member;
//!   an implementation may flush the members concurrently (a journaling file system commits
//!   concurrent flushes together), or flush more than the group (the whole file system), but
//!   returns only when every member is durable, and answers `Ok` for a member only if nothing
//!   reported a failure to write it.
//! - [`Fs::try_lock`] takes an exclusive lock that lives as long as the returned guard, or as
//!   long as the process: whoever holds it dies, the lock is released (the kernel does it for
//!   [`RealFs`]). A lock is no file content: it says nothing about durability.
//!
//! # Large groups: one `syncfs`
//!
//! Every `fsync` ends with a flush of the device's write cache, even when the journal commit
//! it asks for has already happened: a checkpoint of 1,000 partitions made 1,000 file and
//! 1,000 directory flushes at its vote and 1,000 more at its commit, and on this project's
//! test disk those took 0.2 s and 0.1 s of a 1.1 s ingest. `syncfs(2)` makes everything
//! on one file system durable (every dirty page and inode written, the journal committed, one
//! device flush) in one call: 10 ms for those 1,000 directories. [`RealFs`] uses it for a
//! group of at least [`RealFs::SYNCFS_GROUP_MIN`] members where its answers are as exact as
//! those of `fsync`, and otherwise flushes each member:
//!
//! - **Linux 5.17 or later** (mainline; some stable kernels before it have the fix), where
//!   `syncfs` returns the file system's own failure (a journal commit, an XFS log force, the
//!   device flush) and any write-back error of the file system since the descriptor it is
//!   called on was opened. Before 5.8 it always succeeded; from 5.8 to 5.16 it reported
//!   write-back errors but dropped the file system's own;
//! - **ext4, XFS or btrfs**, local file systems whose `syncfs` is the full write-back and
//!   journal commit above (not NFS, FUSE or overlay file systems, whose `sync_fs` may do less);
//! - **every member on that one file system**: the same `statfs` type and id and the same
//!   device number for each (a partition directory that is a mount point of another disk, or
//!   a file an overlay reports with its upper disk's device, is not);
//! - **the call allowed**: where `syncfs` is refused (`ENOSYS`, `EPERM`, `EINVAL`,
//!   `EOPNOTSUPP`: a sandbox), each member is flushed on its own.
//!
//! Each file still answers for itself: after the one `syncfs`, a `sync_file_range` that waits
//! for the file's pages returns the write-back errors recorded for that file since its last
//! check, the error an `fsync` would return, without a device flush. And one member (the
//! first file, or the first directory) is `fsync`ed after the `syncfs`: a file system that
//! has failed (a journal abort that left it read-only, a shutdown) makes `syncfs` return 0
//! without writing anything, where every `fsync` there returns `EROFS` or `EIO`. Directories
//! are metadata, which these file systems write through their journal: a failure there is
//! the file system's, which `syncfs` or that `fsync` returns, and it fails every directory of
//! the group. (An ext4 without a journal writes directories through the device's buffers;
//! an error there that an earlier write-back recorded and a later one cleared could go
//! unreported.) Not tested by injecting such failures: that needs a device that fails on
//! demand (dm-error, dm-flakey).
//!
//! The cost: `syncfs` also writes back other programs' dirty data on the same file system,
//! so a checkpoint on a disk another program fills with unflushed writes waits for them too
//! (1,000 `fsync`s each commit the shared journal and flush the device as well); and a
//! write-back error of another program's file there since the group's first file was opened
//! fails the checkpoint too (it fails closed).

use std::fmt::Debug;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::UNIX_EPOCH;

/// A file system, as far as [`LocalStorage`](super::LocalStorage) uses one. See the
/// [module documentation](self) for the contract.
pub trait Fs: Send + Sync + Debug + 'static {
    /// Creates `path` and any missing parents; returns the directories it created, outermost
    /// first.
    fn create_dir_all(&self, path: &Path) -> io::Result<Vec<PathBuf>>;
    /// The absolute path without symbolic links.
    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf>;
    /// Creates one directory; [`io::ErrorKind::AlreadyExists`] if something has the name.
    fn create_dir(&self, path: &Path) -> io::Result<()>;
    /// Creates a new empty file for appending; [`io::ErrorKind::AlreadyExists`] if the name is
    /// taken.
    fn create_new(&self, path: &Path) -> io::Result<Arc<dyn FsFile>>;
    /// Opens a file for reading.
    fn open(&self, path: &Path) -> io::Result<Box<dyn FsRead>>;
    /// Reads a whole file.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let mut file = self.open(path)?;
        let mut out = Vec::new();
        file.read_to_end(&mut out)?;
        Ok(out)
    }
    /// Facts about `path` (symbolic links are not followed).
    fn stat(&self, path: &Path) -> io::Result<FsStat>;
    /// The entries of a directory with their facts. Names that are not UTF-8 are left out: no
    /// name filesink writes is. An entry removed or renamed between the listing and its facts
    /// is left out too (it is gone): `NotFound` means the directory itself is missing, never
    /// that one of its entries moved while it was listed.
    fn read_dir(&self, path: &Path) -> io::Result<Vec<(String, FsStat)>>;
    /// Renames atomically without replacing the target.
    fn rename_noreplace(&self, src: &Path, dst: &Path) -> io::Result<()>;
    /// Renames atomically, replacing a file at the target (POSIX `rename`).
    fn rename_replace(&self, src: &Path, dst: &Path) -> io::Result<()>;
    /// Removes a file's name.
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Removes an empty directory (an error if it holds anything). A disk that keeps its
    /// directories (the power-loss model) leaves it.
    fn remove_empty_dir(&self, path: &Path) -> io::Result<()> {
        let _ = path;
        Ok(())
    }
    /// Flushes the data of every file; one answer per file, in order.
    fn sync_files(&self, files: &[Arc<dyn FsFile>]) -> Vec<io::Result<()>>;
    /// Flushes the entries of every directory; one answer per directory, in order.
    fn sync_dirs(&self, dirs: &[PathBuf]) -> Vec<io::Result<()>>;
    /// Takes the exclusive lock of the file `path` (created if missing, in an existing
    /// directory) without waiting; `None` if another holder has it. `describe` replaces the
    /// file's content once the lock is held: who holds it, for [`Fs::lock_holder`].
    fn try_lock(&self, path: &Path, describe: &[u8]) -> io::Result<Option<Box<dyn FsLock>>>;
    /// Whether another holder has the lock of `path` right now, and what it wrote there; never
    /// takes the lock, so it cannot get in a holder's way. `None` if the lock is free or the
    /// file does not exist.
    fn lock_holder(&self, path: &Path) -> io::Result<Option<Vec<u8>>>;
}

/// A held [`Fs::try_lock`] lock; dropping it releases the lock.
pub trait FsLock: Send + Sync + Debug {}

/// A file open for appending.
pub trait FsFile: Send + Sync + Debug {
    /// Appends `data`.
    fn write_all(&self, data: &[u8]) -> io::Result<()>;
    /// Flushes the file's data (the group form is [`Fs::sync_files`]).
    fn sync_data(&self) -> io::Result<()>;
    /// Whether `path` still names this file (another process may have removed or replaced
    /// the name while this handle kept writing).
    fn is_named(&self, path: &Path) -> io::Result<bool>;
    /// The operating system's open file, for [`RealFs`]'s group flush; `None` elsewhere.
    fn os_file(&self) -> Option<&File> {
        None
    }
}

/// A file open for reading.
pub trait FsRead: Read + Send {
    /// The file's length.
    fn len_bytes(&self) -> io::Result<u64>;
}

/// What [`Fs::stat`] and [`Fs::read_dir`] tell about a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsStat {
    /// A directory.
    pub is_dir: bool,
    /// A regular file.
    pub is_file: bool,
    /// Length in bytes.
    pub len: u64,
    /// Last modification, in milliseconds since the Unix epoch (0 if unknown).
    pub modified_ms: i64,
}

/// The operating system's file system. Group flushes run on up to
/// [`RealFs::SYNC_THREADS_MAX`] threads at once, or as one `syncfs` (see the
/// [module documentation](self#large-groups-one-syncfs)).
#[derive(Debug, Clone, Copy, Default)]
pub struct RealFs;

impl RealFs {
    /// How many flushes of one group are in flight at once.
    pub const SYNC_THREADS_MAX: usize = 16;
    /// Groups of at least this many members are flushed with one `syncfs` where it answers
    /// as exactly as `fsync` does.
    pub const SYNCFS_GROUP_MIN: usize = 64;
}

impl Fs for RealFs {
    fn create_dir_all(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
        let mut missing = Vec::new();
        let mut at = Some(path);
        while let Some(dir) = at {
            if dir.as_os_str().is_empty() || dir.is_dir() {
                break;
            }
            missing.push(dir.to_path_buf());
            at = dir.parent();
        }
        missing.reverse();
        let mut created = Vec::new();
        for dir in missing {
            match fs::create_dir(&dir) {
                Ok(()) => created.push(dir),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(created)
    }

    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        path.canonicalize()
    }

    fn create_dir(&self, path: &Path) -> io::Result<()> {
        fs::create_dir(path)
    }

    fn create_new(&self, path: &Path) -> io::Result<Arc<dyn FsFile>> {
        let file = OpenOptions::new().write(true).create_new(true).open(path)?;
        Ok(Arc::new(RealFile(file)))
    }

    fn open(&self, path: &Path) -> io::Result<Box<dyn FsRead>> {
        Ok(Box::new(File::open(path)?))
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        fs::read(path)
    }

    fn stat(&self, path: &Path) -> io::Result<FsStat> {
        Ok(stat_of(&fs::symlink_metadata(path)?))
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<(String, FsStat)>> {
        let mut out = Vec::new();
        for entry in fs::read_dir(path)? {
            let entry = entry?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            // A temporary name renamed to its final one, or a file removed, since the listing
            // read it: gone, not an error (callers read `NotFound` as "no such directory").
            let meta = match entry.metadata() {
                Ok(meta) => meta,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            out.push((name, stat_of(&meta)));
        }
        Ok(out)
    }

    fn rename_noreplace(&self, src: &Path, dst: &Path) -> io::Result<()> {
        rename_noreplace(src, dst)
    }

    fn rename_replace(&self, src: &Path, dst: &Path) -> io::Result<()> {
        fs::rename(src, dst)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    fn remove_empty_dir(&self, path: &Path) -> io::Result<()> {
        fs::remove_dir(path)
    }

    fn sync_files(&self, files: &[Arc<dyn FsFile>]) -> Vec<io::Result<()>> {
        #[cfg(target_os = "linux")]
        if files.len() >= RealFs::SYNCFS_GROUP_MIN {
            if let Some(done) = whole_fs::sync_files(files) {
                return done;
            }
        }
        concurrently(files, |f| f.sync_data())
    }

    fn sync_dirs(&self, dirs: &[PathBuf]) -> Vec<io::Result<()>> {
        #[cfg(target_os = "linux")]
        if dirs.len() >= RealFs::SYNCFS_GROUP_MIN {
            if let Some(done) = whole_fs::sync_dirs(dirs) {
                return done;
            }
        }
        let mut results = concurrently(dirs, |d| DIR_SYNCS.run(|| sync_dir(d)));
        // A directory that could not be opened for want of descriptors (the writers' part
        // files hold most of them) is flushed again, alone, once the others let theirs go.
        for (dir, result) in dirs.iter().zip(results.iter_mut()) {
            if matches!(result, Err(e) if e.raw_os_error() == Some(libc::EMFILE)) {
                *result = DIR_SYNCS.run(|| sync_dir(dir));
            }
        }
        results
    }

    fn try_lock(&self, path: &Path, describe: &[u8]) -> io::Result<Option<Box<dyn FsLock>>> {
        // A holder may remove the lock file as it lets the lock go (a retired job's): a lock
        // taken on a file that no longer has this name locks nothing, and is taken again on
        // the file the name has now.
        let file = loop {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(path)?;
            if !os_lock(&file, LockOp::Take)? {
                return Ok(None);
            }
            if still_named(&file, path)? {
                break file;
            }
        };
        file.set_len(0)?;
        (&file).write_all(describe)?;
        Ok(Some(Box::new(RealLock(file))))
    }

    fn lock_holder(&self, path: &Path) -> io::Result<Option<Vec<u8>>> {
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        if !os_lock(&file, LockOp::Query)? {
            return Ok(None);
        }
        let mut text = Vec::new();
        (&file).read_to_end(&mut text)?;
        Ok(Some(text))
    }
}

/// A lock held through its open file: closing the file (dropping it, or the process dying)
/// releases it.
#[derive(Debug)]
struct RealLock(#[allow(dead_code)] File);

impl FsLock for RealLock {}

#[derive(Clone, Copy, PartialEq, Eq)]
enum LockOp {
    /// Take the lock; `Ok(false)` if another holder has it.
    Take,
    /// Ask whether another holder has it (`Ok(true)`), without taking it.
    Query,
}

/// Open-file-description locks on Linux: held by one open of the file (not by the process,
/// as POSIX record locks are, so two opens in one process exclude each other as two processes
/// do) and released when that open is closed. Elsewhere `flock`, which has the same scope;
/// there a query takes and drops the lock.
fn os_lock(file: &File, op: LockOp) -> io::Result<bool> {
    use std::os::unix::io::AsRawFd;
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `flock` is plain old data; zero is a valid value for every field.
        let mut lock: libc::flock = unsafe { std::mem::zeroed() };
        lock.l_type = libc::F_WRLCK as libc::c_short;
        lock.l_whence = libc::SEEK_SET as libc::c_short;
        let cmd = match op {
            LockOp::Take => libc::F_OFD_SETLK,
            LockOp::Query => libc::F_OFD_GETLK,
        };
        // SAFETY: the descriptor is open for the duration of the call and `lock` is valid.
        if unsafe { libc::fcntl(file.as_raw_fd(), cmd, &mut lock) } != 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EACCES) if op == LockOp::Take => Ok(false),
                _ => Err(e),
            };
        }
        Ok(match op {
            LockOp::Take => true,
            LockOp::Query => lock.l_type != libc::F_UNLCK as libc::c_short,
        })
    }
    #[cfg(not(target_os = "linux"))]
    {
        // SAFETY: the descriptor is open for the duration of the call.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EWOULDBLOCK) => Ok(op == LockOp::Query),
                _ => Err(e),
            };
        }
        if op == LockOp::Query {
            // SAFETY: as above.
            unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_UN) };
            return Ok(false);
        }
        Ok(true)
    }
}

/// Directory flushes in flight in the whole process: each holds a descriptor while it runs,
/// and every writer's vote flushes its directories at the same time, so their number is
/// bounded for the process, not per group ([`RealFs::SYNC_THREADS_MAX`]).
static DIR_SYNCS: Slots = Slots::new(RealFs::SYNC_THREADS_MAX);

/// A counting semaphore for blocking threads.
struct Slots {
    used: std::sync::Mutex<usize>,
    freed: std::sync::Condvar,
    max: usize,
}

impl Slots {
    const fn new(max: usize) -> Slots {
        Slots {
            used: std::sync::Mutex::new(0),
            freed: std::sync::Condvar::new(),
            max,
        }
    }

    /// Runs `f` once a slot is free, holding the slot while it runs (a panic included).
    fn run<T>(&self, f: impl FnOnce() -> T) -> T {
        struct Held<'a>(&'a Slots);
        impl Drop for Held<'_> {
            fn drop(&mut self) {
                *self.0.used.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
                self.0.freed.notify_one();
            }
        }
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        while *used >= self.max {
            used = self.freed.wait(used).unwrap_or_else(|e| e.into_inner());
        }
        *used += 1;
        drop(used);
        let _held = Held(self);
        f()
    }
}

/// Runs `op` on every item, on up to [`RealFs::SYNC_THREADS_MAX`] threads, and waits for all.
fn concurrently<T: Sync>(
    items: &[T],
    op: impl Fn(&T) -> io::Result<()> + Sync,
) -> Vec<io::Result<()>> {
    if items.len() <= 1 {
        return items.iter().map(&op).collect();
    }
    let next = AtomicUsize::new(0);
    let threads = items.len().min(RealFs::SYNC_THREADS_MAX);
    let mut results: Vec<Option<io::Result<()>>> = (0..items.len()).map(|_| None).collect();
    let done: Vec<Vec<(usize, io::Result<()>)>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break };
                        mine.push((i, op(item)));
                    }
                    mine
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    for (i, r) in done.into_iter().flatten() {
        results[i] = Some(r);
    }
    results
        .into_iter()
        .map(|r| r.expect("every item is taken by one worker"))
        .collect()
}

#[derive(Debug)]
struct RealFile(File);

impl FsFile for RealFile {
    fn write_all(&self, data: &[u8]) -> io::Result<()> {
        (&self.0).write_all(data)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }

    fn is_named(&self, path: &Path) -> io::Result<bool> {
        use std::os::unix::fs::MetadataExt;
        let open = self.0.metadata()?;
        match fs::symlink_metadata(path) {
            Ok(named) => Ok(named.dev() == open.dev() && named.ino() == open.ino()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn os_file(&self) -> Option<&File> {
        Some(&self.0)
    }
}

/// A group flushed with one `syncfs`, where that answers as exactly as `fsync` ([module
/// documentation](self#large-groups-one-syncfs)); `None` where it does not, for the caller to
/// flush each member.
#[cfg(target_os = "linux")]
mod whole_fs {
    use std::ffi::CString;
    use std::fs::File;
    use std::io;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::io::AsRawFd;
    use std::path::{Path, PathBuf};
    use std::sync::{Arc, OnceLock};

    use super::FsFile;

    /// `statfs` magic numbers of the file systems whose `syncfs` is a full write-back and
    /// journal (or log, or transaction) commit.
    const EXT4: i64 = 0xEF53;
    const XFS: i64 = 0x5846_5342;
    const BTRFS: i64 = 0x9123_683E;

    /// Whether this kernel's `syncfs` reports every failure: write-back errors since 5.8, the
    /// file system's own (journal commit, log force, device flush) since 5.17.
    fn kernel_reports_errors() -> bool {
        static REPORTS: OnceLock<bool> = OnceLock::new();
        *REPORTS.get_or_init(|| {
            let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
            release_at_least(&release, (5, 17))
        })
    }

    /// Whether kernel release `release` (`6.18.44-generic`) is `at_least` (major, minor); an
    /// unreadable release is not.
    pub(super) fn release_at_least(release: &str, at_least: (u32, u32)) -> bool {
        let mut parts = release
            .trim()
            .split(['.', '-'])
            .map(|p| p.parse::<u32>().ok());
        matches!(
            (parts.next().flatten(), parts.next().flatten()),
            (Some(major), Some(minor)) if (major, minor) >= at_least
        )
    }

    /// What tells file systems apart here: the `statfs` type and id, and the device number
    /// (an overlay can report its upper file system's device for its files).
    #[derive(Debug, PartialEq, Eq)]
    pub(super) struct FsId {
        kind: i64,
        fsid: [i32; 2],
        dev: u64,
    }

    // `f_type` is an `i64` here and narrower on other targets.
    #[allow(clippy::unnecessary_cast)]
    fn id_of(st: &libc::statfs, dev: u64) -> FsId {
        // SAFETY: `fsid_t` is two C ints (its field is private in the libc crate).
        let fsid: [i32; 2] = unsafe { std::mem::transmute_copy(&st.f_fsid) };
        FsId {
            // Compared as the 32-bit magic it is (a 32-bit `long` would sign-extend btrfs's).
            kind: st.f_type as u32 as i64,
            fsid,
            dev,
        }
    }

    pub(super) fn id_of_file(file: &File) -> Option<FsId> {
        // SAFETY: `statfs` is plain old data; zero is a valid value for every field.
        let mut st: libc::statfs = unsafe { std::mem::zeroed() };
        // SAFETY: the descriptor is open for the duration of the call and `st` is valid.
        if unsafe { libc::fstatfs(file.as_raw_fd(), &mut st) } != 0 {
            return None;
        }
        Some(id_of(&st, file.metadata().ok()?.dev()))
    }

    fn id_of_path(path: &Path) -> Option<FsId> {
        let c = CString::new(path.as_os_str().as_bytes()).ok()?;
        // SAFETY: as above.
        let mut st: libc::statfs = unsafe { std::mem::zeroed() };
        // SAFETY: `c` is a valid NUL-terminated string and `st` is valid for the call.
        if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
            return None;
        }
        Some(id_of(&st, std::fs::metadata(path).ok()?.dev()))
    }

    /// Whether a file system of this kind is flushed whole.
    pub(super) fn taken(id: &FsId) -> bool {
        kernel_reports_errors() && matches!(id.kind, EXT4 | XFS | BTRFS)
    }

    /// Whether a group in directory `dir` would be flushed with one `syncfs`: its file system
    /// is taken and the call is allowed (it is made, once).
    #[cfg(test)]
    pub(super) fn probe(dir: &Path) -> bool {
        let Ok(file) = File::open(dir) else {
            return false;
        };
        id_of_file(&file).is_some_and(|id| taken(&id)) && syncfs(&file).is_some()
    }

    /// Whether every member is on one file system that is flushed whole.
    fn one_taken_fs(ids: impl Iterator<Item = Option<FsId>>) -> bool {
        if !kernel_reports_errors() {
            return false;
        }
        let mut first: Option<FsId> = None;
        for id in ids {
            let Some(id) = id else { return false };
            match &first {
                None => first = Some(id),
                Some(f) if *f != id => return false,
                Some(_) => {}
            }
        }
        first.is_some_and(|f| taken(&f))
    }

    /// `syncfs` on `file`'s file system; `None` where the call itself is refused (a sandbox
    /// without it), for the caller to flush member by member.
    fn syncfs(file: &File) -> Option<io::Result<()>> {
        // SAFETY: the descriptor is open for the duration of the call.
        if unsafe { libc::syncfs(file.as_raw_fd()) } == 0 {
            return Some(Ok(()));
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::ENOSYS | libc::EPERM | libc::EINVAL | libc::EOPNOTSUPP) => None,
            _ => Some(Err(e)),
        }
    }

    fn copy(e: &io::Error) -> io::Error {
        io::Error::new(e.kind(), e.to_string())
    }

    pub(super) fn sync_files(files: &[Arc<dyn FsFile>]) -> Option<Vec<io::Result<()>>> {
        let os: Vec<&File> = files.iter().map(|f| f.os_file()).collect::<Option<_>>()?;
        if !one_taken_fs(os.iter().map(|f| id_of_file(f))) {
            return None;
        }
        let first = os.first()?;
        // A file system that has failed (a journal abort left it read-only, a shutdown) makes
        // `syncfs` return 0 without writing anything; the `fsync` of one member checks that
        // state, as each member's own `fsync` would have (one device flush, not thousands).
        if let Err(e) = syncfs(first)?.and_then(|()| first.sync_data()) {
            return Some(files.iter().map(|_| Err(copy(&e))).collect());
        }
        // Each file's own write-back errors, as `fsync` would report them; its pages are
        // clean already, so this only waits and checks.
        let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE
            | libc::SYNC_FILE_RANGE_WRITE
            | libc::SYNC_FILE_RANGE_WAIT_AFTER;
        Some(
            os.iter()
                .map(|f| {
                    // SAFETY: the descriptor is open for the duration of the call.
                    if unsafe { libc::sync_file_range(f.as_raw_fd(), 0, 0, flags) } != 0 {
                        return Err(io::Error::last_os_error());
                    }
                    Ok(())
                })
                .collect(),
        )
    }

    /// One directory is opened (for the call), not all of them: a thousand descriptors held
    /// at once beside a thousand open part files could run the process out of them.
    pub(super) fn sync_dirs(dirs: &[PathBuf]) -> Option<Vec<io::Result<()>>> {
        if !one_taken_fs(dirs.iter().map(|d| id_of_path(d))) {
            return None;
        }
        let dir = File::open(dirs.first()?).ok()?;
        // As for files: the one directory's `fsync` checks that the file system still writes.
        let synced = syncfs(&dir)?.and_then(|()| dir.sync_all());
        Some(
            dirs.iter()
                .map(|_| synced.as_ref().map(|_| ()).map_err(copy))
                .collect(),
        )
    }
}

impl FsRead for File {
    fn len_bytes(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }
}

fn stat_of(meta: &fs::Metadata) -> FsStat {
    FsStat {
        is_dir: meta.is_dir(),
        is_file: meta.is_file(),
        len: meta.len(),
        modified_ms: meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as i64),
    }
}

/// Renames `src` to `dst`, failing with `AlreadyExists` instead of replacing `dst`:
/// `renameat2(RENAME_NOREPLACE)`, or `link` + `unlink` where the file system lacks the flag.
/// The one implementation of the system call, used by [`RealFs`] and by the benchmarks'
/// system-call floor; it does not flush anything (the local backend's group commit does).
pub fn rename_noreplace(src: &Path, dst: &Path) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::ffi::CString;
        use std::os::unix::ffi::OsStrExt;
        let s = CString::new(src.as_os_str().as_bytes())?;
        let d = CString::new(dst.as_os_str().as_bytes())?;
        // SAFETY: both pointers are valid NUL-terminated strings for the duration of the call.
        let rc = unsafe {
            libc::renameat2(
                libc::AT_FDCWD,
                s.as_ptr(),
                libc::AT_FDCWD,
                d.as_ptr(),
                libc::RENAME_NOREPLACE,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            // The file system does not support the flag: fall back to the equally safe
            // link + unlink below.
            Some(libc::EINVAL) | Some(libc::ENOSYS) | Some(libc::EOPNOTSUPP) => {}
            _ => return Err(e),
        }
    }
    link_unlink(src, dst)
}

/// Whether `path` names the open `file` (the same device and inode); `false` if the name is
/// gone.
fn still_named(file: &File, path: &Path) -> io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let open = file.metadata()?;
    match fs::symlink_metadata(path) {
        Ok(named) => Ok(named.dev() == open.dev() && named.ino() == open.ino()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Opens, fsyncs and closes the directory `dir`, making its entries durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// `link` never replaces; if we stop between the two calls, both names hold the same inode and
/// the next commit sees `AlreadyExists`, proves the content and removes the hidden name.
fn link_unlink(src: &Path, dst: &Path) -> io::Result<()> {
    fs::hard_link(src, dst)?;
    fs::remove_file(src)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_lock_whose_name_went_is_taken_again_on_the_file_the_name_has_now() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("owner.lock");
        let old = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .unwrap();
        assert!(still_named(&old, &path).unwrap());
        // The holder removes the name as it lets the lock go (a retired job).
        fs::remove_file(&path).unwrap();
        assert!(!still_named(&old, &path).unwrap(), "the name is gone");
        let lock = RealFs.try_lock(&path, b"me").unwrap().expect("free");
        assert!(
            !still_named(&old, &path).unwrap(),
            "another file has the name"
        );
        // A second holder of the new file is refused: one lock per name.
        assert!(RealFs.try_lock(&path, b"other").unwrap().is_none());
        drop(lock);
    }

    /// A directory on the disk the project builds on (the system's temporary directory may be
    /// a tmpfs, whose `syncfs` is not taken).
    fn disk_dir() -> tempfile::TempDir {
        tempfile::tempdir_in(concat!(env!("CARGO_MANIFEST_DIR"), "/target"))
            .unwrap_or_else(|_| tempfile::tempdir().unwrap())
    }

    fn written_files(base: &Path, n: usize) -> (Vec<PathBuf>, Vec<Arc<dyn FsFile>>) {
        let mut dirs = Vec::new();
        let mut files = Vec::new();
        for i in 0..n {
            let dir = base.join(format!("k={i}"));
            RealFs.create_dir(&dir).unwrap();
            let f = RealFs.create_new(&dir.join("part")).unwrap();
            f.write_all(&vec![i as u8; 10_000]).unwrap();
            dirs.push(dir);
            files.push(f);
        }
        (dirs, files)
    }

    /// A group of at least `SYNCFS_GROUP_MIN` files and directories on ext4, XFS or btrfs is
    /// flushed as one `syncfs` (Linux 5.17 and later), every member answering `Ok`; a group
    /// elsewhere (a tmpfs), a group across two file systems and a group of files that are not
    /// the operating system's are not taken, and are flushed member by member.
    #[test]
    fn large_groups_are_one_syncfs_where_it_answers_exactly() {
        let dir = disk_dir();
        let (dirs, files) = written_files(dir.path(), RealFs::SYNCFS_GROUP_MIN);
        let taken = whole_fs::probe(dir.path());
        eprintln!("syncfs taken on {}: {taken}", dir.path().display());
        let flushed = whole_fs::sync_files(&files);
        assert_eq!(flushed.is_some(), taken);
        assert!(flushed.into_iter().flatten().all(|r| r.is_ok()));
        let flushed = whole_fs::sync_dirs(&dirs);
        assert_eq!(flushed.is_some(), taken);
        assert!(flushed.into_iter().flatten().all(|r| r.is_ok()));
        assert!(RealFs.sync_files(&files).iter().all(|r| r.is_ok()));
        assert!(RealFs.sync_dirs(&dirs).iter().all(|r| r.is_ok()));

        // Another file system in the group: not one `syncfs`.
        if let Ok(shm) = tempfile::tempdir_in("/dev/shm") {
            let (shm_dirs, shm_files) = written_files(shm.path(), RealFs::SYNCFS_GROUP_MIN);
            assert!(
                whole_fs::sync_files(&shm_files).is_none(),
                "a tmpfs is not taken"
            );
            assert!(whole_fs::sync_dirs(&shm_dirs).is_none());
            let mixed_files: Vec<Arc<dyn FsFile>> =
                files.iter().chain(&shm_files[..1]).cloned().collect();
            assert!(whole_fs::sync_files(&mixed_files).is_none());
            let mixed_dirs: Vec<PathBuf> = dirs.iter().chain(&shm_dirs[..1]).cloned().collect();
            assert!(whole_fs::sync_dirs(&mixed_dirs).is_none());
            assert!(RealFs.sync_files(&mixed_files).iter().all(|r| r.is_ok()));
        }
        // A directory that is gone: flushed one by one, where its own flush fails.
        let mut gone = dirs.clone();
        gone.push(dir.path().join("gone"));
        assert!(whole_fs::sync_dirs(&gone).is_none());
        let answers = RealFs.sync_dirs(&gone);
        assert!(answers[..dirs.len()].iter().all(|r| r.is_ok()));
        assert!(answers[dirs.len()].is_err());

        #[derive(Debug)]
        struct NotOs;
        impl FsFile for NotOs {
            fn write_all(&self, _: &[u8]) -> io::Result<()> {
                Ok(())
            }
            fn sync_data(&self) -> io::Result<()> {
                Ok(())
            }
            fn is_named(&self, _: &Path) -> io::Result<bool> {
                Ok(true)
            }
        }
        let mut foreign = files.clone();
        foreign.push(Arc::new(NotOs));
        assert!(whole_fs::sync_files(&foreign).is_none());
    }

    #[test]
    fn kernel_releases_compare_by_major_and_minor() {
        for (release, want) in [
            ("6.18.44-fc-v1098\n", true),
            ("5.17.0", true),
            ("5.19.0-28-amd64", true),
            ("5.16.20", false),
            ("5.15.0-91-generic", false),
            ("4.19.0-foo", false),
            ("", false),
            ("garbage", false),
        ] {
            assert_eq!(
                whole_fs::release_at_least(release, (5, 17)),
                want,
                "{release}"
            );
        }
    }
}
