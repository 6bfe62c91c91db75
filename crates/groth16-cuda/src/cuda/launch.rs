//! Kernels and their launches.

use std::{fmt, sync::Arc};

use cudarc::driver::{CudaFunction, DeviceRepr, LaunchArgs, LaunchConfig, PushKernelArg};

use super::{
    DeviceBuffer, DeviceElem, DeviceRange, Gpu,
    buffer::Elem,
    gpu::{describe, driver_error},
};
use crate::{Groth16Error, Result};

/// The most threads a block may have on every GPU cuzk targets.
pub const MAX_BLOCK_SIZE: u32 = 1024;
/// The most blocks along a grid's x dimension (compute capability 3.0 on).
const MAX_GRID_X: usize = (1 << 31) - 1;

/// A 1-D launch configuration: blocks of `block_size` threads, enough of them
/// to give each of `n` elements a thread (at least one block, so a launch for
/// `n = 0` is still valid; kernels check `i < n`). No dynamic shared memory;
/// set `shared_mem_bytes` on the result for that.
pub fn grid_1d(n: usize, block_size: u32) -> Result<LaunchConfig> {
    let what = || format!("sizing a grid for {n} elements in blocks of {block_size} threads");
    if block_size == 0 || block_size > MAX_BLOCK_SIZE {
        return Err(Groth16Error::Cuda {
            what: what(),
            detail: format!("a block holds 1 to {MAX_BLOCK_SIZE} threads"),
        });
    }
    let blocks = n.div_ceil(block_size as usize).max(1);
    let blocks = u32::try_from(blocks)
        .ok()
        .filter(|&b| b as usize <= MAX_GRID_X)
        .ok_or_else(|| Groth16Error::Cuda {
            what: what(),
            detail: format!("{blocks} blocks are more than a grid's {MAX_GRID_X}"),
        })?;
    Ok(LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (block_size, 1, 1),
        shared_mem_bytes: 0,
    })
}

/// One `extern "C" __global__` function of a PTX module, loaded on one GPU.
/// Get it with [`Gpu::kernel`]; launch it with [`Kernel::args`], then
/// [`KernelArgs::launch`]. Cheap to clone.
#[derive(Clone)]
pub struct Kernel {
    gpu: Arc<Gpu>,
    module: &'static str,
    name: String,
    function: CudaFunction,
}

impl fmt::Debug for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Kernel")
            .field("module", &self.module)
            .field("name", &self.name)
            .field("gpu", &self.gpu.ordinal())
            .finish()
    }
}

impl Kernel {
    pub(crate) fn new(
        gpu: Arc<Gpu>,
        module: &'static str,
        name: &str,
        function: CudaFunction,
    ) -> Self {
        Kernel {
            gpu,
            module,
            name: name.to_owned(),
            function,
        }
    }

    /// The GPU it is loaded on.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    /// The PTX module it comes from.
    pub fn module(&self) -> &'static str {
        self.module
    }

    /// The kernel's name (its `extern "C"` symbol).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The driver's function handle (cudarc), e.g. for occupancy queries.
    pub fn cuda_function(&self) -> &CudaFunction {
        &self.function
    }

    /// Starts a launch: push the arguments in the kernel's parameter order,
    /// then call [`KernelArgs::launch`].
    pub fn args(&self) -> KernelArgs<'_> {
        KernelArgs {
            kernel: self,
            args: self.gpu.stream().launch_builder(&self.function),
            foreign_buffer: None,
        }
    }
}

/// The arguments of one launch of a [`Kernel`], in parameter order. Every
/// argument is borrowed until the launch has been queued; device buffers are
/// also tracked by cudarc, so later copies wait for the kernel that uses
/// them and a buffer is freed only after it.
pub struct KernelArgs<'a> {
    kernel: &'a Kernel,
    args: LaunchArgs<'a>,
    /// The GPU of an argument buffer that is not on the kernel's GPU.
    foreign_buffer: Option<usize>,
}

impl fmt::Debug for KernelArgs<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KernelArgs")
            .field("kernel", &self.kernel)
            .finish_non_exhaustive()
    }
}

impl<'a> KernelArgs<'a> {
    /// A parameter passed by value: an integer (`uint32_t n`) or a
    /// `#[repr(C)]` struct implementing [`DeviceRepr`].
    pub fn arg<T: DeviceRepr>(&mut self, value: &'a T) -> &mut Self {
        self.args.arg(value);
        self
    }

    /// A field element or point passed by value (`fr_t c`), as its bytes.
    pub fn elem<T: DeviceElem>(&mut self, value: &'a T) -> &mut Self {
        // SAFETY: `Elem<T>` is `repr(transparent)` over `T`, so the pointer
        // cast keeps address, size and alignment, and the borrow keeps the
        // lifetime of `value`.
        let value: &'a Elem<T> = unsafe { &*std::ptr::from_ref(value).cast::<Elem<T>>() };
        self.args.arg(value);
        self
    }

    /// A device buffer the kernel only reads (`const T*`).
    pub fn buf<T: DeviceElem>(&mut self, buffer: &'a DeviceBuffer<T>) -> &mut Self {
        self.check_gpu(buffer.gpu());
        self.args.arg(buffer.slice());
        self
    }

    /// A range of a device buffer the kernel only reads (`const T*` to
    /// the range's first element).
    pub fn range<T: DeviceElem>(&mut self, range: &'a DeviceRange<'_, T>) -> &mut Self {
        self.check_gpu(range.gpu());
        self.args.arg(range.view());
        self
    }

    /// A device buffer the kernel writes (`T*`).
    pub fn buf_mut<T: DeviceElem>(&mut self, buffer: &'a mut DeviceBuffer<T>) -> &mut Self {
        self.check_gpu(buffer.gpu());
        self.args.arg(buffer.slice_mut());
        self
    }

    fn check_gpu(&mut self, gpu: &Gpu) {
        if gpu.ordinal() != self.kernel.gpu.ordinal() {
            self.foreign_buffer.get_or_insert(gpu.ordinal());
        }
    }

    /// Queues the kernel on its GPU's stream with `config`. Errors name the
    /// module, the kernel, the GPU and the configuration, with the driver's
    /// error. The kernel runs asynchronously: a fault while it runs shows in
    /// the next synchronisation (a download, [`Gpu::synchronize`]), which
    /// names the latest kernel launched; with `CUZK_CUDA_LAUNCH_BLOCKING=1`
    /// every launch waits for its kernel and reports such faults itself.
    ///
    /// # Safety
    ///
    /// The arguments pushed must match the kernel's parameters in number,
    /// order and type ([`buf`](Self::buf) and [`buf_mut`](Self::buf_mut)
    /// pass a `T*`, [`arg`](Self::arg) and [`elem`](Self::elem) the value),
    /// and the kernel, run with `config`, must stay inside the buffers it is
    /// given. Nothing checks this: a mismatch corrupts device memory or
    /// faults the context, and then every later call on this GPU fails.
    pub unsafe fn launch(&mut self, config: LaunchConfig) -> Result<()> {
        let kernel = self.kernel;
        let gpu = &kernel.gpu;
        let label = format!("{}::{}", kernel.module, kernel.name);
        let what = || {
            format!(
                "launching kernel {label} on GPU {} (grid {:?}, block {:?}, {} bytes of dynamic \
                 shared memory)",
                gpu.ordinal(),
                config.grid_dim,
                config.block_dim,
                config.shared_mem_bytes
            )
        };
        if let Some(other) = self.foreign_buffer {
            return Err(Groth16Error::Cuda {
                what: what(),
                detail: format!("an argument buffer is in the memory of GPU {other}"),
            });
        }
        tracing::trace!(kernel = %label, gpu = gpu.ordinal(), ?config, "launch");
        // SAFETY: the caller guarantees that the arguments match the
        // kernel's parameters and that the kernel stays inside its buffers;
        // every argument is borrowed for 'a, past this call.
        unsafe { self.args.launch(config) }.map_err(driver_error(what))?;
        gpu.note_launch(label.clone());
        if gpu.launch_blocking() {
            gpu.stream()
                .synchronize()
                .map_err(|err| Groth16Error::Cuda {
                    what: format!("{} (waiting for it)", what()),
                    detail: describe(err),
                })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_covers_every_element() {
        for (n, block, blocks) in [
            (0, 256, 1),
            (1, 256, 1),
            (256, 256, 1),
            (257, 256, 2),
            (1 << 20, 1024, 1024),
            (1000, 32, 32),
        ] {
            let config = grid_1d(n, block).unwrap();
            assert_eq!(config.grid_dim, (blocks, 1, 1), "n = {n}, block = {block}");
            assert_eq!(config.block_dim, (block, 1, 1));
            assert_eq!(config.shared_mem_bytes, 0);
        }
    }

    #[test]
    fn grid_rejects_bad_sizes() {
        for block in [0, MAX_BLOCK_SIZE + 1] {
            let err = grid_1d(10, block).unwrap_err().to_string();
            assert!(err.contains("a block holds 1 to 1024 threads"), "{err}");
            assert!(err.contains(&format!("blocks of {block} threads")), "{err}");
        }
        let err = grid_1d(usize::MAX, 1).unwrap_err().to_string();
        assert!(err.contains("more than a grid's"), "{err}");
        assert!(grid_1d(MAX_GRID_X, 1).is_ok());
        assert!(grid_1d(MAX_GRID_X + 1, 1).is_err());
    }
}
