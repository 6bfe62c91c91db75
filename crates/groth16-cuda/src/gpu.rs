//! The CUDA backend: whole proofs on the GPU, byte-identical to bellperson.
//!
//! prepare (outside any lock): checks, a/b/c from the PCE when the caller
//! did not evaluate them, and the uploads of a, b, c (zero-padded to the
//! domain size) and of the witness. kernel_region: H by NTTs in device
//! memory (b and c are freed as soon as it is done), then the five MSMs
//! against parameter bases that stay resident on the device across proofs.
//! The epilogue ([`assemble`](crate::assemble)) runs on the CPU.

use std::sync::{Arc, Mutex};

use bellperson::groth16::Parameters;
use blstrs::{G1Affine, G2Affine, Scalar};
use cuzk_synth::{Abc, Density, Pce};

use crate::cuda::{DeviceBuffer, Gpu};
use crate::msm::{DeviceBases, DeviceDensity, GpuMsm};
use crate::ntt::GpuNtt;
use crate::prover::{AbcInput, MsmResults, Prover, ProverInput, StageTimings, Staged};
use crate::{Bls12, Groth16Error, Result, check_params};

/// Parameter bases resident on one GPU, kept while the parameter set lives.
struct ResidentParams {
    /// Keeps the host vectors alive, so their addresses identify the set.
    host: Parameters<Bls12>,
    h: DeviceBases<G1Affine>,
    l: DeviceBases<G1Affine>,
    a: DeviceBases<G1Affine>,
    b_g1: DeviceBases<G1Affine>,
    b_g2: DeviceBases<G2Affine>,
}

impl ResidentParams {
    fn is(&self, p: &Parameters<Bls12>) -> bool {
        std::sync::Arc::ptr_eq(&self.host.h, &p.h)
            && std::sync::Arc::ptr_eq(&self.host.l, &p.l)
            && std::sync::Arc::ptr_eq(&self.host.a, &p.a)
            && std::sync::Arc::ptr_eq(&self.host.b_g1, &p.b_g1)
            && std::sync::Arc::ptr_eq(&self.host.b_g2, &p.b_g2)
    }
}

/// Densities of one circuit shape on the device, over `[inputs | aux]`.
struct ShapeDensities {
    key: (usize, usize, usize, u64),
    /// H: the first m-1 of m coefficients.
    h: DeviceDensity,
    /// L: the aux variables.
    l: DeviceDensity,
    /// A: every input, then the aux used in A.
    a: DeviceDensity,
    /// B: the inputs and aux used in B.
    b: DeviceDensity,
}

/// What prepare stages for the kernel region.
struct GpuStaged {
    a: DeviceBuffer<Scalar>,
    b: DeviceBuffer<Scalar>,
    c: DeviceBuffer<Scalar>,
    w: DeviceBuffer<Scalar>,
}

/// The CUDA prover of one GPU.
pub struct GpuProver {
    gpu: Arc<Gpu>,
    ntt: GpuNtt,
    msm: GpuMsm,
    params: Mutex<Vec<Arc<ResidentParams>>>,
    shapes: Mutex<Vec<Arc<ShapeDensities>>>,
}

impl std::fmt::Debug for GpuProver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuProver")
            .field("gpu", &self.gpu.ordinal())
            .finish_non_exhaustive()
    }
}

fn density_hash(d: &Density) -> u64 {
    // FNV-1a over the bits: cheap, and enough to tell shapes apart in a cache
    // that also compares the counts.
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for (i, used) in d.iter().enumerate() {
        if used {
            h = (h ^ i as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
    h
}

impl GpuProver {
    /// The prover of GPU `ordinal`.
    pub fn new(ordinal: usize) -> Result<Self> {
        let gpu = Gpu::get(ordinal)?;
        Ok(GpuProver {
            ntt: GpuNtt::new(gpu.clone()),
            msm: GpuMsm::new(gpu.clone()),
            gpu,
            params: Mutex::new(Vec::new()),
            shapes: Mutex::new(Vec::new()),
        })
    }

    fn resident(&self, params: &Parameters<Bls12>) -> Result<Arc<ResidentParams>> {
        let mut cache = self.params.lock().map_err(|_| poisoned())?;
        if let Some(r) = cache.iter().find(|r| r.is(params)) {
            return Ok(r.clone());
        }
        let _s = tracing::info_span!("upload_params").entered();
        let r = Arc::new(ResidentParams {
            host: params.clone(),
            h: DeviceBases::<G1Affine>::upload(&self.gpu, &params.h)?,
            l: DeviceBases::<G1Affine>::upload(&self.gpu, &params.l)?,
            a: DeviceBases::<G1Affine>::upload(&self.gpu, &params.a)?,
            b_g1: DeviceBases::<G1Affine>::upload(&self.gpu, &params.b_g1)?,
            b_g2: DeviceBases::<G2Affine>::upload(&self.gpu, &params.b_g2)?,
        });
        cache.push(r.clone());
        Ok(r)
    }

    /// Drops the device copies of every parameter set no proof is using.
    pub fn evict_params(&self) {
        if let Ok(mut cache) = self.params.lock() {
            cache.retain(|r| Arc::strong_count(r) > 1);
        }
    }

    fn densities(&self, pce: &Pce) -> Result<Arc<ShapeDensities>> {
        let key = (
            pce.num_inputs,
            pce.num_aux,
            pce.num_constraints(),
            density_hash(&pce.a_aux_density)
                ^ density_hash(&pce.b_input_density).rotate_left(21)
                ^ density_hash(&pce.b_aux_density).rotate_left(42),
        );
        let mut cache = self.shapes.lock().map_err(|_| poisoned())?;
        if let Some(s) = cache.iter().find(|s| s.key == key) {
            return Ok(s.clone());
        }
        let (ni, na, m) = (pce.num_inputs, pce.num_aux, pce.domain_size());
        let vars = ni + na;
        let g = &self.gpu;
        let s = Arc::new(ShapeDensities {
            key,
            h: DeviceDensity::upload(g, (0..m).map(|i| i + 1 < m), m)?,
            l: DeviceDensity::upload(g, (0..vars).map(|i| i >= ni), vars)?,
            a: DeviceDensity::upload(
                g,
                (0..ni).map(|_| true).chain(pce.a_aux_density.iter()),
                vars,
            )?,
            b: DeviceDensity::upload(
                g,
                pce.b_input_density.iter().chain(pce.b_aux_density.iter()),
                vars,
            )?,
        });
        cache.push(s.clone());
        Ok(s)
    }
}

fn poisoned() -> Groth16Error {
    Groth16Error::Cuda {
        what: "the GPU prover's caches".into(),
        detail: "a thread panicked while holding them".into(),
    }
}

fn upload_padded(gpu: &Arc<Gpu>, v: &[Scalar], m: usize) -> Result<DeviceBuffer<Scalar>> {
    let mut buf = gpu.alloc_zeros::<Scalar>(m)?;
    buf.copy_from_host_at(0, v)?;
    Ok(buf)
}

impl Prover for GpuProver {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn device_bytes(&self, pce: &Pce) -> u64 {
        // a, b, c over the domain and the witness; the MSMs' scratch is
        // reserved by GpuMsm itself.
        let m = pce.domain_size() as u64;
        (3 * m + (pce.num_inputs + pce.num_aux) as u64) * 32
    }

    fn prepare(
        &self,
        input: ProverInput<'_>,
        params: &Parameters<Bls12>,
        timings: &mut StageTimings,
    ) -> Result<Staged> {
        let pce = input.pce;
        check_params(params, pce)?;
        cuzk_synth::spmv::check_shape(pce, input.witness)?;
        let owned: Option<Abc>;
        let (a, b, c) = match input.abc {
            AbcInput::Evaluated { a, b, c } => (a, b, c),
            AbcInput::FromPce => {
                owned = Some(timings.time("spmv", || cuzk_synth::evaluate(pce, input.witness))?);
                let abc = owned.as_ref().ok_or_else(poisoned)?;
                (&abc.a[..], &abc.b[..], &abc.c[..])
            }
        };
        let m = pce.domain_size();
        let g = &self.gpu;
        let staged = timings.time("h2d", || -> Result<GpuStaged> {
            let w_len = pce.num_inputs + pce.num_aux;
            let mut w = g.alloc_zeros::<Scalar>(w_len)?;
            w.copy_from_host_at(0, &input.witness.inputs)?;
            w.copy_from_host_at(pce.num_inputs, &input.witness.aux)?;
            Ok(GpuStaged {
                a: upload_padded(g, a, m)?,
                b: upload_padded(g, b, m)?,
                c: upload_padded(g, c, m)?,
                w,
            })
        })?;
        Ok(Staged::new(staged))
    }

    fn kernel_region(
        &self,
        input: ProverInput<'_>,
        params: &Parameters<Bls12>,
        staged: Staged,
        timings: &mut StageTimings,
    ) -> Result<MsmResults> {
        let pce = input.pce;
        let Some(GpuStaged {
            mut a,
            mut b,
            mut c,
            w,
        }) = staged.take::<GpuStaged>()
        else {
            return Err(Groth16Error::NotPrepared {
                backend: self.name(),
            });
        };
        let resident = timings.time("params", || self.resident(params))?;
        let dens = self.densities(pce)?;
        timings.time("h (ntt)", || {
            self.ntt
                .compute_h(&mut a, &mut b, &mut c, pce.domain_log2())
        })?;
        drop((b, c));
        let h = timings.time("msm h", || self.msm.g1_dense(&resident.h, &a, &dens.h))?;
        drop(a);
        let l = timings.time("msm l", || self.msm.g1_dense(&resident.l, &w, &dens.l))?;
        let a = timings.time("msm a", || self.msm.g1_dense(&resident.a, &w, &dens.a))?;
        let b_g1 = timings.time("msm b_g1", || {
            self.msm.g1_dense(&resident.b_g1, &w, &dens.b)
        })?;
        let b_g2 = timings.time("msm b_g2", || {
            self.msm.g2_dense(&resident.b_g2, &w, &dens.b)
        })?;
        Ok(MsmResults {
            h,
            l,
            a,
            b_g1,
            b_g2,
        })
    }
}
