//! What `DaemonConfig::check` and `from_file` refuse before anything
//! starts: a config that is not a regular file of bounded size, a socket
//! mode that opens the API to every local user or carries special bits,
//! limits under which no request can be served, and directories the daemon
//! cannot use.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, Result, bail};
use cuzk_engine::{Auto, ByteSize};

use super::DaemonConfig;

/// The largest daemon config read (a real one is a few KiB): a path that
/// names something endless (`/dev/zero`) must not grow memory without bound.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The smallest `max_request_bytes`: a built-in circuit's request with a
/// parameter path as long as Linux allows (PATH_MAX, 4 KiB) and a few
/// seeds fits; Filecoin requests are far larger (a 32 GiB PoRep C1 output
/// is about 50 MB). Under it only empty calls (status) would get through.
pub const MIN_REQUEST_BYTES: u64 = 8 << 10;

/// The smallest host memory budget: the smallest built-in circuit
/// (`no-aux:1`, 5 constraints) needs a few KiB with its PCE and parameters,
/// production circuits need GiB; under 1 MiB nothing useful fits.
pub const MIN_HOST_BUDGET: u64 = 1 << 20;

/// The text of the daemon config at `path`, which must be a regular file
/// (a symbolic link to one is fine) of at most [`MAX_CONFIG_BYTES`].
pub fn read_config_text(path: &Path) -> Result<String> {
    use std::os::unix::fs::OpenOptionsExt;
    let meta = std::fs::metadata(path)
        .with_context(|| format!("cannot read daemon config {}", path.display()))?;
    regular_and_bounded(path, &meta)?;
    // O_NONBLOCK: should the path be swapped for a FIFO after the look
    // above, opening it does not wait for a writer; the handle's own type is
    // checked again below, and the read is bounded whatever it is.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .with_context(|| format!("cannot open daemon config {}", path.display()))?;
    let meta = file
        .metadata()
        .with_context(|| format!("cannot read daemon config {}", path.display()))?;
    regular_and_bounded(path, &meta)?;
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read daemon config {}", path.display()))?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        bail!(too_large(path, None));
    }
    String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "daemon config {} is not UTF-8 text (invalid byte at offset {}): give a TOML file",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })
}

fn too_large(path: &Path, len: Option<u64>) -> String {
    format!(
        "daemon config {} is {}: a daemon config is at most {} (a real one is a few KiB); give \
         the path of a TOML file such as docs/daemon.example.toml",
        path.display(),
        len.map_or_else(|| "larger than that".into(), |l| ByteSize(l).to_string()),
        ByteSize(MAX_CONFIG_BYTES)
    )
}

fn regular_and_bounded(path: &Path, meta: &std::fs::Metadata) -> Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    let kind = if t.is_file() {
        if meta.len() > MAX_CONFIG_BYTES {
            bail!(too_large(path, Some(meta.len())));
        }
        return Ok(());
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a file"
    };
    bail!(
        "daemon config {} is {kind}, not a regular file: give the path of a TOML file such as \
         docs/daemon.example.toml",
        path.display()
    )
}

/// The socket's permission bits: no special bits ever; writable by others
/// only when asked for in so many words.
pub fn socket_mode(mode: u32, allow_world: bool) -> Result<()> {
    if mode & !0o777 != 0 {
        bail!(
            "socket_mode = 0o{mode:o} has bits outside 0o777 (setuid 0o4000, setgid 0o2000, sticky \
             0o1000 or beyond): a socket needs only read and write bits; use 0o600 (its owner) \
             or 0o660 (its owner and group)"
        );
    }
    if mode & 0o002 != 0 && !allow_world {
        bail!(
            "socket_mode = 0o{mode:o} lets every local user write to the socket, and the API has \
             no authentication (anyone could prove, cancel others' jobs and shut the daemon \
             down); use 0o600 (its owner) or 0o660 (a group of trusted users), or set \
             allow_world_socket = true to allow it anyway"
        );
    }
    Ok(())
}

/// Limits under which no request could ever be served.
pub fn limits(c: &DaemonConfig) -> Result<()> {
    for (name, value) in [
        ("max_jobs", c.max_jobs as u64),
        ("max_partitions", c.max_partitions as u64),
        ("max_constraints", c.max_constraints),
    ] {
        if value == 0 {
            bail!(
                "{name} = 0 refuses every request; set at least 1 (or leave it out for the default)"
            );
        }
    }
    if c.max_request_bytes.0 < MIN_REQUEST_BYTES {
        bail!(
            "max_request_bytes = {} is too small for any proving request (a built-in \
             circuit's request with a parameter path takes up to {}; Filecoin requests many MB); \
             set at least {}, normally the default 128MiB",
            c.max_request_bytes,
            ByteSize(MIN_REQUEST_BYTES),
            ByteSize(MIN_REQUEST_BYTES)
        );
    }
    if let Auto::Value(budget) = c.engine.host_memory_budget
        && budget.0 < MIN_HOST_BUDGET
    {
        bail!(
            "[engine] host_memory_budget = {budget} holds no circuit with its parameters and \
             working set; set \"auto\" or at least {}",
            ByteSize(MIN_HOST_BUDGET)
        );
    }
    Ok(())
}

/// `params_dirs` must exist as readable directories; `pce_cache_dir` must
/// be a directory the daemon can make and write, outside /proc and /sys.
pub fn directories(c: &DaemonConfig) -> Result<()> {
    for dir in &c.params_dirs {
        let meta = std::fs::metadata(dir).with_context(|| {
            format!(
                "params_dirs: {} cannot be used; give existing directories that hold parameter \
                 files",
                dir.display()
            )
        })?;
        if !meta.is_dir() {
            bail!(
                "params_dirs: {} is not a directory; give directories that hold parameter files",
                dir.display()
            );
        }
        std::fs::read_dir(dir).with_context(|| {
            format!(
                "params_dirs: {} cannot be listed by the daemon's user; fix its permissions or \
                 remove it",
                dir.display()
            )
        })?;
    }
    if let Some(dir) = &c.engine.pce_cache_dir {
        pce_cache_dir(dir)?;
    }
    Ok(())
}

fn pce_cache_dir(dir: &Path) -> Result<()> {
    let resolved = resolve(dir);
    if let Some(root) = ["/proc", "/sys"]
        .into_iter()
        .find(|r| resolved.starts_with(r))
    {
        bail!(
            "[engine] pce_cache_dir = {} is under {root} (the kernel's view of processes and \
             devices, not storage); give a directory on a disk, e.g. /var/cache/cuzk/pce",
            dir.display()
        );
    }
    let hint = "give a directory the daemon's user can create and write, e.g. /var/cache/cuzk/pce";
    std::fs::create_dir_all(dir).with_context(|| {
        format!(
            "[engine] pce_cache_dir = {}: cannot create it; {hint}",
            dir.display()
        )
    })?;
    if !std::fs::metadata(dir).is_ok_and(|m| m.is_dir()) {
        bail!(
            "[engine] pce_cache_dir = {} is not a directory; {hint}",
            dir.display()
        );
    }
    // Writing is the only reliable test (read-only mounts, ACLs, quotas);
    // the probe is removed when dropped.
    tempfile::Builder::new()
        .prefix(".cuzk-write-test-")
        .tempfile_in(dir)
        .with_context(|| {
            format!(
                "[engine] pce_cache_dir = {}: cannot write there; {hint}",
                dir.display()
            )
        })?;
    Ok(())
}

/// `dir` with symbolic links resolved as far as it exists (so `/x -> /proc`
/// is seen as /proc), the rest appended as given.
fn resolve(dir: &Path) -> PathBuf {
    let absolute = if dir.is_absolute() {
        dir.to_owned()
    } else {
        std::env::current_dir().map_or_else(|_| dir.to_owned(), |cwd| cwd.join(dir))
    };
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            let mut out = real;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return out;
        }
        match (existing.parent(), existing.components().next_back()) {
            (Some(parent), Some(Component::Normal(last))) => {
                rest.push(last.to_owned());
                existing = parent;
            }
            _ => return absolute,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_path_that_is_not_a_bounded_regular_file_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("config.fifo");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        let big = dir.path().join("big.toml");
        std::fs::write(&big, vec![b'#'; MAX_CONFIG_BYTES as usize + 1]).unwrap();
        // /dev/null, not /dev/zero: should the check be lost, an endless
        // read in this process would take the machine's memory (the
        // command-line test reads /dev/zero under a memory limit).
        let cases = [
            (fifo, "a FIFO"),
            (PathBuf::from("/dev/null"), "a character device"),
            (dir.path().to_owned(), "a directory"),
            (big, "at most 1.0 MiB"),
        ];
        for (path, want) in cases {
            // On a thread: reading a FIFO used to wait for a writer forever,
            // which must fail the test rather than hang it.
            let (tx, rx) = std::sync::mpsc::channel();
            let p = path.clone();
            std::thread::spawn(move || {
                let _ = tx.send(DaemonConfig::from_file(&p).map(|_| ()));
            });
            let got = rx
                .recv_timeout(std::time::Duration::from_secs(5))
                .unwrap_or_else(|_| panic!("{}: still reading after 5 s", path.display()));
            let err = format!("{:#}", got.unwrap_err());
            assert!(err.contains(want), "{}: {err}", path.display());
            assert!(err.contains("TOML file"), "{}: {err}", path.display());
        }
        let good = dir.path().join("good.toml");
        std::fs::write(&good, "max_jobs = 7\n").unwrap();
        assert_eq!(DaemonConfig::from_file(&good).unwrap().max_jobs, 7);
    }

    #[test]
    fn socket_modes_open_to_everyone_or_with_special_bits_are_refused() {
        for (mode, allow, want) in [
            (0o777, false, Some("allow_world_socket")),
            (0o666, false, Some("allow_world_socket")),
            (0o602, false, Some("allow_world_socket")),
            (0o4600, false, Some("outside 0o777")),
            (0o1600, true, Some("outside 0o777")),
            (0o2660, true, Some("outside 0o777")),
            (0o10600, true, Some("outside 0o777")),
            (0o600, false, None),
            (0o660, false, None),
            (0o666, true, None),
        ] {
            let c = DaemonConfig {
                socket_mode: mode,
                allow_world_socket: allow,
                ..DaemonConfig::default()
            };
            match (c.check(), want) {
                (Ok(()), None) => {}
                (Err(e), Some(w)) => {
                    let e = e.to_string();
                    assert!(
                        e.contains(w) && e.contains("socket_mode"),
                        "0o{mode:o}: {e}"
                    );
                }
                (got, _) => panic!("0o{mode:o} allow {allow}: {got:?}"),
            }
        }
    }

    /// A change to the default config, by name, and what its refusal says.
    type Case = (&'static str, fn(&mut DaemonConfig), &'static str);

    #[test]
    fn limits_that_serve_nothing_and_unusable_directories_are_refused() {
        let cases: [Case; 10] = [
            (
                "max_constraints",
                |c| c.max_constraints = 0,
                "max_constraints = 0",
            ),
            ("max_jobs", |c| c.max_jobs = 0, "max_jobs = 0"),
            (
                "max_partitions",
                |c| c.max_partitions = 0,
                "max_partitions = 0",
            ),
            (
                "max_request_bytes 0",
                |c| c.max_request_bytes = ByteSize(0),
                "max_request_bytes = 0 bytes is too small",
            ),
            (
                "max_request_bytes 1000",
                |c| c.max_request_bytes = ByteSize(1000),
                "max_request_bytes = 1000 bytes",
            ),
            (
                "budget",
                |c| c.engine.host_memory_budget = Auto::Value(ByteSize(1)),
                "host_memory_budget = 1 bytes",
            ),
            (
                "pce /proc",
                |c| c.engine.pce_cache_dir = Some("/proc/1".into()),
                "pce_cache_dir = /proc/1 is under /proc",
            ),
            (
                "pce /sys",
                |c| c.engine.pce_cache_dir = Some("/sys/kernel/x".into()),
                "under /sys",
            ),
            (
                "params_dirs",
                |c| c.params_dirs = vec!["/nonexistent/cuzk-params".into()],
                "params_dirs: /nonexistent/cuzk-params cannot be used",
            ),
            (
                "params_dirs file",
                |c| c.params_dirs = vec!["/dev/null".into()],
                "/dev/null is not a directory",
            ),
        ];
        for (what, tweak, want) in cases {
            let mut c = DaemonConfig::default();
            tweak(&mut c);
            let err = format!("{:#}", c.check().unwrap_err());
            assert!(err.contains(want), "{what}: {err}");
        }
        // A path through a symbolic link into /proc is seen for what it is.
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/proc/self", dir.path().join("p")).unwrap();
        let c = DaemonConfig {
            engine: cuzk_engine::EngineConfig {
                pce_cache_dir: Some(dir.path().join("p/pce")),
                ..Default::default()
            },
            ..DaemonConfig::default()
        };
        let err = format!("{:#}", c.check().unwrap_err());
        assert!(err.contains("under /proc"), "{err}");
        // A file where the directory should be; then a usable one.
        let file = dir.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        let mut c = DaemonConfig::default();
        c.engine.pce_cache_dir = Some(file.join("pce"));
        let err = format!("{:#}", c.check().unwrap_err());
        assert!(err.contains("cannot create it"), "{err}");
        c.engine.pce_cache_dir = Some(dir.path().join("made/pce"));
        c.params_dirs = vec![dir.path().to_owned()];
        c.max_request_bytes = ByteSize(MIN_REQUEST_BYTES);
        c.engine.host_memory_budget = Auto::Value(ByteSize(MIN_HOST_BUDGET));
        c.check().unwrap();
        assert!(dir.path().join("made/pce").is_dir());
        // The write probe left nothing behind.
        assert_eq!(
            std::fs::read_dir(dir.path().join("made/pce"))
                .unwrap()
                .count(),
            0
        );
    }
}
