//! NTTs over BLS12-381's Fr on the GPU (PTX module `ntt`), and the H
//! polynomial of a Groth16 proof from device-resident a, b, c.
//!
//! [`GpuNtt`] plans each domain size once ([`plan::DomainPlan`]: the passes
//! and the small twiddle and scaling tables, uploaded and kept on the device)
//! and launches the passes on the GPU's stream. The results equal
//! bellperson's `EvaluationDomain` bit for bit (same omega, same coset
//! generator, same scalings): field arithmetic is exact, so any correct
//! transform gives the same canonical bytes; the tests compare against
//! [`crate::cpu::compute_h`] and `EvaluationDomain` directly.
//!
//! The H computation makes 7 transforms of 3 passes at 2^26 (plus one fused
//! bit-reversal), each pass one read and one write of the vector, and is
//! bound by field multiplications, not memory: on an H200 a 2^26 H takes
//! 252 ms against 208 ms for its multiplications at the measured Fr rate
//! and 23 ms for its bytes at the measured copy bandwidth
//! (`examples/ntt_bench.rs`, bench-data/ntt/2026-11-29-ea85b80-h.json).
//!
//! Here: [`GpuNtt`], its per-size domain cache and the plain transforms.
//! Beside it: `config` (the pass kernel variants and [`NttConfig`]), `h`
//! (the H polynomial's entry points), `kernels` (the launches of a plan on
//! the GPU), `copy` (uploads and device copies) and [`plan`] (what the
//! kernels are asked to do, and its CPU twin).

mod config;
mod copy;
mod h;
mod kernels;
pub mod plan;

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use blstrs::Scalar;
use cudarc::driver::CudaStream;

use crate::{
    Groth16Error, Result,
    cuda::{DeviceBuffer, Gpu},
};
pub use config::{NttConfig, PassKernel, Stages, TableLayout};
pub use copy::{copy_device, upload_padded_through};
pub use h::{HBuffers, HostUpload, Upload, upload_padded_on};
pub use kernels::Pointwise;
use plan::{DomainPlan, Launch, MAX_LOG2, Op, TableSpec};

/// The PTX module's name.
const MODULE: &str = "ntt";

/// A domain's plan and its tables on the device.
struct Domain {
    plan: DomainPlan,
    tables: Vec<DeviceBuffer<Scalar>>,
}

/// The NTT kernels of one GPU, with the tables of every domain size used so
/// far cached on the device. Cheap to share (`&self` everywhere); launches go
/// to the calling thread's stream ([`Gpu::stream`]).
pub struct GpuNtt {
    gpu: Arc<Gpu>,
    config: NttConfig,
    domains: Mutex<HashMap<u32, Arc<Domain>>>,
    /// The second stream of [`Upload::Overlapped`], created on first use.
    copy_stream: Mutex<Option<Arc<CudaStream>>>,
}

impl std::fmt::Debug for GpuNtt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut sizes: Vec<u32> = lock(&self.domains).keys().copied().collect();
        sizes.sort_unstable();
        f.debug_struct("GpuNtt")
            .field("gpu", &self.gpu.ordinal())
            .field("config", &self.config)
            .field("domains_log2", &sizes)
            .finish()
    }
}

impl GpuNtt {
    /// The NTT of `gpu`; nothing is loaded or allocated until first use.
    pub fn new(gpu: Arc<Gpu>) -> Self {
        Self::with_config(gpu, NttConfig::default())
    }

    /// [`GpuNtt::new`] with another configuration.
    pub fn with_config(gpu: Arc<Gpu>, config: NttConfig) -> Self {
        GpuNtt {
            gpu,
            config,
            domains: Mutex::new(HashMap::new()),
            copy_stream: Mutex::new(None),
        }
    }

    /// The GPU it runs on.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    /// Its configuration.
    pub fn config(&self) -> NttConfig {
        self.config
    }

    /// Loads the module and builds the tables of a 2^log2 domain now, to
    /// take that one-time work out of a measurement.
    pub fn prepare(&self, log2: u32) -> Result<()> {
        self.gpu.load_module(MODULE)?;
        if log2 > 0 {
            self.domain(log2)?;
        }
        Ok(())
    }

    /// bellperson's `EvaluationDomain::fft` of `x` (2^log2 elements) in place.
    pub fn fft(&self, x: &mut DeviceBuffer<Scalar>, log2: u32) -> Result<()> {
        self.transform(Op::Fft, x, log2)
    }

    /// bellperson's `EvaluationDomain::ifft` (with the 1/m scaling).
    pub fn ifft(&self, x: &mut DeviceBuffer<Scalar>, log2: u32) -> Result<()> {
        self.transform(Op::Ifft, x, log2)
    }

    /// bellperson's `EvaluationDomain::coset_fft`.
    pub fn coset_fft(&self, x: &mut DeviceBuffer<Scalar>, log2: u32) -> Result<()> {
        self.transform(Op::CosetFft, x, log2)
    }

    /// bellperson's `EvaluationDomain::icoset_fft`.
    pub fn icoset_fft(&self, x: &mut DeviceBuffer<Scalar>, log2: u32) -> Result<()> {
        self.transform(Op::IcosetFft, x, log2)
    }

    /// Low level: queues `launches`, made by [`DomainPlan::launches`] (or
    /// its parts) for a domain of 2^log2, on vectors a, b, c of that size
    /// (b and c as the launches need them). For timing the passes one by one.
    /// A launch the domain's plan does not make is refused
    /// ([`DomainPlan::is_planned`]).
    pub fn run_launches(
        &self,
        log2: u32,
        launches: &[Launch],
        a: &mut DeviceBuffer<Scalar>,
        b: Option<&mut DeviceBuffer<Scalar>>,
        c: Option<&mut DeviceBuffer<Scalar>>,
    ) -> Result<()> {
        check_len("a", a, log2)?;
        for (what, v) in [("b", b.as_deref()), ("c", c.as_deref())] {
            if let Some(v) = v {
                check_len(what, v, log2)?;
            }
        }
        if log2 == 0 {
            return Ok(());
        }
        let domain = self.domain(log2)?;
        if let Some(l) = launches.iter().find(|l| !domain.plan.is_planned(l)) {
            return Err(Groth16Error::NttSize {
                detail: format!("a launch the plan of 2^{log2} does not make: {l:?}"),
            });
        }
        self.run(&domain, launches, a, b, c)
    }

    fn transform(&self, op: Op, x: &mut DeviceBuffer<Scalar>, log2: u32) -> Result<()> {
        check_len("the vector", x, log2)?;
        if log2 == 0 {
            // Every transform of one element is the identity.
            return Ok(());
        }
        let domain = self.domain(log2)?;
        self.run(&domain, &domain.plan.launches(op), x, None, None)
    }

    /// The plan and device tables of a 2^log2 domain, built on first use.
    fn domain(&self, log2: u32) -> Result<Arc<Domain>> {
        let mut domains = lock(&self.domains);
        if let Some(d) = domains.get(&log2) {
            return Ok(Arc::clone(d));
        }
        let _s = tracing::debug_span!("ntt_tables", log2).entered();
        let plan = DomainPlan::with_layout(log2, self.config.tables)?
            .with_fused_bitrev(self.config.fused_bitrev);
        let tables = plan
            .tables()
            .iter()
            .map(|t: &TableSpec| self.gpu.upload(&t.values()))
            .collect::<Result<Vec<_>>>()?;
        let domain = Arc::new(Domain { plan, tables });
        domains.insert(log2, Arc::clone(&domain));
        Ok(domain)
    }
}

fn check_len(what: &str, v: &DeviceBuffer<Scalar>, log2: u32) -> Result<()> {
    if log2 > MAX_LOG2 {
        return Err(Groth16Error::NttSize {
            detail: format!("a domain of 2^{log2} elements; the NTT takes up to 2^{MAX_LOG2}"),
        });
    }
    if v.len() != 1usize << log2 {
        return Err(Groth16Error::NttSize {
            detail: format!(
                "{what} holds {} elements, the domain 2^{log2} = {}",
                v.len(),
                1usize << log2
            ),
        });
    }
    Ok(())
}

fn cuda_error(what: &'static str) -> impl FnOnce(cudarc::driver::DriverError) -> Groth16Error {
    move |err| Groth16Error::Cuda {
        what: what.to_owned(),
        detail: err.to_string(),
    }
}

/// The caches stay consistent if a holder panicked; ignore poisoning.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
