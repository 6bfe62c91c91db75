//! The CUDA runtime layer: devices, embedded device-code modules, typed
//! device buffers and kernel launches, over cudarc's driver API.
//!
//! - [`Gpu::get`] gives the process-wide handle of one device: its primary
//!   context and its streams (a shared one, and one per thread that asks
//!   with [`Gpu::own_stream`]), on which every copy and launch of this layer
//!   is ordered ([`Gpu::stream`]: the calling thread's). Without the CUDA driver library, or without the device, it
//!   returns [`Groth16Error::NoGpu`](crate::Groth16Error::NoGpu) instead of
//!   panicking, so code built with this crate runs on machines without a GPU.
//! - Modules are compiled from `kernels/<name>.cu` by `cargo xtask kernels`
//!   into fatbins (machine code for sm_80/86/89/90, compute_80 PTX for newer
//!   GPUs), committed under `kernels/fatbin/` and embedded in the binary
//!   ([`modules::MODULES`]; test-only modules are embedded by the tests with
//!   [`fatbin_module!`](crate::fatbin_module)); a module is loaded on a
//!   device the first time one of its kernels is asked for, and cached on
//!   that [`Gpu`].
//! - [`DeviceBuffer<T>`] holds `T`s in device memory with exactly the bytes
//!   `T` has in host memory: for blstrs types, Montgomery form with
//!   little-endian 64-bit limbs ([`DeviceElem`] lists the types).
//! - [`Kernel`] is one `extern "C"` entry point of a module; its launches go
//!   through [`KernelArgs::launch`], whose errors name the module and the
//!   kernel.
//!
//! ```no_run
//! use cuzk_groth16_cuda::cuda::{Gpu, grid_1d};
//! # fn main() -> cuzk_groth16_cuda::Result<()> {
//! let gpu = Gpu::get(0)?;
//! let a = gpu.upload(&[blstrs::Scalar::from(3u64); 1000])?;
//! let mut out = gpu.alloc_zeros::<blstrs::Scalar>(a.len())?;
//! let n = a.len() as u32;
//! // arith is a test-only module: tests embed it themselves.
//! let arith = cuzk_groth16_cuda::fatbin_module!("arith");
//! let kernel = gpu.kernel_in(&arith, "arith_fr_sqr_bls12_381")?;
//! // SAFETY: arith_fr_sqr_bls12_381(fr_t* out, const fr_t* a, uint32_t n)
//! // takes exactly these arguments, both buffers hold n elements, and the
//! // kernel touches index i only when i < n.
//! unsafe {
//!     kernel
//!         .args()
//!         .buf_mut(&mut out)
//!         .buf(&a)
//!         .arg(&n)
//!         .launch(grid_1d(a.len(), 256)?)?;
//! }
//! let squares: Vec<blstrs::Scalar> = out.download()?;
//! # let _ = squares;
//! # Ok(())
//! # }
//! ```
//!
//! Which worker may launch on which device, and when, is decided by
//! `gpu-sched` and the engine; this layer only carries out what it is told.

mod bounce;
mod buffer;
mod gpu;
mod launch;
pub mod modules;

pub use bounce::is_page_locked;
pub use buffer::{DeviceBuffer, DeviceElem, DeviceRange};
pub use cudarc::driver::{DeviceRepr, LaunchConfig};
pub use gpu::{Gpu, GpuEvent, LAUNCH_BLOCKING_ENV, OwnStream, limited_mem_info};
pub use launch::{Kernel, KernelArgs, MAX_BLOCK_SIZE, grid_1d};
pub use modules::{DeviceModule, ModuleImage};
