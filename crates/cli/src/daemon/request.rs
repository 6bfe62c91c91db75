//! Turning a request into engine terms, refusing what it may not ask for:
//! malformed circuits and randomness, too many partitions or constraints,
//! unknown parameter sets, paths outside the allowed directories.

use std::fs::File;
use std::path::{Component, Path, PathBuf};

use blstrs::Scalar;
use cuzk_engine::{EngineError, ParamsRef, Priority};
use cuzk_synth::circuits::{CircuitSpec, Family};
use ff::{Field, PrimeField};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use tonic::{Code, Status};

use super::config::DaemonConfig;
use crate::proto;

/// A request, checked.
#[derive(Debug)]
pub struct Checked {
    pub spec: CircuitSpec,
    pub seeds: Vec<u64>,
    pub params: Resolved,
    pub priority: Priority,
    pub randomness: Option<Vec<(Scalar, Scalar)>>,
}

/// Constraints of a built-in circuit, from the family's formula (see
/// `cuzk circuits`), without building it.
pub fn constraints(spec: &CircuitSpec) -> u64 {
    let n = u64::from(spec.size);
    match spec.family {
        Family::MulChain | Family::PorepShaped { .. } => 1u64 << n.min(63),
        Family::Sha256 => (26_704 * n).saturating_sub(670),
        Family::NoAux => 3 * n + 2,
        Family::ManyInputs => (1u64 << (n + 1).min(63)) + 2,
        Family::RepeatedVars | Family::ConstantOnly => 3 * n + 3,
        Family::Parts => 35 * n + 1,
    }
}

pub fn priority_from_proto(p: i32) -> Result<Priority, Status> {
    match proto::Priority::try_from(p) {
        Ok(proto::Priority::Unspecified | proto::Priority::Normal) => Ok(Priority::Normal),
        Ok(proto::Priority::Low) => Ok(Priority::Low),
        Ok(proto::Priority::High) => Ok(Priority::High),
        Ok(proto::Priority::Critical) => Ok(Priority::Critical),
        Err(_) => Err(Status::invalid_argument(format!("unknown priority {p}"))),
    }
}

pub fn priority_to_proto(p: Priority) -> proto::Priority {
    match p {
        Priority::Low => proto::Priority::Low,
        Priority::Normal => proto::Priority::Normal,
        Priority::High => proto::Priority::High,
        Priority::Critical => proto::Priority::Critical,
    }
}

/// The most bytes of a client's value an error message quotes.
pub const QUOTE_LIMIT: usize = 200;

/// The most bytes of an error message sent back: a message built around
/// a client's values stays well within what gRPC clients take as metadata
/// (8 KiB in grpc-go and C-core).
pub const MESSAGE_LIMIT: usize = 1024;

/// A client's value for an error message: escaped, in backquotes, and cut
/// to [`QUOTE_LIMIT`] bytes with its full length said.
pub fn quoted(value: &str) -> String {
    if value.len() <= QUOTE_LIMIT {
        return format!("`{}`", value.escape_debug());
    }
    format!(
        "`{}`... ({} bytes)",
        truncated(value, QUOTE_LIMIT).escape_debug(),
        value.len()
    )
}

/// The longest prefix of `s` within `limit` bytes, cut at a character.
fn truncated(s: &str, limit: usize) -> &str {
    let mut end = limit.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// `s` with its message cut to [`MESSAGE_LIMIT`] bytes: an error that
/// quotes a client's value whole (a parser's message) still reaches it.
pub fn bounded(s: Status) -> Status {
    if s.message().len() <= MESSAGE_LIMIT {
        return s;
    }
    let cut = truncated(s.message(), MESSAGE_LIMIT);
    Status::new(
        s.code(),
        format!("{cut}... (message cut: {} bytes)", s.message().len()),
    )
}

/// (r, s) of each partition from a seed, as `cuzk prove --rs-seed` draws
/// them: the i-th pair from one ChaCha20 stream.
pub fn seeded_randomness(seed: u64, partitions: usize) -> Vec<(Scalar, Scalar)> {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    (0..partitions)
        .map(|_| (Scalar::random(&mut rng), Scalar::random(&mut rng)))
        .collect()
}

fn scalar(bytes: &[u8], what: &str, partition: usize) -> Result<Scalar, Status> {
    let repr: [u8; 32] = bytes.try_into().map_err(|_| {
        Status::invalid_argument(format!(
            "partition {partition}: {what} has {} bytes; a scalar is 32 little-endian bytes",
            bytes.len()
        ))
    })?;
    Option::from(Scalar::from_repr(repr)).ok_or_else(|| {
        Status::invalid_argument(format!(
            "partition {partition}: {what} is not a canonical scalar (not below the field modulus)"
        ))
    })
}

/// Explicit (r, s) pairs, one per partition, each checked.
pub fn explicit_randomness(
    e: &proto::ExplicitRandomness,
    partitions: usize,
) -> Result<Vec<(Scalar, Scalar)>, Status> {
    if e.partitions.len() != partitions {
        return Err(Status::invalid_argument(format!(
            "the request has {partitions} partitions but {} (r, s) pairs",
            e.partitions.len()
        )));
    }
    e.partitions
        .iter()
        .enumerate()
        .map(|(i, rs)| Ok((scalar(&rs.r, "r", i)?, scalar(&rs.s, "s", i)?)))
        .collect()
}

/// A parameter set a request may use: the engine's name for it, and for a
/// path the request gave, the file itself, opened before its place was
/// checked (the engine reads that handle, so what was checked is what is
/// read).
#[derive(Debug)]
pub struct Resolved {
    pub params: ParamsRef,
    pub file: Option<File>,
}

impl From<ParamsRef> for Resolved {
    fn from(params: ParamsRef) -> Self {
        Resolved { params, file: None }
    }
}

/// Resolves a parameter set to a file the daemon may read.
pub fn resolve_params(
    config: &DaemonConfig,
    spec: Option<&proto::ParamsSpec>,
) -> Result<Resolved, Status> {
    let source = spec.and_then(|p| p.source.as_ref()).ok_or_else(|| {
        Status::invalid_argument("the request names no parameter set (params.name or params.path)")
    })?;
    match source {
        proto::params_spec::Source::Name(name) => {
            let path = config.param_sets.get(name).ok_or_else(|| {
                let known: Vec<&str> = config.param_sets.keys().map(String::as_str).collect();
                Status::not_found(format!(
                    "unknown parameter set {}; the daemon knows {}",
                    quoted(name),
                    if known.is_empty() {
                        "none (configure [param_sets])".to_owned()
                    } else {
                        known.join(", ")
                    }
                ))
            })?;
            let canonical = std::fs::canonicalize(path).map_err(|e| {
                Status::not_found(format!(
                    "parameter set {}: cannot open {}: {e}",
                    quoted(name),
                    path.display()
                ))
            })?;
            Ok(ParamsRef::File(canonical).into())
        }
        proto::params_spec::Source::Path(p) => {
            confine(config, Path::new(p)).map(|(path, file)| Resolved {
                params: ParamsRef::File(path),
                file: Some(file),
            })
        }
        proto::params_spec::Source::SealProof(name) => filecoin_params(config, name, |n, dir| {
            cuzk_filecoin::porep::param_files_for(n.parse()?, dir)
        })
        .map(Resolved::from),
        proto::params_spec::Source::PostProof(name) => filecoin_params(config, name, |n, dir| {
            cuzk_filecoin::post::param_files_for(n.parse()?, dir)
        })
        .map(Resolved::from),
        proto::params_spec::Source::UpdateProof(name) => filecoin_params(config, name, |n, dir| {
            cuzk_filecoin::update::param_files_for(n.parse()?, dir)
        })
        .map(Resolved::from),
    }
}

/// The `.params` file of the Filecoin circuit that `files` names for the
/// registered proof `name`, in the daemon's Filecoin parameter cache.
fn filecoin_params(
    config: &DaemonConfig,
    name: &str,
    files: impl FnOnce(&str, &Path) -> cuzk_filecoin::Result<cuzk_filecoin::ParamFiles>,
) -> Result<ParamsRef, Status> {
    let dir = config.filecoin_params_dir();
    let files = files(name, &dir).map_err(|e| Status::invalid_argument(e.to_string()))?;
    // The path as Filecoin jobs name it (not canonicalized), so a preloaded
    // set is the one their jobs find in the engine's cache.
    let path = files
        .existing_params()
        .map_err(|e| Status::not_found(e.to_string()))?;
    Ok(ParamsRef::File(path.to_owned()))
}

/// The file `path` names, opened, and where it is, if it is a regular file
/// inside one of the allowed directories (after following every symbolic
/// link). The file is opened first and the place of the opened file is
/// what is checked, so nothing can be swapped in between the check and
/// the read.
pub fn confine(config: &DaemonConfig, path: &Path) -> Result<(PathBuf, File), Status> {
    if config.params_dirs.is_empty() {
        return Err(Status::permission_denied(
            "this daemon takes no parameter paths (params_dirs is empty); name a configured \
             parameter set instead",
        ));
    }
    if path.as_os_str().is_empty() {
        return Err(Status::invalid_argument("the parameter path is empty"));
    }
    let joined = if path.is_absolute() {
        path.to_owned()
    } else {
        config.params_dirs[0].join(path)
    };
    // Refuse `..` up front, so a path outside is refused whether or not it
    // exists (no probing of the file system through error messages).
    if joined.components().any(|c| c == Component::ParentDir) {
        return Err(outside(path));
    }
    let allowed: Vec<PathBuf> = config
        .params_dirs
        .iter()
        .filter_map(|d| std::fs::canonicalize(d).ok())
        .collect();
    let lexically_inside = config.params_dirs.iter().any(|d| joined.starts_with(d))
        || allowed.iter().any(|d| joined.starts_with(d));
    if !lexically_inside {
        return Err(outside(path));
    }
    let file = open_nonblocking(&joined)
        .map_err(|e| Status::not_found(format!("parameter file {}: {e}", shown(path))))?;
    let real = opened_path(&file, &joined).map_err(|e| {
        Status::internal(format!(
            "cannot tell where parameter file {} is: {e}",
            shown(path)
        ))
    })?;
    if !allowed.iter().any(|d| real.starts_with(d)) {
        // A symbolic link out of the allowed directories.
        return Err(outside(path));
    }
    let is_file = file.metadata().map(|m| m.is_file()).unwrap_or(false);
    if !is_file {
        return Err(Status::invalid_argument(format!(
            "parameter path {} is not a file",
            shown(path)
        )));
    }
    Ok((real, file))
}

/// Opens `path` for reading without blocking on a FIFO or taking a
/// terminal (either is then refused as not a regular file).
fn open_nonblocking(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
}

/// Where the open `file` is: the kernel's answer on Linux; elsewhere the
/// canonical form of the path it was opened by.
fn opened_path(file: &File, opened_by: &Path) -> std::io::Result<PathBuf> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let _ = opened_by;
        std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = file;
        std::fs::canonicalize(opened_by)
    }
}

/// A path a client sent, for a message.
fn shown(path: &Path) -> String {
    quoted(&path.to_string_lossy())
}

fn outside(path: &Path) -> Status {
    Status::permission_denied(format!(
        "parameter path {} is outside the daemon's allowed directories (params_dirs)",
        shown(path)
    ))
}

/// Checks a prove request.
pub fn check(config: &DaemonConfig, req: &proto::ProveRequest) -> Result<Checked, Status> {
    if req.circuit.len() > QUOTE_LIMIT {
        // A parser's message would quote it whole.
        return Err(Status::invalid_argument(format!(
            "circuit {} is not a circuit spec: specs are a few bytes (porep:24, mul-chain:20)",
            quoted(&req.circuit)
        )));
    }
    let spec: CircuitSpec = req
        .circuit
        .parse()
        .map_err(|e| Status::invalid_argument(format!("circuit {}: {e}", quoted(&req.circuit))))?;
    let n = constraints(&spec);
    if n > config.max_constraints {
        return Err(Status::resource_exhausted(format!(
            "circuit {spec} has {n} constraints; this daemon takes at most {} (max_constraints)",
            config.max_constraints
        )));
    }
    let partitions = req.witness_seeds.len();
    if partitions == 0 {
        return Err(Status::invalid_argument(
            "the request has no partitions (witness_seeds is empty)",
        ));
    }
    if partitions > config.max_partitions {
        return Err(Status::resource_exhausted(format!(
            "the request has {partitions} partitions; this daemon takes at most {} \
             (max_partitions)",
            config.max_partitions
        )));
    }
    let priority = priority_from_proto(req.priority)?;
    let randomness = match &req.randomness {
        None => None,
        Some(proto::prove_request::Randomness::RsSeed(seed)) => {
            Some(seeded_randomness(*seed, partitions))
        }
        Some(proto::prove_request::Randomness::Explicit(e)) => {
            Some(explicit_randomness(e, partitions)?)
        }
    };
    let params = resolve_params(config, req.params.as_ref())?;
    Ok(Checked {
        spec,
        seeds: req.witness_seeds.clone(),
        params,
        priority,
        randomness,
    })
}

/// The gRPC status of an engine error: what the caller did wrong, what
/// cannot be had, or what failed.
pub fn status_of(e: &EngineError) -> Status {
    let code = match e {
        EngineError::EmptyRequest
        | EngineError::RandomnessMismatch { .. }
        | EngineError::TooManyPartitions { .. } => Code::InvalidArgument,
        EngineError::ParamsNotRegistered { .. } => Code::NotFound,
        EngineError::JobNeverFits { .. } | EngineError::NeverFits { .. } => Code::ResourceExhausted,
        EngineError::Cancelled { .. } | EngineError::WaitCancelled { .. } => Code::Cancelled,
        EngineError::ShutDown { .. } | EngineError::EngineShutDown => Code::Unavailable,
        EngineError::Params { .. }
        | EngineError::ParamsIo { .. }
        | EngineError::ParamsInUse { .. }
        | EngineError::ParamsLoader { .. } => Code::FailedPrecondition,
        _ => Code::Internal,
    };
    Status::new(code, e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constraint_counts_follow_the_families() {
        for (spec, n) in [
            ("mul-chain:4", 16),
            ("porep:12", 4096),
            ("sha256:1", 26_034),
            ("no-aux:5", 17),
            ("many-inputs:3", 18),
        ] {
            assert_eq!(constraints(&spec.parse().unwrap()), n, "{spec}");
        }
    }

    #[test]
    fn paths_stay_inside_the_allowed_directories() {
        let root = tempfile::tempdir().unwrap();
        let allowed = root.path().join("params");
        std::fs::create_dir(&allowed).unwrap();
        std::fs::write(allowed.join("a.params"), b"x").unwrap();
        std::fs::write(root.path().join("secret"), b"x").unwrap();
        std::os::unix::fs::symlink(root.path().join("secret"), allowed.join("link")).unwrap();
        let config = DaemonConfig {
            params_dirs: vec![allowed.clone()],
            ..DaemonConfig::default()
        };
        let (ok, _) = confine(&config, Path::new("a.params")).unwrap();
        assert_eq!(ok, std::fs::canonicalize(allowed.join("a.params")).unwrap());
        assert_eq!(confine(&config, &allowed.join("a.params")).unwrap().0, ok);
        for bad in [
            root.path().join("secret"),
            allowed.join("../secret"),
            PathBuf::from("../secret"),
            PathBuf::from("link"),
            PathBuf::from("/etc/passwd"),
        ] {
            let e = confine(&config, &bad).unwrap_err();
            assert_eq!(e.code(), Code::PermissionDenied, "{bad:?}: {e:?}");
        }
        let e = confine(&config, Path::new("missing.params")).unwrap_err();
        assert_eq!(e.code(), Code::NotFound);

        // What was checked is what is read: the name swapped for a link
        // to the secret after the check changes nothing for the handle.
        let (_, mut file) = confine(&config, Path::new("a.params")).unwrap();
        std::fs::remove_file(allowed.join("a.params")).unwrap();
        std::os::unix::fs::symlink(root.path().join("secret"), allowed.join("a.params")).unwrap();
        std::fs::write(root.path().join("secret"), b"secret").unwrap();
        let mut read = String::new();
        std::io::Read::read_to_string(&mut file, &mut read).unwrap();
        assert_eq!(read, "x");
        assert_eq!(
            confine(&config, Path::new("a.params")).unwrap_err().code(),
            Code::PermissionDenied
        );

        // A FIFO or a directory is refused, without blocking on the FIFO.
        let fifo = allowed.join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        std::fs::create_dir(allowed.join("dir")).unwrap();
        for name in ["fifo", "dir"] {
            let e = confine(&config, Path::new(name)).unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument, "{name}: {e:?}");
            assert!(e.message().contains("is not a file"), "{name}: {e:?}");
        }
    }
}
