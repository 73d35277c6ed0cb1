//! Glob patterns over inputs: one rule for files and for objects. `*`, `?` and `[...]`
//! (`[abc]`, `[a-z]`, `[!x]`) match within one `/`-separated component, `**` matches zero or
//! more components; a hidden component (`.x`, `_x`) matches only where the pattern names it
//! literally, as filesink's own names in a lake are hidden that way. The matches are taken in
//! byte order of their names (as `ls` sorts in the C locale): `app.jsonl`, `app.jsonl.1`,
//! `app.jsonl.10`, `app.jsonl.2`. A pattern that matches nothing is an empty set of inputs,
//! not an error: a cron run over a directory that has no file yet has nothing to do.
//!
//! Files: a pattern is matched against the directory tree under its fixed leading
//! components (`logs/` of `logs/*.jsonl`, `/var/log/` of `/var/log/app*.jsonl`), relative
//! to the working directory unless absolute. A match is a regular file, or a symbolic link to
//! one; `**` does not follow symbolic links to directories (a link back up would never end).
//! A name that exists as given is that file, whatever characters it holds.

use std::collections::{HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};

use super::input::Input;
use crate::error::{Error, Result};

/// Whether `s` holds a glob character (`*`, `?`, `[`).
pub(crate) fn is_glob(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

impl Input {
    /// The files the glob `pattern` matches (see the module doc of `glob.rs`), each an input
    /// named as the pattern names it (`logs/a.jsonl` for `logs/*.jsonl`), in byte order of
    /// those names; none is an empty list. A file the pattern matches under several names
    /// (hard or symbolic links) is one input, under the first of them. A pattern without glob
    /// characters, or a file that exists under the very name given, is that one file. A file
    /// that goes away between the listing and its opening (a log rotated meanwhile) is passed
    /// over: the next run finds it under its new name.
    pub fn files_matching(pattern: &str) -> Result<Vec<Input>> {
        if !is_glob(pattern) || Path::new(pattern).exists() {
            return Ok(vec![Input::file(pattern)?]);
        }
        let absolute = pattern.starts_with('/');
        let components: Vec<&str> = pattern
            .split('/')
            .filter(|c| !c.is_empty() && *c != ".")
            .collect();
        let fixed = components.iter().take_while(|c| !is_glob(c)).count();
        let mut base = match absolute {
            true => String::from("/"),
            false => String::new(),
        };
        for c in &components[..fixed] {
            base.push_str(c);
            base.push('/');
        }
        let mut names = Vec::new();
        walk(&base, &components[fixed..], &mut names)?;
        names.sort_unstable();
        names.dedup();
        let mut inputs: Vec<Input> = Vec::with_capacity(names.len());
        let mut files = HashSet::with_capacity(names.len());
        // Each directory's canonical path, resolved once for all its files.
        let mut dirs: HashMap<&Path, Option<PathBuf>> = HashMap::new();
        for (name, plain) in &names {
            let path = Path::new(name);
            let canonical_dir = match (plain, path.parent(), path.file_name()) {
                (true, Some(dir), Some(file)) => dirs
                    .entry(dir)
                    .or_insert_with(|| {
                        let at = if dir.as_os_str().is_empty() {
                            Path::new(".")
                        } else {
                            dir
                        };
                        at.canonicalize().ok()
                    })
                    .as_ref()
                    .map(|d| d.join(file)),
                _ => None,
            };
            let input = match canonical_dir {
                Some(canonical) => Input::file_at(name, canonical),
                None => Input::file(name),
            };
            match input {
                Ok(input) if !files.insert(input.file_id) => {}
                Ok(input) => inputs.push(input),
                Err(Error::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(inputs)
    }
}

/// Appends to `out` the names under directory `dir` (a prefix ending in `/`, or empty for
/// the working directory) that the components `p` match.
fn walk(dir: &str, p: &[&str], out: &mut Vec<(String, bool)>) -> Result<()> {
    let Some((first, rest)) = p.split_first() else {
        return Ok(());
    };
    let at = if dir.is_empty() { "." } else { dir };
    let entries = match std::fs::read_dir(at) {
        Ok(entries) => entries,
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(())
        }
        Err(e) => return Err(Error::io("list the inputs in", at, e)),
    };
    if *first == "**" {
        // Zero components here, or one visible directory more.
        walk(dir, rest, out)?;
    }
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("list the inputs in", at, e))?;
        let Ok(name) = entry.file_name().into_string() else {
            continue; // not UTF-8: no pattern names it
        };
        names.push((name, entry.file_type().ok()));
    }
    for (name, file_type) in names {
        let path = format!("{dir}{name}");
        if *first == "**" {
            if is_hidden(&name) {
                continue;
            }
            if file_type.is_some_and(|t| t.is_dir()) {
                walk(&format!("{path}/"), p, out)?;
            } else if rest.is_empty() {
                push_file(path, file_type, out);
            }
            continue;
        }
        if !component_visible(first, &name) || !component_matches(first.as_bytes(), name.as_bytes())
        {
            continue;
        }
        if rest.is_empty() {
            push_file(path, file_type, out);
        } else if Path::new(&path).is_dir() {
            walk(&format!("{path}/"), rest, out)?;
        }
    }
    Ok(())
}

/// Appends `path` if it is a regular file (as its directory entry says: `true`, its name
/// needs no resolving) or a link to one (`false`).
fn push_file(path: String, file_type: Option<std::fs::FileType>, out: &mut Vec<(String, bool)>) {
    if file_type.is_some_and(|t| t.is_file()) {
        out.push((path, true));
    } else if Path::new(&path).metadata().is_ok_and(|m| m.is_file()) {
        out.push((path, false));
    }
}

/// Whether a name may match a pattern component: a hidden one only a literal component.
fn component_visible(pattern: &str, name: &str) -> bool {
    !is_hidden(name) || !is_glob(pattern)
}

/// Whether `key` matches `pattern` (`*`, `?` and `[...]` within a component, `**` across
/// components). A hidden component of the key (`.x`, `_x`) matches only a literal one.
pub(crate) fn glob_matches(pattern: &str, key: &str) -> bool {
    let p: Vec<&str> = pattern.split('/').collect();
    let k: Vec<&str> = key.split('/').collect();
    components_match(&p, &k)
}

fn components_match(p: &[&str], k: &[&str]) -> bool {
    match (p.first(), k.first()) {
        (None, None) => true,
        (Some(&"**"), _) => {
            // `**` takes zero or more visible components.
            components_match(&p[1..], k)
                || (!k.is_empty() && !is_hidden(k[0]) && components_match(p, &k[1..]))
        }
        (Some(pc), Some(kc)) => {
            (!is_hidden(kc) || !is_glob(pc))
                && component_matches(pc.as_bytes(), kc.as_bytes())
                && components_match(&p[1..], &k[1..])
        }
        _ => false,
    }
}

fn is_hidden(component: &str) -> bool {
    component.starts_with(['.', '_'])
}

/// Glob match of one component: `*` any run of bytes, `?` one byte, `[abc]`, `[a-z]`, `[!x]`.
fn component_matches(p: &[u8], s: &[u8]) -> bool {
    match p.first() {
        None => s.is_empty(),
        Some(b'*') => (0..=s.len()).any(|i| component_matches(&p[1..], &s[i..])),
        Some(b'?') => !s.is_empty() && component_matches(&p[1..], &s[1..]),
        Some(b'[') => {
            let Some(end) = p.iter().skip(1).position(|&b| b == b']').map(|i| i + 1) else {
                return s.first() == Some(&b'[') && component_matches(&p[1..], &s[1..]);
            };
            let Some(&c) = s.first() else { return false };
            let (negate, set) = match p[1..end].first() {
                Some(b'!') | Some(b'^') => (true, &p[2..end]),
                _ => (false, &p[1..end]),
            };
            let mut hit = false;
            let mut i = 0;
            while i < set.len() {
                if i + 2 < set.len() && set[i + 1] == b'-' {
                    hit |= set[i] <= c && c <= set[i + 2];
                    i += 3;
                } else {
                    hit |= set[i] == c;
                    i += 1;
                }
            }
            hit != negate && component_matches(&p[end + 1..], &s[1..])
        }
        Some(&b) => s.first() == Some(&b) && component_matches(&p[1..], &s[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_within_and_across_components() {
        let yes = [
            ("2026-11-30/*.jsonl", "2026-11-30/a.jsonl"),
            ("*/events-?.csv", "x/events-1.csv"),
            ("raw/**/*.gz", "raw/a/b/c.gz"),
            ("raw/**/*.gz", "raw/c.gz"),
            ("d=2026-11-[0-3][0-9]/*", "d=2026-11-30/part"),
            ("d=[!x]/*", "d=y/part"),
            ("plain/key.jsonl", "plain/key.jsonl"),
        ];
        for (p, k) in yes {
            assert!(glob_matches(p, k), "{p} should match {k}");
        }
        let no = [
            ("2026-11-30/*.jsonl", "2026-11-30/sub/a.jsonl"),
            ("2026-11-30/*.jsonl", "2026-11-30/a.csv"),
            ("*/events-?.csv", "x/events-12.csv"),
            ("raw/*", "raw/_tmp"),
            ("2026-11-30/*.jsonl", "2026-11-30/.jsonl"),
            ("raw/*", "raw/.hidden"),
            ("raw/**/*.gz", "raw/_staging/c.gz"),
            ("d=[!x]/*", "d=x/part"),
            ("a/*", "a"),
        ];
        for (p, k) in no {
            assert!(!glob_matches(p, k), "{p} should not match {k}");
        }
        // A hidden component named literally matches.
        assert!(glob_matches("raw/_tmp/*", "raw/_tmp/x"));
    }
}
