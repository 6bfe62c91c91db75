//! The crate's one error type.

use std::path::PathBuf;

use cuzk_engine::EngineError;

/// What went wrong proving or verifying a Filecoin proof.
#[derive(Debug, thiserror::Error)]
pub enum FilecoinError {
    /// The input file ends early: a truncated copy.
    #[error(
        "{what} ends early at line {line}, column {column}: the file is truncated or incomplete"
    )]
    Truncated {
        what: &'static str,
        line: usize,
        column: usize,
    },

    /// The input is not the JSON it should be.
    #[error("{what} is not valid: {detail}")]
    BadInput { what: &'static str, detail: String },

    /// A sector size that Filecoin does not define.
    #[error(
        "unknown sector size {0} bytes (supported: 2KiB, 4KiB, 16KiB, 32KiB, 8MiB, 16MiB, \
         512MiB, 1GiB, 32GiB, 64GiB)"
    )]
    UnknownSectorSize(u64),

    /// A registered proof name that is not known.
    #[error("unknown registered proof `{name}` (expected e.g. {examples})")]
    UnknownProof {
        name: String,
        examples: &'static str,
    },

    /// The input is for another sector size than the one asked for.
    #[error("{what} is for {found} sectors, but {expected} was asked for")]
    SectorSizeMismatch {
        what: &'static str,
        expected: crate::SectorSize,
        found: crate::SectorSize,
    },

    /// The input has another number of partitions than its proof type.
    #[error("{what} holds {found} partitions; a {proof} proof has {expected}")]
    PartitionCount {
        what: &'static str,
        proof: String,
        expected: usize,
        found: usize,
    },

    /// A parameter or verifying-key file is not where the convention puts it.
    #[error(
        "no {what} at {path}: put Filecoin's parameter files in the parameter cache \
         (FIL_PROOFS_PARAMETER_CACHE, default /var/tmp/filecoin-proof-parameters)"
    )]
    ParamsMissing { what: &'static str, path: PathBuf },

    /// storage-proofs or filecoin-proofs refused something; its message.
    #[error("{context}: {message}")]
    Proofs {
        context: &'static str,
        message: String,
    },

    /// A proof file that is not a whole number of 192-byte Groth16 proofs.
    #[error("proof of {len} bytes: a {proof} proof is {expected} bytes ({partitions} x 192)")]
    ProofLength {
        proof: String,
        len: usize,
        expected: usize,
        partitions: usize,
    },

    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The engine failed: parameters that do not fit the circuit, an
    /// unsatisfied circuit, memory, a device.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

impl FilecoinError {
    /// Wraps an error of filecoin-proofs / storage-proofs (their `anyhow`
    /// errors), keeping its whole chain in the message.
    pub(crate) fn proofs(context: &'static str) -> impl FnOnce(anyhow::Error) -> Self {
        move |e| FilecoinError::Proofs {
            context,
            message: format!("{e:#}"),
        }
    }

    /// A JSON error, told apart as truncation or bad content.
    pub(crate) fn json(what: &'static str, e: serde_json::Error) -> Self {
        if e.is_eof() {
            FilecoinError::Truncated {
                what,
                line: e.line(),
                column: e.column(),
            }
        } else {
            FilecoinError::BadInput {
                what,
                detail: e.to_string(),
            }
        }
    }
}

/// `Result` with [`FilecoinError`].
pub type Result<T, E = FilecoinError> = std::result::Result<T, E>;
