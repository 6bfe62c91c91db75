//! a = A·w, b = B·w, c = C·w on the GPU (PTX module `spmv`) from a PCE
//! resident in device memory, so a proof uploads its witness instead of
//! a, b and c (a third of the bytes), and the CPU skips its SpMV.
//!
//! [`DevicePce::upload`] lays the matrices out once per circuit shape
//! ([`layout`]: u32 row pointers, one 32-bit word per ±1 entry and two per
//! other coefficient, the coefficient table in Montgomery form) and
//! [`GpuSpmv::evaluate`] computes a, b, c of the domain size m, zero-padded
//! past the constraints, exactly as [`crate::GpuNtt::compute_h`] reads them.
//! The results equal `cuzk_synth::spmv` bit for bit: field arithmetic is
//! exact, so any order of the additions gives the same canonical bytes.
//! [`GpuSpmv::first_unsatisfied`] is the GPU twin of
//! `cuzk_synth::check_satisfied`.
//!
//! Sizes, for reservations before anything is allocated: [`device_bytes`]
//! (the resident PCE) and [`abc_bytes`] (one proof's a, b, c).

pub mod layout;

use std::sync::{Arc, Mutex, PoisonError};

use blstrs::Scalar;
use cuzk_synth::{Csr, Pce};

use crate::cuda::{DeviceBuffer, Gpu, grid_1d};
use crate::{Groth16Error, Result};
use layout::{LONG_BLOCK_THREADS, MatrixSize, SHORT_MAX_WORDS, WARP_THREADS};

/// The PTX module's name.
const MODULE: &str = "spmv";
/// Threads per block of the one-thread-per-row and check kernels.
const ROW_THREADS: u32 = 256;

/// Identifies a PCE by content, for caches of [`DevicePce`]: its counts and
/// a 64-bit fingerprint of its row pointers, columns, coefficient indices
/// and coefficient table. Computing it reads the whole PCE (in parallel),
/// as packing does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PceShapeKey {
    pub num_inputs: usize,
    pub num_aux: usize,
    /// Constraints (rows of A).
    pub rows: usize,
    /// Stored entries of A, B, C.
    pub nnz: [usize; 3],
    /// Entries of the coefficient table.
    pub coefficients: usize,
    pub fingerprint: u64,
}

impl PceShapeKey {
    /// The key of `pce` (its fingerprint is computed once per `Pce` value
    /// and kept with it: [`Pce::fingerprint`]).
    pub fn of(pce: &Pce) -> Self {
        PceShapeKey {
            num_inputs: pce.num_inputs,
            num_aux: pce.num_aux,
            rows: pce.num_constraints(),
            nnz: pce.nnz(),
            coefficients: pce.coeff_table.len(),
            fingerprint: pce.fingerprint(),
        }
    }
}

/// One matrix in device memory (see [`layout`]).
#[derive(Debug)]
struct DeviceMatrix {
    row_ptr: DeviceBuffer<u32>,
    words: DeviceBuffer<u32>,
    warp_rows: DeviceBuffer<u32>,
    block_rows: DeviceBuffer<u32>,
    size: MatrixSize,
}

/// A PCE's matrices and coefficient table resident on one GPU, uploaded once
/// per circuit shape ([`DevicePce::upload`]) and read by every proof of that
/// shape. Cache it by [`DevicePce::key`]; reserve [`device_bytes`] before
/// uploading.
#[derive(Debug)]
pub struct DevicePce {
    key: PceShapeKey,
    num_inputs: usize,
    num_aux: usize,
    rows: usize,
    table: DeviceBuffer<Scalar>,
    /// A, B, C.
    matrices: [DeviceMatrix; 3],
}

fn bad(detail: String) -> Groth16Error {
    Groth16Error::Spmv { detail }
}

/// Checks what the layout needs of the PCE as a whole: A, B and C with the
/// same number of rows, and sizes within the layout's limits.
fn check_pce(pce: &Pce) -> Result<()> {
    let rows = pce.num_constraints();
    for (what, m) in [("B", &pce.b), ("C", &pce.c)] {
        if m.row_ptr.len() != pce.a.row_ptr.len() {
            return Err(bad(format!(
                "matrix {what} has {} row pointers and A {}: the matrices must have one row per \
                 constraint each",
                m.row_ptr.len(),
                pce.a.row_ptr.len()
            )));
        }
    }
    layout::check_limits(rows, columns(pce), pce.coeff_table.len())
}

fn columns(pce: &Pce) -> usize {
    pce.num_inputs + pce.num_aux
}

/// Bytes of device memory [`DevicePce::upload`] will allocate for `pce`:
/// the coefficient table and, per matrix, its row pointers, words and lists
/// of long rows. Reads the row pointers and coefficient indices (in
/// parallel) and keeps the figure by the PCE's [`PceShapeKey`], so a PCE
/// whose matrices were released from host memory
/// ([`Pce::release_matrices`]) gets the figure of its whole self; one never
/// measured whole gets an estimate from its counts. For a PCE the layout
/// refuses, an estimate of the same order.
pub fn device_bytes(pce: &Pce) -> u64 {
    static MEASURED: Mutex<Vec<(PceShapeKey, u64)>> = Mutex::new(Vec::new());
    let key = PceShapeKey::of(pce);
    let measured = |m: &Mutex<Vec<(PceShapeKey, u64)>>| {
        let m = m.lock().unwrap_or_else(PoisonError::into_inner);
        m.iter().find(|(k, _)| *k == key).map(|&(_, b)| b)
    };
    if let Some(bytes) = measured(&MEASURED) {
        return bytes;
    }
    let table = pce.coeff_table.len().max(1) as u64 * 32;
    let estimate = |nnz: usize| (pce.num_constraints() as u64 + 1 + 2 * nnz as u64) * 4;
    if pce.is_released() {
        return table + pce.nnz().iter().map(|&n| estimate(n)).sum::<u64>();
    }
    let matrix = |m: &Csr| {
        layout::matrix_size(m, "")
            .map(|s| s.device_bytes())
            .unwrap_or_else(|_| estimate(m.nnz()))
    };
    let bytes = table + matrix(&pce.a) + matrix(&pce.b) + matrix(&pce.c);
    let mut m = MEASURED.lock().unwrap_or_else(PoisonError::into_inner);
    if !m.iter().any(|(k, _)| *k == key) {
        // A handful of shapes per process; the oldest goes past 64.
        if m.len() >= 64 {
            m.remove(0);
        }
        m.push((key, bytes));
    }
    bytes
}

/// Bytes of device memory of one evaluation's a, b and c over a domain of
/// `m` elements (what [`GpuSpmv::evaluate`] allocates).
pub fn abc_bytes(m: usize) -> u64 {
    3 * m.max(1) as u64 * 32
}

impl DevicePce {
    /// Lays out `pce`'s matrices and uploads them with its coefficient table
    /// to `gpu`. The packing runs in parallel on the CPU a window of rows at
    /// a time and streams to the device, so the host holds little beyond the
    /// PCE itself. Errors with [`Groth16Error::Spmv`] for a malformed PCE (row
    /// pointers out of order, a column past the witness, a coefficient index
    /// past the table) or one too large for the layout (more than 2^30
    /// variables or coefficients, more than 2^32 - 1 words per matrix).
    pub fn upload(gpu: &Arc<Gpu>, pce: &Pce) -> Result<DevicePce> {
        let rows = pce.num_constraints();
        let _s = tracing::info_span!("spmv_upload", rows).entered();
        // Matrices released from host memory are read again for the upload.
        let pce = &*pce.with_matrices()?;
        check_pce(pce)?;
        let key = PceShapeKey::of(pce);
        let table = gpu.upload(&pce.coeff_table)?;
        let upload = |m: &Csr, what: &str| upload_matrix(gpu, m, pce, what);
        let matrices = [
            upload(&pce.a, "A")?,
            upload(&pce.b, "B")?,
            upload(&pce.c, "C")?,
        ];
        Ok(DevicePce {
            key,
            num_inputs: pce.num_inputs,
            num_aux: pce.num_aux,
            rows,
            table,
            matrices,
        })
    }

    /// The key of the PCE it was uploaded from.
    pub fn key(&self) -> &PceShapeKey {
        &self.key
    }

    /// The GPU it lives on.
    pub fn gpu(&self) -> &Arc<Gpu> {
        self.table.gpu()
    }

    /// Number of constraints (rows).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Length of the witness `[inputs | aux]` it multiplies.
    pub fn columns(&self) -> usize {
        self.num_inputs + self.num_aux
    }

    /// Bytes of device memory it holds; equals [`device_bytes`] of its PCE.
    pub fn device_bytes(&self) -> u64 {
        self.table.len().max(1) as u64 * 32
            + self
                .matrices
                .iter()
                .map(|m| m.size.device_bytes())
                .sum::<u64>()
    }

    /// The device layout of A, B, C: rows, words and long rows of each.
    pub fn sizes(&self) -> [MatrixSize; 3] {
        [
            self.matrices[0].size,
            self.matrices[1].size,
            self.matrices[2].size,
        ]
    }
}

fn upload_matrix(gpu: &Arc<Gpu>, csr: &Csr, pce: &Pce, what: &str) -> Result<DeviceMatrix> {
    struct Dest {
        size: MatrixSize,
        row_ptr: DeviceBuffer<u32>,
        words: DeviceBuffer<u32>,
        warp_rows: Vec<u32>,
        block_rows: Vec<u32>,
    }
    let dest = layout::pack_streaming(
        csr,
        columns(pce),
        pce.coeff_table.len(),
        what,
        |size| {
            Ok(Dest {
                size,
                row_ptr: DeviceBuffer::alloc(gpu, size.rows + 1, false)?,
                words: DeviceBuffer::alloc(gpu, size.words as usize, false)?,
                warp_rows: Vec::with_capacity(size.warp_rows),
                block_rows: Vec::with_capacity(size.block_rows),
            })
        },
        |d, row, word, p| {
            d.row_ptr.copy_from_host_at(row, &p.row_ptr)?;
            d.words.copy_from_host_at(word as usize, &p.words)?;
            d.warp_rows.extend_from_slice(&p.warp_rows);
            d.block_rows.extend_from_slice(&p.block_rows);
            Ok(())
        },
    )?;
    let Dest {
        size,
        mut row_ptr,
        words,
        warp_rows,
        block_rows,
    } = dest;
    row_ptr.copy_from_host_at(size.rows, &[size.words as u32])?;
    Ok(DeviceMatrix {
        row_ptr,
        words,
        warp_rows: gpu.upload(&warp_rows)?,
        block_rows: gpu.upload(&block_rows)?,
        size,
    })
}

/// The SpMV kernels of one GPU. Cheap; launches go to the calling thread's
/// stream ([`Gpu::stream`]).
#[derive(Debug)]
pub struct GpuSpmv {
    gpu: Arc<Gpu>,
}

impl GpuSpmv {
    /// The SpMV of `gpu`; the module is loaded on first use.
    pub fn new(gpu: Arc<Gpu>) -> Self {
        GpuSpmv { gpu }
    }

    /// The GPU it runs on.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    /// Loads the PTX module now, to take that one-time work out of a
    /// measurement.
    pub fn prepare(&self) -> Result<()> {
        self.gpu.load_module(MODULE)
    }

    /// a, b, c = A·w, B·w, C·w for the witness `w` = `[inputs | aux]` on the
    /// device, each `m` long (m >= the number of constraints, normally the
    /// domain size) and zero past the constraints: the layout
    /// [`crate::GpuNtt::compute_h`] reads. Asynchronous like
    /// [`GpuSpmv::evaluate_into`].
    pub fn evaluate(
        &self,
        pce: &DevicePce,
        w: &DeviceBuffer<Scalar>,
        m: usize,
    ) -> Result<(
        DeviceBuffer<Scalar>,
        DeviceBuffer<Scalar>,
        DeviceBuffer<Scalar>,
    )> {
        // Every element is written by the kernels, so no zeroing.
        let mut a = DeviceBuffer::alloc(&self.gpu, m, false)?;
        let mut b = DeviceBuffer::alloc(&self.gpu, m, false)?;
        let mut c = DeviceBuffer::alloc(&self.gpu, m, false)?;
        self.evaluate_into(pce, w, &mut a, &mut b, &mut c)?;
        Ok((a, b, c))
    }

    /// As [`GpuSpmv::evaluate`], into caller-provided buffers of one length
    /// m >= the number of constraints; every element is overwritten.
    ///
    /// Asynchronous: the kernels are queued on the GPU's stream; a later
    /// copy, launch or [`Gpu::synchronize`] waits for them and reports their
    /// faults.
    pub fn evaluate_into(
        &self,
        pce: &DevicePce,
        w: &DeviceBuffer<Scalar>,
        a: &mut DeviceBuffer<Scalar>,
        b: &mut DeviceBuffer<Scalar>,
        c: &mut DeviceBuffer<Scalar>,
    ) -> Result<()> {
        let m = a.len();
        if w.len() != pce.columns() {
            return Err(bad(format!(
                "the witness on the device has {} elements, the PCE {} variables \
                 ([inputs | aux])",
                w.len(),
                pce.columns()
            )));
        }
        if b.len() != m || c.len() != m || m < pce.rows {
            return Err(bad(format!(
                "outputs of {}, {}, {} elements for {} constraints (they must have one length \
                 m >= the number of constraints)",
                m,
                b.len(),
                c.len(),
                pce.rows
            )));
        }
        self.check_gpu(pce.gpu(), "the PCE")?;
        self.check_gpu(w.gpu(), "the witness")?;
        for (what, out) in [("a", &*a), ("b", &*b), ("c", &*c)] {
            self.check_gpu(out.gpu(), what)?;
        }
        let _s = tracing::debug_span!("spmv_gpu", rows = pce.rows, m).entered();
        for (matrix, out) in pce.matrices.iter().zip([a, b, c]) {
            self.launch_matrix(pce, matrix, w, out)?;
        }
        Ok(())
    }

    fn check_gpu(&self, gpu: &Gpu, what: &str) -> Result<()> {
        if gpu.ordinal() == self.gpu.ordinal() {
            Ok(())
        } else {
            Err(bad(format!(
                "{what} is on GPU {}, the SpMV runs on GPU {}",
                gpu.ordinal(),
                self.gpu.ordinal()
            )))
        }
    }

    fn launch_matrix(
        &self,
        pce: &DevicePce,
        matrix: &DeviceMatrix,
        w: &DeviceBuffer<Scalar>,
        out: &mut DeviceBuffer<Scalar>,
    ) -> Result<()> {
        let rows = pce.rows as u32;
        let m = out.len() as u64;
        let short_max = SHORT_MAX_WORDS;
        let config = grid_1d(out.len(), ROW_THREADS)?;
        let kernel = self.gpu.kernel(MODULE, "spmv_rows_bls12_381")?;
        // SAFETY: spmv_rows_bls12_381(fr_t* out, const uint32_t* row_ptr,
        // const uint32_t* words, const fr_t* table, const fr_t* w,
        // uint32_t rows, uint64_t m, uint32_t short_max) takes these
        // arguments in this order. Thread i touches out[i] only for i < m =
        // out.len(), and row_ptr[i], row_ptr[i + 1] only for i < rows (row_ptr
        // has rows + 1 entries); the layout (checked while packing) keeps the
        // words of row i inside `words`, every column below w.len() (checked
        // by evaluate_into) and every coefficient index below table.len().
        unsafe {
            kernel
                .args()
                .buf_mut(out)
                .buf(&matrix.row_ptr)
                .buf(&matrix.words)
                .buf(&pce.table)
                .buf(w)
                .arg(&rows)
                .arg(&m)
                .arg(&short_max)
                .launch(config)?;
        }
        for (list, n, threads, name) in [
            (
                &matrix.warp_rows,
                matrix.size.warp_rows,
                WARP_THREADS,
                "spmv_long_warp_bls12_381",
            ),
            (
                &matrix.block_rows,
                matrix.size.block_rows,
                LONG_BLOCK_THREADS,
                "spmv_long_block_bls12_381",
            ),
        ] {
            if n == 0 {
                continue;
            }
            let count = n as u32;
            let kernel = self.gpu.kernel(MODULE, name)?;
            let config = grid_1d(n * threads as usize, LONG_BLOCK_THREADS)?;
            // SAFETY: spmv_long_*_bls12_381(fr_t* out, const uint32_t*
            // row_ptr, const uint32_t* words, const fr_t* table, const fr_t*
            // w, const uint32_t* list, uint32_t n) takes these arguments in
            // this order. The block is LONG_BLOCK_THREADS threads, a multiple
            // of the group size (32, or LONG_BLOCK_THREADS for the block
            // kernel, whose __launch_bounds__ is that); group g reads list[g]
            // only for g < n = list.len(), and the listed rows are below rows
            // <= out.len(); their words are inside the layout as above.
            unsafe {
                kernel
                    .args()
                    .buf_mut(out)
                    .buf(&matrix.row_ptr)
                    .buf(&matrix.words)
                    .buf(&pce.table)
                    .buf(w)
                    .buf(list)
                    .arg(&count)
                    .launch(config)?;
            }
        }
        Ok(())
    }

    /// The first constraint i with a[i]·b[i] != c[i], or `None` when all of
    /// `pce`'s constraints hold: the GPU twin of `cuzk_synth::check_satisfied`
    /// (map `Some(i)` to `SynthError::Unsatisfied`). Waits for the GPU.
    pub fn first_unsatisfied(
        &self,
        pce: &DevicePce,
        a: &DeviceBuffer<Scalar>,
        b: &DeviceBuffer<Scalar>,
        c: &DeviceBuffer<Scalar>,
    ) -> Result<Option<usize>> {
        let rows = pce.rows;
        if [a.len(), b.len(), c.len()].iter().any(|&n| n < rows) {
            return Err(bad(format!(
                "a, b, c of {}, {}, {} elements cannot hold {rows} constraints",
                a.len(),
                b.len(),
                c.len()
            )));
        }
        for (what, v) in [("a", a), ("b", b), ("c", c)] {
            self.check_gpu(v.gpu(), what)?;
        }
        let mut first = self.gpu.upload(&[u32::MAX])?;
        let n = rows as u32;
        let kernel = self.gpu.kernel(MODULE, "spmv_check_bls12_381")?;
        // SAFETY: spmv_check_bls12_381(const fr_t* a, const fr_t* b, const
        // fr_t* c, uint32_t rows, uint32_t* first) takes these arguments in
        // this order; thread i reads a[i], b[i], c[i] only for i < rows, which
        // every buffer holds (checked above), and `first` has one element.
        unsafe {
            kernel
                .args()
                .buf(a)
                .buf(b)
                .buf(c)
                .arg(&n)
                .buf_mut(&mut first)
                .launch(grid_1d(rows, ROW_THREADS)?)?;
        }
        let first = first.download()?;
        Ok(first
            .first()
            .filter(|&&i| i != u32::MAX)
            .map(|&i| i as usize))
    }
}

/// The CPU twin of [`DevicePce`] + [`GpuSpmv::evaluate`]: lays out `pce` as
/// the upload does and evaluates the layout as the kernels do
/// ([`layout::evaluate_packed`]) for the witness `[inputs | aux]` = `w`,
/// each output `m` long.
pub fn evaluate_host(pce: &Pce, w: &[Scalar], m: usize) -> Result<[Vec<Scalar>; 3]> {
    let pce = &*pce.with_matrices()?;
    check_pce(pce)?;
    if w.len() != columns(pce) {
        return Err(bad(format!(
            "the witness has {} elements, the PCE {} variables",
            w.len(),
            columns(pce)
        )));
    }
    let eval = |csr: &Csr, what: &str| -> Result<Vec<Scalar>> {
        let p = layout::pack(csr, columns(pce), pce.coeff_table.len(), what)?;
        layout::evaluate_packed(&p, &pce.coeff_table, w, m)
    };
    Ok([eval(&pce.a, "A")?, eval(&pce.b, "B")?, eval(&pce.c, "C")?])
}

#[cfg(test)]
mod tests {
    use cuzk_synth::circuits::all_test_specs;
    use cuzk_synth::pce::{COEFF_MINUS_ONE, COEFF_ONE};
    use cuzk_synth::{Density, Witness};
    use ff::Field;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha20Rng;

    use super::*;

    fn witness_vec(w: &Witness) -> Vec<Scalar> {
        w.inputs.iter().chain(&w.aux).copied().collect()
    }

    /// CPU SpMV of `cuzk_synth`, zero-padded to m.
    fn reference(pce: &Pce, w: &Witness, m: usize) -> [Vec<Scalar>; 3] {
        let n = pce.num_constraints();
        let mut out = [
            vec![Scalar::ZERO; n],
            vec![Scalar::ZERO; n],
            vec![Scalar::ZERO; n],
        ];
        let [a, b, c] = &mut out;
        cuzk_synth::spmv::evaluate_into(pce, w, a, b, c).unwrap();
        for v in &mut out {
            v.resize(m, Scalar::ZERO);
        }
        out
    }

    #[test]
    fn host_layout_matches_cpu_spmv_on_every_builtin_circuit() {
        for spec in all_test_specs() {
            let circuit = spec.build(7);
            let pce = Pce::record(circuit.clone()).unwrap();
            let w = Witness::synthesize(circuit).unwrap();
            let m = pce.domain_size();
            let got = evaluate_host(&pce, &witness_vec(&w), m).unwrap();
            assert_eq!(got, reference(&pce, &w, m), "{spec}");
            // The predicted size is what the packing makes.
            let table = pce.coeff_table.len().max(1) as u64 * 32;
            let packed: u64 = [&pce.a, &pce.b, &pce.c]
                .iter()
                .map(|m| {
                    layout::pack(m, columns(&pce), pce.coeff_table.len(), "")
                        .unwrap()
                        .size()
                        .device_bytes()
                })
                .sum();
            assert_eq!(device_bytes(&pce), table + packed, "{spec}");
        }
    }

    /// A random PCE with the edge cases the kernels must get right.
    pub(crate) fn random_pce(rng: &mut ChaCha20Rng, rows: usize, columns: usize) -> Pce {
        let mut table = vec![Scalar::ONE, -Scalar::ONE, Scalar::ZERO, -Scalar::from(2u64)];
        for _ in 0..12 {
            table.push(Scalar::random(&mut *rng));
        }
        let matrix = |rng: &mut ChaCha20Rng| {
            let mut m = Csr {
                row_ptr: vec![0],
                ..Csr::default()
            };
            for r in 0..rows {
                let len = match rng.gen_range(0..100) {
                    // One row for the block kernel in every larger matrix.
                    _ if rows >= 100 && r == rows / 2 => 2100,
                    0..=9 => 0,
                    10 => rng.gen_range(33..200),
                    11 if r % 7 == 0 => rng.gen_range(2000..5000),
                    _ => rng.gen_range(1..6),
                };
                for _ in 0..len {
                    // Repeated columns: a small pool now and then.
                    let col = if rng.gen_bool(0.2) {
                        rng.gen_range(0..4.min(columns) as u32)
                    } else {
                        rng.gen_range(0..columns as u32)
                    };
                    let k = match rng.gen_range(0..10) {
                        0..=3 => COEFF_ONE,
                        4..=6 => COEFF_MINUS_ONE,
                        _ => rng.gen_range(2..table.len() as u32),
                    };
                    m.cols.push(col);
                    m.coeffs.push(k);
                }
                m.row_ptr.push(m.cols.len() as u64);
            }
            m
        };
        let (a, b, c) = (matrix(rng), matrix(rng), matrix(rng));
        Pce {
            num_inputs: 3.min(columns),
            num_aux: columns - 3.min(columns),
            a,
            b,
            c,
            coeff_table: table,
            a_aux_density: Density::new(0),
            b_input_density: Density::new(0),
            b_aux_density: Density::new(0),
            names: None,
            released: None,
            memo: Default::default(),
        }
    }

    pub(crate) fn random_witness(rng: &mut ChaCha20Rng, pce: &Pce) -> Witness {
        let mut value = || match rng.gen_range(0..4) {
            0 => Scalar::ZERO,
            1 => -Scalar::ONE,
            _ => Scalar::random(&mut *rng),
        };
        Witness {
            inputs: (0..pce.num_inputs).map(|_| value()).collect(),
            aux: (0..pce.num_aux).map(|_| value()).collect(),
        }
    }

    #[test]
    fn host_layout_matches_cpu_spmv_on_random_matrices() {
        let mut rng = ChaCha20Rng::seed_from_u64(14);
        for (rows, columns, m) in [
            (0, 0, 0),
            (1, 1, 1),
            (5, 2, 16),
            (300, 50, 300),
            (900, 700, 1024),
        ] {
            let pce = random_pce(&mut rng, rows, columns);
            let w = random_witness(&mut rng, &pce);
            let got = evaluate_host(&pce, &witness_vec(&w), m).unwrap();
            assert_eq!(got, reference(&pce, &w, m), "{rows} rows, m = {m}");
            if rows >= 100 {
                let p = layout::pack(&pce.a, columns, pce.coeff_table.len(), "A").unwrap();
                assert!(!p.warp_rows.is_empty() && !p.block_rows.is_empty());
            }
        }
    }

    #[test]
    fn host_evaluation_refuses_bad_input() {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let pce = random_pce(&mut rng, 10, 5);
        let w = witness_vec(&random_witness(&mut rng, &pce));
        let err = evaluate_host(&pce, &w[..4], 10).unwrap_err().to_string();
        assert!(err.contains("4 elements, the PCE 5 variables"), "{err}");
        assert!(evaluate_host(&pce, &w, 9).is_err());
        let mut short_b = pce.clone();
        short_b.b.row_ptr.pop();
        let err = evaluate_host(&short_b, &w, 10).unwrap_err().to_string();
        assert!(
            err.contains("matrix B has 10 row pointers and A 11"),
            "{err}"
        );
    }

    #[test]
    fn shape_key_tells_shapes_apart() {
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        let pce = random_pce(&mut rng, 50, 20);
        let key = PceShapeKey::of(&pce);
        assert_eq!(key, PceShapeKey::of(&pce.clone()));
        assert_eq!(key.rows, 50);
        let mut other = pce.clone();
        let i = other.c.cols.len() / 2;
        other.c.cols[i] ^= 1;
        assert_ne!(PceShapeKey::of(&other).fingerprint, key.fingerprint);
        let mut other = pce.clone();
        other.coeff_table[5] += Scalar::ONE;
        assert_ne!(PceShapeKey::of(&other), key);
    }
}
