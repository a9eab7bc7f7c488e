//! Reading what a run left, without following anything it planted.
//!
//! The root server reads a run's output files and copies its artifacts out of
//! directories that the run — or a process a package's import code left in the
//! workspace's zygote — can write while the server works on them. Any entry there may be
//! swapped for a symbolic link at any moment. `HeldDir` opens a directory once, when it
//! is still the server's own (just created), and opens everything below it relative to
//! that descriptor, one plain name at a time, with `O_NOFOLLOW` (what
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` does, on every kernel): a link is
//! never followed, `..` never taken, and nothing but a regular file is ever opened for
//! reading (a FIFO would block the server). Removing such a directory is
//! `std::fs::remove_dir_all`, which never follows a link either.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::fcntl::{AtFlags, OFlag, openat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstat, fstatat};

/// A directory held open; everything below it is reached through it.
#[derive(Debug)]
pub struct HeldDir {
    fd: OwnedFd,
}

/// One entry of a held directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: OsString,
    pub kind: Kind,
    /// Last modification, in seconds since the epoch.
    pub modified: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File {
        size: u64,
    },
    Dir,
    /// A link, FIFO, socket or device: never opened.
    Other,
}

const DIR_FLAGS: OFlag = OFlag::O_RDONLY
    .union(OFlag::O_DIRECTORY)
    .union(OFlag::O_NOFOLLOW)
    .union(OFlag::O_CLOEXEC);

impl HeldDir {
    /// Opens `path`, a directory the server made and nobody else could have replaced yet
    /// (its last component is still not followed if it is a link).
    pub fn open(path: &Path) -> io::Result<Self> {
        let fd = nix::fcntl::open(path, DIR_FLAGS, Mode::empty())?;
        Ok(Self { fd })
    }

    /// Free and used space of the file system the directory is on.
    pub fn space(&self) -> io::Result<nix::sys::statvfs::Statvfs> {
        Ok(nix::sys::statvfs::fstatvfs(self.fd.as_fd())?)
    }

    /// The subdirectory `name` (a plain name; a link is refused with `ELOOP`/`ENOTDIR`).
    pub fn dir(&self, name: &OsStr) -> io::Result<Self> {
        check_name(name)?;
        let fd = openat(self.fd.as_fd(), name, DIR_FLAGS, Mode::empty())?;
        Ok(Self { fd })
    }

    /// The regular file `name`, opened for reading; anything else is refused.
    pub fn file(&self, name: &OsStr) -> io::Result<File> {
        check_name(name)?;
        // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below).
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK;
        let fd = openat(self.fd.as_fd(), name, flags, Mode::empty())?;
        if !matches!(kind(&fstat(&fd)?), Kind::File { .. }) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a regular file",
            ));
        }
        let file = File::from(fd);
        // Regular files ignore O_NONBLOCK, but clear it anyway for whoever reads on.
        nix::fcntl::fcntl(&file, nix::fcntl::FcntlArg::F_SETFL(OFlag::empty()))?;
        Ok(file)
    }

    /// The regular file at `path` below this directory, each component a plain name.
    pub fn file_beneath(&self, path: &[OsString]) -> io::Result<File> {
        let Some((last, dirs)) = path.split_last() else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "an empty path"));
        };
        let mut held: Option<HeldDir> = None;
        for dir in dirs {
            let next = held.as_ref().unwrap_or(self).dir(dir)?;
            held = Some(next);
        }
        held.as_ref().unwrap_or(self).file(last)
    }

    /// Removes the entry `name` if it is not a directory (a link is removed, never
    /// followed).
    pub fn remove_file(&self, name: &OsStr) -> io::Result<()> {
        check_name(name)?;
        nix::unistd::unlinkat(
            self.fd.as_fd(),
            name,
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        )?;
        Ok(())
    }

    /// Every entry but `.` and `..`, by name, with its kind as `lstat` sees it.
    pub fn entries(&self) -> io::Result<Vec<Entry>> {
        let fd = openat(self.fd.as_fd(), ".", DIR_FLAGS, Mode::empty())?;
        let mut dir = nix::dir::Dir::from_fd(fd)?;
        let mut entries = Vec::new();
        for entry in dir.iter() {
            let entry = entry?;
            let name = OsStr::from_bytes(entry.file_name().to_bytes());
            if name == "." || name == ".." {
                continue;
            }
            let stat = match fstatat(self.fd.as_fd(), name, AtFlags::AT_SYMLINK_NOFOLLOW) {
                Ok(stat) => stat,
                // Gone since the listing: skipped.
                Err(nix::errno::Errno::ENOENT) => continue,
                Err(err) => return Err(err.into()),
            };
            entries.push(Entry {
                name: name.to_owned(),
                kind: kind(&stat),
                modified: stat.st_mtime,
            });
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(entries)
    }
}

fn kind(stat: &FileStat) -> Kind {
    match SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT {
        SFlag::S_IFREG => Kind::File {
            size: stat.st_size.max(0) as u64,
        },
        SFlag::S_IFDIR => Kind::Dir,
        _ => Kind::Other,
    }
}

/// A single path component: not empty, not `.` or `..`, no `/`.
fn check_name(name: &OsStr) -> io::Result<()> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes == b"." || bytes == b".." || bytes.contains(&b'/') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a plain file name",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn links_are_never_followed() -> io::Result<()> {
        let tmp = tempfile::tempdir()?;
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside)?;
        std::fs::write(outside.join("secret"), "root only")?;
        let run = tmp.path().join("run");
        std::fs::create_dir(&run)?;
        let held = HeldDir::open(&run)?;
        std::os::unix::fs::symlink(&outside, run.join("work"))?;
        std::os::unix::fs::symlink(outside.join("secret"), run.join("stdout"))?;
        assert!(held.dir(OsStr::new("work")).is_err());
        assert!(held.file(OsStr::new("stdout")).is_err());
        assert!(held.dir(OsStr::new("..")).is_err());
        assert!(held.file(OsStr::new("../outside/secret")).is_err());
        let kinds: Vec<_> = held.entries()?.into_iter().map(|e| e.kind).collect();
        assert_eq!(kinds, vec![Kind::Other, Kind::Other]);
        Ok(())
    }

    #[test]
    fn a_held_directory_survives_being_swapped() -> io::Result<()> {
        let tmp = tempfile::tempdir()?;
        let run = tmp.path().join("run");
        std::fs::create_dir(&run)?;
        std::fs::write(run.join("stdout"), "ours")?;
        let held = HeldDir::open(&run)?;
        std::fs::rename(&run, tmp.path().join("moved"))?;
        std::fs::create_dir(&run)?;
        std::fs::write(run.join("stdout"), "planted")?;
        let mut text = String::new();
        held.file(OsStr::new("stdout"))?.read_to_string(&mut text)?;
        assert_eq!(text, "ours");
        Ok(())
    }

    #[test]
    fn fifos_are_refused_without_blocking() -> io::Result<()> {
        let tmp = tempfile::tempdir()?;
        nix::unistd::mkfifo(&tmp.path().join("pipe"), Mode::S_IRWXU)?;
        let held = HeldDir::open(tmp.path())?;
        assert!(held.file(OsStr::new("pipe")).is_err());
        Ok(())
    }

    #[test]
    fn nested_files_are_reached_component_by_component() -> io::Result<()> {
        let tmp = tempfile::tempdir()?;
        std::fs::create_dir_all(tmp.path().join("a/b"))?;
        std::fs::write(tmp.path().join("a/b/c.txt"), "deep")?;
        let held = HeldDir::open(tmp.path())?;
        let path: Vec<OsString> = ["a", "b", "c.txt"].iter().map(OsString::from).collect();
        let mut text = String::new();
        held.file_beneath(&path)?.read_to_string(&mut text)?;
        assert_eq!(text, "deep");
        Ok(())
    }
}
