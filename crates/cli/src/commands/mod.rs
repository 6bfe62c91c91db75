//! The commands that go through the daemon or run the engine in process:
//! `daemon`, `prove --daemon`, `bench`, `status`, `devices`, `timeline`,
//! `params` (`params check` reads a parameter directory, no daemon). Each
//! takes its clap arguments and prints for a person, or JSON with `--json`.

mod bench;
mod daemon_cmd;
mod info;
mod params_check;
mod prove;

use std::path::Path;

use anyhow::{Context, Result, bail};
use bellperson::groth16::{PreparedVerifyingKey, Proof, prepare_verifying_key, verify_proof};
use cuzk_engine::{Priority, Span, Timeline, TimelineData};
use cuzk_groth16_cuda::{Bls12, StageTimings};
use cuzk_synth::Witness;
use cuzk_synth::circuits::CircuitSpec;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub use bench::{BenchArgs, bench};
pub use daemon_cmd::{DaemonArgs, daemon};
pub use info::{
    DevicesArgs, ParamsAction, ParamsArgs, StatusArgs, TimelineArgs, devices, params, status,
    timeline,
};
pub use params_check::{ParamsCheckArgs, params_check};
pub use prove::{RemoteProve, prove_remote};

use crate::daemon::Address;
use crate::proto;

/// `--daemon ADDR`: where the daemon is.
#[derive(Debug, Clone, clap::Args)]
pub struct DaemonAddr {
    /// The daemon's address: a Unix socket path (`unix:PATH` or a path) or
    /// `127.0.0.1:PORT`. Default: `$CUZK_DAEMON`, else
    /// `$XDG_RUNTIME_DIR/cuzk.sock`, else `/tmp/cuzk-<uid>/cuzk.sock`.
    #[arg(long = "daemon", value_name = "ADDR")]
    pub daemon: Option<Address>,
}

impl DaemonAddr {
    pub fn address(&self) -> Address {
        self.daemon
            .clone()
            .unwrap_or_else(crate::daemon::default_address)
    }
}

/// Priority names on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PriorityArg {
    Low,
    Normal,
    High,
    Critical,
}

impl From<PriorityArg> for Priority {
    fn from(p: PriorityArg) -> Self {
        match p {
            PriorityArg::Low => Priority::Low,
            PriorityArg::Normal => Priority::Normal,
            PriorityArg::High => Priority::High,
            PriorityArg::Critical => Priority::Critical,
        }
    }
}

/// A multi-threaded runtime for a command.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// A progress bar over `len` proofs on stderr (drawn only on a terminal,
/// never with `--json`).
pub fn proof_bar(len: u64, json: bool) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(
        Some(len),
        if json {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr()
        },
    );
    if let Ok(style) = ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} proofs {msg}",
    ) {
        bar.set_style(style);
    }
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar
}

/// Parameters named on a command line: a file the client can read, or a
/// set the daemon knows by name.
pub fn params_spec(path: Option<&Path>, name: Option<&str>) -> Result<proto::ParamsSpec> {
    use proto::params_spec::Source;
    let source = match (path, name) {
        (Some(p), None) => {
            // The daemon resolves paths itself: send an absolute one.
            let abs = std::path::absolute(p)
                .with_context(|| format!("parameter path {}", p.display()))?;
            Source::Path(abs.to_string_lossy().into_owned())
        }
        (None, Some(n)) => Source::Name(n.to_owned()),
        (Some(_), Some(_)) => bail!("give --params or --params-set, not both"),
        (None, None) => bail!("give --params FILE or --params-set NAME"),
    };
    Ok(proto::ParamsSpec {
        source: Some(source),
    })
}

/// Checks proofs against a verifying key read from a local file.
pub struct Verifier {
    pvk: PreparedVerifyingKey<Bls12>,
    spec: CircuitSpec,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

impl Verifier {
    /// `None` (with a warning) for fake parameters, which nothing verifies.
    pub fn from_file(path: &Path, spec: &CircuitSpec) -> Result<Option<Self>> {
        let vk = cuzk_groth16_cuda::read_verifying_key(path)?;
        if cuzk_groth16_cuda::fake::is_fake(&vk) {
            eprintln!(
                "WARNING: {} holds FAKE parameters (cuzk setup --fake): proofs are made for \
                 timing but can NEVER verify; not verifying",
                path.display()
            );
            return Ok(None);
        }
        Ok(Some(Verifier {
            pvk: prepare_verifying_key(&vk),
            spec: spec.clone(),
        }))
    }

    /// A verifier of parameters held in memory.
    pub fn from_vk(vk: &bellperson::groth16::VerifyingKey<Bls12>, spec: &CircuitSpec) -> Self {
        Verifier {
            pvk: prepare_verifying_key(vk),
            spec: spec.clone(),
        }
    }

    /// Checks one proof's bytes for the circuit built from `witness_seed`.
    pub fn check(&self, bytes: &[u8], witness_seed: u64) -> Result<()> {
        let proof = proof_from_bytes(bytes)?;
        let witness = Witness::synthesize(self.spec.build(witness_seed))?;
        if !verify_proof(&self.pvk, &proof, witness.public_inputs())? {
            bail!(
                "the proof of {} with witness seed {witness_seed} does NOT verify",
                self.spec
            );
        }
        Ok(())
    }
}

pub fn proof_from_bytes(bytes: &[u8]) -> Result<Proof<Bls12>> {
    if bytes.len() != 192 {
        bail!(
            "a proof has {} bytes; a Groth16 proof over BLS12-381 has 192",
            bytes.len()
        );
    }
    Proof::read(bytes).context("the proof does not hold valid curve points")
}

/// Writes `bytes` to `path` through a temporary file and a rename, so a
/// reader never sees a partial file.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    cuzk_groth16_cuda::write_atomically(path, |w| std::io::Write::write_all(w, bytes))?;
    Ok(())
}

/// Writes a Chrome trace of `data` to `path`.
pub fn write_trace(path: &Path, data: &TimelineData) -> Result<()> {
    write_file(path, data.chrome_trace().to_string().as_bytes())
        .with_context(|| format!("writing the timeline to {}", path.display()))
}

/// The timeline of one in-process proof: its stages laid end to end on the
/// host, as `cuzk prove --timeline` writes it.
pub fn stage_timeline(timings: &StageTimings) -> TimelineData {
    let timeline = Timeline::new(timings.0.len().max(1));
    let mut at = 0u64;
    for (stage, d) in &timings.0 {
        let end = at + d.as_micros() as u64;
        timeline.record(Span {
            job: 0,
            partition: 0,
            worker: 0,
            lane: cuzk_engine::Lane::Device(0),
            stage,
            start_us: at,
            end_us: end,
            depth: 0,
            note: None,
        });
        at = end;
    }
    timeline.snapshot()
}
