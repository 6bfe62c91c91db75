//! The backend trait, its inputs and outputs, and the proof assembly that
//! every backend shares.

use std::any::Any;
use std::fmt;
use std::time::Duration;

use bellperson::groth16::{Parameters, Proof, VerifyingKey};
use blstrs::{G1Projective, G2Projective, Scalar};
use cuzk_synth::{Pce, Witness};
use group::Curve;
use group::prime::PrimeCurveAffine;

use crate::{Bls12, Groth16Error, Result};

/// Where a backend gets a = A·w, b = B·w and c = C·w from.
#[derive(Clone, Copy, Debug)]
pub enum AbcInput<'a> {
    /// Already evaluated (and checked) by the caller, one element per constraint.
    Evaluated {
        a: &'a [Scalar],
        b: &'a [Scalar],
        c: &'a [Scalar],
    },
    /// The backend evaluates them from the PCE and the witness, and checks
    /// that the witness satisfies every constraint.
    FromPce,
}

/// Everything a backend needs about one circuit instance.
#[derive(Clone, Copy, Debug)]
pub struct ProverInput<'a> {
    /// The recorded shape: sizes and densities, and the matrices for
    /// [`AbcInput::FromPce`].
    pub pce: &'a Pce,
    /// Inputs (ONE first) and aux values.
    pub witness: &'a Witness,
    pub abc: AbcInput<'a>,
}

/// Time per stage of one proof, in the order the stages ran: `.0` the
/// wall-clock time of each host-side stage, `.1` (GPU backends only) the
/// GPU time of each device stage as CUDA events in the stream measured it,
/// `.2` totals of work that overlapped those stages (e.g. "streamed h2d":
/// the copies of streamed parameters, under the MSMs), with a note saying
/// what they amount to.
#[derive(Clone, Debug, Default)]
pub struct StageTimings(
    pub Vec<(&'static str, Duration)>,
    pub Vec<(&'static str, Duration)>,
    pub Vec<(&'static str, Duration, String)>,
);

impl StageTimings {
    /// Records a total of overlapping work ([`StageTimings`]' `.2`).
    pub fn push_overlapped(&mut self, what: &'static str, d: Duration, note: String) {
        self.2.push((what, d, note));
    }

    /// The totals of overlapping work.
    pub fn overlapped(&self) -> &[(&'static str, Duration, String)] {
        &self.2
    }

    /// Records `stage` as having taken `d` of GPU time.
    pub fn push_gpu(&mut self, stage: &'static str, d: Duration) {
        self.1.push((stage, d));
    }

    /// The GPU time per device stage (empty for CPU backends).
    pub fn gpu(&self) -> &[(&'static str, Duration)] {
        &self.1
    }

    /// Records `stage` as having taken `d`.
    pub fn push(&mut self, stage: &'static str, d: Duration) {
        self.0.push((stage, d));
    }

    /// Runs `f`, recording its wall-clock time as `stage`.
    pub fn time<T>(&mut self, stage: &'static str, f: impl FnOnce() -> T) -> T {
        let start = std::time::Instant::now();
        let out = f();
        self.push(stage, start.elapsed());
        out
    }

    /// Sum of all stages.
    pub fn total(&self) -> Duration {
        self.0.iter().map(|(_, d)| *d).sum()
    }
}

impl fmt::Display for StageTimings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (stage, d) in &self.0 {
            writeln!(f, "  {stage:<12} {:>10.3} ms", d.as_secs_f64() * 1e3)?;
        }
        Ok(())
    }
}

/// A proof and how long each stage of making it took.
#[derive(Clone, Debug)]
pub struct ProofOutput {
    pub proof: Proof<Bls12>,
    pub timings: StageTimings,
}

/// What a backend's [`Prover::prepare`] hands to its
/// [`Prover::kernel_region`]: host or device state staged outside the lock
/// (a/b/c the backend evaluated itself, buffers already uploaded). Opaque to
/// callers; a backend downcasts its own type.
#[derive(Default)]
pub struct Staged {
    state: Option<Box<dyn Any + Send>>,
    holds_witness: bool,
}

impl Staged {
    /// Wraps a backend's staged state.
    pub fn new<T: Any + Send>(state: T) -> Self {
        Staged {
            state: Some(Box::new(state)),
            holds_witness: false,
        }
    }

    /// Wraps a backend's staged state that holds its own copy of the
    /// witness (uploaded to the device): its
    /// [`kernel_region`](Prover::kernel_region) reads nothing of
    /// `input.witness`, so the caller may free the witness (gigabytes for a
    /// large partition) and pass an empty one.
    pub fn holding_witness<T: Any + Send>(state: T) -> Self {
        Staged {
            state: Some(Box::new(state)),
            holds_witness: true,
        }
    }

    /// Whether the kernel region does without `input.witness`
    /// ([`Staged::holding_witness`]).
    pub fn holds_witness(&self) -> bool {
        self.holds_witness
    }

    /// The state, if it is a `T`.
    pub fn take<T: Any>(self) -> Option<T> {
        self.state.and_then(|b| b.downcast::<T>().ok()).map(|b| *b)
    }
}

impl fmt::Debug for Staged {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match (&self.state, self.holds_witness) {
            (Some(_), false) => "Staged(..)",
            (Some(_), true) => "Staged(.., holds the witness)",
            (None, _) => "Staged(none)",
        })
    }
}

/// Where a backend evaluates a/b/c = A·w, B·w, C·w for a circuit shape, with
/// the reason, for the engine's timeline and status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AbcPlacement {
    /// On the backend's device from a resident PCE (else SpMV on the host).
    pub on_device: bool,
    /// Why, in words an operator reads in a status report.
    pub reason: String,
    /// On the host only for want of free device memory: device memory
    /// held across proofs that no job uses might make room
    /// ([`Prover::release_idle`]).
    pub short_of_room: bool,
}

impl AbcPlacement {
    /// On the device, because of `reason`.
    pub fn device(reason: impl Into<String>) -> Self {
        AbcPlacement {
            on_device: true,
            reason: reason.into(),
            short_of_room: false,
        }
    }

    /// On the host, because of `reason`.
    pub fn host(reason: impl Into<String>) -> Self {
        AbcPlacement {
            on_device: false,
            reason: reason.into(),
            short_of_room: false,
        }
    }

    /// On the host for want of free device memory ([`Self::short_of_room`]).
    pub fn host_short_of_room(reason: impl Into<String>) -> Self {
        AbcPlacement {
            short_of_room: true,
            ..Self::host(reason)
        }
    }
}

/// A Groth16 backend: same inputs, same bytes as bellperson's `create_proof`.
///
/// The work is split as design.md's steps are, so a scheduler can hold a
/// device lock only around [`kernel_region`](Prover::kernel_region):
/// [`prepare`](Prover::prepare) (outside any lock), the kernel region (H and
/// the five MSMs), and the epilogue [`assemble`] (outside the lock, CPU).
/// [`prove`](Prover::prove) runs all three.
pub trait Prover: Send + Sync + fmt::Debug {
    /// Short name for logs and reports ("cpu", "cuda").
    fn name(&self) -> &'static str;

    /// Device memory each partition of this shape in flight holds (from
    /// prepare to the end of its kernel region) beyond resident parameters
    /// and [`shared_device_bytes`](Prover::shared_device_bytes), for the
    /// scheduler's per-partition reservations; 0 for CPU backends.
    fn device_bytes(&self, pce: &Pce) -> u64 {
        let _ = pce;
        0
    }

    /// Device memory the prover holds once for proofs of this shape,
    /// however many partitions are in flight (the GPU backend: MSM scratch,
    /// NTT twiddles, streamed chunk buffers; kept across proofs and grown
    /// to the largest shape); the engine keeps it as a standing
    /// reservation on each device. 0 for CPU backends.
    fn shared_device_bytes(&self, pce: &Pce) -> u64 {
        let _ = pce;
        0
    }

    /// Where a/b/c are evaluated for this shape, and why: on the device
    /// when [`prepare`](Prover::prepare) evaluates (and checks) them there
    /// from the PCE given [`AbcInput::FromPce`], so the caller need not;
    /// else on the host. On the host by default.
    fn abc_placement(&self, pce: &Pce) -> AbcPlacement {
        let _ = pce;
        AbcPlacement::host(format!(
            "the {} backend takes a/b/c evaluated on the host",
            self.name()
        ))
    }

    /// Frees what the backend keeps for parameter sets that nobody holds
    /// any more (the GPU backend: their device copies); returns the bytes
    /// freed. The engine calls it after evicting a set; a backend also
    /// frees them before it next uploads a set. Nothing by default.
    fn release_unused(&self) -> u64 {
        0
    }

    /// Device memory the prover holds now across proofs beyond
    /// [`shared_device_bytes`](Prover::shared_device_bytes): resident
    /// parameter copies, circuit matrices (PCEs) and per-shape tables on
    /// the device. The engine keeps a standing reservation of this size per
    /// device, brought up to date after each phase and each eviction. 0 by
    /// default.
    fn held_device_bytes(&self) -> u64 {
        0
    }

    /// Frees everything kept across proofs that no proof is using now:
    /// what [`release_unused`](Prover::release_unused) frees, and resident
    /// parameter copies (even of sets still held), circuit matrices and
    /// per-shape tables (made again by the next proof that needs them). The
    /// engine calls it when asked to free everything idle, and when held
    /// memory keeps the next partition from starting on an idle device.
    /// Returns the bytes freed; `release_unused` by default.
    fn release_idle(&self) -> u64 {
        self.release_unused()
    }

    /// Whether the backend keeps `pce`'s matrices on its device now (put
    /// there by a [`prepare`](Prover::prepare) given
    /// [`AbcInput::FromPce`]), so proofs of its shape read no matrices from
    /// the host PCE: the engine may then release them from host memory
    /// ([`Pce::release_matrices`]). A backend that later needs them again
    /// (after freeing its copy) reads them through [`Pce::with_matrices`].
    /// False by default.
    fn holds_pce(&self, pce: &Pce) -> bool {
        let _ = pce;
        false
    }

    /// Whether [`abc_placement`](Prover::abc_placement) is on the device.
    fn evaluates_abc(&self, pce: &Pce) -> bool {
        self.abc_placement(pce).on_device
    }

    /// Outside any lock: checks the parameters and the witness against the
    /// PCE and stages what the kernel region needs.
    fn prepare(
        &self,
        input: ProverInput<'_>,
        params: &Parameters<Bls12>,
        timings: &mut StageTimings,
    ) -> Result<Staged>;

    /// The kernel region: H and the five MSMs.
    fn kernel_region(
        &self,
        input: ProverInput<'_>,
        params: &Parameters<Bls12>,
        staged: Staged,
        timings: &mut StageTimings,
    ) -> Result<MsmResults>;

    /// Proves one circuit instance with the randomness r and s: prepare, the
    /// kernel region, then [`assemble`].
    fn prove(
        &self,
        input: ProverInput<'_>,
        params: &Parameters<Bls12>,
        r: Scalar,
        s: Scalar,
    ) -> Result<ProofOutput> {
        let mut timings = StageTimings::default();
        let staged = self.prepare(input, params, &mut timings)?;
        let msm = self.kernel_region(input, params, staged, &mut timings)?;
        let start = std::time::Instant::now();
        let proof = assemble(&params.vk, &msm, r, s)?;
        timings.push("assemble", start.elapsed());
        Ok(ProofOutput { proof, timings })
    }
}

/// The five multi-scalar multiplications of a proof, each over the whole
/// query (inputs and aux together where the query has both).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsmResults {
    /// sum h_i·H_i
    pub h: G1Projective,
    /// sum aux_i·L_i
    pub l: G1Projective,
    /// sum w_i·A_i over the dense A query
    pub a: G1Projective,
    /// sum w_i·B_i over the dense B query, in G1
    pub b_g1: G1Projective,
    /// sum w_i·B_i over the dense B query, in G2
    pub b_g2: G2Projective,
}

/// The epilogue: the proof from the MSM results and r, s.
///
/// g_a = α + A + r·δ;  g_b = β + B2 + s·δ;
/// g_c = s·A + r·B1 + s·α + r·β + r·s·δ + H + L (α, β, δ in the group of each term).
pub fn assemble(
    vk: &VerifyingKey<Bls12>,
    msm: &MsmResults,
    r: Scalar,
    s: Scalar,
) -> Result<Proof<Bls12>> {
    if bool::from(vk.delta_g1.is_identity() | vk.delta_g2.is_identity()) {
        return Err(Groth16Error::DegenerateParams);
    }
    let g_a = vk.delta_g1 * r + vk.alpha_g1 + msm.a;
    let g_b = vk.delta_g2 * s + vk.beta_g2 + msm.b_g2;
    let g_c = msm.a * s
        + msm.b_g1 * r
        + vk.delta_g1 * (r * s)
        + vk.alpha_g1 * s
        + vk.beta_g1 * r
        + msm.h
        + msm.l;
    Ok(Proof {
        a: g_a.to_affine(),
        b: g_b.to_affine(),
        c: g_c.to_affine(),
    })
}
