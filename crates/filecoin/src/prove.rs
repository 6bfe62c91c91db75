//! The glue between storage-proofs' compound proofs and the engine: the
//! partition circuits exactly as `CompoundProof::circuit_proofs` builds
//! them, one engine job for all of them, and the proofs concatenated as
//! `MultiProof::write` does.

use bellperson::Circuit;
use bellperson::groth16::Proof;
use blstrs::{Bls12, Scalar};
use cuzk_engine::{Engine, JobHandle, ParamsRef, Priority, ProofRequest, WitnessWith};
use storage_proofs_core::compound_proof::{CircuitComponent, CompoundProof};
use storage_proofs_core::parameter_cache::CacheableParameters;
use storage_proofs_core::proof::ProofScheme;

use crate::error::{FilecoinError, Result};
use crate::params::ParamFiles;

/// Bytes of one Groth16 proof over BLS12-381 (compressed G1, G2, G1).
pub const PROOF_BYTES: usize = 192;

/// The engine's shape id of a Filecoin circuit (its PCE's name in the
/// engine's cache and PCE directory): `filecoin/<storage-proofs' circuit
/// identifier>`.
pub fn shape_id(files: &ParamFiles) -> String {
    format!("filecoin/{}", files.id)
}

/// A Filecoin circuit's PCE recorded from its blank circuit: no sector and
/// no values (the recorder never evaluates an assignment), the circuit
/// filecoin-proofs generates parameters from.
#[derive(Debug)]
pub struct BlankPce {
    /// The engine's shape id ([`shape_id`]).
    pub shape: String,
    pub pce: cuzk_synth::Pce,
    /// How long the recording took.
    pub record_seconds: f64,
}

impl BlankPce {
    pub(crate) fn record<C: Circuit<Scalar>>(files: &ParamFiles, blank: C) -> Result<BlankPce> {
        let start = std::time::Instant::now();
        let pce = cuzk_synth::Pce::record(blank).map_err(|e| FilecoinError::Proofs {
            context: "recording the blank circuit's PCE",
            message: e.to_string(),
        })?;
        Ok(BlankPce {
            shape: shape_id(files),
            pce,
            record_seconds: start.elapsed().as_secs_f64(),
        })
    }

    /// Writes the PCE into `pce_dir` under the name the engine looks for
    /// (engine config `pce_cache_dir`), so that jobs of this circuit read it
    /// instead of recording it; the file's path.
    pub fn write_to(&self, pce_dir: &std::path::Path) -> Result<std::path::PathBuf> {
        std::fs::create_dir_all(pce_dir).map_err(|source| FilecoinError::Io {
            path: pce_dir.to_owned(),
            source,
        })?;
        let path = pce_dir.join(cuzk_engine::pce_file::file_name(&self.shape));
        cuzk_engine::pce_file::write_pce(&path, &self.shape, &self.pce)?;
        Ok(path)
    }
}

/// Work on the typed partitions of a proof whose circuit type is chosen at
/// run time (by sector size and proof kind): benchmarks and tools that need
/// the circuits themselves, not just the proofs. See
/// [`crate::C1Output::visit_partitions`], [`crate::post::PostInput::visit_partitions`]
/// and [`crate::UpdateInput::visit_partitions`].
pub trait PartitionsVisitor {
    type Output;
    fn visit<C>(self, partitions: Partitions<C>) -> Self::Output
    where
        C: Circuit<Scalar> + Clone + Send + Sync + 'static;
}

/// The partition circuits of one Filecoin proof, ready for the engine.
#[derive(Debug)]
pub struct Partitions<C> {
    /// What is proved, for messages ("PoRep C2 StackedDrg2KiBV1_1").
    pub label: String,
    /// storage-proofs' circuit identifier: the engine's shape id (one PCE
    /// per circuit shape) and the parameter files' name.
    pub params: ParamFiles,
    /// In partition order.
    pub circuits: Vec<C>,
    pub priority: Priority,
    /// How the engine synthesizes a partition's witness (PoRep: its
    /// challenges in parallel; the others: the circuit on the engine's
    /// witness system).
    pub witness: WitnessWith<C>,
}

impl<C> Partitions<C>
where
    C: Circuit<Scalar> + Clone + Send + 'static,
{
    /// Submits every partition as one engine job; `randomness` fixes (r, s)
    /// per partition (tests), else the OS's RNG draws them.
    pub fn submit(
        self,
        engine: &Engine,
        randomness: Option<Vec<(Scalar, Scalar)>>,
    ) -> Result<JobHandle> {
        let path = self.params.existing_params()?.to_owned();
        let mut request =
            ProofRequest::new(shape_id(&self.params), ParamsRef::File(path), self.circuits)
                .with_priority(self.priority)
                .with_witness(self.witness);
        if let Some(rs) = randomness {
            request = request.with_randomness(rs);
        }
        tracing::info!(what = %self.label, "submitting to the engine");
        Ok(engine.submit(request)?)
    }

    /// Runs the job at `priority` instead of the kind's default (PoRep C2
    /// and SnapDeals NORMAL, WindowPoSt HIGH, WinningPoSt CRITICAL); `None`
    /// keeps the default.
    pub fn with_priority(mut self, priority: Option<Priority>) -> Self {
        if let Some(p) = priority {
            self.priority = p;
        }
        self
    }

    /// Proves every partition and waits for the proofs, in partition order.
    pub fn prove(
        self,
        engine: &Engine,
        randomness: Option<Vec<(Scalar, Scalar)>>,
    ) -> Result<Vec<Proof<Bls12>>> {
        Ok(self.submit(engine, randomness)?.wait_blocking()?)
    }
}

/// The circuit of every partition, as `CompoundProof::circuit_proofs`
/// makes them (partition k gets `Some(k)`).
pub(crate) fn compound_circuits<'a, S, C, CP>(
    pub_in: &S::PublicInputs,
    vanilla_proofs: &[S::Proof],
    pub_params: &S::PublicParams,
) -> Result<Vec<C>>
where
    S: ProofScheme<'a>,
    S::Proof: Sync + Send,
    S::PublicParams: storage_proofs_core::parameter_cache::ParameterSetMetadata + Sync + Send,
    S::PublicInputs: Clone + Sync,
    C: Circuit<Scalar> + CircuitComponent + Send,
    CP: CompoundProof<'a, S, C> + CacheableParameters<C, S::PublicParams>,
{
    if vanilla_proofs.is_empty() {
        return Err(FilecoinError::BadInput {
            what: "vanilla proofs",
            detail: "there are none".into(),
        });
    }
    vanilla_proofs
        .iter()
        .enumerate()
        .map(|(k, proof)| {
            CP::circuit(
                pub_in,
                C::ComponentPrivateInputs::default(),
                proof,
                pub_params,
                Some(k),
            )
            .map_err(FilecoinError::proofs("building a partition circuit"))
        })
        .collect()
}

/// The proofs as filecoin-proofs writes a multi-partition proof: each
/// proof's 192 bytes, in partition order.
pub fn proofs_to_bytes(proofs: &[Proof<Bls12>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(proofs.len() * PROOF_BYTES);
    for proof in proofs {
        // Writing into a Vec cannot fail.
        let _ = proof.write(&mut out);
    }
    out
}

/// Splits `bytes` into `partitions` proofs, with a clear error for a wrong
/// length or bytes that are not curve points.
pub fn proofs_from_bytes(what: &str, bytes: &[u8], partitions: usize) -> Result<Vec<Proof<Bls12>>> {
    if bytes.len() != partitions * PROOF_BYTES {
        return Err(FilecoinError::ProofLength {
            proof: what.to_owned(),
            len: bytes.len(),
            expected: partitions * PROOF_BYTES,
            partitions,
        });
    }
    bytes
        .chunks(PROOF_BYTES)
        .enumerate()
        .map(|(k, chunk)| {
            Proof::read(chunk).map_err(|e| FilecoinError::BadInput {
                what: "proof",
                detail: format!("partition {k} of the {what} proof is not valid points: {e}"),
            })
        })
        .collect()
}
