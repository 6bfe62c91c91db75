//! WinningPoSt and WindowPoSt from vanilla proofs, as
//! `generate_winning_post_with_vanilla` and
//! `generate_window_post_with_vanilla` make them: the same setup, public
//! inputs, partitioning of the vanilla proofs (`partition_vanilla_proofs`)
//! and partition circuits, proved through the engine at CRITICAL
//! (winning) or HIGH (window) priority.
//!
//! The input file is cuzk's own JSON ([`PostRequest`]): the registered
//! proof, the challenge randomness, the prover id and the vanilla proofs
//! as filecoin-proofs serializes `FallbackPoStSectorProof`.
//!
//! The engine synthesizes a partition's witness with its sectors' heads
//! and inclusion paths in parallel ([`witness()`]), the paths' Poseidon
//! made natively ([`set_native_poseidon`]); storage-proofs' own synthesis
//! stays for the PCE and for bellperson.

mod circuit;
mod witness;

pub use circuit::PostCircuit;
pub use witness::{native_poseidon, set_native_poseidon, witness, witness_with};

use std::path::Path;

use bellperson::groth16::Proof;
use blstrs::{Bls12, Scalar};
use cuzk_engine::{Engine, JobHandle, Priority};
use filecoin_proofs::constants::{
    SectorShapeBase, SectorShapeSub2, SectorShapeSub8, SectorShapeTop2,
};
use filecoin_proofs::{
    FallbackPoStSectorProof, PoStConfig, as_safe_commitment, partition_vanilla_proofs,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::merkle::{MerkleProofTrait, MerkleTreeTrait};
use storage_proofs_core::multi_proof::MultiProof;
use storage_proofs_core::parameter_cache::CacheableParameters;
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_post::fallback::{
    self, ChallengeRequirements, FallbackPoSt, FallbackPoStCircuit, FallbackPoStCompound,
    PublicSector,
};

use crate::error::{FilecoinError, Result};
use crate::params::{self, ParamFiles};
use crate::prove::{
    BlankPce, Partitions, PartitionsVisitor, compound_circuits, proofs_from_bytes, proofs_to_bytes,
};
use crate::sector::{PostKind, PostProof, Shape};
use crate::vanilla::{self, VanillaEncoding};

/// cuzk's PoSt request file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PostRequest {
    /// E.g. `StackedDrgWinning2KiBV1`, `StackedDrgWindow32GiBV1_1`.
    pub registered_proof: String,
    /// The challenge randomness (a field element, little endian).
    pub randomness: [u8; 32],
    pub prover_id: [u8; 32],
    /// `FallbackPoStSectorProof`s, one per challenged sector: as
    /// filecoin-proofs serializes them to JSON, or base64 strings of the
    /// `VanillaProofBytes` filecoin-proofs-api returns ([`crate::vanilla`]).
    pub vanilla_proofs: Value,
}

/// A parsed PoSt request.
#[derive(Debug)]
pub struct PostInput {
    proof: PostProof,
    randomness: [u8; 32],
    prover_id: [u8; 32],
    inner: PostAny,
}

#[derive(Debug)]
enum PostAny {
    Base(Vec<FallbackPoStSectorProof<SectorShapeBase>>),
    Sub2(Vec<FallbackPoStSectorProof<SectorShapeSub2>>),
    Sub8(Vec<FallbackPoStSectorProof<SectorShapeSub8>>),
    Top2(Vec<FallbackPoStSectorProof<SectorShapeTop2>>),
}

macro_rules! with_vanilla {
    ($any:expr, $v:ident => $body:expr) => {
        match $any {
            PostAny::Base($v) => $body,
            PostAny::Sub2($v) => $body,
            PostAny::Sub8($v) => $body,
            PostAny::Top2($v) => $body,
        }
    };
}

const WHAT: &str = "PoSt request";

/// A PoSt proof: partition proofs and their bytes as filecoin-proofs
/// writes them.
#[derive(Debug, Clone)]
pub struct PostOutput {
    pub proofs: Vec<Proof<Bls12>>,
    pub bytes: Vec<u8>,
}

impl PostInput {
    /// Parses a [`PostRequest`]; `expect` refuses a request for another
    /// proof type.
    pub fn from_json(bytes: &[u8], expect: Option<PostKind>) -> Result<PostInput> {
        let request: PostRequest =
            serde_json::from_slice(bytes).map_err(|e| FilecoinError::json(WHAT, e))?;
        let proof: PostProof = request.registered_proof.parse()?;
        if let Some(kind) = expect
            && kind != proof.kind
        {
            return Err(FilecoinError::BadInput {
                what: WHAT,
                detail: format!("it is for {proof}, not a {kind:?}PoSt"),
            });
        }
        let v = request.vanilla_proofs;
        let inner = match proof.sector_size.shape() {
            Shape::Base => PostAny::Base(vanilla::decode(WHAT, v)?),
            Shape::Sub2 => PostAny::Sub2(vanilla::decode(WHAT, v)?),
            Shape::Sub8 => PostAny::Sub8(vanilla::decode(WHAT, v)?),
            Shape::Top2 => PostAny::Top2(vanilla::decode(WHAT, v)?),
        };
        let input = PostInput {
            proof,
            randomness: request.randomness,
            prover_id: request.prover_id,
            inner,
        };
        with_vanilla!(&input.inner, v => check_vanilla_shape(proof, v))?;
        Ok(input)
    }

    /// Reads and parses a request file.
    pub fn from_file(path: &Path, expect: Option<PostKind>) -> Result<PostInput> {
        let bytes = std::fs::read(path).map_err(|source| FilecoinError::Io {
            path: path.to_owned(),
            source,
        })?;
        PostInput::from_json(&bytes, expect)
    }

    pub fn proof(&self) -> PostProof {
        self.proof
    }

    /// Proves through `engine` with the parameters in `param_dir`.
    pub fn prove(
        &self,
        engine: &Engine,
        param_dir: &Path,
        randomness: Option<Vec<(Scalar, Scalar)>>,
    ) -> Result<PostOutput> {
        let proofs = with_vanilla!(&self.inner, v => {
            partitions(self.proof, &self.randomness, self.prover_id, v, param_dir)?
                .prove(engine, randomness)?
        });
        let bytes = proofs_to_bytes(&proofs);
        Ok(PostOutput { proofs, bytes })
    }

    /// The partitions (Groth16 proofs) this PoSt is proved in: one for
    /// WinningPoSt, one per `sector_count` sectors for WindowPoSt.
    pub fn partitions(&self) -> Result<usize> {
        let config = self.proof.config();
        with_vanilla!(&self.inner, v => partition_count(&config, v))
    }

    /// Hands the typed partition circuits (with their parameter files in
    /// `param_dir`) to `visitor`.
    pub fn visit_partitions<V: PartitionsVisitor>(
        &self,
        param_dir: &Path,
        visitor: V,
    ) -> Result<V::Output> {
        with_vanilla!(&self.inner, v => Ok(visitor.visit(partitions(
            self.proof,
            &self.randomness,
            self.prover_id,
            v,
            param_dir
        )?)))
    }

    /// Submits the PoSt to `engine` as one job and returns at once; its
    /// proofs are what [`PostInput::prove`] returns. `priority`: `None` for
    /// the kind's (WinningPoSt CRITICAL, WindowPoSt HIGH).
    pub fn submit(
        &self,
        engine: &Engine,
        param_dir: &Path,
        randomness: Option<Vec<(Scalar, Scalar)>>,
        priority: Option<Priority>,
    ) -> Result<JobHandle> {
        with_vanilla!(&self.inner, v => {
            partitions(self.proof, &self.randomness, self.prover_id, v, param_dir)?
                .with_priority(priority)
                .submit(engine, randomness)
        })
    }

    /// The parameter files of this PoSt's circuit in `param_dir`.
    pub fn param_files(&self, param_dir: &Path) -> Result<ParamFiles> {
        with_vanilla!(&self.inner, v => param_files_of(self.proof, v, param_dir))
    }

    /// Verifies PoSt bytes against the sectors (ids and comm_r) of the
    /// vanilla proofs, as `verify_winning_post` / `verify_window_post` do,
    /// with the verifying key from `param_dir`.
    pub fn verify(&self, param_dir: &Path, bytes: &[u8]) -> Result<bool> {
        with_vanilla!(&self.inner, v => {
            verify(self.proof, &self.randomness, self.prover_id, v, param_dir, bytes)
        })
    }

    /// The request as JSON, for typed vanilla proofs, written in
    /// `encoding`.
    pub fn request_json<Tree: 'static + MerkleTreeTrait>(
        proof: PostProof,
        randomness: [u8; 32],
        prover_id: [u8; 32],
        vanilla: &[FallbackPoStSectorProof<Tree>],
        encoding: VanillaEncoding,
    ) -> Result<Vec<u8>> {
        let enc = |e: serde_json::Error| FilecoinError::BadInput {
            what: WHAT,
            detail: e.to_string(),
        };
        let request = PostRequest {
            registered_proof: proof.to_string(),
            randomness,
            prover_id,
            vanilla_proofs: vanilla::encode(WHAT, vanilla, encoding)?,
        };
        serde_json::to_vec(&request).map_err(enc)
    }
}

/// Every inclusion proof must be over a tree of the proof type's sector:
/// the product of the arities along its path is the number of leaves.
fn check_vanilla_shape<Tree: 'static + MerkleTreeTrait>(
    proof: PostProof,
    vanilla: &[FallbackPoStSectorProof<Tree>],
) -> Result<()> {
    if vanilla.is_empty() {
        return Err(FilecoinError::BadInput {
            what: WHAT,
            detail: "it holds no vanilla proofs".into(),
        });
    }
    let nodes = proof.sector_size.nodes();
    for sector in vanilla {
        for p in sector
            .vanilla_proof
            .sectors
            .iter()
            .flat_map(|s| &s.inclusion_proofs)
        {
            let leaves: u64 = p
                .path()
                .iter()
                .map(|(hashes, _)| hashes.len() as u64 + 1)
                .product();
            if leaves != nodes {
                let found =
                    crate::SectorSize::new(leaves * 32).map_err(|_| FilecoinError::BadInput {
                        what: WHAT,
                        detail: format!(
                            "sector {:?} has an inclusion proof over {leaves} leaves",
                            sector.sector_id
                        ),
                    })?;
                return Err(FilecoinError::SectorSizeMismatch {
                    what: WHAT,
                    expected: proof.sector_size,
                    found,
                });
            }
        }
    }
    Ok(())
}

type PubParams<'a, Tree> = compound_proof::PublicParams<'a, FallbackPoSt<'a, Tree>>;
type PubInputs<'a, Tree> = <FallbackPoSt<'a, Tree> as ProofScheme<'a>>::PublicInputs;

/// Setup as the `*_with_vanilla` functions do; `sectors` for the
/// partition count of WindowPoSt.
fn partition_count<Tree: 'static + MerkleTreeTrait>(
    config: &PoStConfig,
    vanilla: &[FallbackPoStSectorProof<Tree>],
) -> Result<usize> {
    Ok(setup::<Tree>(config, vanilla.len())?
        .partitions
        .unwrap_or(1))
}

fn setup<'a, Tree: 'static + MerkleTreeTrait>(
    config: &PoStConfig,
    sectors: usize,
) -> Result<PubParams<'a, Tree>> {
    let (vanilla_params, partitions) = match config.typ {
        filecoin_proofs::PoStType::Winning => (
            filecoin_proofs::parameters::winning_post_setup_params(config)
                .map_err(FilecoinError::proofs("WinningPoSt setup parameters"))?,
            None,
        ),
        filecoin_proofs::PoStType::Window => {
            let partitions = sectors.div_ceil(config.sector_count.max(1));
            (
                filecoin_proofs::parameters::window_post_setup_params(config),
                (partitions > 1).then_some(partitions),
            )
        }
    };
    let setup = compound_proof::SetupParams {
        vanilla_params,
        partitions,
        priority: config.priority,
    };
    <FallbackPoStCompound<Tree> as CompoundProof<'_, FallbackPoSt<'_, Tree>, _>>::setup(&setup)
        .map_err(FilecoinError::proofs("PoSt public parameters"))
}

fn pub_inputs<'a, Tree: 'static + MerkleTreeTrait>(
    randomness: &[u8; 32],
    prover_id: [u8; 32],
    sectors: Vec<(storage_proofs_core::sector::SectorId, [u8; 32])>,
) -> Result<PubInputs<'a, Tree>> {
    let comm = |bytes: &[u8; 32], name: &'static str| {
        as_safe_commitment(bytes, name).map_err(FilecoinError::proofs(WHAT))
    };
    Ok(fallback::PublicInputs {
        randomness: comm(randomness, "randomness")?,
        prover_id: comm(&prover_id, "prover_id")?,
        sectors: sectors
            .into_iter()
            .map(|(id, comm_r)| {
                Ok(PublicSector {
                    id,
                    comm_r: comm(&comm_r, "comm_r")?,
                })
            })
            .collect::<Result<_>>()?,
        k: None,
    })
}

fn comm_r_bytes<Tree: MerkleTreeTrait>(p: &FallbackPoStSectorProof<Tree>) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(AsRef::<[u8]>::as_ref(&p.comm_r));
    out
}

/// The parameter files of `proof`'s PoSt circuit in `dir` (the circuit
/// proves the proof type's `sector_count` sectors per partition).
pub fn param_files_for(proof: PostProof, dir: &Path) -> Result<ParamFiles> {
    with_tree!(proof.sector_size, post_param_files(proof, dir))
}

fn post_param_files<Tree: 'static + MerkleTreeTrait>(
    proof: PostProof,
    dir: &Path,
) -> Result<ParamFiles> {
    let config = proof.config();
    let pub_params = setup::<Tree>(&config, config.sector_count)?;
    Ok(param_files::<Tree>(&pub_params, dir))
}

fn param_files_of<Tree: 'static + MerkleTreeTrait>(
    proof: PostProof,
    vanilla: &[FallbackPoStSectorProof<Tree>],
    dir: &Path,
) -> Result<ParamFiles> {
    let pub_params = setup::<Tree>(&proof.config(), vanilla.len())?;
    Ok(param_files::<Tree>(&pub_params, dir))
}

fn param_files<Tree: 'static + MerkleTreeTrait>(
    pub_params: &PubParams<'_, Tree>,
    dir: &Path,
) -> ParamFiles {
    let id =
        <FallbackPoStCompound<Tree> as CacheableParameters<PostCircuit<Tree>, _>>::cache_identifier(
            &pub_params.vanilla_params,
        );
    ParamFiles::new(dir, id)
}

/// The partition circuits of a typed PoSt, as the `*_with_vanilla`
/// functions build them, with the parameter files they need.
pub fn partitions<Tree: 'static + MerkleTreeTrait>(
    proof: PostProof,
    randomness: &[u8; 32],
    prover_id: [u8; 32],
    vanilla: &[FallbackPoStSectorProof<Tree>],
    param_dir: &Path,
) -> Result<Partitions<PostCircuit<Tree>>> {
    check_vanilla_shape(proof, vanilla)?;
    let config = proof.config();
    if proof.kind == PostKind::Winning && vanilla.len() != config.sector_count {
        return Err(FilecoinError::BadInput {
            what: WHAT,
            detail: format!(
                "WinningPoSt proves {} sector(s); the request has {}",
                config.sector_count,
                vanilla.len()
            ),
        });
    }
    let pub_params = setup::<Tree>(&config, vanilla.len())?;
    let pub_in = pub_inputs::<Tree>(
        randomness,
        prover_id,
        vanilla
            .iter()
            .map(|p| (p.sector_id, comm_r_bytes(p)))
            .collect(),
    )?;
    let count = pub_params.partitions.unwrap_or(1);
    let partitioned =
        partition_vanilla_proofs(&config, &pub_params.vanilla_params, &pub_in, count, vanilla)
            .map_err(FilecoinError::proofs(
                "the vanilla proofs do not fit their challenges (altered, or for other randomness)",
            ))?;
    let circuits = compound_circuits::<_, FallbackPoStCircuit<Tree>, FallbackPoStCompound<Tree>>(
        &pub_in,
        &partitioned,
        &pub_params.vanilla_params,
    )?
    .into_iter()
    .zip(&partitioned)
    .map(|(circuit, vanilla)| PostCircuit::new(circuit, vanilla))
    .collect::<Result<Vec<_>>>()?;
    let priority = match proof.kind {
        PostKind::Winning => Priority::Critical,
        PostKind::Window => Priority::High,
    };
    Ok(Partitions {
        label: proof.to_string(),
        params: param_files::<Tree>(&pub_params, param_dir),
        circuits,
        priority,
        witness: witness::<Tree>,
    })
}

fn verify<Tree: 'static + MerkleTreeTrait>(
    proof: PostProof,
    randomness: &[u8; 32],
    prover_id: [u8; 32],
    vanilla: &[FallbackPoStSectorProof<Tree>],
    param_dir: &Path,
    bytes: &[u8],
) -> Result<bool> {
    let config = proof.config();
    let pub_params = setup::<Tree>(&config, vanilla.len())?;
    let sectors: Vec<_> = vanilla
        .iter()
        .map(|p| (p.sector_id, comm_r_bytes(p)))
        .collect();
    // verify_winning_post lists the sectors once per circuit "sector".
    let sectors = match proof.kind {
        PostKind::Winning => {
            let times = pub_params.vanilla_params.sector_count;
            (0..times).flat_map(|_| sectors.clone()).collect()
        }
        PostKind::Window => sectors,
    };
    let pub_in = pub_inputs::<Tree>(randomness, prover_id, sectors)?;
    let pvk = param_files::<Tree>(&pub_params, param_dir).prepared_vk()?;
    let proofs = proofs_from_bytes(
        &proof.to_string(),
        bytes,
        pub_params.partitions.unwrap_or(1),
    )?;
    let multi = MultiProof::new(proofs, &pvk);
    <FallbackPoStCompound<Tree> as CompoundProof<'_, FallbackPoSt<'_, Tree>, _>>::verify(
        &pub_params,
        &pub_in,
        &multi,
        &ChallengeRequirements {
            minimum_challenge_count: config.challenge_count * config.sector_count,
        },
    )
    .map_err(FilecoinError::proofs("verifying the PoSt proof"))
}

/// Generates seeded test parameters for `proof`'s circuit into
/// `param_dir` unless they are there; returns whether it generated.
/// WindowPoSt parameters are per partition shape, the same for any number
/// of sectors.
pub fn generate_test_params(proof: PostProof, param_dir: &Path, seed: u64) -> Result<bool> {
    match proof.sector_size.shape() {
        Shape::Base => generate_for::<SectorShapeBase>(proof, param_dir, seed),
        Shape::Sub2 => generate_for::<SectorShapeSub2>(proof, param_dir, seed),
        Shape::Sub8 => generate_for::<SectorShapeSub8>(proof, param_dir, seed),
        Shape::Top2 => generate_for::<SectorShapeTop2>(proof, param_dir, seed),
    }
}

/// The PCE of `proof`'s partition circuit (WindowPoSt: `sector_count`
/// sectors), recorded from storage-proofs' blank circuit (no sector or
/// vanilla proof needed).
pub fn blank_pce(proof: PostProof) -> Result<BlankPce> {
    match proof.sector_size.shape() {
        Shape::Base => record_blank::<SectorShapeBase>(proof),
        Shape::Sub2 => record_blank::<SectorShapeSub2>(proof),
        Shape::Sub8 => record_blank::<SectorShapeSub8>(proof),
        Shape::Top2 => record_blank::<SectorShapeTop2>(proof),
    }
}

fn record_blank<Tree: 'static + MerkleTreeTrait>(proof: PostProof) -> Result<BlankPce> {
    let pub_params = setup::<Tree>(&proof.config(), 1)?;
    let files = param_files::<Tree>(&pub_params, Path::new(""));
    let blank =
        <FallbackPoStCompound<Tree> as CompoundProof<'_, FallbackPoSt<'_, Tree>, _>>::blank_circuit(
            &pub_params.vanilla_params,
        );
    BlankPce::record(&files, blank)
}

fn generate_for<Tree: 'static + MerkleTreeTrait>(
    proof: PostProof,
    dir: &Path,
    seed: u64,
) -> Result<bool> {
    let pub_params = setup::<Tree>(&proof.config(), 1)?;
    let files = param_files::<Tree>(&pub_params, dir);
    let blank =
        <FallbackPoStCompound<Tree> as CompoundProof<'_, FallbackPoSt<'_, Tree>, _>>::blank_circuit(
            &pub_params.vanilla_params,
        );
    params::generate(&files, blank, &pub_params.vanilla_params, seed)
}
