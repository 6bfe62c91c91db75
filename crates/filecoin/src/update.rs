//! SnapDeals (empty sector update) from its vanilla partition proofs, as
//! `generate_empty_sector_update_proof_with_vanilla` makes it: the same
//! update configuration for the sector size (`SectorUpdateConfig`: h,
//! partition count), public inputs (comm_r_old, comm_r_new, comm_d_new, h),
//! partition circuits (`EmptySectorUpdateCompound::circuit`) and byte layout
//! (the partition proofs concatenated), so `verify_empty_sector_update_proof`
//! accepts the result; only the Groth16 proving goes through the engine.
//!
//! The engine job runs at NORMAL priority, as PoRep C2 does: an update is a
//! seal of new data into a sector, bulk work with no chain deadline minutes
//! away (PoSt's HIGH and CRITICAL are for those).
//!
//! The input file is cuzk's own JSON ([`UpdateRequest`]): the registered
//! update proof, the three commitments and the vanilla proofs as
//! filecoin-proofs serializes `PartitionProof` (the output of
//! `generate_partition_proofs`).

use std::path::Path;

use bellperson::groth16::Proof;
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::{Bls12, Scalar};
use cuzk_engine::{Engine, EngineError, JobHandle, Priority};
use filecoin_proofs::constants::{
    SectorShapeBase, SectorShapeSub2, SectorShapeSub8, SectorShapeTop2,
};
use filecoin_proofs::{PartitionProof, SectorUpdateConfig, as_safe_commitment};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::merkle::{MerkleProofTrait, MerkleTreeTrait};
use storage_proofs_core::multi_proof::MultiProof;
use storage_proofs_core::parameter_cache::CacheableParameters;
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_update::constants::{TreeDDomain, TreeRDomain, TreeRHasher};
use storage_proofs_update::{
    EmptySectorUpdate, EmptySectorUpdateCircuit, EmptySectorUpdateCompound, PublicInputs,
    SetupParams, circuit,
};

use crate::error::{FilecoinError, Result};
use crate::params::{self, ParamFiles};
use crate::prove::{
    BlankPce, Partitions, PartitionsVisitor, compound_circuits, proofs_from_bytes, proofs_to_bytes,
};
use crate::sector::{self, SectorSize, Shape, UpdateProof};
use crate::vanilla::{self, VanillaEncoding};

mod witness;
pub use witness::{witness, witness_with};

/// The circuit of one SnapDeals partition: storage-proofs-update's own,
/// with the `Clone` that the engine needs (it records the circuit's shape
/// from a copy of the first partition) and that storage-proofs-update does
/// not implement.
pub struct UpdateCircuit<Tree: MerkleTreeTrait<Hasher = TreeRHasher>>(
    pub EmptySectorUpdateCircuit<Tree>,
);

impl<Tree: MerkleTreeTrait<Hasher = TreeRHasher>> Clone for UpdateCircuit<Tree> {
    fn clone(&self) -> Self {
        let c = &self.0;
        UpdateCircuit(EmptySectorUpdateCircuit {
            pub_params: c.pub_params.clone(),
            pub_inputs: c.pub_inputs.clone(),
            // Field by field: its derived `Clone` wants `Tree: Clone`.
            priv_inputs: circuit::PrivateInputs {
                comm_c: c.priv_inputs.comm_c,
                root_r_old: c.priv_inputs.root_r_old,
                root_r_new: c.priv_inputs.root_r_new,
                apex_leafs: c.priv_inputs.apex_leafs.clone(),
                challenge_proofs: c.priv_inputs.challenge_proofs.clone(),
            },
        })
    }
}

impl<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> Circuit<Scalar>
    for UpdateCircuit<Tree>
{
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        self.0.synthesize(cs)
    }
}

impl<Tree: MerkleTreeTrait<Hasher = TreeRHasher>> std::fmt::Debug for UpdateCircuit<Tree> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpdateCircuit")
            .field("sector_nodes", &self.0.pub_params.sector_nodes)
            .finish_non_exhaustive()
    }
}

type Compound<Tree> = EmptySectorUpdateCompound<Tree>;

/// cuzk's SnapDeals request file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UpdateRequest {
    /// The registered update proof, e.g. `StackedDrg2KiBV1`, `StackedDrg32GiBV1`.
    pub registered_proof: String,
    /// comm_r of the sector before the update (its sealed CC replica).
    pub comm_r_old: [u8; 32],
    /// comm_r of the updated replica.
    pub comm_r_new: [u8; 32],
    /// comm_d of the new data.
    pub comm_d_new: [u8; 32],
    /// `PartitionProof`s in partition order: as filecoin-proofs serializes
    /// them to JSON, or base64 strings of the `PartitionProofBytes`
    /// filecoin-proofs-api returns ([`crate::vanilla`]).
    pub vanilla_proofs: Value,
}

/// A parsed SnapDeals request.
#[derive(Debug)]
pub struct UpdateInput {
    proof: UpdateProof,
    comms: Comms,
    inner: UpdateAny,
}

/// comm_r_old, comm_r_new, comm_d_new as given.
#[derive(Debug, Clone, Copy)]
struct Comms {
    r_old: [u8; 32],
    r_new: [u8; 32],
    d_new: [u8; 32],
}

enum UpdateAny {
    Base(Vec<PartitionProof<SectorShapeBase>>),
    Sub2(Vec<PartitionProof<SectorShapeSub2>>),
    Sub8(Vec<PartitionProof<SectorShapeSub8>>),
    Top2(Vec<PartitionProof<SectorShapeTop2>>),
}

/// Runs `$body` with `$v` bound to the typed vanilla proofs, whatever
/// their tree.
macro_rules! with_vanilla {
    ($any:expr, $v:ident => $body:expr) => {
        match $any {
            UpdateAny::Base($v) => $body,
            UpdateAny::Sub2($v) => $body,
            UpdateAny::Sub8($v) => $body,
            UpdateAny::Top2($v) => $body,
        }
    };
}

// By hand: storage-proofs-update's proofs have no `Debug`.
impl std::fmt::Debug for UpdateAny {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let partitions = with_vanilla!(self, v => v.len());
        write!(f, "{partitions} partition proof(s)")
    }
}

const WHAT: &str = "SnapDeals request";

/// A SnapDeals proof: partition proofs and their bytes as
/// `generate_empty_sector_update_proof_with_vanilla` returns them.
#[derive(Debug, Clone)]
pub struct UpdateOutput {
    pub proofs: Vec<Proof<Bls12>>,
    pub bytes: Vec<u8>,
}

impl UpdateInput {
    /// Parses an [`UpdateRequest`]. The sector size is read from the
    /// vanilla proofs themselves (the depth of the TreeD inclusion paths),
    /// so a request whose proofs are of another sector size than its
    /// registered proof is refused; so is one with the wrong number of
    /// partitions, challenges or apex leaves, or paths of another shape.
    pub fn from_json(bytes: &[u8]) -> Result<UpdateInput> {
        let request: UpdateRequest =
            serde_json::from_slice(bytes).map_err(|e| FilecoinError::json(WHAT, e))?;
        let proof: UpdateProof = request.registered_proof.parse()?;
        // The JSON form shows the sector size of its paths; the bincode form
        // is read as the registered proof's type and its paths' shapes are
        // checked below.
        if vanilla::encoding_of(WHAT, &request.vanilla_proofs)? == VanillaEncoding::Json
            && let found = sector_size_of(&request.vanilla_proofs)?
            && found != proof.sector_size()
        {
            return Err(FilecoinError::SectorSizeMismatch {
                what: WHAT,
                expected: proof.sector_size(),
                found,
            });
        }
        let v = request.vanilla_proofs;
        let inner = match proof.sector_size().shape() {
            Shape::Base => UpdateAny::Base(vanilla::decode(WHAT, v)?),
            Shape::Sub2 => UpdateAny::Sub2(vanilla::decode(WHAT, v)?),
            Shape::Sub8 => UpdateAny::Sub8(vanilla::decode(WHAT, v)?),
            Shape::Top2 => UpdateAny::Top2(vanilla::decode(WHAT, v)?),
        };
        let comms = Comms {
            r_old: request.comm_r_old,
            r_new: request.comm_r_new,
            d_new: request.comm_d_new,
        };
        let input = UpdateInput {
            proof,
            comms,
            inner,
        };
        with_vanilla!(&input.inner, v => check_shape(proof, v))?;
        Ok(input)
    }

    /// Reads and parses a request file.
    pub fn from_file(path: &Path) -> Result<UpdateInput> {
        let bytes = std::fs::read(path).map_err(|source| FilecoinError::Io {
            path: path.to_owned(),
            source,
        })?;
        UpdateInput::from_json(&bytes)
    }

    pub fn proof(&self) -> UpdateProof {
        self.proof
    }

    /// Partitions of the update proof.
    pub fn partitions(&self) -> usize {
        with_vanilla!(&self.inner, v => v.len())
    }

    /// comm_r_old, comm_r_new, comm_d_new, as in the file.
    pub fn commitments(&self) -> ([u8; 32], [u8; 32], [u8; 32]) {
        (self.comms.r_old, self.comms.r_new, self.comms.d_new)
    }

    /// Checks the vanilla proofs against the request's commitments with
    /// storage-proofs-update's verifier (`verify_partition_proofs`): wrong
    /// commitments or altered proofs are refused here, before any SNARK
    /// work, instead of as an unsatisfied circuit.
    pub fn check_vanilla(&self) -> Result<()> {
        with_vanilla!(&self.inner, v => check_vanilla(self.proof, self.comms, v))
    }

    /// Proves through `engine` with the parameters in `param_dir`;
    /// `randomness` fixes (r, s) per partition. Vanilla proofs that do not
    /// fit the commitments fail in the engine (as an unsatisfied circuit),
    /// reported with [`UpdateInput::check_vanilla`]'s error; call that
    /// first to refuse them before any SNARK work.
    pub fn prove(
        &self,
        engine: &Engine,
        param_dir: &Path,
        randomness: Option<Vec<(Scalar, Scalar)>>,
    ) -> Result<UpdateOutput> {
        let proved = with_vanilla!(&self.inner, v => {
            partitions_of(self.proof, self.comms, v, param_dir)?.prove(engine, randomness)
        });
        match proved {
            Ok(proofs) => {
                let bytes = proofs_to_bytes(&proofs);
                Ok(UpdateOutput { proofs, bytes })
            }
            // The circuit refused its witness (storage-proofs-update asserts
            // in `synthesize`, or a constraint failed): when the vanilla
            // proofs do not fit the commitments, say that instead. Checked
            // only on this path, so proving pays nothing for it.
            Err(FilecoinError::Engine(
                e @ (EngineError::Panicked { .. } | EngineError::PartitionSynthesis { .. }),
            )) => {
                self.check_vanilla()?;
                Err(FilecoinError::Engine(e))
            }
            Err(e) => Err(e),
        }
    }

    /// Hands the typed partition circuits (with their parameter files in
    /// `param_dir`) to `visitor`.
    pub fn visit_partitions<V: PartitionsVisitor>(
        &self,
        param_dir: &Path,
        visitor: V,
    ) -> Result<V::Output> {
        with_vanilla!(&self.inner, v => Ok(visitor.visit(partitions_of(
            self.proof,
            self.comms,
            v,
            param_dir
        )?)))
    }

    /// Submits the update proof to `engine` as one job and returns at once;
    /// its proofs are what [`UpdateInput::prove`] returns. Call
    /// [`UpdateInput::check_vanilla`] first: a witness that does not fit
    /// its commitments fails the job with the circuit's own error, not
    /// with the mismatch named. `priority`: `None` for NORMAL.
    pub fn submit(
        &self,
        engine: &Engine,
        param_dir: &Path,
        randomness: Option<Vec<(Scalar, Scalar)>>,
        priority: Option<Priority>,
    ) -> Result<JobHandle> {
        with_vanilla!(&self.inner, v => {
            partitions_of(self.proof, self.comms, v, param_dir)?
                .with_priority(priority)
                .submit(engine, randomness)
        })
    }

    /// The parameter files of this update's circuit in `param_dir`.
    pub fn param_files(&self, param_dir: &Path) -> Result<ParamFiles> {
        with_tree!(self.proof.sector_size(), param_files(self.proof, param_dir))
    }

    /// Verifies update proof bytes against the request's commitments, as
    /// `verify_empty_sector_update_proof` does, with the verifying key from
    /// `param_dir`.
    pub fn verify(&self, param_dir: &Path, bytes: &[u8]) -> Result<bool> {
        with_tree!(
            self.proof.sector_size(),
            verify(self.proof, self.comms, param_dir, bytes)
        )
    }

    /// The request as JSON, for typed vanilla proofs, written in
    /// `encoding`.
    pub fn request_json<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
        proof: UpdateProof,
        comm_r_old: [u8; 32],
        comm_r_new: [u8; 32],
        comm_d_new: [u8; 32],
        vanilla: &[PartitionProof<Tree>],
        encoding: VanillaEncoding,
    ) -> Result<Vec<u8>> {
        let enc = |e: serde_json::Error| FilecoinError::BadInput {
            what: WHAT,
            detail: e.to_string(),
        };
        let request = UpdateRequest {
            registered_proof: proof.to_string(),
            comm_r_old,
            comm_r_new,
            comm_d_new,
            vanilla_proofs: vanilla::encode(WHAT, vanilla, encoding)?,
        };
        serde_json::to_vec(&request).map_err(enc)
    }
}

/// The sector size of the vanilla proofs: TreeD is binary over the
/// sector's 32-byte nodes, so its inclusion paths have log2(nodes) levels.
fn sector_size_of(vanilla: &Value) -> Result<SectorSize> {
    let bad = |detail: &str| FilecoinError::BadInput {
        what: WHAT,
        detail: detail.to_owned(),
    };
    let partitions = vanilla
        .as_array()
        .ok_or_else(|| bad("`vanilla_proofs` is not a list of partition proofs"))?;
    if partitions.is_empty() {
        return Err(bad("`vanilla_proofs` holds no partition proofs"));
    }
    sector::sector_size_from_path(
        WHAT,
        partitions.first(),
        "/challenge_proofs/0/proof_d_new/data/Single/path/path",
        "TreeD",
    )
}

/// What the circuit asserts about its private inputs, checked here so a
/// malformed request is an error and never a panic: the partition count,
/// then per partition the numbers of apex leaves and challenges and the
/// shape (siblings per level) of every inclusion path.
fn check_shape<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    proof: UpdateProof,
    vanilla: &[PartitionProof<Tree>],
) -> Result<()> {
    let pub_params =
        storage_proofs_update::PublicParams::from_sector_size(proof.sector_size().bytes());
    if vanilla.len() != pub_params.partition_count {
        return Err(FilecoinError::PartitionCount {
            what: WHAT,
            proof: format!("SnapDeals {proof}"),
            expected: pub_params.partition_count,
            found: vanilla.len(),
        });
    }
    let expect_r: Vec<usize> = circuit::ChallengeProof::<Tree>::empty(pub_params.sector_nodes)
        .path_r_old
        .iter()
        .map(Vec::len)
        .collect();
    let expect_d = vec![1; pub_params.challenge_bit_len];
    for (k, partition) in vanilla.iter().enumerate() {
        let bad = |detail: String| FilecoinError::BadInput {
            what: WHAT,
            detail: format!("partition {k}: {detail}"),
        };
        if partition.apex_leafs.len() != pub_params.apex_leaf_count {
            return Err(bad(format!(
                "{} apex leaves, a {} sector has {}",
                partition.apex_leafs.len(),
                proof.sector_size(),
                pub_params.apex_leaf_count
            )));
        }
        if partition.challenge_proofs.len() != pub_params.challenge_count {
            return Err(bad(format!(
                "{} challenge proofs, a {} sector has {}",
                partition.challenge_proofs.len(),
                proof.sector_size(),
                pub_params.challenge_count
            )));
        }
        for (i, c) in partition.challenge_proofs.iter().enumerate() {
            let paths = [
                ("TreeROld", shape(c.proof_r_old.path()), &expect_r),
                ("TreeDNew", shape(c.proof_d_new.path()), &expect_d),
                ("TreeRNew", shape(c.proof_r_new.path()), &expect_r),
            ];
            for (tree, found, expected) in paths {
                if found != *expected {
                    return Err(bad(format!(
                        "challenge {i}: the {tree} path has siblings per level {found:?}, \
                         a {} sector's has {expected:?}",
                        proof.sector_size()
                    )));
                }
            }
        }
    }
    Ok(())
}

/// Siblings per level of an inclusion path.
fn shape<D>(path: Vec<(Vec<D>, usize)>) -> Vec<usize> {
    path.iter().map(|(siblings, _)| siblings.len()).collect()
}

type PubParams<'a, Tree> = compound_proof::PublicParams<'a, EmptySectorUpdate<Tree>>;

/// The compound public parameters, as the `*_empty_sector_update_*`
/// functions set them up.
fn setup<'a, Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    proof: UpdateProof,
) -> Result<(SectorUpdateConfig, PubParams<'a, Tree>)> {
    let config = SectorUpdateConfig::from_porep_config(&proof.config()?);
    let setup = compound_proof::SetupParams {
        vanilla_params: SetupParams {
            sector_bytes: u64::from(config.sector_size),
        },
        partitions: Some(usize::from(config.update_partitions)),
        priority: false,
    };
    let pub_params =
        <Compound<Tree> as CompoundProof<'_, EmptySectorUpdate<Tree>, _>>::setup(&setup)
            .map_err(FilecoinError::proofs("SnapDeals public parameters"))?;
    Ok((config, pub_params))
}

/// The public inputs: `k` is the partition count, as in
/// filecoin-proofs; each partition's circuit gets its own index.
fn pub_inputs(config: &SectorUpdateConfig, comms: Comms) -> Result<PublicInputs> {
    let context = "SnapDeals commitments";
    Ok(PublicInputs {
        k: usize::from(config.update_partitions),
        comm_r_old: as_safe_commitment::<TreeRDomain, _>(&comms.r_old, "comm_r_old")
            .map_err(FilecoinError::proofs(context))?,
        comm_d_new: as_safe_commitment::<TreeDDomain, _>(&comms.d_new, "comm_d_new")
            .map_err(FilecoinError::proofs(context))?,
        comm_r_new: as_safe_commitment::<TreeRDomain, _>(&comms.r_new, "comm_r_new")
            .map_err(FilecoinError::proofs(context))?,
        h: config.h,
    })
}

/// The parameter files of `proof`'s SnapDeals circuit in `dir`.
pub fn param_files_for(proof: UpdateProof, dir: &Path) -> Result<ParamFiles> {
    with_tree!(proof.sector_size(), param_files(proof, dir))
}

fn param_files<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    proof: UpdateProof,
    dir: &Path,
) -> Result<ParamFiles> {
    let (_, pub_params) = setup::<Tree>(proof)?;
    let id = <Compound<Tree> as CacheableParameters<EmptySectorUpdateCircuit<Tree>, _>>::cache_identifier(
        &pub_params.vanilla_params,
    );
    Ok(ParamFiles::new(dir, id))
}

/// The partition circuits of a typed update, as
/// `generate_empty_sector_update_proof_with_vanilla` builds them, with the
/// parameter files they need in `param_dir`.
pub fn partitions<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    proof: UpdateProof,
    comm_r_old: [u8; 32],
    comm_r_new: [u8; 32],
    comm_d_new: [u8; 32],
    vanilla: &[PartitionProof<Tree>],
    param_dir: &Path,
) -> Result<Partitions<UpdateCircuit<Tree>>> {
    let comms = Comms {
        r_old: comm_r_old,
        r_new: comm_r_new,
        d_new: comm_d_new,
    };
    partitions_of(proof, comms, vanilla, param_dir)
}

fn partitions_of<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    proof: UpdateProof,
    comms: Comms,
    vanilla: &[PartitionProof<Tree>],
    param_dir: &Path,
) -> Result<Partitions<UpdateCircuit<Tree>>> {
    check_shape(proof, vanilla)?;
    let (config, pub_params) = setup::<Tree>(proof)?;
    let pub_in = pub_inputs(&config, comms)?;
    let circuits =
        compound_circuits::<_, _, Compound<Tree>>(&pub_in, vanilla, &pub_params.vanilla_params)?
            .into_iter()
            .map(UpdateCircuit)
            .collect();
    Ok(Partitions {
        label: format!("SnapDeals {proof}"),
        params: param_files::<Tree>(proof, param_dir)?,
        circuits,
        priority: Priority::Normal,
        witness: witness::<Tree>,
    })
}

fn check_vanilla<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    proof: UpdateProof,
    comms: Comms,
    vanilla: &[PartitionProof<Tree>],
) -> Result<()> {
    check_shape(proof, vanilla)?;
    let (config, pub_params) = setup::<Tree>(proof)?;
    let pub_in = pub_inputs(&config, comms)?;
    let ok = EmptySectorUpdate::<Tree>::verify_all_partitions(
        &pub_params.vanilla_params,
        &pub_in,
        vanilla,
    )
    .map_err(FilecoinError::proofs(
        "checking the SnapDeals vanilla proofs",
    ))?;
    if ok {
        Ok(())
    } else {
        Err(FilecoinError::BadInput {
            what: WHAT,
            detail: format!(
                "its vanilla proofs do not verify against its comm_r_old, comm_r_new and \
                 comm_d_new (wrong commitments, altered proofs, or not a {proof} update)"
            ),
        })
    }
}

fn verify<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    proof: UpdateProof,
    comms: Comms,
    param_dir: &Path,
    bytes: &[u8],
) -> Result<bool> {
    let (config, pub_params) = setup::<Tree>(proof)?;
    let pub_in = pub_inputs(&config, comms)?;
    let pvk = param_files::<Tree>(proof, param_dir)?.prepared_vk()?;
    let proofs = proofs_from_bytes(
        &format!("SnapDeals {proof}"),
        bytes,
        usize::from(config.update_partitions),
    )?;
    let multi = MultiProof::new(proofs, &pvk);
    <Compound<Tree> as CompoundProof<'_, EmptySectorUpdate<Tree>, _>>::verify(
        &pub_params,
        &pub_in,
        &multi,
        &(),
    )
    .map_err(FilecoinError::proofs("verifying the SnapDeals proof"))
}

/// Generates seeded test parameters for `proof`'s circuit into
/// `param_dir` unless they are there (see [`params::generate`]); returns
/// whether it generated.
pub fn generate_test_params(proof: UpdateProof, param_dir: &Path, seed: u64) -> Result<bool> {
    with_tree!(proof.sector_size(), generate_for(proof, param_dir, seed))
}

/// The PCE of `proof`'s partition circuit, recorded from storage-proofs'
/// blank circuit (no sector or vanilla proof needed).
pub fn blank_pce(proof: UpdateProof) -> Result<BlankPce> {
    with_tree!(proof.sector_size(), record_blank(proof))
}

fn record_blank<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    proof: UpdateProof,
) -> Result<BlankPce> {
    let (_, pub_params) = setup::<Tree>(proof)?;
    let files = param_files::<Tree>(proof, Path::new(""))?;
    let blank = <Compound<Tree> as CompoundProof<'_, EmptySectorUpdate<Tree>, _>>::blank_circuit(
        &pub_params.vanilla_params,
    );
    BlankPce::record(&files, blank)
}

fn generate_for<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    proof: UpdateProof,
    dir: &Path,
    seed: u64,
) -> Result<bool> {
    let (_, pub_params) = setup::<Tree>(proof)?;
    let files = param_files::<Tree>(proof, dir)?;
    let blank = <Compound<Tree> as CompoundProof<'_, EmptySectorUpdate<Tree>, _>>::blank_circuit(
        &pub_params.vanilla_params,
    );
    params::generate(&files, blank, &pub_params.vanilla_params, seed)
}
