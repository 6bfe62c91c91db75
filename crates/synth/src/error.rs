//! Errors of the synth crate.

/// What went wrong while recording, synthesizing or evaluating a circuit.
#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    /// The circuit's own `synthesize` returned an error.
    #[error("circuit synthesis failed: {0}")]
    Synthesis(#[from] bellperson::SynthesisError),

    /// A witness does not have the shape the PCE was recorded with: the
    /// circuit is not the one whose parameters and PCE are in use.
    #[error(
        "witness has {found_inputs} inputs and {found_aux} aux variables but the recorded circuit has \
         {expected_inputs} inputs and {expected_aux} aux variables: the circuit is not the one the \
         PCE was recorded from"
    )]
    ShapeMismatch {
        expected_inputs: usize,
        expected_aux: usize,
        found_inputs: usize,
        found_aux: usize,
    },

    /// A caller-provided output slice has the wrong length.
    #[error("{what} has length {found}, expected {expected}")]
    LengthMismatch {
        what: &'static str,
        expected: usize,
        found: usize,
    },

    /// The witness does not satisfy constraint `index`: (A·w)·(B·w) != C·w.
    #[error(
        "the witness does not satisfy the circuit: constraint {index}{} fails ((A·w)·(B·w) != C·w); \
         a proof would not verify, so none is produced",
        path.as_deref().map(|p| format!(" (`{p}`)")).unwrap_or_default()
    )]
    Unsatisfied {
        /// Row of the constraint in bellperson's order (the input constraints come last).
        index: usize,
        /// Namespace path of the constraint, when names were recorded.
        path: Option<String>,
    },

    /// A part synthesized on its own did not start with the values the
    /// circuit's common head has: the circuit is not deterministic, so its
    /// parts cannot be synthesized apart.
    #[error(
        "part {part} of a circuit synthesized in parallel does not start with the circuit's common \
         {what} values: its synthesis is not deterministic"
    )]
    PartMismatch { part: usize, what: &'static str },

    /// The matrices of a PCE released from host memory could not be read
    /// again ([`crate::Pce::with_matrices`]).
    #[error(
        "the circuit's matrices (PCE) were released from host memory and could not be read again \
         from {from}: {detail}; check that the file is still there and unchanged, or set \
         `release_host_pce = false` to keep the matrices in host memory"
    )]
    MatricesUnavailable { from: String, detail: String },

    /// The circuit is too large for this representation.
    #[error("circuit too large: {0}")]
    TooLarge(String),

    /// The witness gave its turn up before it started its parts, because
    /// its pacer asked it to ([`crate::gate::Pacer::should_yield`]): the
    /// engine takes the partition back into its queue, circuit untouched.
    #[error(
        "the witness yielded before its parts started (its job gives its parameters up to a          higher-priority job); it is made again later"
    )]
    Yielded,
}

/// `Result` with [`SynthError`].
pub type Result<T> = std::result::Result<T, SynthError>;
