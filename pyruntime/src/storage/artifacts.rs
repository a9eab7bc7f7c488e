//! Artifacts: files a run wrote, kept per workspace and served back by name.
//!
//! `Artifacts` owns `PY_TOOL_ARTIFACTS/<workspace>/` (and `.runs/`, where `sandbox`
//! places run directories on the same file system). `collect` copies every regular file
//! a run left in its working directory into the workspace's directory under a
//! collision-free name; `open` serves one back after checking that the name is a plain
//! basename, and never follows a symlink or leaves the workspace's directory.

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::isolation::FILE_SIZE_LIMIT;
use crate::storage::beneath::{Entry, HeldDir, Kind};
use crate::storage::workspace;

/// Why an artifact is not served.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The workspace id or file name is not one an artifact can have.
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    NotFound(String),
    /// The detail is for the log, never for the caller.
    #[error("{0}")]
    Internal(String),
}

impl ReadError {
    fn internal(detail: impl std::fmt::Display) -> Self {
        Self::Internal(detail.to_string())
    }
}

/// At most this many files are kept from one run.
const MAX_FILES_PER_RUN: usize = 200;
/// How deep `collect` looks into subdirectories of the working directory.
const MAX_DEPTH: usize = 8;

/// One collected file, as listed in an execution response.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Artifact {
    pub filename: String,
    pub url: String,
    #[serde(rename = "mimeType")]
    pub mime_type: String,
    pub size: u64,
}

#[derive(Debug, Clone)]
pub struct Artifacts {
    root: PathBuf,
    /// Bytes of artifacts one workspace may keep (`PY_TOOL_WORKSPACE_QUOTA`).
    quota: u64,
}

impl Artifacts {
    pub fn new(root: PathBuf, quota: u64) -> Self {
        Self { root, quota }
    }

    /// Where run directories are created (inside the artifact root, so collected files
    /// stay on one file system; `.runs` can never be a workspace id).
    pub fn runs_dir(&self) -> PathBuf {
        self.root.join(".runs")
    }

    /// Where installs' directories are created: in no zygote's view (a workspace's
    /// zygote sees `.runs/<workspace>`, and workspace ids have no dots).
    pub fn installs_dir(&self) -> PathBuf {
        self.runs_dir().join(".installs")
    }

    /// The workspace's artifact directory (its runs see it, writable, at this path).
    pub fn workspace_dir(&self, workspace: &str) -> PathBuf {
        self.root.join(workspace)
    }

    /// Copies the files in a run's working directory into the workspace's directory,
    /// reaching each one through `work` (never by path: the run may have swapped any
    /// entry for a link). Returns what was kept and warnings about what was not.
    /// Blocking: call it off the async runtime.
    pub fn collect(
        &self,
        workspace: &str,
        work: &HeldDir,
    ) -> io::Result<(Vec<Artifact>, Vec<String>)> {
        let mut found = Vec::new();
        let mut warnings = Vec::new();
        walk(work, &mut Vec::new(), &mut found, &mut warnings)?;
        if found.is_empty() {
            return Ok((Vec::new(), warnings));
        }
        let target = self.root.join(workspace);
        std::fs::create_dir_all(&target)?;
        let incoming: u64 = found
            .iter()
            .map(|(_, size)| *size)
            .filter(|size| *size < FILE_SIZE_LIMIT)
            .take(MAX_FILES_PER_RUN)
            .sum();
        let used = usage(&HeldDir::open(&target)?)?;
        if used.saturating_add(incoming) > self.quota {
            warnings.push(format!(
                "the workspace's artifacts would exceed PY_TOOL_WORKSPACE_QUOTA ({} MiB; {} MiB \
                 kept already): this run's files were not kept",
                self.quota >> 20,
                used >> 20
            ));
            return Ok((Vec::new(), warnings));
        }
        let mut artifacts = Vec::new();
        for (path, size) in found {
            if size >= FILE_SIZE_LIMIT {
                warnings.push(format!(
                    "{} reached the file size limit of {} MiB and was cut off; it was not kept",
                    display_name(&path),
                    FILE_SIZE_LIMIT >> 20
                ));
                continue;
            }
            if artifacts.len() == MAX_FILES_PER_RUN {
                warnings.push(format!(
                    "only the first {MAX_FILES_PER_RUN} files were kept as artifacts"
                ));
                break;
            }
            // Gone or swapped since the listing: not kept.
            let Ok(source) = work.file_beneath(&path) else {
                continue;
            };
            let name = sanitize(&path.last().map(|n| n.to_string_lossy()).unwrap_or_default());
            let (filename, mut dest) = create_unique(&target, &name)?;
            // No more than the file had when it was listed, nor than a run may write.
            let size = io::copy(&mut source.take(FILE_SIZE_LIMIT), &mut dest)?;
            artifacts.push(Artifact {
                url: format!("/tools/artifacts/{workspace}/{filename}"),
                mime_type: mime_for(&filename),
                filename,
                size,
            });
        }
        Ok((artifacts, warnings))
    }

    /// Reads one artifact for the download endpoint.
    pub async fn read(&self, workspace: &str, filename: &str) -> Result<Vec<u8>, ReadError> {
        if !workspace::is_valid(workspace) {
            return Err(ReadError::Invalid(workspace::invalid_message(
                "workspace_id",
            )));
        }
        if !is_plain_basename(filename) {
            return Err(ReadError::Invalid(
                "the file name must be a plain file name".to_owned(),
            ));
        }
        let dir = self.root.join(workspace);
        let name = std::ffi::OsString::from(filename);
        let not_found = || ReadError::NotFound(format!("artifact {filename} not found"));
        // Runs (and their zygote) write this directory: the file is opened without
        // following a link, only when regular, and read up to the largest a run writes.
        let read = tokio::task::spawn_blocking(move || -> io::Result<Option<Vec<u8>>> {
            let held = match HeldDir::open(&dir) {
                Ok(held) => held,
                Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(err) => return Err(err),
            };
            let file = held.file(&name)?;
            let mut bytes = Vec::new();
            file.take(FILE_SIZE_LIMIT + 1).read_to_end(&mut bytes)?;
            Ok(Some(bytes))
        })
        .await
        .map_err(ReadError::internal)?;
        match read {
            Ok(Some(bytes)) if bytes.len() as u64 > FILE_SIZE_LIMIT => Err(ReadError::Invalid(
                format!("the artifact is larger than {} MiB", FILE_SIZE_LIMIT >> 20),
            )),
            Ok(Some(bytes)) => Ok(bytes),
            Ok(None) => Err(not_found()),
            Err(err) => match err.raw_os_error() {
                Some(libc::ELOOP) => Err(ReadError::Invalid(
                    "the file name must not be a symbolic link".to_owned(),
                )),
                Some(libc::ENOENT) => Err(not_found()),
                _ if err.kind() == io::ErrorKind::InvalidInput => Err(not_found()),
                _ => Err(ReadError::internal(err)),
            },
        }
    }
}

impl Artifacts {
    /// Removes every workspace's artifacts last modified longer than `ttl` ago (files
    /// only, links never followed). Returns how many went. Blocking.
    pub fn sweep(&self, ttl: std::time::Duration) -> io::Result<usize> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let oldest = now.saturating_sub(ttl.as_secs() as i64);
        let root = match HeldDir::open(&self.root) {
            Ok(root) => root,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(0),
            Err(err) => return Err(err),
        };
        let mut removed = 0;
        for entry in root.entries()? {
            // `.runs` and the like are not a workspace's.
            if entry.name.as_bytes().starts_with(b".") || entry.kind != Kind::Dir {
                continue;
            }
            if let Ok(dir) = root.dir(&entry.name) {
                removed += expire(&dir, oldest)?;
            }
        }
        Ok(removed)
    }
}

/// Calls `each` with every entry below `dir` that is not a directory (and the directory
/// holding it), as deep as `collect` looks.
fn for_each_file(
    dir: &HeldDir,
    depth: usize,
    each: &mut impl FnMut(&HeldDir, &Entry),
) -> io::Result<()> {
    for entry in dir.entries()? {
        match entry.kind {
            Kind::Dir if depth + 1 < MAX_DEPTH => {
                if let Ok(sub) = dir.dir(&entry.name) {
                    for_each_file(&sub, depth + 1, each)?;
                }
            }
            Kind::Dir => {}
            _ => each(dir, &entry),
        }
    }
    Ok(())
}

/// Bytes of the regular files below `dir`.
fn usage(dir: &HeldDir) -> io::Result<u64> {
    let mut total = 0u64;
    for_each_file(dir, 0, &mut |_, entry| {
        if let Kind::File { size } = entry.kind {
            total = total.saturating_add(size);
        }
    })?;
    Ok(total)
}

/// Removes what below `dir` was last modified before `oldest`; returns how many.
fn expire(dir: &HeldDir, oldest: i64) -> io::Result<usize> {
    let mut removed = 0;
    for_each_file(dir, 0, &mut |holder, entry| {
        if entry.modified < oldest && holder.remove_file(&entry.name).is_ok() {
            removed += 1;
        }
    })?;
    Ok(removed)
}

/// A name that stays inside one directory: not empty, not `.`/`..`, no separators or NUL.
pub fn is_plain_basename(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && name != "."
        && name != ".."
        && !name.contains(['/', '\\', '\0'])
}

/// Content-Type for a file name, from its extension.
pub fn mime_for(filename: &str) -> String {
    mime_guess::from_path(filename)
        .first_or_octet_stream()
        .essence_str()
        .to_owned()
}

/// A file name safe in a URL and a directory: `[A-Za-z0-9._-]`, other characters become
/// `_`, no leading dot.
pub fn sanitize(name: &str) -> String {
    let mut clean: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(200)
        .collect();
    if clean.starts_with('.') || clean.is_empty() {
        clean.insert(0, '_');
    }
    clean
}

/// `name`, or `stem-1.ext`, `stem-2.ext`, … : the first that does not exist yet, created
/// atomically so concurrent runs never overwrite each other.
fn create_unique(dir: &Path, name: &str) -> io::Result<(String, File)> {
    let (stem, extension) = match name.rfind('.') {
        Some(dot) if dot > 0 => (&name[..dot], &name[dot..]),
        _ => (name, ""),
    };
    for attempt in 0..1000 {
        let candidate = if attempt == 0 {
            name.to_owned()
        } else {
            format!("{stem}-{attempt}{extension}")
        };
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(dir.join(&candidate))
        {
            Ok(file) => return Ok((candidate, file)),
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(err) => return Err(err),
        }
    }
    let candidate = format!("{stem}-{}{extension}", uuid::Uuid::new_v4().simple());
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(dir.join(&candidate))?;
    Ok((candidate, file))
}

/// Regular files under `dir` as paths of plain names (hidden entries, links and
/// anything not a file or directory skipped), in name order.
fn walk(
    dir: &HeldDir,
    at: &mut Vec<OsString>,
    found: &mut Vec<(Vec<OsString>, u64)>,
    warnings: &mut Vec<String>,
) -> io::Result<()> {
    for entry in dir.entries()? {
        if entry.name.as_bytes().starts_with(b".") {
            continue;
        }
        match entry.kind {
            Kind::File { size } => {
                let mut path = at.clone();
                path.push(entry.name);
                found.push((path, size));
            }
            Kind::Dir if at.len() + 1 < MAX_DEPTH => {
                // Replaced since the listing: skipped.
                let Ok(sub) = dir.dir(&entry.name) else {
                    continue;
                };
                at.push(entry.name);
                walk(&sub, at, found, warnings)?;
                at.pop();
            }
            Kind::Dir => {
                warnings.push("files nested deeper than 8 directories were not kept".to_owned());
            }
            Kind::Other => {}
        }
    }
    Ok(())
}

fn display_name(path: &[OsString]) -> String {
    path.iter()
        .map(|part| part.to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basenames_are_validated() {
        for good in ["plot.png", "a b.csv", "..hidden", "x..y"] {
            assert!(is_plain_basename(good), "{good}");
        }
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "a/b",
            "a\\b",
            "a\0b",
            "/etc/passwd",
            &"x".repeat(256),
        ] {
            assert!(!is_plain_basename(bad), "{bad:?}");
        }
    }

    #[test]
    fn names_are_sanitized() {
        assert_eq!(sanitize("plot.png"), "plot.png");
        assert_eq!(sanitize("my plot (1).png"), "my_plot__1_.png");
        assert_eq!(sanitize(".env"), "_.env");
        assert_eq!(sanitize("données.csv"), "donn_es.csv");
        assert_eq!(sanitize(""), "_");
    }

    #[test]
    fn mime_types_come_from_extensions() {
        assert_eq!(mime_for("a.png"), "image/png");
        assert_eq!(mime_for("a.csv"), "text/csv");
        assert_eq!(mime_for("a.json"), "application/json");
        assert_eq!(mime_for("a.pdf"), "application/pdf");
        assert_eq!(mime_for("noext"), "application/octet-stream");
    }

    #[test]
    fn collect_copies_files_under_unique_names() -> io::Result<()> {
        let tmp = tempfile::tempdir()?;
        let work = tmp.path().join("work");
        std::fs::create_dir_all(work.join("sub"))?;
        std::fs::write(work.join("out.csv"), "a,b\n")?;
        std::fs::write(work.join("sub").join("out.csv"), "c,d\n")?;
        std::fs::write(work.join(".cache"), "hidden")?;
        std::os::unix::fs::symlink("/etc/passwd", work.join("link.txt"))?;
        let artifacts = Artifacts::new(tmp.path().join("artifacts"), 1 << 30);
        let (kept, warnings) = artifacts.collect("ws", &HeldDir::open(&work)?)?;
        assert!(warnings.is_empty());
        let names: Vec<_> = kept.iter().map(|a| a.filename.as_str()).collect();
        assert_eq!(names, vec!["out.csv", "out-1.csv"]);
        assert_eq!(kept[0].url, "/tools/artifacts/ws/out.csv");
        assert_eq!(kept[0].size, 4);
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("artifacts/ws/out-1.csv"))?,
            "c,d\n"
        );
        Ok(())
    }

    #[test]
    fn a_workspace_over_its_quota_keeps_nothing_more() -> io::Result<()> {
        let tmp = tempfile::tempdir()?;
        let work = tmp.path().join("work");
        std::fs::create_dir_all(&work)?;
        std::fs::write(work.join("a.bin"), vec![0u8; 600])?;
        let artifacts = Artifacts::new(tmp.path().join("artifacts"), 1000);
        let (kept, warnings) = artifacts.collect("ws", &HeldDir::open(&work)?)?;
        assert_eq!(kept.len(), 1);
        assert!(warnings.is_empty());
        let (kept, warnings) = artifacts.collect("ws", &HeldDir::open(&work)?)?;
        assert!(kept.is_empty());
        assert!(
            warnings[0].contains("PY_TOOL_WORKSPACE_QUOTA"),
            "{warnings:?}"
        );
        let (kept, _) = artifacts.collect("other", &HeldDir::open(&work)?)?;
        assert_eq!(kept.len(), 1, "another workspace has its own quota");
        Ok(())
    }

    #[test]
    fn the_sweep_removes_expired_files_only() -> io::Result<()> {
        let tmp = tempfile::tempdir()?;
        let root = tmp.path().join("artifacts");
        std::fs::create_dir_all(root.join("ws"))?;
        std::fs::create_dir_all(root.join(".runs"))?;
        std::fs::write(root.join("ws/old.txt"), "old")?;
        std::fs::write(root.join(".runs/keep.txt"), "not a workspace's")?;
        let artifacts = Artifacts::new(root.clone(), 1 << 30);
        assert_eq!(artifacts.sweep(std::time::Duration::from_secs(3600))?, 0);
        std::thread::sleep(std::time::Duration::from_millis(1100));
        assert_eq!(artifacts.sweep(std::time::Duration::from_secs(0))?, 1);
        assert!(!root.join("ws/old.txt").exists());
        assert!(root.join(".runs/keep.txt").exists());
        Ok(())
    }
}
