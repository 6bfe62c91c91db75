//! At start, the PCE cache directory (the only directory the daemon
//! writes: PCE files, through `cuzk_groth16_cuda::write_atomically`) is
//! cleared of what dead writers and old failures left there:
//!
//! - temporary files of a PCE write that never finished: `.NAME.pce.XXXXXX.tmp`
//!   (tempfile's names, today's writer) or `.NAME.pce.tmp-PID` (older
//!   versions'), once unchanged for a minute and open in no process this
//!   user can see, or at once for the older form when process PID is gone.
//!   A live writer changes its file as it writes and holds it open, so
//!   another daemon or `cuzk` command writing into the same directory keeps
//!   its file;
//! - PCE files set aside as unusable (`NAME.pce.bad`, one per name: a later
//!   failure replaces it) once set aside a week ago: long enough to look at
//!   after the warning in the log, and a PoRep PCE is GiB that no one else
//!   ever removes.
//!
//! Nothing else is touched: only names of these forms, only in that
//! directory, never below it.

use std::collections::HashSet;
use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// A temporary file unchanged for this long has no writer.
pub const TEMP_AGE: Duration = Duration::from_secs(60);
/// How long a PCE file set aside as unusable is kept.
pub const BAD_KEEP: Duration = Duration::from_secs(7 * 24 * 3600);

/// What a name in the PCE directory is, for the sweep.
#[derive(Debug, PartialEq, Eq)]
enum Kind {
    /// `.NAME.pce.XXXXXX.tmp`
    Temp,
    /// `.NAME.pce.tmp-PID`
    OldTemp(u32),
    /// `NAME.pce.bad`
    Bad,
}

fn kind(name: &str) -> Option<Kind> {
    if let Some(stem) = name.strip_suffix(".pce.bad") {
        return (!stem.is_empty() && !stem.starts_with('.')).then_some(Kind::Bad);
    }
    let inner = name.strip_prefix('.')?;
    if let Some((base, pid)) = inner.rsplit_once(".tmp-") {
        let pid = (!pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
            .then(|| pid.parse().ok())
            .flatten()?;
        return pce_name(base).then_some(Kind::OldTemp(pid));
    }
    let (base, random) = inner.strip_suffix(".tmp")?.rsplit_once('.')?;
    (random.len() == 6 && random.bytes().all(|b| b.is_ascii_alphanumeric()) && pce_name(base))
        .then_some(Kind::Temp)
}

/// A PCE file's name (`pce_file::file_name`: `SHAPE-HASH.pce`).
fn pce_name(name: &str) -> bool {
    name.strip_suffix(".pce").is_some_and(|s| !s.is_empty())
}

/// Whether process `pid` exists (as any user).
fn alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: kill with signal 0 sends nothing; it only checks that the
    // process exists and may be signalled.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// The paths of files open in processes whose descriptors this user can
/// read (its own, or all of them as root). Read through the descriptor
/// links' text, not by following them, so a hung mount cannot stall this.
fn open_paths() -> HashSet<OsString> {
    let mut open = HashSet::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return open;
    };
    for p in procs.flatten() {
        if !p
            .file_name()
            .as_encoded_bytes()
            .iter()
            .all(u8::is_ascii_digit)
        {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if let Ok(target) = std::fs::read_link(fd.path()) {
                open.insert(target.into_os_string());
            }
        }
    }
    open
}

/// Removes stale temporary files and old set-aside PCEs from `dir`, as
/// of `now`; returns what was removed and why, each also logged.
pub fn sweep_pce_dir(dir: &Path, now: SystemTime) -> Vec<(PathBuf, &'static str)> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            tracing::warn!(dir = %dir.display(), "cannot list the PCE directory to clean it: {e}");
            return Vec::new();
        }
    };
    let real_dir = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
    let age = |t: SystemTime| now.duration_since(t).unwrap_or_default();
    let mut open: Option<HashSet<OsString>> = None;
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(kind) = name.to_str().and_then(kind) else {
            continue;
        };
        // Not following links: a link is nothing the writer made.
        let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        let unchanged = meta.modified().map(age).unwrap_or_default();
        let mut open_somewhere = || {
            open.get_or_insert_with(open_paths)
                .contains(real_dir.join(&name).as_os_str())
        };
        let why = match kind {
            Kind::OldTemp(pid) if !alive(pid) => {
                "temporary file of a PCE write whose process is gone"
            }
            Kind::Temp | Kind::OldTemp(_) if unchanged >= TEMP_AGE && !open_somewhere() => {
                "temporary file of a PCE write, unchanged for a minute and open nowhere"
            }
            Kind::Bad => {
                // Set aside by a rename, which sets ctime, not mtime.
                let ctime = SystemTime::UNIX_EPOCH
                    + Duration::from_secs(u64::try_from(meta.ctime()).unwrap_or(0));
                if age(ctime).min(unchanged) < BAD_KEEP {
                    continue;
                }
                "unusable PCE file set aside over a week ago"
            }
            _ => continue,
        };
        let path = entry.path();
        match std::fs::remove_file(&path) {
            Ok(()) => {
                tracing::info!(path = %path.display(), why, "removed from the PCE directory");
                removed.push((path, why));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(path = %path.display(), why, "cannot remove: {e}"),
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_told_apart() {
        assert_eq!(kind(".porep_32-ab12.pce.Xy9Q0z.tmp"), Some(Kind::Temp));
        assert_eq!(
            kind(".porep_32-ab12.pce.tmp-4242"),
            Some(Kind::OldTemp(4242))
        );
        assert_eq!(kind("porep_32-ab12.pce.bad"), Some(Kind::Bad));
        for other in [
            "porep_32-ab12.pce",
            ".porep_32-ab12.pce",
            ".notes.txt.Xy9Q0z.tmp",
            ".porep.pce.Xy9Q0.tmp",
            ".porep.pce.Xy9Q0!.tmp",
            ".pce.Xy9Q0z.tmp",
            ".porep.pce.tmp-",
            ".porep.pce.tmp-12a",
            ".porep.params.tmp-12",
            ".pce.bad",
            "..pce.bad",
            "x.bad",
            "x.tmp",
        ] {
            assert_eq!(kind(other), None, "{other}");
        }
    }

    #[test]
    fn stale_files_go_and_everything_else_stays() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let dead = {
            let mut child = std::process::Command::new("true").spawn().unwrap();
            let pid = child.id();
            child.wait().unwrap();
            pid
        };
        let me = std::process::id();
        let write = |name: &str, age: Duration| {
            let f = std::fs::File::create(d.join(name)).unwrap();
            f.set_modified(SystemTime::now() - age).unwrap();
            f
        };
        let hour = Duration::from_secs(3600);
        let second = Duration::from_secs(1);
        write(&format!(".a-1.pce.tmp-{dead}"), second);
        write(&format!(".b-1.pce.tmp-{me}"), hour);
        write(&format!(".c-1.pce.tmp-{me}"), second);
        write(".d-1.pce.AAAAAA.tmp", hour);
        write(".e-1.pce.BBBBBB.tmp", second);
        // Old, but a writer holds it open (a slow fsync, say).
        let _held = write(".f-1.pce.CCCCCC.tmp", hour);
        write("g-1.pce.bad", hour);
        for other in [
            "g-1.pce",
            ".notes.txt.DDDDDD.tmp",
            "readme",
            ".x.params.tmp-1",
        ] {
            write(other, hour);
        }
        std::fs::create_dir(d.join(".h-1.pce.EEEEEE.tmp")).unwrap();
        std::os::unix::fs::symlink("/nonexistent", d.join(".i-1.pce.FFFFFF.tmp")).unwrap();

        let removed = sweep_pce_dir(d, SystemTime::now());
        let mut names: Vec<String> = removed
            .iter()
            .map(|(p, _)| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                format!(".a-1.pce.tmp-{dead}"),
                format!(".b-1.pce.tmp-{me}"),
                ".d-1.pce.AAAAAA.tmp".into(),
            ]
        );
        // A week on, the set-aside PCE goes too; nothing else ever does.
        let later = SystemTime::now() + BAD_KEEP + hour;
        let removed = sweep_pce_dir(d, later);
        let names: Vec<_> = removed
            .iter()
            .map(|(p, _)| p.file_name().unwrap())
            .collect();
        assert!(
            names.contains(&std::ffi::OsStr::new("g-1.pce.bad")),
            "{names:?}"
        );
        assert!(
            names.contains(&std::ffi::OsStr::new(".e-1.pce.BBBBBB.tmp")),
            "{names:?}"
        );
        assert_eq!(names.len(), 3, "{names:?}");
        let mut left: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        let want = [
            ".f-1.pce.CCCCCC.tmp",
            ".h-1.pce.EEEEEE.tmp",
            ".i-1.pce.FFFFFF.tmp",
            ".notes.txt.DDDDDD.tmp",
            ".x.params.tmp-1",
            "g-1.pce",
            "readme",
        ];
        assert_eq!(left, want);
    }
}
