//! The files reconsim writes (failure files, traces, pages): a regular file is written
//! whole to a temporary name and renamed into place; a character device the user names
//! (`/dev/stdout`, `/dev/null`) is opened and written where it is; anything else (a
//! directory, a FIFO, a socket, a block device, a symlink to nothing) is refused,
//! naming what it is, and never replaced. An existing output is only ever read when it
//! is a regular file of the size being compared, so a device is never read.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// What a path names now, as far as writing it goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Nothing: a new regular file goes there.
    Missing,
    /// A regular file (or a symlink to one, which is written through, not replaced).
    Regular,
    /// A character device, written in place.
    CharDevice,
    /// Something reconsim never writes: what it is, in words.
    Refused(&'static str),
}

/// What `path` names now.
pub fn target(path: &Path) -> Target {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => Target::Regular,
        Ok(m) if m.is_dir() => Target::Refused("a directory"),
        Ok(m) => special(&m.file_type()),
        // A symlink whose target is missing: renaming over it would replace the link.
        Err(_) if std::fs::symlink_metadata(path).is_ok() => Target::Refused("a dangling symlink"),
        Err(_) => Target::Missing,
    }
}

#[cfg(unix)]
fn special(t: &std::fs::FileType) -> Target {
    use std::os::unix::fs::FileTypeExt;
    if t.is_char_device() {
        Target::CharDevice
    } else if t.is_fifo() {
        // Opening one for writing waits for a reader, perhaps forever.
        Target::Refused("a FIFO")
    } else if t.is_socket() {
        Target::Refused("a socket")
    } else if t.is_block_device() {
        Target::Refused("a block device")
    } else {
        Target::Refused("not a regular file")
    }
}

#[cfg(not(unix))]
fn special(_: &std::fs::FileType) -> Target {
    Target::Refused("not a regular file")
}

/// `Err` naming what `path` is when reconsim would refuse to write it.
pub fn check(path: &Path) -> std::io::Result<()> {
    match target(path) {
        Target::Refused(what) => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("it is {what}; reconsim writes only regular files and character devices"),
        )),
        _ => Ok(()),
    }
}

/// Write `bytes` to `path`, replacing a regular file atomically (a symlink to one is
/// written through and stays a symlink), writing a character device in place, and
/// refusing anything else.
pub fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    check(path)?;
    match target(path) {
        Target::CharDevice => std::fs::OpenOptions::new()
            .write(true)
            .open(path)?
            .write_all(bytes),
        Target::Regular => replace(&std::fs::canonicalize(path)?, bytes),
        _ => replace(path, bytes),
    }
}

/// Whether `path` is a regular file holding exactly `bytes`; anything else (a device, a
/// FIFO, a file of another size) is answered without reading it. A directory is an
/// error: no file can be saved under its name.
pub fn holds(path: &Path, bytes: &[u8]) -> std::io::Result<bool> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() && m.len() == bytes.len() as u64 => Ok(std::fs::read(path)? == bytes),
        Ok(m) if m.is_dir() => Err(std::io::Error::from(std::io::ErrorKind::IsADirectory)),
        Ok(_) => Ok(false),
        // A symlink to nothing holds nothing of ours.
        Err(_) if std::fs::symlink_metadata(path).is_ok() => Ok(false),
        Err(e) => Err(e),
    }
}

/// A temporary file beside `path`, then a rename over it.
fn replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = temporary(path, bytes)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// Write `bytes` to a new file beside `path` whose name no other process or thread uses
/// (pid and a counter), and return its path.
pub fn temporary(path: &Path, bytes: &[u8]) -> std::io::Result<PathBuf> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(
        ".{name}.{}-{}.tmp",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)?;
    if let Err(e) = f.write_all(bytes) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(tmp)
}

#[cfg(test)]
mod tests {
    use super::{Target, holds, target, write};

    fn scratch(tag: &str) -> std::path::PathBuf {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../target/tmp")
            .join(format!("output-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn regular_files_are_replaced_and_symlinks_written_through() {
        let dir = scratch("regular");
        let file = dir.join("a.json");
        write(&file, b"one").unwrap();
        assert_eq!(target(&file), Target::Regular);
        write(&file, b"two").unwrap();
        assert!(holds(&file, b"two").unwrap());
        assert!(!holds(&file, b"twoo").unwrap());
        #[cfg(unix)]
        {
            let link = dir.join("link.json");
            std::os::unix::fs::symlink(&file, &link).unwrap();
            write(&link, b"three").unwrap();
            assert!(
                std::fs::symlink_metadata(&link)
                    .unwrap()
                    .file_type()
                    .is_symlink()
            );
            assert!(holds(&file, b"three").unwrap());
            let dangling = dir.join("dangling.json");
            std::os::unix::fs::symlink(dir.join("nothing"), &dangling).unwrap();
            assert_eq!(target(&dangling), Target::Refused("a dangling symlink"));
            assert!(write(&dangling, b"x").is_err());
            assert!(
                std::fs::symlink_metadata(&dangling)
                    .unwrap()
                    .file_type()
                    .is_symlink()
            );
        }
        assert_eq!(target(&dir), Target::Refused("a directory"));
        assert!(write(&dir, b"x").is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
