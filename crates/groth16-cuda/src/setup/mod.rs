//! Groth16 parameter generation: the file bellperson 0.27's
//! `generate_parameters` would write for the same circuit and toxic waste,
//! byte for byte, with the query points computed on the GPU (or on the CPU
//! by the same algorithm).
//!
//! 1. [`evaluate_qap`] (CPU, rayon): the scalar of every point, from the
//!    circuit's PCE and tau (Lagrange basis at tau, per-variable sums over
//!    A, B and C, the h powers, the divisions by gamma and delta).
//! 2. Fixed-base multiplication of those scalars by the G1 and G2
//!    generators ([`GpuFixedBase`] or its CPU twin [`CpuFixedBase`]: a table
//!    of multiples of the generator, signed-digit windows, no doublings).
//! 3. Streaming output in bellperson's format: the points go to a writer
//!    thread chunk by chunk, in file order (verifying key with IC, then h,
//!    l, a, b_g1, b_g2), so the GPU computes one chunk while the CPU
//!    serialises and writes the previous one, and no section needs to fit in
//!    device memory at once. [`generate_parameters_file`] writes through a
//!    temporary file, so a failure leaves no partial file.
//!
//! What bellperson filters, this filters too: the A and B queries hold only
//! the points whose scalar is not zero (bellperson drops their identity
//! points), and an aux variable whose L scalar is zero is refused
//! ([`Groth16Error::UnconstrainedVariable`], bellperson's
//! `UnconstrainedVariable`).

mod fixed_base;
mod gpu;
mod qap;

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::time::Instant;

use bellperson::groth16::Parameters;
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cuzk_synth::Pce;
use ff::Field;
use group::prime::PrimeCurveAffine;
use group::{Curve, Group};
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};
use rayon::prelude::*;

pub use fixed_base::{
    CpuFixedBase, DEFAULT_WINDOW_BITS, WINDOW_BITS, build_table, cpu_window_bits, mul_with_table,
    signed_digits, table_len, windows,
};
pub use gpu::{GpuFixedBase, MAX_CHUNK};
pub use qap::{QapScalars, column_sums, evaluate_qap, lagrange_at};

use crate::params::write_atomically;
use crate::{Bls12, Groth16Error, Result};

/// The secrets of a Groth16 setup ("toxic waste") and the generators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ToxicWaste {
    pub g1: G1Projective,
    pub g2: G2Projective,
    pub alpha: Scalar,
    pub beta: Scalar,
    pub gamma: Scalar,
    pub delta: Scalar,
    pub tau: Scalar,
}

impl ToxicWaste {
    /// Draws everything from `rng` in the order bellperson's
    /// `generate_random_parameters` does (g1, g2, alpha, beta, gamma, delta,
    /// tau), so the same RNG state gives the same parameters as bellperson.
    pub fn random<R: RngCore>(rng: &mut R) -> Self {
        let g1 = G1Projective::random(&mut *rng);
        let g2 = G2Projective::random(&mut *rng);
        let alpha = Scalar::random(&mut *rng);
        let beta = Scalar::random(&mut *rng);
        let gamma = Scalar::random(&mut *rng);
        let delta = Scalar::random(&mut *rng);
        let tau = Scalar::random(&mut *rng);
        ToxicWaste {
            g1,
            g2,
            alpha,
            beta,
            gamma,
            delta,
            tau,
        }
    }

    /// [`ToxicWaste::random`] from `ChaCha20Rng::seed_from_u64(seed)`: what
    /// `cuzk setup --seed <seed>` uses, with or without `--gpu`.
    pub fn from_seed(seed: u64) -> Self {
        Self::random(&mut ChaCha20Rng::seed_from_u64(seed))
    }

    /// Refuses what bellperson's generator refuses or cannot use: gamma or
    /// delta zero (no inverse), and generators at infinity (every point
    /// would be the identity; bellperson then fails on the L query).
    pub fn check(&self) -> Result<()> {
        let bad = |what| Err(Groth16Error::DegenerateToxicWaste { what });
        if bool::from(self.gamma.is_zero()) {
            return bad("gamma is zero");
        }
        if bool::from(self.delta.is_zero()) {
            return bad("delta is zero");
        }
        if bool::from(self.g1.is_identity()) {
            return bad("the G1 generator is the identity");
        }
        if bool::from(self.g2.is_identity()) {
            return bad("the G2 generator is the identity");
        }
        Ok(())
    }
}

/// Where the fixed-base multiplications run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetupBackend {
    /// [`CpuFixedBase`] on all cores.
    Cpu,
    /// [`GpuFixedBase`] on the GPU of this ordinal.
    Gpu { ordinal: usize },
}

/// How to generate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetupOptions {
    pub backend: SetupBackend,
    /// Fixed-base window width, in [`WINDOW_BITS`]; `None`: on the GPU
    /// [`DEFAULT_WINDOW_BITS`], on the CPU the width that minimises table
    /// building plus additions for this circuit ([`cpu_window_bits`]).
    pub window_bits: Option<u32>,
    /// Scalars per chunk handed to the backend and to the writer; `None`:
    /// the GPU's own limit (memory), 2^16 on the CPU.
    pub chunk_len: Option<usize>,
}

impl SetupOptions {
    /// The CPU backend with default settings.
    pub fn cpu() -> Self {
        SetupOptions {
            backend: SetupBackend::Cpu,
            window_bits: None,
            chunk_len: None,
        }
    }

    /// GPU `ordinal` with default settings.
    pub fn gpu(ordinal: usize) -> Self {
        SetupOptions {
            backend: SetupBackend::Gpu { ordinal },
            window_bits: None,
            chunk_len: None,
        }
    }
}

/// One section of the file as it was produced.
#[derive(Clone, Debug, PartialEq)]
pub struct SectionReport {
    /// `ic`, `h`, `l`, `a`, `b_g1` or `b_g2`.
    pub name: &'static str,
    pub points: usize,
    /// Wall time of this section: its fixed-base multiplications (upload,
    /// kernels, download on the GPU) and any wait for the writer to take a
    /// chunk (when serialising and writing are slower than the GPU).
    pub compute_s: f64,
}

/// What a generation did and how long each stage took.
#[derive(Clone, Debug, PartialEq)]
pub struct SetupReport {
    /// `cpu` or `gpu <ordinal> (<name>)`.
    pub backend: String,
    pub window_bits: u32,
    /// Scalars per chunk.
    pub chunk_len: usize,
    pub num_constraints: usize,
    pub domain_log2: u32,
    pub num_inputs: usize,
    pub num_aux: usize,
    /// [`evaluate_qap`].
    pub qap_s: f64,
    /// Building (and on the GPU uploading) the generator tables.
    pub tables_s: f64,
    pub sections: Vec<SectionReport>,
    /// GPU time of the kernels (CUDA events); 0 on the CPU.
    pub kernel_s: f64,
    /// Time the writer thread spent serialising and writing.
    pub write_busy_s: f64,
    /// Time from the last point computed to the last byte written.
    pub write_tail_s: f64,
    /// Bytes written.
    pub bytes: u64,
    /// Everything, from the QAP to the last byte.
    pub total_s: f64,
}

/// Writes the parameters for the circuit recorded in `pce` and the toxic
/// waste `waste` to `out`, in bellperson's format. An error of `out` is
/// reported as [`Groth16Error::Write`] with a path of `<output stream>`.
pub fn write_parameters<W: Write + Send>(
    pce: &Pce,
    waste: &ToxicWaste,
    options: &SetupOptions,
    out: &mut W,
) -> Result<SetupReport> {
    generate(pce, waste, options, out).map_err(|e| match e {
        Failure::Setup(e) => e,
        Failure::Io(source) => Groth16Error::Write {
            path: PathBuf::from("<output stream>"),
            source,
        },
    })
}

/// [`write_parameters`] into the file `path`, through a temporary sibling
/// and a rename: on any error no file (and no partial file) is left.
pub fn generate_parameters_file(
    path: &Path,
    pce: &Pce,
    waste: &ToxicWaste,
    options: &SetupOptions,
) -> Result<SetupReport> {
    let mut outcome: Option<std::result::Result<SetupReport, Groth16Error>> = None;
    let written = write_atomically(path, |w: &mut BufWriter<File>| {
        match generate(pce, waste, options, w) {
            Ok(report) => {
                outcome = Some(Ok(report));
                Ok(())
            }
            Err(Failure::Io(e)) => Err(e),
            Err(Failure::Setup(e)) => {
                outcome = Some(Err(e));
                Err(io::Error::other("parameter generation failed"))
            }
        }
    });
    match (outcome, written) {
        (Some(Err(e)), _) => Err(e),
        (_, Err(e)) => Err(e),
        (Some(Ok(report)), Ok(())) => Ok(report),
        (None, Ok(())) => Err(Groth16Error::Write {
            path: path.to_owned(),
            source: io::Error::other("the generator did not run"),
        }),
    }
}

/// The parameters in memory (written to a buffer and read back unchecked:
/// for small circuits and tests).
pub fn generate_parameters(
    pce: &Pce,
    waste: &ToxicWaste,
    options: &SetupOptions,
) -> Result<Parameters<Bls12>> {
    let mut bytes = Vec::new();
    write_parameters(pce, waste, options, &mut bytes)?;
    Parameters::read(&bytes[..], false).map_err(|e| Groth16Error::ParamsCorrupt {
        path: PathBuf::from("<generated parameters>"),
        section: "any",
        detail: e.to_string(),
    })
}

/// Why a generation stopped: its own error, or the output's.
enum Failure {
    Setup(Groth16Error),
    Io(io::Error),
}

impl From<Groth16Error> for Failure {
    fn from(e: Groth16Error) -> Self {
        Failure::Setup(e)
    }
}

/// A piece of the file, in order.
enum Piece {
    Bytes(Vec<u8>),
    G1(Vec<G1Affine>),
    G2(Vec<G2Affine>),
}

/// Pieces waiting for the writer: bounds host memory to a few chunks.
const QUEUE: usize = 2;
/// Scalars per chunk on the CPU backend.
const CPU_CHUNK: usize = 1 << 16;
/// Points serialised per parallel task.
const SERIALIZE_TASK: usize = 1 << 12;

/// The fixed-base backend behind [`SetupBackend`].
enum Engine {
    Cpu(CpuFixedBase),
    Gpu(Box<GpuFixedBase>),
}

impl Engine {
    fn g1(&mut self, scalars: &[Scalar]) -> Result<Vec<G1Affine>> {
        match self {
            Engine::Cpu(cpu) => Ok(cpu.g1(scalars)),
            Engine::Gpu(gpu) => gpu.g1(scalars),
        }
    }

    fn g2(&mut self, scalars: &[Scalar]) -> Result<Vec<G2Affine>> {
        match self {
            Engine::Cpu(cpu) => Ok(cpu.g2(scalars)),
            Engine::Gpu(gpu) => gpu.g2(scalars),
        }
    }
}

/// Sends pieces to the writer; a closed channel means the writer failed,
/// and its error is the one reported.
struct Sink<'a> {
    tx: SyncSender<Piece>,
    bytes: &'a mut u64,
}

impl Sink<'_> {
    fn send(&mut self, piece: Piece) -> std::result::Result<(), WriterGone> {
        *self.bytes += match &piece {
            Piece::Bytes(b) => b.len() as u64,
            Piece::G1(p) => (p.len() * G1_BYTES) as u64,
            Piece::G2(p) => (p.len() * G2_BYTES) as u64,
        };
        self.tx.send(piece).map_err(|_| WriterGone)
    }
}

struct WriterGone;

const G1_BYTES: usize = 96;
const G2_BYTES: usize = 192;

fn generate<W: Write + Send>(
    pce: &Pce,
    waste: &ToxicWaste,
    options: &SetupOptions,
    out: &mut W,
) -> std::result::Result<SetupReport, Failure> {
    let _s = tracing::info_span!("setup", constraints = pce.num_constraints()).entered();
    let start = Instant::now();
    waste.check()?;
    if let Some(c) = options.window_bits {
        fixed_base::check_window_bits(c)?;
    }
    let (tx, rx) = sync_channel::<Piece>(QUEUE);
    let mut bytes = 0u64;
    let (produced, written) = std::thread::scope(|scope| {
        let writer = scope.spawn(move || write_pieces(rx, out));
        let produced = produce(
            pce,
            waste,
            options,
            Sink {
                tx,
                bytes: &mut bytes,
            },
        );
        let last_point = Instant::now();
        let written = writer
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the writer thread panicked")));
        (
            produced.map(|r| (r, last_point.elapsed().as_secs_f64())),
            written,
        )
    });
    // The writer's error explains a producer that stopped because the
    // writer went away, so it comes first.
    let write_busy_s = written.map_err(Failure::Io)?;
    let (mut report, write_tail_s) = match produced {
        Ok((Ok(report), tail)) => (report, tail),
        Ok((Err(WriterGone), _)) => {
            return Err(Failure::Io(io::Error::other(
                "the writer stopped before the end",
            )));
        }
        Err(e) => return Err(Failure::Setup(e)),
    };
    report.write_busy_s = write_busy_s;
    report.write_tail_s = write_tail_s;
    report.bytes = bytes;
    report.total_s = start.elapsed().as_secs_f64();
    Ok(report)
}

/// The writer thread: serialises points (in parallel) and writes pieces in
/// order until the channel closes. Returns its busy time.
fn write_pieces<W: Write>(rx: Receiver<Piece>, out: &mut W) -> io::Result<f64> {
    let mut busy = 0.0;
    let mut buf = Vec::new();
    for piece in rx {
        let t = Instant::now();
        match piece {
            Piece::Bytes(b) => out.write_all(&b)?,
            Piece::G1(points) => {
                serialize(&points, G1_BYTES, &mut buf, |p| p.to_uncompressed());
                out.write_all(&buf)?;
            }
            Piece::G2(points) => {
                serialize(&points, G2_BYTES, &mut buf, |p| p.to_uncompressed());
                out.write_all(&buf)?;
            }
        }
        busy += t.elapsed().as_secs_f64();
    }
    out.flush()?;
    Ok(busy)
}

fn serialize<P: Sync, const N: usize>(
    points: &[P],
    size: usize,
    buf: &mut Vec<u8>,
    encode: impl Fn(&P) -> [u8; N] + Sync,
) {
    debug_assert_eq!(size, N);
    buf.clear();
    buf.resize(points.len() * N, 0);
    buf.par_chunks_mut(SERIALIZE_TASK * N)
        .zip(points.par_chunks(SERIALIZE_TASK))
        .for_each(|(bytes, points)| {
            for (b, p) in bytes.chunks_exact_mut(N).zip(points) {
                b.copy_from_slice(&encode(p));
            }
        });
}

/// Everything but the writing: tables (first, so a missing GPU fails fast),
/// QAP, then every section's points in
/// file order. The outer error is the generator's; the inner one says the
/// writer went away (its own error is reported instead).
fn produce(
    pce: &Pce,
    waste: &ToxicWaste,
    options: &SetupOptions,
    mut sink: Sink<'_>,
) -> Result<std::result::Result<SetupReport, WriterGone>> {
    // The GPU first, so a missing one fails before the CPU work.
    let t = Instant::now();
    let gpu = match options.backend {
        SetupBackend::Gpu { ordinal } => {
            let c = options.window_bits.unwrap_or(DEFAULT_WINDOW_BITS);
            let mut gpu = GpuFixedBase::new(ordinal, &waste.g1, &waste.g2, c)?;
            if let Some(len) = options.chunk_len {
                let own = gpu.chunk_len();
                gpu = gpu.with_chunk_len(len.min(own));
            }
            Some(gpu)
        }
        SetupBackend::Cpu => None,
    };
    let mut tables_s = t.elapsed().as_secs_f64();

    let t = Instant::now();
    let qap = evaluate_qap(pce, waste)?;
    let qap_s = t.elapsed().as_secs_f64();

    let t = Instant::now();
    let (mut engine, backend, chunk, c) = match gpu {
        Some(gpu) => {
            let name = format!("gpu {} ({})", gpu.gpu().ordinal(), gpu.gpu().name());
            let (len, c) = (gpu.chunk_len(), gpu.window_bits());
            (Engine::Gpu(Box::new(gpu)), name, len, c)
        }
        None => {
            let g1_points = qap.total_points() - qap.b.len();
            let c = options
                .window_bits
                .unwrap_or_else(|| cpu_window_bits(g1_points, qap.b.len()));
            (
                Engine::Cpu(CpuFixedBase::new(&waste.g1, &waste.g2, c)?),
                "cpu".to_owned(),
                options.chunk_len.unwrap_or(CPU_CHUNK).max(1),
                c,
            )
        }
    };
    tables_s += t.elapsed().as_secs_f64();

    let mut report = SetupReport {
        backend,
        window_bits: c,
        chunk_len: chunk,
        num_constraints: pce.num_constraints(),
        domain_log2: qap.domain_log2,
        num_inputs: pce.num_inputs,
        num_aux: pce.num_aux,
        qap_s,
        tables_s,
        sections: Vec::new(),
        kernel_s: 0.0,
        write_busy_s: 0.0,
        write_tail_s: 0.0,
        bytes: 0,
        total_s: 0.0,
    };
    let QapScalars { ic, h, l, a, b, .. } = qap;

    // The verifying key, IC included, opens the file.
    let t = Instant::now();
    let ic_points = engine.g1(&ic)?;
    report.sections.push(SectionReport {
        name: "ic",
        points: ic.len(),
        compute_s: t.elapsed().as_secs_f64(),
    });
    drop(ic);
    let (g1, g2) = (waste.g1.to_affine(), waste.g2.to_affine());
    let mut vk = Vec::with_capacity(3 * G1_BYTES + 3 * G2_BYTES + 4);
    vk.extend_from_slice(&(g1 * waste.alpha).to_affine().to_uncompressed());
    vk.extend_from_slice(&(g1 * waste.beta).to_affine().to_uncompressed());
    vk.extend_from_slice(&(g2 * waste.beta).to_affine().to_uncompressed());
    vk.extend_from_slice(&(g2 * waste.gamma).to_affine().to_uncompressed());
    vk.extend_from_slice(&(g1 * waste.delta).to_affine().to_uncompressed());
    vk.extend_from_slice(&(g2 * waste.delta).to_affine().to_uncompressed());
    vk.extend_from_slice(&count("ic", ic_points.len())?);
    if sink.send(Piece::Bytes(vk)).is_err() || sink.send(Piece::G1(ic_points)).is_err() {
        return Ok(Err(WriterGone));
    }

    let sections: [(&'static str, Vec<Scalar>, bool); 4] = [
        ("h", h, false),
        ("l", l, true),
        ("a", a, true),
        ("b_g1", b, true),
    ];
    let mut b_scalars = Vec::new();
    for (name, scalars, nonzero) in sections {
        let t = Instant::now();
        if sink
            .send(Piece::Bytes(count(name, scalars.len())?.to_vec()))
            .is_err()
        {
            return Ok(Err(WriterGone));
        }
        for (i, part) in scalars.chunks(chunk).enumerate() {
            let points = engine.g1(part)?;
            if nonzero {
                check_not_identity(name, i * chunk, &points)?;
            }
            if sink.send(Piece::G1(points)).is_err() {
                return Ok(Err(WriterGone));
            }
        }
        report.sections.push(SectionReport {
            name,
            points: scalars.len(),
            compute_s: t.elapsed().as_secs_f64(),
        });
        if name == "b_g1" {
            b_scalars = scalars;
        }
    }

    let t = Instant::now();
    if sink
        .send(Piece::Bytes(count("b_g2", b_scalars.len())?.to_vec()))
        .is_err()
    {
        return Ok(Err(WriterGone));
    }
    for (i, part) in b_scalars.chunks(chunk).enumerate() {
        let points = engine.g2(part)?;
        check_not_identity("b_g2", i * chunk, &points)?;
        if sink.send(Piece::G2(points)).is_err() {
            return Ok(Err(WriterGone));
        }
    }
    report.sections.push(SectionReport {
        name: "b_g2",
        points: b_scalars.len(),
        compute_s: t.elapsed().as_secs_f64(),
    });
    if let Engine::Gpu(gpu) = &engine {
        report.kernel_s = gpu.kernel_ms() / 1e3;
    }
    Ok(Ok(report))
}

/// A section's u32 count, big-endian.
fn count(section: &'static str, n: usize) -> Result<[u8; 4]> {
    u32::try_from(n)
        .map(u32::to_be_bytes)
        .map_err(|_| Groth16Error::SetupTooLarge { section, points: n })
}

/// A nonzero scalar times a generator of prime order is never the identity;
/// one that is means the multiplication is broken, and the file would be
/// shorter than the circuit needs.
fn check_not_identity<P: PrimeCurveAffine + Sync>(
    query: &'static str,
    offset: usize,
    points: &[P],
) -> Result<()> {
    match points
        .par_iter()
        .position_first(|p| bool::from(p.is_identity()))
    {
        Some(i) => Err(Groth16Error::SetupIdentity {
            query,
            index: offset + i,
        }),
        None => Ok(()),
    }
}
