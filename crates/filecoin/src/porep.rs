//! PoRep commit phase 2: from the output of commit phase 1 (C1: the
//! vanilla proofs, as JSON) to the multi-partition SNARK that
//! filecoin-proofs' `verify_seal` accepts.
//!
//! Everything here mirrors `filecoin_proofs::seal_commit_phase2_circuit_proofs`:
//! the same public parameters (`setup_params`), public inputs, partition
//! circuits (`StackedCompound::circuit`) and byte layout (`MultiProof::write`);
//! only the Groth16 proving goes through the engine instead of bellperson.

use std::path::Path;

use bellperson::groth16::Proof;
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::{Bls12, Scalar};
use cuzk_engine::{Engine, JobHandle, Priority};
use cuzk_synth::{PartsGate, Witness, WitnessCs};
use filecoin_hashers::Hasher;
use filecoin_proofs::constants::{
    DefaultPieceHasher, SectorShapeBase, SectorShapeSub2, SectorShapeSub8, SectorShapeTop2,
};
use filecoin_proofs::{PoRepConfig, SealCommitPhase1Output, as_safe_commitment};
use rayon::prelude::*;
use serde_json::Value;
use storage_proofs_core::api_version::ApiFeature;
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::multi_proof::MultiProof;
use storage_proofs_core::parameter_cache::CacheableParameters;
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_porep::stacked::{
    self, ChallengeRequirements, StackedCircuit, StackedCompound, StackedDrg, Tau,
};

use crate::error::{FilecoinError, Result};
use crate::params::{self, ParamFiles};
use crate::prove::{
    BlankPce, Partitions, PartitionsVisitor, compound_circuits, proofs_from_bytes, proofs_to_bytes,
};
use crate::sector::{self, SealProof, SealVersion, SectorSize, Shape};

/// One challenge's vanilla proof, as C1 holds it.
type ChallengeProof<Tree> = stacked::Proof<Tree, DefaultPieceHasher>;
type Domain<Tree> = <<Tree as MerkleTreeTrait>::Hasher as Hasher>::Domain;
type DataDomain = <DefaultPieceHasher as Hasher>::Domain;

/// Whether PoRep witnesses make their SHA-256 (the labels', tree D's path)
/// natively
/// ([`set_native_sha256`]); `None` until first read from
/// `CUZK_NATIVE_SHA256`.
static NATIVE_SHA256: std::sync::OnceLock<std::sync::atomic::AtomicBool> =
    std::sync::OnceLock::new();

fn native_sha256_flag() -> &'static std::sync::atomic::AtomicBool {
    NATIVE_SHA256.get_or_init(|| {
        let off = std::env::var("CUZK_NATIVE_SHA256").is_ok_and(|v| v == "0" || v == "off");
        std::sync::atomic::AtomicBool::new(!off)
    })
}

/// Turns the native SHA-256 of PoRep witnesses ([`PoRepCircuit::witness`])
/// on or off for the process: on by default, `CUZK_NATIVE_SHA256=0` starts
/// with it off (storage-proofs' circuit, bellperson's SHA-256 gadget, for
/// every value). The witness is the same either way.
pub fn set_native_sha256(on: bool) {
    native_sha256_flag().store(on, std::sync::atomic::Ordering::Relaxed);
}

/// Whether PoRep witnesses make their SHA-256 (the labels', tree D's path)
/// natively now.
pub fn native_sha256() -> bool {
    native_sha256_flag().load(std::sync::atomic::Ordering::Relaxed)
}

/// The circuit of one PoRep partition: storage-proofs' `StackedCircuit`,
/// synthesized by storage-proofs' own code, kept as its parts (the
/// commitments and each challenge's vanilla proof) so that its witness can
/// be synthesized one challenge per core ([`PoRepCircuit::witness`]).
pub struct PoRepCircuit<Tree: 'static + MerkleTreeTrait> {
    head: Head<Tree>,
    challenges: Vec<ChallengeProof<Tree>>,
}

/// What every challenge of a partition shares: the public commitments and
/// the replica id, which the circuit allocates (and hashes) before the
/// challenges.
struct Head<Tree: 'static + MerkleTreeTrait> {
    replica_id: Domain<Tree>,
    comm_d: DataDomain,
    comm_r: Domain<Tree>,
    comm_r_last: Domain<Tree>,
    comm_c: Domain<Tree>,
}

impl<Tree: 'static + MerkleTreeTrait> Clone for Head<Tree> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<Tree: 'static + MerkleTreeTrait> Copy for Head<Tree> {}

impl<Tree: 'static + MerkleTreeTrait> Head<Tree> {
    /// The values the head allocates that challenges refer to.
    fn values(&self) -> crate::challenge::HeadValues {
        crate::challenge::HeadValues {
            replica_id: self.replica_id.into(),
            comm_d: self.comm_d.into(),
            comm_c: self.comm_c.into(),
            comm_r_last: self.comm_r_last.into(),
        }
    }

    /// storage-proofs' `StackedCircuit` of these challenges, synthesized on
    /// `cs` by storage-proofs (`StackedCircuit::synthesize`).
    fn synthesize<CS: ConstraintSystem<Scalar>>(
        self,
        cs: CS,
        challenges: Vec<ChallengeProof<Tree>>,
    ) -> std::result::Result<(), SynthesisError> {
        StackedCircuit::<Tree, DefaultPieceHasher>::synthesize(
            cs,
            Some(self.replica_id),
            Some(self.comm_d),
            Some(self.comm_r),
            Some(self.comm_r_last),
            Some(self.comm_c),
            challenges.into_iter().map(Into::into).collect(),
        )
    }
}

impl<Tree: 'static + MerkleTreeTrait> Clone for PoRepCircuit<Tree> {
    fn clone(&self) -> Self {
        PoRepCircuit {
            head: self.head,
            challenges: self.challenges.clone(),
        }
    }
}

impl<Tree: 'static + MerkleTreeTrait> std::fmt::Debug for PoRepCircuit<Tree> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoRepCircuit")
            .field("challenges", &self.challenges.len())
            .finish_non_exhaustive()
    }
}

impl<Tree: 'static + MerkleTreeTrait> Circuit<Scalar> for PoRepCircuit<Tree> {
    /// storage-proofs' synthesis of the whole partition, one challenge
    /// after the other (what bellperson proves, and what the PCE is
    /// recorded from).
    fn synthesize<CS: ConstraintSystem<Scalar>>(
        self,
        cs: &mut CS,
    ) -> std::result::Result<(), SynthesisError> {
        self.head.synthesize(cs, self.challenges)
    }
}

impl<Tree: 'static + MerkleTreeTrait> PoRepCircuit<Tree> {
    /// The partition circuit as `StackedCompound::circuit` makes it from the
    /// partition's vanilla proofs (with its checks).
    fn new(
        pub_inputs: &PubInputs<'_, Tree>,
        vanilla: &[ChallengeProof<Tree>],
    ) -> Result<PoRepCircuit<Tree>> {
        let bad = |message: &str| FilecoinError::Proofs {
            context: "building a partition circuit",
            message: message.to_owned(),
        };
        let first = vanilla
            .first()
            .ok_or_else(|| bad("Cannot create a circuit with no vanilla proofs"))?;
        let (comm_r_last, comm_c) = (first.comm_r_last(), first.comm_c());
        if vanilla.iter().any(|p| p.comm_r_last() != comm_r_last) {
            return Err(bad("inconsistent comm_r_lasts"));
        }
        if vanilla.iter().any(|p| p.comm_c() != comm_c) {
            return Err(bad("inconsistent comm_cs"));
        }
        let tau = pub_inputs
            .tau
            .as_ref()
            .ok_or_else(|| bad("no comm_d and comm_r"))?;
        Ok(PoRepCircuit {
            head: Head {
                replica_id: pub_inputs.replica_id,
                comm_d: tau.comm_d,
                comm_r: tau.comm_r,
                comm_r_last,
                comm_c,
            },
            challenges: vanilla.to_vec(),
        })
    }

    /// This partition's circuit cut to its first `n` challenges (the same
    /// head): storage-proofs' circuit of those challenges alone, for
    /// profiling one challenge's synthesis.
    pub fn first_challenges(&self, n: usize) -> PoRepCircuit<Tree> {
        PoRepCircuit {
            head: self.head,
            challenges: self.challenges.iter().take(n).cloned().collect(),
        }
    }

    /// Challenges of this partition.
    pub fn challenges(&self) -> usize {
        self.challenges.len()
    }

    /// The witness of this partition with its challenges synthesized in
    /// parallel on rayon's pool: exactly the values of
    /// `Witness::synthesize_with_capacity(self, inputs, aux)` (storage-proofs'
    /// sequential synthesis), in the same order.
    ///
    /// Each challenge is synthesized as a circuit of that challenge alone,
    /// which allocates the partition's head (replica id and its bits,
    /// comm_d, comm_r, comm_r_last, comm_c and their hash) first and then
    /// the challenge; the head is also synthesized alone, and the parts are
    /// joined as head + each challenge's own values, each written straight
    /// into its place when `aux` is known ([`Witness::fill_parts`]) or
    /// joined afterwards ([`Witness::from_parts`]); both refuse a part whose
    /// head differs. The head is a few hundred values, the challenge
    /// millions, so the repeated heads cost nothing measurable. Witnesses
    /// made at once start their challenges in the order they were asked
    /// for, while the challenges running are under twice the pool's threads
    /// ([`PartsGate::global`]): the partitions of a proof finish one after
    /// the other, and the GPU gets the first one after about one
    /// partition's time.
    ///
    /// The head is always storage-proofs' synthesis. Each challenge is
    /// storage-proofs' too, except that with [`native_sha256`] on (the
    /// default) the SHA-256 of its labels is made natively (the same
    /// values, several times faster; see `cuzk_synth::native`).
    pub fn witness(self, inputs: usize, aux: usize) -> cuzk_synth::Result<Witness> {
        self.witness_with(inputs, aux, native_sha256())
    }

    /// [`PoRepCircuit::witness`] with the SHA-256 (the labels', tree D's
    /// path) made natively or
    /// by storage-proofs' circuit (bellperson's gadget), as `native` says.
    pub fn witness_with(
        self,
        inputs: usize,
        aux: usize,
        native: bool,
    ) -> cuzk_synth::Result<Witness> {
        let _s = tracing::info_span!("witness", aux, challenges = self.challenges.len(), native)
            .entered();
        let PoRepCircuit { head, challenges } = self;
        let values = head.values();
        // One challenge after the head, on a part's system.
        let synth_part = |cs: &mut cuzk_synth::PartCs<'_>, challenge: ChallengeProof<Tree>| {
            if native {
                head.synthesize(&mut *cs, Vec::new())?;
                crate::challenge::synthesize(cs, &values, challenge)
            } else {
                head.synthesize(cs, vec![challenge])
            }
        };
        let mut cs = WitnessCs::with_capacity(inputs, aux);
        head.synthesize(&mut cs, Vec::new())?;
        // Partitions synthesized at once take the pool in turn, so the first
        // finishes first (see `PartsGate`).
        let pass = PartsGate::global().try_enter(challenges.len())?;
        if aux > 0 {
            // The size is known (from the PCE) and every challenge has the
            // same shape: each is written straight into its place.
            let w = cs
                .into_witness()
                .fill_parts(challenges, aux, |part, challenge| {
                    let done = synth_part(part, challenge);
                    pass.part_done();
                    done.map_err(Into::into)
                });
            drop(pass);
            return w;
        }
        // Size unknown: each challenge on a system of its own (room for the
        // head and one challenge's share), then joined.
        let head_aux = cs.aux_len();
        let part_aux = head_aux
            + aux
                .saturating_sub(head_aux)
                .div_ceil(challenges.len().max(1));
        let parts = challenges
            .into_par_iter()
            .map(|challenge| {
                let mut part = WitnessCs::part_with_capacity(part_aux);
                let done = if native {
                    head.synthesize(&mut part, Vec::new())
                        .and_then(|()| crate::challenge::synthesize(&mut part, &values, challenge))
                } else {
                    head.synthesize(&mut part, vec![challenge])
                };
                pass.part_done();
                done?;
                Ok(part.into_witness())
            })
            .collect::<cuzk_synth::Result<Vec<_>>>()?;
        drop(pass);
        Witness::from_parts(cs.into_witness(), parts, inputs, aux)
    }
}

type Compound<Tree> = StackedCompound<Tree, DefaultPieceHasher>;

/// A parsed C1 output and the registered proof it is proved for.
#[derive(Debug)]
pub struct C1Output {
    proof: SealProof,
    inner: C1Any,
}

#[derive(Debug)]
enum C1Any {
    Base(SealCommitPhase1Output<SectorShapeBase>),
    Sub2(SealCommitPhase1Output<SectorShapeSub2>),
    Sub8(SealCommitPhase1Output<SectorShapeSub8>),
    Top2(SealCommitPhase1Output<SectorShapeTop2>),
}

/// Runs `$body` with `$c1` bound to the typed C1 output, whatever its tree.
macro_rules! with_c1 {
    ($any:expr, $c1:ident => $body:expr) => {
        match $any {
            C1Any::Base($c1) => $body,
            C1Any::Sub2($c1) => $body,
            C1Any::Sub8($c1) => $body,
            C1Any::Top2($c1) => $body,
        }
    };
}

/// The C2 proof: partition proofs and their bytes as filecoin-proofs
/// writes them.
#[derive(Debug, Clone)]
pub struct C2Proof {
    pub proofs: Vec<Proof<Bls12>>,
    pub bytes: Vec<u8>,
}

const WHAT: &str = "C1 output";

impl C1Output {
    /// Parses a C1 output: filecoin-proofs' `SealCommitPhase1Output` as
    /// JSON, or filecoin-proofs-api's (with `registered_proof` and the
    /// vanilla proofs under their proof type's name).
    ///
    /// The sector size is read from the proofs themselves (the depth of the
    /// comm_d inclusion paths); `proof` names the registered proof when the
    /// file does not (default: `StackedDrg<size>V1_1`), and a C1 of another
    /// sector size than `proof` is refused.
    pub fn from_json(bytes: &[u8], proof: Option<SealProof>) -> Result<C1Output> {
        let mut value: Value =
            serde_json::from_slice(bytes).map_err(|e| FilecoinError::json(WHAT, e))?;
        let bad = |detail: String| FilecoinError::BadInput { what: WHAT, detail };
        let obj = value
            .as_object_mut()
            .ok_or_else(|| bad("expected a JSON object".into()))?;
        let registered = match obj.get("registered_proof") {
            None => None,
            Some(Value::String(name)) => Some(name.parse::<SealProof>()?),
            Some(other) => return Err(bad(format!("registered_proof is {other}, not a name"))),
        };
        let vanilla = obj
            .get_mut("vanilla_proofs")
            .ok_or_else(|| bad("it has no `vanilla_proofs`".into()))?;
        // filecoin-proofs-api: {"StackedDrg2KiBV1": [[...]]}.
        if let Value::Object(map) = vanilla {
            let single = map.len() == 1;
            let inner = match map.values_mut().next() {
                Some(v) if single => v.take(),
                _ => {
                    return Err(bad(
                        "`vanilla_proofs` is an object but not {\"<proof type>\": [...]}".into(),
                    ));
                }
            };
            *vanilla = inner;
        }
        let found = sector_size_of(vanilla)?;
        let proof = match (proof, registered) {
            (Some(asked), Some(named)) if asked != named => {
                return Err(bad(format!(
                    "the file says it is a {named} C1 but {asked} was asked for"
                )));
            }
            (Some(p), _) | (None, Some(p)) => p,
            (None, None) => SealProof::v1_1(found),
        };
        if proof.sector_size != found {
            return Err(FilecoinError::SectorSizeMismatch {
                what: WHAT,
                expected: proof.sector_size,
                found,
            });
        }
        if proof.version == SealVersion::V1_2NonInteractivePoRep {
            return Err(bad(format!(
                "{proof} is non-interactive PoRep, whose C2 is an aggregate proof; \
                 cuzk proves interactive PoRep C2 only"
            )));
        }
        let typed = |v: Value| -> Result<C1Any> {
            let de = |e| FilecoinError::json(WHAT, e);
            Ok(match proof.sector_size.shape() {
                Shape::Base => C1Any::Base(serde_json::from_value(v).map_err(de)?),
                Shape::Sub2 => C1Any::Sub2(serde_json::from_value(v).map_err(de)?),
                Shape::Sub8 => C1Any::Sub8(serde_json::from_value(v).map_err(de)?),
                Shape::Top2 => C1Any::Top2(serde_json::from_value(v).map_err(de)?),
            })
        };
        let out = C1Output {
            proof,
            inner: typed(value)?,
        };
        with_c1!(&out.inner, c1 => check_c1(c1, proof))?;
        Ok(out)
    }

    /// Reads and parses a C1 file (see [`C1Output::from_json`]).
    pub fn from_file(path: &Path, proof: Option<SealProof>) -> Result<C1Output> {
        let bytes = std::fs::read(path).map_err(|source| FilecoinError::Io {
            path: path.to_owned(),
            source,
        })?;
        C1Output::from_json(&bytes, proof)
    }

    pub fn proof(&self) -> SealProof {
        self.proof
    }

    pub fn sector_size(&self) -> SectorSize {
        self.proof.sector_size
    }

    /// Partitions of the C2 proof.
    pub fn partitions(&self) -> usize {
        with_c1!(&self.inner, c1 => c1.vanilla_proofs.len())
    }

    /// Hands the typed partition circuits (with their parameter files in
    /// `param_dir` and the parallel witness) to `visitor`.
    pub fn visit_partitions<V: PartitionsVisitor>(
        &self,
        param_dir: &Path,
        visitor: V,
    ) -> Result<V::Output> {
        with_c1!(&self.inner, c1 => Ok(visitor.visit(partitions(c1, self.proof, param_dir)?)))
    }

    /// Checks the vanilla proofs against the C1's own public inputs
    /// (comm_r, comm_d, replica id, seed) with storage-proofs' verifier:
    /// an altered C1 is refused here, before any SNARK work.
    pub fn check_vanilla(&self) -> Result<()> {
        with_c1!(&self.inner, c1 => check_vanilla(c1, self.proof))
    }

    /// Proves C2 through `engine` with the parameters in `param_dir`
    /// (see [`crate::params`]); `randomness` fixes (r, s) per partition.
    pub fn prove(
        &self,
        engine: &Engine,
        param_dir: &Path,
        randomness: Option<Vec<(Scalar, Scalar)>>,
    ) -> Result<C2Proof> {
        let proofs = with_c1!(&self.inner, c1 => {
            partitions(c1, self.proof, param_dir)?.prove(engine, randomness)?
        });
        let bytes = proofs_to_bytes(&proofs);
        Ok(C2Proof { proofs, bytes })
    }

    /// Submits C2 to `engine` as one job and returns at once (a daemon
    /// follows the job's progress and may cancel it); the job's proofs, in
    /// partition order, are what [`C1Output::prove`] returns.
    /// `priority`: `None` for NORMAL.
    pub fn submit(
        &self,
        engine: &Engine,
        param_dir: &Path,
        randomness: Option<Vec<(Scalar, Scalar)>>,
        priority: Option<Priority>,
    ) -> Result<JobHandle> {
        with_c1!(&self.inner, c1 => {
            partitions(c1, self.proof, param_dir)?
                .with_priority(priority)
                .submit(engine, randomness)
        })
    }

    /// The parameter files of this C1's circuit in `param_dir`.
    pub fn param_files(&self, param_dir: &Path) -> Result<ParamFiles> {
        with_tree!(self.sector_size(), param_files(self.proof, param_dir))
    }

    /// Verifies C2 proof bytes against this C1's public inputs with
    /// storage-proofs' `StackedCompound::verify`, as `verify_seal` does
    /// after deriving the replica id (here it comes from the C1), with the
    /// verifying key from `param_dir`.
    pub fn verify(&self, param_dir: &Path, proof: &[u8]) -> Result<bool> {
        with_c1!(&self.inner, c1 => verify(c1, self.proof, param_dir, proof))
    }

    /// comm_r, comm_d, seed and ticket, as in the file.
    pub fn commitments(&self) -> ([u8; 32], [u8; 32], [u8; 32], [u8; 32]) {
        with_c1!(&self.inner, c1 => (c1.comm_r, c1.comm_d, c1.seed, c1.ticket))
    }
}

/// The sector size of a C1's vanilla proofs: the comm_d tree is binary over
/// the sector's 32-byte nodes, so its inclusion paths have log2(nodes)
/// levels.
fn sector_size_of(vanilla: &Value) -> Result<SectorSize> {
    let first = vanilla.get(0).and_then(|p| p.get(0));
    sector::sector_size_from_path(
        WHAT,
        first,
        "/comm_d_proofs/data/Single/path/path",
        "comm_d",
    )
}

/// The checks `seal_commit_phase2` makes before proving.
fn check_c1<Tree: 'static + MerkleTreeTrait>(
    c1: &SealCommitPhase1Output<Tree>,
    proof: SealProof,
) -> Result<()> {
    let bad = |detail: &str| FilecoinError::BadInput {
        what: WHAT,
        detail: detail.to_owned(),
    };
    if c1.comm_d == [0; 32] {
        return Err(bad("comm_d is all zeros"));
    }
    if c1.comm_r == [0; 32] {
        return Err(bad("comm_r is all zeros"));
    }
    if c1.seed == [0; 32] {
        return Err(bad("the challenge seed is all zeros"));
    }
    if c1.vanilla_proofs.iter().any(Vec::is_empty) {
        return Err(bad("a partition has no vanilla proofs"));
    }
    let config = proof.config()?;
    let expected = usize::from(config.partitions);
    if c1.vanilla_proofs.len() != expected {
        return Err(FilecoinError::PartitionCount {
            what: WHAT,
            proof: proof.to_string(),
            expected,
            found: c1.vanilla_proofs.len(),
        });
    }
    Ok(())
}

type PubParams<'a, Tree> =
    compound_proof::PublicParams<'a, StackedDrg<'a, Tree, DefaultPieceHasher>>;
type PubInputs<'a, Tree> =
    <StackedDrg<'a, Tree, DefaultPieceHasher> as ProofScheme<'a>>::PublicInputs;

/// Public parameters and inputs exactly as `seal_commit_phase2` makes them.
pub(crate) fn setup<'a, Tree: 'static + MerkleTreeTrait>(
    config: &PoRepConfig,
    c1: Option<&SealCommitPhase1Output<Tree>>,
) -> Result<(PubParams<'a, Tree>, Option<PubInputs<'a, Tree>>)> {
    let setup = compound_proof::SetupParams {
        vanilla_params: filecoin_proofs::parameters::setup_params(config)
            .map_err(FilecoinError::proofs("PoRep setup parameters"))?,
        partitions: Some(usize::from(config.partitions)),
        priority: false,
    };
    let pub_params =
        <Compound<Tree> as CompoundProof<'_, StackedDrg<'_, Tree, DefaultPieceHasher>, _>>::setup(
            &setup,
        )
        .map_err(FilecoinError::proofs("PoRep public parameters"))?;
    let pub_inputs = match c1 {
        None => None,
        Some(c1) => Some(stacked::PublicInputs {
            replica_id: c1.replica_id,
            tau: Some(Tau {
                comm_d: as_safe_commitment(&c1.comm_d, "comm_d")
                    .map_err(FilecoinError::proofs("C1 output"))?,
                comm_r: as_safe_commitment(&c1.comm_r, "comm_r")
                    .map_err(FilecoinError::proofs("C1 output"))?,
            }),
            k: None,
            seed: Some(c1.seed),
        }),
    };
    Ok((pub_params, pub_inputs))
}

/// The parameter files of `proof`'s PoRep circuit in `dir` (to preload or
/// evict them without a C1 at hand).
pub fn param_files_for(proof: SealProof, dir: &Path) -> Result<ParamFiles> {
    with_tree!(proof.sector_size, param_files(proof, dir))
}

fn param_files<Tree: 'static + MerkleTreeTrait>(
    proof: SealProof,
    dir: &Path,
) -> Result<ParamFiles> {
    let config = proof.config()?;
    let (pub_params, _) = setup::<Tree>(&config, None)?;
    let id = <Compound<Tree> as CacheableParameters<PoRepCircuit<Tree>, _>>::cache_identifier(
        &pub_params.vanilla_params,
    );
    Ok(ParamFiles::new(dir, id))
}

/// The partition circuits of a typed C1, as `seal_commit_phase2` builds
/// them, with the parameter files they need in `param_dir`.
pub fn partitions<Tree: 'static + MerkleTreeTrait>(
    c1: &SealCommitPhase1Output<Tree>,
    proof: SealProof,
    param_dir: &Path,
) -> Result<Partitions<PoRepCircuit<Tree>>> {
    check_c1(c1, proof)?;
    let config = proof.config()?;
    let (_, pub_inputs) = setup::<Tree>(&config, Some(c1))?;
    let pub_inputs = pub_inputs.ok_or(FilecoinError::Proofs {
        context: "PoRep",
        message: "no public inputs".into(),
    })?;
    let circuits = c1
        .vanilla_proofs
        .iter()
        .map(|vanilla| PoRepCircuit::new(&pub_inputs, vanilla))
        .collect::<Result<Vec<_>>>()?;
    Ok(Partitions {
        label: format!("PoRep C2 {proof}"),
        params: param_files::<Tree>(proof, param_dir)?,
        circuits,
        priority: Priority::Normal,
        witness: PoRepCircuit::witness,
    })
}

/// storage-proofs' own partition circuits of a typed C1, as
/// `seal_commit_phase2` builds and bellperson proves them
/// (`StackedCompound::circuit`): to compare [`partitions`]' circuits with.
pub fn stacked_circuits<Tree: 'static + MerkleTreeTrait>(
    c1: &SealCommitPhase1Output<Tree>,
    proof: SealProof,
) -> Result<Vec<StackedCircuit<Tree, DefaultPieceHasher>>> {
    check_c1(c1, proof)?;
    let config = proof.config()?;
    let (pub_params, pub_inputs) = setup::<Tree>(&config, Some(c1))?;
    let pub_inputs = pub_inputs.ok_or(FilecoinError::Proofs {
        context: "PoRep",
        message: "no public inputs".into(),
    })?;
    compound_circuits::<_, _, Compound<Tree>>(
        &pub_inputs,
        &c1.vanilla_proofs,
        &pub_params.vanilla_params,
    )
}

pub(crate) fn check_vanilla<Tree: 'static + MerkleTreeTrait>(
    c1: &SealCommitPhase1Output<Tree>,
    proof: SealProof,
) -> Result<()> {
    let config = proof.config()?;
    let (pub_params, pub_inputs) = setup::<Tree>(&config, Some(c1))?;
    let Some(pub_inputs) = pub_inputs else {
        return Ok(());
    };
    let ok = StackedDrg::<Tree, DefaultPieceHasher>::verify_all_partitions(
        &pub_params.vanilla_params,
        &pub_inputs,
        &c1.vanilla_proofs,
    )
    .map_err(FilecoinError::proofs("checking the C1's vanilla proofs"))?;
    if ok {
        Ok(())
    } else {
        Err(FilecoinError::BadInput {
            what: WHAT,
            detail: format!(
                "its vanilla proofs do not verify against its own comm_r, comm_d, replica id \
                 and seed (altered, or not a {proof} C1)"
            ),
        })
    }
}

fn verify<Tree: 'static + MerkleTreeTrait>(
    c1: &SealCommitPhase1Output<Tree>,
    proof: SealProof,
    param_dir: &Path,
    bytes: &[u8],
) -> Result<bool> {
    let config = proof.config()?;
    if config.feature_enabled(ApiFeature::NonInteractivePoRep) {
        return Err(FilecoinError::BadInput {
            what: "proof type",
            detail: "non-interactive PoRep proofs are aggregates; not supported".into(),
        });
    }
    let (pub_params, pub_inputs) = setup::<Tree>(&config, Some(c1))?;
    let Some(pub_inputs) = pub_inputs else {
        return Ok(false);
    };
    let pvk = param_files::<Tree>(proof, param_dir)?.prepared_vk()?;
    let proofs = proofs_from_bytes(
        &format!("PoRep C2 {proof}"),
        bytes,
        usize::from(config.partitions),
    )?;
    let multi = MultiProof::new(proofs, &pvk);
    <Compound<Tree> as CompoundProof<'_, StackedDrg<'_, Tree, DefaultPieceHasher>, _>>::verify(
        &pub_params,
        &pub_inputs,
        &multi,
        &ChallengeRequirements {
            minimum_challenges: config.minimum_challenges(),
        },
    )
    .map_err(FilecoinError::proofs("verifying the PoRep C2 proof"))
}

/// Generates seeded test parameters for `proof`'s circuit into `param_dir`
/// unless they are there (see [`params::generate`]); returns whether it
/// generated.
pub fn generate_test_params(proof: SealProof, param_dir: &Path, seed: u64) -> Result<bool> {
    with_tree!(proof.sector_size, generate_for(proof, param_dir, seed))
}

/// The PCE of `proof`'s partition circuit, recorded from storage-proofs'
/// blank circuit (no C1 needed).
pub fn blank_pce(proof: SealProof) -> Result<BlankPce> {
    with_tree!(proof.sector_size, record_blank(proof))
}

fn record_blank<Tree: 'static + MerkleTreeTrait>(proof: SealProof) -> Result<BlankPce> {
    let config = proof.config()?;
    let (pub_params, _) = setup::<Tree>(&config, None)?;
    let files = param_files::<Tree>(proof, Path::new(""))?;
    let blank = <Compound<Tree> as CompoundProof<
        '_,
        StackedDrg<'_, Tree, DefaultPieceHasher>,
        _,
    >>::blank_circuit(&pub_params.vanilla_params);
    BlankPce::record(&files, blank)
}

fn generate_for<Tree: 'static + MerkleTreeTrait>(
    proof: SealProof,
    dir: &Path,
    seed: u64,
) -> Result<bool> {
    let config = proof.config()?;
    let (pub_params, _) = setup::<Tree>(&config, None)?;
    let files = param_files::<Tree>(proof, dir)?;
    let blank = <Compound<Tree> as CompoundProof<
        '_,
        StackedDrg<'_, Tree, DefaultPieceHasher>,
        _,
    >>::blank_circuit(&pub_params.vanilla_params);
    params::generate(&files, blank, &pub_params.vanilla_params, seed)
}
