//! Filecoin proofs in the daemon: a request's inputs parsed and checked
//! (bad input is `INVALID_ARGUMENT` before any SNARK work), the job
//! submitted to the daemon's engine with the parameter files of its Filecoin
//! parameter cache (`filecoin_params_dir`), which the engine loads once and
//! keeps, and each proof verified before it is returned (`verify_proofs`).

use std::path::PathBuf;
use std::sync::Arc;

use blstrs::Scalar;
use cuzk_engine::{Engine, JobHandle, Priority};
use cuzk_filecoin::post::PostInput;
use cuzk_filecoin::{C1Output, FilecoinError, PostKind, SealProof, UpdateInput};
use tonic::{Code, Status};

use super::Daemon;
use super::config::DaemonConfig;
use super::jobs::{Api, JobKind, Jobs, Tracked};
use super::request::{explicit_randomness, priority_from_proto, seeded_randomness, status_of};
use crate::proto;

/// A Filecoin proof's parsed inputs.
#[derive(Debug)]
pub enum Input {
    PorepC2(C1Output),
    SnapDeals(UpdateInput),
    Post(PostInput),
}

/// A Filecoin request, checked: what to submit and how to verify it.
#[derive(Debug)]
pub struct Checked {
    pub input: Arc<Input>,
    /// `porep-c2:StackedDrg2KiBV1_1`, ...: the job's circuit in status,
    /// metrics (its family before the colon) and messages.
    pub label: String,
    pub partitions: usize,
    /// `None`: the kind's default.
    pub priority: Option<Priority>,
    pub randomness: Option<Vec<(Scalar, Scalar)>>,
    pub params_dir: PathBuf,
}

/// Submits a checked Filecoin request to the daemon's engine (the
/// partitions are built on a blocking thread) and tracks the job, whose
/// proof is verified before its outcome when the daemon verifies. The
/// caller has admitted the request (`Service::admit`) and counts a refusal.
pub async fn submit_checked(
    daemon: &Arc<Daemon>,
    checked: Checked,
    api: Api,
) -> Result<Arc<Tracked>, Status> {
    let checked = Arc::new(checked);
    let engine = Arc::clone(&daemon.engine);
    let submit = Arc::clone(&checked);
    let check = daemon.config.check_params;
    let handle = super::service::blocking(move || {
        if check {
            submit.check_params()?;
        }
        submit.submit(&engine)
    })
    .await??;
    let verifier = daemon.config.verify_proofs.then(|| checked.verifier());
    tracing::info!(
        job = handle.id().0,
        circuit = %checked.label,
        partitions = checked.partitions,
        "Filecoin job submitted"
    );
    Ok(Jobs::track(
        daemon,
        handle,
        checked.label.clone(),
        checked.partitions as u32,
        JobKind::Filecoin(verifier),
        api,
    ))
}

/// The gRPC status of a Filecoin error: bad input is the caller's, missing
/// parameter files are the daemon's precondition, engine errors as the
/// engine says.
pub fn status_of_filecoin(e: &FilecoinError) -> Status {
    let code = match e {
        FilecoinError::Engine(e) => return status_of(e),
        FilecoinError::ParamsMissing { .. } | FilecoinError::Io { .. } => Code::FailedPrecondition,
        _ => Code::InvalidArgument,
    };
    Status::new(code, e.to_string())
}

/// Parses and checks `fc` (blocking: JSON of tens of MB for a 32 GiB C1,
/// and the vanilla proofs' Merkle paths are checked).
pub fn check(
    config: &DaemonConfig,
    req: &proto::ProveRequest,
    fc: &proto::FilecoinProof,
) -> Result<Checked, Status> {
    if !req.circuit.is_empty() || !req.witness_seeds.is_empty() || req.params.is_some() {
        return Err(Status::invalid_argument(
            "a Filecoin request takes no circuit, witness_seeds or params: its circuit and \
             parameters follow from its inputs",
        ));
    }
    let bad = |e: FilecoinError| status_of_filecoin(&e);
    let input = match &fc.kind {
        None => {
            return Err(Status::invalid_argument(
                "the Filecoin request names no proof kind (porep_c2, snap_deals, winning_post \
                 or window_post)",
            ));
        }
        Some(proto::filecoin_proof::Kind::PorepC2(p)) => {
            let registered = if p.registered_proof.is_empty() {
                None
            } else {
                Some(p.registered_proof.parse::<SealProof>().map_err(bad)?)
            };
            Input::PorepC2(C1Output::from_json(&p.c1_json, registered).map_err(bad)?)
        }
        Some(proto::filecoin_proof::Kind::SnapDeals(json)) => {
            Input::SnapDeals(UpdateInput::from_json(json).map_err(bad)?)
        }
        Some(proto::filecoin_proof::Kind::WinningPost(json)) => {
            Input::Post(PostInput::from_json(json, Some(PostKind::Winning)).map_err(bad)?)
        }
        Some(proto::filecoin_proof::Kind::WindowPost(json)) => {
            Input::Post(PostInput::from_json(json, Some(PostKind::Window)).map_err(bad)?)
        }
    };
    let priority = match proto::Priority::try_from(req.priority) {
        Ok(proto::Priority::Unspecified) => None,
        _ => Some(priority_from_proto(req.priority)?),
    };
    let mut checked = Checked::new(config, input, priority)?;
    checked.randomness = match &req.randomness {
        None => None,
        Some(proto::prove_request::Randomness::RsSeed(seed)) => {
            Some(seeded_randomness(*seed, checked.partitions))
        }
        Some(proto::prove_request::Randomness::Explicit(e)) => {
            Some(explicit_randomness(e, checked.partitions)?)
        }
    };
    Ok(checked)
}

impl Checked {
    /// Checks parsed inputs (blocking: PoRep C2's and SnapDeals' vanilla
    /// proofs are verified against their commitments here) and sizes the
    /// job; randomness is left to the OS's RNG.
    pub fn new(
        config: &DaemonConfig,
        input: Input,
        priority: Option<Priority>,
    ) -> Result<Checked, Status> {
        let bad = |e: FilecoinError| status_of_filecoin(&e);
        let (label, partitions) = match &input {
            Input::PorepC2(c1) => {
                c1.check_vanilla().map_err(bad)?;
                (format!("porep-c2:{}", c1.proof()), c1.partitions())
            }
            Input::SnapDeals(u) => {
                u.check_vanilla().map_err(bad)?;
                (format!("snap-deals:{}", u.proof()), u.partitions())
            }
            Input::Post(p) => {
                let kind = match p.proof().kind {
                    PostKind::Winning => "winning-post",
                    PostKind::Window => "window-post",
                };
                (
                    format!("{kind}:{}", p.proof()),
                    p.partitions().map_err(bad)?,
                )
            }
        };
        if partitions > config.max_partitions {
            return Err(Status::resource_exhausted(format!(
                "{label} has {partitions} partitions; this daemon takes at most {} \
                 (max_partitions)",
                config.max_partitions
            )));
        }
        Ok(Checked {
            input: Arc::new(input),
            label,
            partitions,
            priority,
            randomness: None,
            params_dir: config.filecoin_params_dir(),
        })
    }

    /// Submits the proof's partitions to `engine` as one job (blocking:
    /// the partition circuits are built here).
    pub fn submit(&self, engine: &Engine) -> Result<JobHandle, Status> {
        let (dir, rs, p) = (&self.params_dir, self.randomness.clone(), self.priority);
        match &*self.input {
            Input::PorepC2(c1) => c1.submit(engine, dir, rs, p),
            Input::SnapDeals(u) => u.submit(engine, dir, rs, p),
            Input::Post(post) => post.submit(engine, dir, rs, p),
        }
        .map_err(|e| status_of_filecoin(&e))
    }

    /// A verifier of the proof bytes (blocking: it reads the verifying key
    /// and pairs), for the job registry to run before the reply.
    pub fn verifier(&self) -> super::jobs::Verifier {
        let (input, dir) = (Arc::clone(&self.input), self.params_dir.clone());
        Box::new(move |bytes: &[u8]| {
            match &*input {
                Input::PorepC2(c1) => c1.verify(&dir, bytes),
                Input::SnapDeals(u) => u.verify(&dir, bytes),
                Input::Post(post) => post.verify(&dir, bytes),
            }
            .map_err(|e| e.to_string())
        })
    }
}

impl Checked {
    /// `check_params`: the parameter and verifying-key files of this
    /// proof's circuit, checked before its first use (blocking: a listed
    /// file is hashed the first time).
    pub fn check_params(&self) -> Result<(), Status> {
        let dir = &self.params_dir;
        let files = match &*self.input {
            Input::PorepC2(c1) => c1.param_files(dir),
            Input::SnapDeals(u) => u.param_files(dir),
            Input::Post(post) => post.param_files(dir),
        }
        .map_err(|e| status_of_filecoin(&e))?;
        check_param_files(&files.params)
    }
}

/// `check_params` for a preload (by registered proof, from a client or
/// Curio): a file of the Filecoin parameter cache is checked as a job's
/// would be; other parameter sets are not Filecoin's files.
pub async fn check_preload(
    config: &DaemonConfig,
    resolved: &super::request::Resolved,
) -> Result<(), Status> {
    let cuzk_engine::ParamsRef::File(path) = &resolved.params else {
        return Ok(());
    };
    if !config.check_params
        || resolved.file.is_some()
        || path.parent() != Some(config.filecoin_params_dir().as_path())
    {
        return Ok(());
    }
    let path = path.clone();
    super::service::blocking(move || check_param_files(&path)).await?
}

/// A `.params` file and the `.vk` beside it, each checked the first time
/// (`cuzk_filecoin::params_check::check_once`); a file that is not there
/// is left to the load, which says so.
fn check_param_files(params: &std::path::Path) -> Result<(), Status> {
    for path in [params.to_owned(), params.with_extension("vk")] {
        if !path.is_file() {
            continue;
        }
        if let Err(verdict) = cuzk_filecoin::params_check::check_once(&path) {
            return Err(Status::failed_precondition(format!(
                "check_params: {}: {verdict}; replace the file (fetch filecoin-proofs' \
                 parameters again, or run `cuzk setup` again for parameters made here) and \
                 retry; `cuzk params check` checks the whole directory",
                path.display()
            )));
        }
    }
    Ok(())
}
