//! Errors of the prover backends.

use std::path::PathBuf;

/// What went wrong while reading parameters or proving.
#[derive(Debug, thiserror::Error)]
pub enum Groth16Error {
    /// Synthesis, evaluation or the satisfaction check failed.
    #[error(transparent)]
    Synth(#[from] cuzk_synth::SynthError),

    /// A parameter file could not be opened or read.
    #[error("cannot read parameter file {path}: {source}")]
    ParamsIo {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A parameter file ends before all of its points were read.
    #[error(
        "parameter file {path} is truncated: it ends before its {section} section is complete \
         ({len} bytes in the file); it was cut short while being written or copied, so make or \
         fetch it again"
    )]
    ParamsTruncated {
        path: PathBuf,
        section: &'static str,
        len: u64,
    },

    /// A parameter file holds bytes that are not valid parameters.
    #[error("parameter file {path} is corrupt in its {section} section: {detail}")]
    ParamsCorrupt {
        path: PathBuf,
        section: &'static str,
        detail: String,
    },

    /// The parameters were made for a circuit of another shape.
    #[error(
        "the parameters do not match the circuit: {what} has {found} elements, the circuit needs \
         {expected}; these parameters were generated for another circuit"
    )]
    ParamsMismatch {
        what: &'static str,
        expected: usize,
        found: usize,
    },

    /// The verifying key's delta is the identity: the parameters are unusable.
    #[error("the parameters' verifying key has delta at infinity; the parameters are invalid")]
    DegenerateParams,

    /// The circuit needs a larger evaluation domain than BLS12-381's Fr has.
    #[error("the circuit has {constraints} constraints, more than BLS12-381's 2^32 domain allows")]
    DomainTooLarge { constraints: usize },

    /// A multi-scalar multiplication failed.
    #[error("multi-scalar multiplication for {what} failed: {detail}")]
    Msm { what: &'static str, detail: String },

    /// Writing an output file failed.
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// No CUDA device can be used: the driver library is missing, the driver
    /// sees no device, or the ordinal asked for is not one of its devices.
    #[error("no usable CUDA GPU: {reason}")]
    NoGpu { reason: String },

    /// A CUDA driver call failed. `what` names the operation and its object
    /// (the device, the PTX module, the kernel); `detail` is the driver's
    /// error name and description.
    #[error("CUDA failure while {what}: {detail}")]
    Cuda { what: String, detail: String },

    /// A kernel was asked for from a module this build does not embed.
    #[error(
        "no device-code module named {module:?} is embedded in this build (embedded: \
         {embedded}); a module is kernels/<name>.cu, compiled by `cargo xtask kernels` and \
         listed in crates/groth16-cuda/src/cuda/modules.rs (test-only modules are embedded by \
         the tests that launch them, with fatbin_module!)"
    )]
    UnknownModule { module: String, embedded: String },

    /// A host slice and a device buffer of different lengths were copied.
    #[error("cannot copy {what}: the device buffer holds {device} elements, the host slice {host}")]
    CopyLength {
        what: &'static str,
        device: usize,
        host: usize,
    },

    /// A kernel region was run without the state its `prepare` stages.
    #[error("the {backend} backend's kernel region ran without its prepare step")]
    NotPrepared { backend: &'static str },

    /// An NTT was asked for on a size, or with buffers, it cannot take.
    #[error("cannot run the NTT: {detail}")]
    NttSize { detail: String },

    /// a/b/c cannot be computed on the GPU from this PCE or with these
    /// buffers: a malformed or oversized matrix, a witness or output of the
    /// wrong length, buffers of another GPU.
    #[error("cannot compute a/b/c on the GPU: {detail}")]
    Spmv { detail: String },

    /// An MSM's scalars (or its density) use more points than were uploaded.
    #[error(
        "the MSM needs {needed} bases but only {available} are uploaded: the scalars or the density \
         belong to a larger circuit than these parameters"
    )]
    MsmTooFewBases { needed: usize, available: usize },

    /// MSM inputs that do not fit together or exceed what the kernels index.
    #[error("MSM inputs do not fit: {detail}")]
    MsmShape { detail: String },

    /// Device memory ran out, or would: `need` bytes were asked for while
    /// `free` of the device's `total` were free.
    #[error(
        "GPU {ordinal} is out of memory {what}: {need} bytes needed, {free} free of {total}; \
         prove smaller partitions, run fewer workers on this GPU, free the memory other \
         processes hold (nvidia-smi lists them), or use the CPU backend"
    )]
    DeviceOutOfMemory {
        ordinal: usize,
        what: String,
        need: u64,
        free: u64,
        total: u64,
    },

    /// Parameter generation was given toxic waste it cannot use.
    #[error("cannot generate parameters from this toxic waste: {what}")]
    DegenerateToxicWaste { what: &'static str },

    /// Parameter generation: an aux variable appears in no constraint (with
    /// a nonzero coefficient), so its L point would be the identity.
    #[error(
        "aux variable {index} is unconstrained: no constraint uses it with a nonzero \
         coefficient, so its L query point would be the identity (bellperson's generator \
         refuses such a circuit with UnconstrainedVariable)"
    )]
    UnconstrainedVariable { index: usize },

    /// Parameter generation was asked for a fixed-base window it cannot use.
    #[error("a fixed-base window of {bits} bits is out of range: use {min} to {max} bits")]
    SetupWindow { bits: u32, min: u32, max: u32 },

    /// Parameter generation was given a PCE whose matrices do not fit together.
    #[error("cannot generate parameters: the PCE's {matrix} matrix is malformed: {detail}")]
    SetupPce {
        matrix: &'static str,
        detail: String,
    },

    /// A parameter section would hold more points than the format's u32 count.
    #[error("the {section} section would hold {points} points, more than the format's 2^32 - 1")]
    SetupTooLarge {
        section: &'static str,
        points: usize,
    },

    /// Fixed-base multiplication gave the identity for a nonzero scalar.
    #[error(
        "point {index} of the {query} query came out as the identity although its scalar is not \
         zero: the fixed-base multiplication is broken"
    )]
    SetupIdentity { query: &'static str, index: usize },
}

/// `Result` with [`Groth16Error`].
pub type Result<T> = std::result::Result<T, Groth16Error>;
