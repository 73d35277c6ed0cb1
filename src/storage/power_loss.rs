//! A disk that loses power: the [`Fs`] the power-loss tests run [`LocalStorage`] on.
//!
//! [`PowerLossDisk`] keeps, for every file, the bytes written and how many of them were flushed
//! (`fdatasync`), and for every directory, its entries and the log of changes since it was
//! last flushed (`fsync` of the directory). It counts every call that changes something; a
//! test plans a crash at one of those calls ([`PowerLossDisk::crash_at`]), after which every
//! call fails, as if the machine had stopped right there. [`PowerLossDisk::power_loss`] then
//! gives the disk as the next boot finds it:
//!
//! - [`PowerLoss::DropUnflushed`]: everything not flushed is gone. Files are cut back to their
//!   flushed length; directories hold their flushed entries, so a file created, renamed or
//!   removed since the last flush of its directory is back where the flush left it, and a
//!   directory whose parent was not flushed is gone with everything in it.
//! - [`PowerLoss::Partial`]: some of what was not flushed made it anyway, chosen by a seed:
//!   each directory keeps a prefix of its unflushed changes (a rename is one change: it is
//!   atomic, as journaling file systems make it), and each file keeps a prefix of its
//!   unflushed bytes, possibly as zeros (the length reached the disk, the data did not, as on
//!   ext4 with `data=writeback`).
//!
//! [`PowerLossDisk::restart_process`] is the milder crash: the process dies, the disk and its
//! cache live on. Chaining the two (a process crash, a restart that runs on, then a power loss)
//! finds what a process must flush for state it inherits from a predecessor that died.
//!
//! Not modelled: reordering of flushed state (a flush is a barrier, as it is on a disk that
//! honours cache flushes), torn sectors inside flushed data, and errors reported by the disk
//! itself (the [fault wrapper](crate::storage::fault) and the tmpfs disk-full test cover
//! failing calls).
//!
//! ```
//! use std::sync::Arc;
//! use filesink::storage::local::Fs;
//! use filesink::storage::power_loss::{PowerLoss, PowerLossDisk};
//!
//! let disk = PowerLossDisk::new();
//! let file = disk.create_new("/a".as_ref()).unwrap();
//! file.write_all(b"kept").unwrap();
//! disk.sync_files(&[file.clone()]).into_iter().collect::<Result<(), _>>().unwrap();
//! disk.sync_dirs(&["/".into()]).into_iter().collect::<Result<(), _>>().unwrap();
//! file.write_all(b" and lost").unwrap();
//!
//! let after = disk.power_loss(PowerLoss::DropUnflushed);
//! assert_eq!(after.read("/a".as_ref()).unwrap(), b"kept");
//! ```

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use super::local::{Fs, FsFile, FsLock, FsRead, FsStat};

#[cfg(doc)]
use super::LocalStorage;

/// What the disk holds after the power comes back. See the [module documentation](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerLoss {
    /// Everything not flushed is gone.
    DropUnflushed,
    /// A seeded choice of what was not flushed survives, in order per directory and per file.
    Partial {
        /// Chooses what survives; the same seed on the same history gives the same disk.
        seed: u64,
    },
}

/// An in-memory disk that forgets what was not flushed when the power goes. Clones share the
/// disk. See the [module documentation](self).
#[derive(Debug, Clone)]
pub struct PowerLossDisk {
    disk: Arc<Mutex<Disk>>,
}

#[derive(Debug, Clone)]
struct Disk {
    nodes: Vec<Node>,
    /// Calls that changed something, so far.
    ops: usize,
    /// The call at which the power goes, and whether that call still reaches the disk.
    crash_at: Option<(usize, bool)>,
    off: bool,
    /// [`Fs::try_lock`] locks held by the running process: path -> (holder, description).
    /// A new process (after a crash or a power loss) starts with none.
    locks: HashMap<PathBuf, (u64, Vec<u8>)>,
    next_holder: u64,
}

#[derive(Debug, Clone)]
enum Node {
    File {
        data: Vec<u8>,
        flushed_len: usize,
        modified_ms: i64,
    },
    Dir {
        entries: BTreeMap<String, usize>,
        flushed: BTreeMap<String, usize>,
        /// Changes to `entries` since `flushed`, in order.
        log: Vec<DirChange>,
    },
}

#[derive(Debug, Clone)]
enum DirChange {
    Insert(String, usize),
    Remove(String),
    Rename { from: String, to: String },
}

const ROOT: usize = 0;

impl Default for PowerLossDisk {
    fn default() -> Self {
        Self::new()
    }
}

impl PowerLossDisk {
    /// An empty disk holding only the root directory `/`, flushed.
    pub fn new() -> Self {
        PowerLossDisk::from_disk(Disk {
            nodes: vec![Node::Dir {
                entries: BTreeMap::new(),
                flushed: BTreeMap::new(),
                log: Vec::new(),
            }],
            ops: 0,
            crash_at: None,
            off: false,
            locks: HashMap::new(),
            next_holder: 0,
        })
    }

    fn from_disk(disk: Disk) -> Self {
        PowerLossDisk {
            disk: Arc::new(Mutex::new(disk)),
        }
    }

    /// How many calls changed (or tried to change) the disk so far.
    pub fn ops(&self) -> usize {
        self.lock().ops
    }

    /// Plans the crash: call number `op` (counting from 1, as [`PowerLossDisk::ops`] counts) is
    /// the last one; with `applied` it still reaches the disk (its answer is lost), without it
    /// it does not. Every later call fails.
    pub fn crash_at(&self, op: usize, applied: bool) {
        self.lock().crash_at = Some((op, applied));
    }

    /// Whether the planned crash has happened.
    pub fn is_off(&self) -> bool {
        self.lock().off
    }

    /// The disk after a power loss, as the next boot finds it. This disk is off from now on:
    /// the handles of the old process can no longer change anything.
    pub fn power_loss(&self, how: PowerLoss) -> PowerLossDisk {
        let mut disk = self.lock();
        disk.off = true;
        let mut rng = Rng::new(match how {
            PowerLoss::DropUnflushed => 0,
            PowerLoss::Partial { seed } => seed,
        });
        let mut nodes = Vec::new();
        let mut renumbered = HashMap::new();
        survive(
            &disk.nodes,
            ROOT,
            how,
            &mut rng,
            &mut nodes,
            &mut renumbered,
        );
        PowerLossDisk::from_disk(Disk {
            nodes,
            ops: 0,
            crash_at: None,
            off: false,
            locks: HashMap::new(),
            next_holder: 0,
        })
    }

    /// The disk after the process dies and a new one starts, the power staying on: nothing is
    /// lost, flushed or not. This disk is off from now on, like the dead process's handles.
    pub fn restart_process(&self) -> PowerLossDisk {
        let mut disk = self.lock();
        disk.off = true;
        let mut next = disk.clone();
        next.ops = 0;
        next.crash_at = None;
        next.off = false;
        next.locks.clear();
        PowerLossDisk::from_disk(next)
    }

    fn lock(&self) -> MutexGuard<'_, Disk> {
        self.disk.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs a call that changes the disk, unless the power is off; cuts the power at the
    /// planned call.
    fn change<T>(&self, op: impl FnOnce(&mut Disk) -> io::Result<T>) -> io::Result<T> {
        let mut disk = self.lock();
        if disk.off {
            return Err(power_off());
        }
        disk.ops += 1;
        if let Some((at, applied)) = disk.crash_at {
            if disk.ops >= at {
                if applied {
                    let _ = op(&mut disk);
                }
                disk.off = true;
                return Err(power_off());
            }
        }
        op(&mut disk)
    }

    /// Runs a call that only reads, unless the power is off.
    fn look<T>(&self, op: impl FnOnce(&Disk) -> io::Result<T>) -> io::Result<T> {
        let disk = self.lock();
        if disk.off {
            return Err(power_off());
        }
        op(&disk)
    }
}

fn power_off() -> io::Error {
    io::Error::other("the power is off")
}

/// Copies the node `at` and what survives under it into `out`; returns its new number.
fn survive(
    old: &[Node],
    at: usize,
    how: PowerLoss,
    rng: &mut Rng,
    out: &mut Vec<Node>,
    renumbered: &mut HashMap<usize, usize>,
) -> usize {
    if let Some(&done) = renumbered.get(&at) {
        return done;
    }
    let new = out.len();
    renumbered.insert(at, new);
    match &old[at] {
        Node::File {
            data,
            flushed_len,
            modified_ms,
        } => {
            let mut kept = data[..*flushed_len].to_vec();
            if let PowerLoss::Partial { .. } = how {
                let tail = &data[*flushed_len..];
                let n = rng.below(tail.len() + 1);
                if rng.below(4) == 0 {
                    kept.resize(kept.len() + n, 0);
                } else {
                    kept.extend_from_slice(&tail[..n]);
                }
            }
            out.push(Node::File {
                flushed_len: kept.len(),
                data: kept,
                modified_ms: *modified_ms,
            });
        }
        Node::Dir { flushed, log, .. } => {
            out.push(Node::Dir {
                entries: BTreeMap::new(),
                flushed: BTreeMap::new(),
                log: Vec::new(),
            });
            let mut entries = flushed.clone();
            if let PowerLoss::Partial { .. } = how {
                for change in &log[..rng.below(log.len() + 1)] {
                    apply(&mut entries, change);
                }
            }
            let entries: BTreeMap<String, usize> = entries
                .into_iter()
                .map(|(name, child)| (name, survive(old, child, how, rng, out, renumbered)))
                .collect();
            out[new] = Node::Dir {
                flushed: entries.clone(),
                entries,
                log: Vec::new(),
            };
        }
    }
    new
}

fn apply(entries: &mut BTreeMap<String, usize>, change: &DirChange) {
    match change {
        DirChange::Insert(name, node) => {
            entries.insert(name.clone(), *node);
        }
        DirChange::Remove(name) => {
            entries.remove(name);
        }
        DirChange::Rename { from, to } => {
            if let Some(node) = entries.remove(from) {
                entries.insert(to.clone(), node);
            }
        }
    }
}

impl Disk {
    /// The directory and name of `path`'s last component, the directory resolved.
    fn parent_of(&self, path: &Path) -> io::Result<(usize, String)> {
        let path = absolute(path)?;
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
        let parent = self.resolve(path.parent().unwrap_or(Path::new("/")))?;
        match self.nodes[parent] {
            Node::Dir { .. } => Ok((parent, name.to_string())),
            Node::File { .. } => Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                "a path component is a file",
            )),
        }
    }

    fn resolve(&self, path: &Path) -> io::Result<usize> {
        let mut at = ROOT;
        for component in absolute(path)?.components() {
            if let Component::Normal(name) = component {
                let name = name.to_str().ok_or_else(not_found)?;
                at = match &self.nodes[at] {
                    Node::Dir { entries, .. } => *entries.get(name).ok_or_else(not_found)?,
                    Node::File { .. } => return Err(not_found()),
                };
            }
        }
        Ok(at)
    }

    fn entries_mut(&mut self, dir: usize) -> (&mut BTreeMap<String, usize>, &mut Vec<DirChange>) {
        match &mut self.nodes[dir] {
            Node::Dir { entries, log, .. } => (entries, log),
            Node::File { .. } => unreachable!("parent_of returns directories"),
        }
    }

    fn insert_new(&mut self, path: &Path, node: Node) -> io::Result<usize> {
        let (parent, name) = self.parent_of(path)?;
        let id = self.nodes.len();
        let (entries, log) = self.entries_mut(parent);
        if entries.contains_key(&name) {
            return Err(io::Error::new(io::ErrorKind::AlreadyExists, "exists"));
        }
        entries.insert(name.to_string(), id);
        log.push(DirChange::Insert(name.to_string(), id));
        self.nodes.push(node);
        Ok(id)
    }

    /// Renames `src` to `dst`; a file at `dst` is replaced if `replace`, else the rename fails
    /// with `AlreadyExists`. One change in one directory's log (atomic, as a journaling file
    /// system makes it), or one in each of two directories.
    fn rename(&mut self, src: &Path, dst: &Path, replace: bool) -> io::Result<()> {
        let (from_dir, from) = self.parent_of(src)?;
        let (to_dir, to) = self.parent_of(dst)?;
        let node = match &self.nodes[from_dir] {
            Node::Dir { entries, .. } => *entries.get(&from).ok_or_else(not_found)?,
            Node::File { .. } => unreachable!(),
        };
        if let Some(&existing) = self.entries_mut(to_dir).0.get(&to) {
            if !replace {
                return Err(io::Error::new(io::ErrorKind::AlreadyExists, "exists"));
            }
            if let Node::Dir { .. } = self.nodes[existing] {
                return Err(io::Error::new(io::ErrorKind::IsADirectory, "a directory"));
            }
            if existing == node {
                return Ok(());
            }
        }
        if from_dir == to_dir {
            let (entries, log) = self.entries_mut(from_dir);
            entries.remove(&from);
            entries.insert(to.to_string(), node);
            log.push(DirChange::Rename {
                from: from.to_string(),
                to: to.to_string(),
            });
        } else {
            // Two directories, two logs: each side reaches the disk with its own flush.
            let (entries, log) = self.entries_mut(to_dir);
            entries.insert(to.to_string(), node);
            log.push(DirChange::Insert(to.to_string(), node));
            let (entries, log) = self.entries_mut(from_dir);
            entries.remove(&from);
            log.push(DirChange::Remove(from.to_string()));
        }
        Ok(())
    }

    fn stat_of(&self, node: usize) -> FsStat {
        match &self.nodes[node] {
            Node::File {
                data, modified_ms, ..
            } => FsStat {
                is_dir: false,
                is_file: true,
                len: data.len() as u64,
                modified_ms: *modified_ms,
            },
            Node::Dir { .. } => FsStat {
                is_dir: true,
                is_file: false,
                len: 0,
                modified_ms: 0,
            },
        }
    }
}

fn not_found() -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, "no such file or directory")
}

/// `path` made absolute, without `.` and `..`: the simulated disk's working directory is `/`
/// and it has no symbolic links, so this is what the operating system would resolve it to
/// (except that `a/..` resolves even when `a` does not exist). The empty path names nothing,
/// as on the operating system.
fn absolute(path: &Path) -> io::Result<PathBuf> {
    if path.as_os_str().is_empty() {
        return Err(not_found());
    }
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(name) => out.push(name),
            Component::ParentDir => {
                out.pop();
            }
            Component::Prefix(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "the simulated disk has no path prefixes",
                ))
            }
        }
    }
    Ok(out)
}

impl Fs for PowerLossDisk {
    fn create_dir_all(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
        // As the operating system's: the missing directories, named as `path` names them
        // (relative if it is relative), outermost first.
        let is_dir = |p: &Path| self.stat(p).is_ok_and(|s| s.is_dir);
        let mut missing = Vec::new();
        let mut at = Some(path);
        while let Some(dir) = at {
            if dir.as_os_str().is_empty() || is_dir(dir) {
                break;
            }
            missing.push(dir.to_path_buf());
            at = dir.parent();
        }
        let mut created = Vec::new();
        for dir in missing.into_iter().rev() {
            match self.create_dir(&dir) {
                Ok(()) => created.push(dir),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && is_dir(&dir) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(created)
    }

    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        self.look(|disk| disk.resolve(path))?;
        absolute(path)
    }

    fn create_dir(&self, path: &Path) -> io::Result<()> {
        self.change(|disk| {
            disk.insert_new(
                path,
                Node::Dir {
                    entries: BTreeMap::new(),
                    flushed: BTreeMap::new(),
                    log: Vec::new(),
                },
            )
            .map(drop)
        })
    }

    fn create_new(&self, path: &Path) -> io::Result<Arc<dyn FsFile>> {
        let node = self.change(|disk| {
            let modified_ms = disk.ops as i64;
            disk.insert_new(
                path,
                Node::File {
                    data: Vec::new(),
                    flushed_len: 0,
                    modified_ms,
                },
            )
        })?;
        Ok(Arc::new(SimFile {
            disk: self.clone(),
            node,
        }))
    }

    fn open(&self, path: &Path) -> io::Result<Box<dyn FsRead>> {
        let data = self.look(|disk| match &disk.nodes[disk.resolve(path)?] {
            Node::File { data, .. } => Ok(data.clone()),
            Node::Dir { .. } => Err(io::Error::new(io::ErrorKind::IsADirectory, "a directory")),
        })?;
        Ok(Box::new(io::Cursor::new(data)))
    }

    fn stat(&self, path: &Path) -> io::Result<FsStat> {
        self.look(|disk| Ok(disk.stat_of(disk.resolve(path)?)))
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<(String, FsStat)>> {
        self.look(|disk| match &disk.nodes[disk.resolve(path)?] {
            Node::Dir { entries, .. } => Ok(entries
                .iter()
                .map(|(name, &node)| (name.clone(), disk.stat_of(node)))
                .collect()),
            Node::File { .. } => Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                "not a directory",
            )),
        })
    }

    fn rename_noreplace(&self, src: &Path, dst: &Path) -> io::Result<()> {
        self.change(|disk| disk.rename(src, dst, false))
    }

    fn rename_replace(&self, src: &Path, dst: &Path) -> io::Result<()> {
        self.change(|disk| disk.rename(src, dst, true))
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.change(|disk| {
            let (dir, name) = disk.parent_of(path)?;
            let node = *disk.entries_mut(dir).0.get(&name).ok_or_else(not_found)?;
            if let Node::Dir { .. } = disk.nodes[node] {
                return Err(io::Error::new(io::ErrorKind::IsADirectory, "a directory"));
            }
            let (entries, log) = disk.entries_mut(dir);
            entries.remove(&name);
            log.push(DirChange::Remove(name.to_string()));
            Ok(())
        })
    }

    fn sync_files(&self, files: &[Arc<dyn FsFile>]) -> Vec<io::Result<()>> {
        files.iter().map(|f| f.sync_data()).collect()
    }

    fn sync_dirs(&self, dirs: &[PathBuf]) -> Vec<io::Result<()>> {
        dirs.iter()
            .map(|dir| {
                self.change(|disk| {
                    let node = disk.resolve(dir)?;
                    match &mut disk.nodes[node] {
                        Node::Dir {
                            entries,
                            flushed,
                            log,
                        } => {
                            flushed.clone_from(entries);
                            log.clear();
                            Ok(())
                        }
                        Node::File { .. } => Ok(()),
                    }
                })
            })
            .collect()
    }

    fn try_lock(&self, path: &Path, describe: &[u8]) -> io::Result<Option<Box<dyn FsLock>>> {
        let mut disk = self.lock();
        if disk.off {
            return Err(power_off());
        }
        // The lock file's directory must exist, as on a real disk; the lock itself is no
        // content and survives nothing.
        disk.resolve(path.parent().unwrap_or(Path::new("/")))?;
        if disk.locks.contains_key(path) {
            return Ok(None);
        }
        disk.next_holder += 1;
        let holder = disk.next_holder;
        disk.locks
            .insert(path.to_path_buf(), (holder, describe.to_vec()));
        Ok(Some(Box::new(SimLock {
            disk: self.disk.clone(),
            path: path.to_path_buf(),
            holder,
        })))
    }

    fn lock_holder(&self, path: &Path) -> io::Result<Option<Vec<u8>>> {
        Ok(self.lock().locks.get(path).map(|(_, d)| d.clone()))
    }
}

/// A lock on a [`PowerLossDisk`], released when dropped.
#[derive(Debug)]
struct SimLock {
    disk: Arc<Mutex<Disk>>,
    path: PathBuf,
    holder: u64,
}

impl FsLock for SimLock {}

impl Drop for SimLock {
    fn drop(&mut self) {
        let mut disk = self.disk.lock().unwrap_or_else(|e| e.into_inner());
        if disk
            .locks
            .get(&self.path)
            .is_some_and(|(h, _)| *h == self.holder)
        {
            disk.locks.remove(&self.path);
        }
    }
}

/// A file open for appending on a [`PowerLossDisk`]; it keeps writing to its file after the
/// name is renamed or removed, as a file descriptor does.
#[derive(Debug)]
struct SimFile {
    disk: PowerLossDisk,
    node: usize,
}

impl FsFile for SimFile {
    fn write_all(&self, bytes: &[u8]) -> io::Result<()> {
        self.disk.change(|disk| {
            let ops = disk.ops as i64;
            if let Node::File {
                data, modified_ms, ..
            } = &mut disk.nodes[self.node]
            {
                data.extend_from_slice(bytes);
                *modified_ms = ops;
            }
            Ok(())
        })
    }

    fn sync_data(&self) -> io::Result<()> {
        self.disk.change(|disk| {
            if let Node::File {
                data, flushed_len, ..
            } = &mut disk.nodes[self.node]
            {
                *flushed_len = data.len();
            }
            Ok(())
        })
    }

    fn is_named(&self, path: &Path) -> io::Result<bool> {
        self.disk.look(|disk| match disk.resolve(path) {
            Ok(node) => Ok(node == self.node),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        })
    }
}

impl FsRead for io::Cursor<Vec<u8>> {
    fn len_bytes(&self) -> io::Result<u64> {
        Ok(self.get_ref().len() as u64)
    }
}

/// xorshift64*: small, seeded, and the same everywhere.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// A number in `0..n` (`0` when `n` is 0).
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        if n == 0 {
            0
        } else {
            (x % n as u64) as usize
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flush_all(disk: &PowerLossDisk, dirs: &[&str]) {
        let dirs: Vec<PathBuf> = dirs.iter().map(PathBuf::from).collect();
        for r in disk.sync_dirs(&dirs) {
            r.unwrap();
        }
    }

    #[test]
    fn unflushed_names_and_bytes_are_gone_after_power_loss() {
        let disk = PowerLossDisk::new();
        disk.create_dir("/d".as_ref()).unwrap();
        let f = disk.create_new("/d/f".as_ref()).unwrap();
        f.write_all(b"abc").unwrap();
        f.sync_data().unwrap();
        // The file is flushed, its name and its directory's name are not.
        let after = disk.power_loss(PowerLoss::DropUnflushed);
        assert_eq!(
            after.stat("/d".as_ref()).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        // The old disk is off: the dead process's handles change nothing.
        assert!(f.write_all(b"x").is_err());

        let disk = PowerLossDisk::new();
        disk.create_dir("/d".as_ref()).unwrap();
        let f = disk.create_new("/d/f".as_ref()).unwrap();
        f.write_all(b"abc").unwrap();
        f.sync_data().unwrap();
        f.write_all(b"def").unwrap();
        flush_all(&disk, &["/", "/d"]);
        disk.rename_noreplace("/d/f".as_ref(), "/d/g".as_ref())
            .unwrap();
        let after = disk.power_loss(PowerLoss::DropUnflushed);
        assert_eq!(after.read("/d/f".as_ref()).unwrap(), b"abc");
        assert!(after.stat("/d/g".as_ref()).is_err());
    }

    #[test]
    fn a_rename_survives_whole_or_not_at_all() {
        for seed in 0..64 {
            let disk = PowerLossDisk::new();
            let f = disk.create_new("/a".as_ref()).unwrap();
            f.write_all(b"x").unwrap();
            f.sync_data().unwrap();
            flush_all(&disk, &["/"]);
            disk.rename_noreplace("/a".as_ref(), "/b".as_ref()).unwrap();
            let after = disk.power_loss(PowerLoss::Partial { seed });
            let names: Vec<String> = after
                .read_dir("/".as_ref())
                .unwrap()
                .into_iter()
                .map(|(n, _)| n)
                .collect();
            assert!(names == ["a"] || names == ["b"], "seed {seed}: {names:?}");
        }
    }

    #[test]
    fn the_planned_call_is_the_last_and_may_be_applied() {
        for applied in [false, true] {
            let disk = PowerLossDisk::new();
            disk.create_dir("/d".as_ref()).unwrap();
            disk.crash_at(2, applied);
            assert!(disk.create_dir("/e".as_ref()).is_err());
            assert!(disk.is_off());
            assert!(disk.create_dir("/f".as_ref()).is_err());
            let after = disk.restart_process();
            assert_eq!(after.stat("/e".as_ref()).is_ok(), applied);
            assert!(after.stat("/f".as_ref()).is_err());
        }
    }

    #[test]
    fn a_replacing_rename_leaves_the_old_file_or_the_new_one() {
        for seed in 0..64 {
            let disk = PowerLossDisk::new();
            for (name, bytes) in [("/p", b"old"), ("/t", b"new")] {
                let f = disk.create_new(name.as_ref()).unwrap();
                f.write_all(bytes).unwrap();
                f.sync_data().unwrap();
            }
            flush_all(&disk, &["/"]);
            disk.rename_replace("/t".as_ref(), "/p".as_ref()).unwrap();
            assert_eq!(disk.read("/p".as_ref()).unwrap(), b"new");
            assert!(disk.stat("/t".as_ref()).is_err());
            let after = disk.power_loss(PowerLoss::Partial { seed });
            let p = after.read("/p".as_ref()).unwrap();
            let t = after.read("/t".as_ref()).ok();
            assert!(
                (p == b"old" && t.as_deref() == Some(b"new".as_slice()))
                    || (p == b"new" && t.is_none()),
                "seed {seed}: /p {p:?}, /t {t:?}"
            );
        }
        let disk = PowerLossDisk::new();
        disk.create_new("/a".as_ref()).unwrap();
        disk.create_dir("/d".as_ref()).unwrap();
        let e = disk
            .rename_replace("/a".as_ref(), "/d".as_ref())
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::IsADirectory);
    }

    #[test]
    fn rename_never_replaces() {
        let disk = PowerLossDisk::new();
        disk.create_new("/a".as_ref()).unwrap();
        disk.create_new("/b".as_ref()).unwrap();
        let e = disk
            .rename_noreplace("/a".as_ref(), "/b".as_ref())
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
    }
}
