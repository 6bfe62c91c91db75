//! Curio's requests as cuzk's own Filecoin inputs: the registered proof
//! numbers and prover ids as Filecoin defines them, and each
//! `SubmitProofRequest` parsed and checked ([`check`]) into the input a
//! `cuzk.v1.Cuzk` request of the same proof parses to.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use cuzk_engine::Priority;
use cuzk_filecoin::post::{PostInput, PostRequest};
use cuzk_filecoin::update::UpdateRequest;
use cuzk_filecoin::{
    C1Output, FilecoinError, PostKind, PostProof, SealProof, SectorSize, UpdateInput, UpdateProof,
};
use serde::Deserialize;
use tonic::Status;

use crate::curio_proto as pb;
use crate::daemon::config::DaemonConfig;
use crate::daemon::filecoin::{Checked, Input, status_of_filecoin};

/// The sector sizes of Filecoin's registered proof numbers, in order.
const SIZES: [&str; 5] = ["2KiB", "8MiB", "512MiB", "32GiB", "64GiB"];

/// The prover id of miner (actor) `miner_id`, as Filecoin derives it from
/// the miner's ID address: the id's unsigned LEB128 bytes (the address's
/// payload), then zeros up to 32 bytes.
pub fn make_prover_id(miner_id: u64) -> [u8; 32] {
    let mut id = [0u8; 32];
    let mut rest = miner_id;
    // A u64 takes at most 10 LEB128 bytes.
    for byte in id.iter_mut() {
        // The low 7 bits: truncation intended.
        *byte = (rest & 0x7f) as u8;
        rest >>= 7;
        if rest == 0 {
            break;
        }
        *byte |= 0x80;
    }
    id
}

/// The name (`StackedDrg32GiBV1_1`) of RegisteredSealProof number `n`:
/// 5 x version + size, versions V1, V1_1, V1_1 with synthetic PoRep and
/// V1_2 non-interactive PoRep (0-19).
pub fn seal_proof_name(n: u64) -> Option<String> {
    const VERSIONS: [&str; 4] = [
        "V1",
        "V1_1",
        "V1_1_Feat_SyntheticPoRep",
        "V1_2_Feat_NonInteractivePoRep",
    ];
    let version = VERSIONS.get(usize::try_from(n / 5).ok()?)?;
    Some(format!("StackedDrg{}{version}", SIZES[(n % 5) as usize]))
}

/// The name of RegisteredPoStProof number `n` as proved: 0-4 WinningPoSt
/// V1, 5-9 WindowPoSt V1, 10-14 WindowPoSt V1_1 of Go and the FFI, which
/// is filecoin-proofs-api's `V1_2` (API version 1.2.0, the grinding fix).
pub fn post_proof_name(n: u64) -> Option<String> {
    let (kind, version) = match n / 5 {
        0 => ("Winning", "V1"),
        1 => ("Window", "V1"),
        2 => ("Window", "V1_2"),
        _ => return None,
    };
    Some(format!(
        "StackedDrg{kind}{}{version}",
        SIZES[(n % 5) as usize]
    ))
}

/// The name of RegisteredUpdateProof number `n` (0-4): `StackedDrg2KiBV1`
/// and so on.
pub fn update_proof_name(n: u64) -> Option<String> {
    (n < 5).then(|| format!("StackedDrg{}V1", SIZES[n as usize]))
}

pub(super) fn invalid(message: String) -> Status {
    Status::invalid_argument(message)
}

fn bad(e: FilecoinError) -> Status {
    status_of_filecoin(&e)
}

fn priority(p: i32) -> Result<Option<Priority>, Status> {
    match pb::Priority::try_from(p) {
        Ok(pb::Priority::Unspecified) => Ok(None),
        Ok(pb::Priority::Low) => Ok(Some(Priority::Low)),
        Ok(pb::Priority::Normal) => Ok(Some(Priority::Normal)),
        Ok(pb::Priority::High) => Ok(Some(Priority::High)),
        Ok(pb::Priority::Critical) => Ok(Some(Priority::Critical)),
        Err(_) => Err(invalid(format!(
            "priority {p} is not a Priority (0 unspecified, 1 LOW ... 4 CRITICAL)"
        ))),
    }
}

fn check_sector_size(given: u64, size: SectorSize, name: &str) -> Result<(), Status> {
    if given != 0 && given != size.bytes() {
        return Err(invalid(format!(
            "sector_size is {given} but registered proof {name} is for {size} ({} bytes) sectors",
            size.bytes()
        )));
    }
    Ok(())
}

fn bytes32(what: &str, b: &[u8]) -> Result<[u8; 32], Status> {
    b.try_into()
        .map_err(|_| invalid(format!("{what} must be 32 bytes, not {}", b.len())))
}

/// The vanilla proofs as cuzk's requests take bincode ones: base64 strings.
fn base64_list(proofs: &[Vec<u8>]) -> serde_json::Value {
    serde_json::Value::Array(
        proofs
            .iter()
            .map(|p| serde_json::Value::String(STANDARD.encode(p)))
            .collect(),
    )
}

fn request_json<T: serde::Serialize>(request: &T) -> Result<Vec<u8>, Status> {
    serde_json::to_vec(request)
        .map_err(|e| Status::internal(format!("writing the request as JSON: {e}")))
}

/// Curio's c1.json: the commit phase 1 output (JSON) in base64, with the
/// sector's number and size.
#[derive(Debug, Deserialize)]
struct C1Wrapper {
    #[serde(rename = "SectorNum")]
    sector_num: u64,
    #[serde(rename = "Phase1Out")]
    phase1_out: String,
    #[serde(rename = "SectorSize")]
    sector_size: u64,
}

fn porep_input(req: &pb::SubmitProofRequest) -> Result<C1Output, Status> {
    let n = req.registered_proof;
    let name = seal_proof_name(n).ok_or_else(|| {
        invalid(format!(
            "registered_proof {n} is not a RegisteredSealProof (0-19) this daemon knows"
        ))
    })?;
    let proof: SealProof = name.parse().map_err(bad)?;
    let size = proof.sector_size;
    check_sector_size(req.sector_size, size, &name)?;
    if req.vanilla_proof.is_empty() {
        return Err(invalid(
            "vanilla_proof is empty: a PoRep C2 takes Curio's c1.json wrapper there".into(),
        ));
    }
    let wrapper: C1Wrapper = serde_json::from_slice(&req.vanilla_proof).map_err(|e| {
        invalid(format!(
            "vanilla_proof is not Curio's c1.json wrapper {{\"SectorNum\", \"Phase1Out\", \
             \"SectorSize\"}} ({} bytes): {e}",
            req.vanilla_proof.len()
        ))
    })?;
    if wrapper.sector_size != size.bytes() {
        return Err(invalid(format!(
            "the c1.json wrapper's SectorSize is {} but registered proof {n} ({name}) is for \
             {size} ({} bytes) sectors",
            wrapper.sector_size,
            size.bytes()
        )));
    }
    if wrapper.sector_num != req.sector_number {
        return Err(invalid(format!(
            "the c1.json wrapper is for sector {} but sector_number is {}",
            wrapper.sector_num, req.sector_number
        )));
    }
    let c1 = STANDARD
        .decode(wrapper.phase1_out.as_bytes())
        .map_err(|e| {
            invalid(format!(
                "the c1.json wrapper's Phase1Out is not base64: {e}"
            ))
        })?;
    C1Output::from_json(&c1, Some(proof)).map_err(bad)
}

fn post_input(req: &pb::SubmitProofRequest, kind: PostKind) -> Result<PostInput, Status> {
    let n = req.registered_proof;
    let name = post_proof_name(n).ok_or_else(|| {
        invalid(format!(
            "registered_proof {n} is not a RegisteredPoStProof (0-14) this daemon knows"
        ))
    })?;
    let proof: PostProof = name.parse().map_err(bad)?;
    if proof.kind != kind {
        return Err(invalid(format!(
            "registered_proof {n} is {name}, not a {kind:?}PoSt proof"
        )));
    }
    check_sector_size(req.sector_size, proof.sector_size, &name)?;
    // Before API version 1.2 a WindowPoSt challenge depends on the sector's
    // position in the whole deadline, which one partition's request lacks.
    if kind == PostKind::Window && req.partition_index > 0 && !name.ends_with("V1_2") {
        return Err(invalid(format!(
            "{name} (registered_proof {n}) partitions other than the first are not proved here \
             (partition_index {}); use the V1_1 proof type ({})",
            req.partition_index,
            n + 5
        )));
    }
    if req.vanilla_proofs.is_empty() {
        return Err(invalid(
            "vanilla_proofs is empty: a PoSt takes one bincode FallbackPoStSectorProof per sector"
                .into(),
        ));
    }
    let request = PostRequest {
        registered_proof: name,
        randomness: bytes32("randomness", &req.randomness)?,
        prover_id: make_prover_id(req.miner_id),
        vanilla_proofs: base64_list(&req.vanilla_proofs),
    };
    PostInput::from_json(&request_json(&request)?, Some(kind)).map_err(bad)
}

fn snap_input(req: &pb::SubmitProofRequest) -> Result<UpdateInput, Status> {
    let n = req.registered_proof;
    let name = update_proof_name(n).ok_or_else(|| {
        invalid(format!(
            "registered_proof {n} is not a RegisteredUpdateProof (0-4) this daemon knows"
        ))
    })?;
    let proof: UpdateProof = name.parse().map_err(bad)?;
    check_sector_size(req.sector_size, proof.sector_size(), &name)?;
    if req.vanilla_proofs.is_empty() {
        return Err(invalid(
            "vanilla_proofs is empty: SnapDeals takes one bincode PartitionProof per partition"
                .into(),
        ));
    }
    let request = UpdateRequest {
        registered_proof: name,
        comm_r_old: bytes32("comm_r_old", &req.comm_r_old)?,
        comm_r_new: bytes32("comm_r_new", &req.comm_r_new)?,
        comm_d_new: bytes32("comm_d_new", &req.comm_d_new)?,
        vanilla_proofs: base64_list(&req.vanilla_proofs),
    };
    UpdateInput::from_json(&request_json(&request)?).map_err(bad)
}

/// Parses and checks a request (blocking: the inputs are large and their
/// vanilla proofs are checked).
pub fn check(config: &DaemonConfig, req: &pb::SubmitProofRequest) -> Result<Checked, Status> {
    let priority = priority(req.priority)?;
    let kind = pb::ProofKind::try_from(req.proof_kind).unwrap_or(pb::ProofKind::Unspecified);
    let input = match kind {
        pb::ProofKind::Unspecified => {
            return Err(invalid(format!(
                "proof_kind {} is not one of POREP_SEAL_COMMIT (1), SNAP_DEALS_UPDATE (2), \
                 WINDOW_POST_PARTITION (3), WINNING_POST (4)",
                req.proof_kind
            )));
        }
        pb::ProofKind::PorepSealCommit => Input::PorepC2(porep_input(req)?),
        pb::ProofKind::SnapDealsUpdate => Input::SnapDeals(snap_input(req)?),
        pb::ProofKind::WindowPostPartition => Input::Post(post_input(req, PostKind::Window)?),
        pb::ProofKind::WinningPost => Input::Post(post_input(req, PostKind::Winning)?),
    };
    let checked = Checked::new(config, input, priority)?;
    if kind == pb::ProofKind::WindowPostPartition && checked.partitions != 1 {
        return Err(invalid(format!(
            "the {} vanilla proofs make {} WindowPoSt partitions; WINDOW_POST_PARTITION proves \
             one: send one partition's sectors per request",
            req.vanilla_proofs.len(),
            checked.partitions
        )));
    }
    Ok(checked)
}
