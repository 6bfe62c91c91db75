//! [`Gpu`]: one device's context, streams and loaded device-code modules,
//! shared by the whole process.

use std::{
    cell::RefCell,
    collections::{BTreeMap, HashMap},
    fmt,
    marker::PhantomData,
    sync::{
        Arc, Mutex, MutexGuard, OnceLock, PoisonError,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::Instant,
};

use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaStream, DriverError, result,
    sys::{self, CUresult},
};

use super::{
    DeviceBuffer, DeviceElem, Kernel,
    modules::{self, DeviceModule, ModuleImage},
};
use crate::{Groth16Error, Result};

/// Environment variable: `1` makes every launch wait for its kernel, so a
/// kernel that faults is named in the error of its own launch instead of in
/// the next synchronisation's. For debugging; it serialises host and GPU.
pub const LAUNCH_BLOCKING_ENV: &str = "CUZK_CUDA_LAUNCH_BLOCKING";

/// Streams a device keeps for threads that ask for one of their own
/// ([`Gpu::own_stream`]); threads beyond these share them, round robin.
const OWN_STREAMS: usize = 8;

thread_local! {
    /// Per device (ordinal): the own stream this thread was given, and how
    /// many [`OwnStream`] guards of it are alive (work goes to it while
    /// any is).
    static OWN: RefCell<Vec<(usize, usize, usize)>> = const { RefCell::new(Vec::new()) };
}

/// One CUDA device as this crate uses it: the device's primary context, the
/// streams its copies and launches are ordered on, and the modules loaded on
/// it so far.
///
/// Work goes to one shared stream, except on a thread holding an
/// [`OwnStream`] ([`Gpu::own_stream`]): there it goes to that thread's own
/// stream, so one worker's copies and kernels run beside another's instead
/// of queueing behind them. A buffer used on several streams is ordered by
/// cudarc's per-buffer events (a read waits for the last write, a write
/// for the last read and write; a free for both).
///
/// Get it with [`Gpu::get`]; every caller asking for the same ordinal shares
/// one handle for the life of the process, so each module is loaded once per
/// device.
pub struct Gpu {
    ordinal: usize,
    name: String,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    /// Streams of threads holding an [`OwnStream`], made on first use.
    own: [OnceLock<Arc<CudaStream>>; OWN_STREAMS],
    /// The next own stream to give a thread.
    next_own: AtomicUsize,
    modules: Mutex<HashMap<&'static str, LoadedModule>>,
    /// By module name, module code address and kernel name.
    kernels: Mutex<HashMap<(&'static str, usize, String), CudaFunction>>,
    /// `module::kernel` of the latest launch, named when a later
    /// synchronisation reports an asynchronous failure.
    last_launch: Mutex<Option<String>>,
    launch_blocking: bool,
    /// Bytes this crate's device buffers hold now (charged before the
    /// driver is asked).
    allocated: AtomicU64,
    /// [`Gpu::set_memory_limit`]'s limit, if one is in force.
    limit: Mutex<Option<Limit>>,
}

/// A device memory limit in force.
#[derive(Clone, Copy, Debug)]
struct Limit {
    /// The limited card's total: the limit, or the real card's if smaller.
    card: u64,
    /// What else held device memory when the limit was set (other
    /// processes, the context), counted against it.
    baseline: u64,
}

struct LoadedModule {
    code: &'static [u8],
    module: Arc<CudaModule>,
}

impl fmt::Debug for Gpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut modules: Vec<&str> = lock(&self.modules).keys().copied().collect();
        modules.sort_unstable();
        f.debug_struct("Gpu")
            .field("ordinal", &self.ordinal)
            .field("name", &self.name)
            .field("modules", &modules)
            .finish_non_exhaustive()
    }
}

/// Free and total memory of a card with `limit` bytes, given what the
/// driver reports for the real one (`free`, `total`), what other holders
/// had when the limit was set (`baseline`) and what this crate's buffers
/// hold (`allocated`): the limited card's total is the smaller of `limit`
/// and `total`; its free memory what that leaves after `baseline` and
/// `allocated`, and never more than the real card has free.
pub fn limited_mem_info(
    free: u64,
    total: u64,
    limit: u64,
    baseline: u64,
    allocated: u64,
) -> (u64, u64) {
    let card = limit.min(total);
    let left = card.saturating_sub(baseline.saturating_add(allocated));
    (left.min(free), card)
}

/// `what` an out-of-memory error names, on a card limited to `card` bytes.
fn under_limit(what: String, card: u64) -> String {
    format!("{what} (device memory limit: a card of {card} bytes)")
}

/// Every `Gpu` opened so far, by ordinal.
static GPUS: Mutex<BTreeMap<usize, Arc<Gpu>>> = Mutex::new(BTreeMap::new());

impl Gpu {
    /// The handle of device `ordinal` (as the driver numbers them, after
    /// `CUDA_VISIBLE_DEVICES`), opened on first use.
    ///
    /// Errors with [`Groth16Error::NoGpu`] when the CUDA driver library is
    /// not installed, when the driver sees no device, or when `ordinal` is
    /// not below the number it sees; with [`Groth16Error::Cuda`] when the
    /// driver fails to set the device up.
    pub fn get(ordinal: usize) -> Result<Arc<Gpu>> {
        let mut gpus = lock(&GPUS);
        if let Some(gpu) = gpus.get(&ordinal) {
            return Ok(Arc::clone(gpu));
        }
        let gpu = Arc::new(Gpu::open(ordinal)?);
        gpus.insert(ordinal, Arc::clone(&gpu));
        Ok(gpu)
    }

    fn open(ordinal: usize) -> Result<Gpu> {
        let count = device_count()?;
        if ordinal >= count {
            return Err(Groth16Error::NoGpu {
                reason: format!(
                    "GPU {ordinal} was asked for, but the CUDA driver sees {count} device{} \
                     (numbered from 0; CUDA_VISIBLE_DEVICES limits them)",
                    if count == 1 { "" } else { "s" }
                ),
            });
        }
        let _span = tracing::debug_span!("gpu_open", ordinal).entered();
        let ctx =
            CudaContext::new(ordinal).map_err(driver_error(|| format!("opening GPU {ordinal}")))?;
        let name = ctx.name().map_err(driver_error(|| {
            format!("asking GPU {ordinal} for its name")
        }))?;
        let stream = ctx.new_stream().map_err(driver_error(|| {
            format!("creating a stream on GPU {ordinal}")
        }))?;
        let launch_blocking = std::env::var(LAUNCH_BLOCKING_ENV).is_ok_and(|v| v == "1");
        tracing::debug!(ordinal, %name, launch_blocking, "GPU opened");
        Ok(Gpu {
            ordinal,
            name,
            ctx,
            stream,
            own: std::array::from_fn(|_| OnceLock::new()),
            next_own: AtomicUsize::new(0),
            modules: Mutex::new(HashMap::new()),
            kernels: Mutex::new(HashMap::new()),
            last_launch: Mutex::new(None),
            launch_blocking,
            allocated: AtomicU64::new(0),
            limit: Mutex::new(None),
        })
    }

    /// The device's ordinal.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// The device's name, e.g. `NVIDIA H200`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The device's context (cudarc), for what this layer does not wrap yet
    /// (events, memory queries).
    pub fn cuda_context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The stream the calling thread's copies and launches go to: its own
    /// while it holds an [`OwnStream`] of this device, else the shared one.
    pub fn stream(&self) -> &Arc<CudaStream> {
        let own = OWN.with_borrow(|own| {
            own.iter()
                .find(|&&(ordinal, _, depth)| ordinal == self.ordinal && depth > 0)
                .map(|&(_, slot, _)| slot)
        });
        match own.and_then(|slot| self.own[slot].get()) {
            Some(stream) => stream,
            None => &self.stream,
        }
    }

    /// Sends the calling thread's work on this device to a stream of its
    /// own until the guard is dropped (guards nest). A thread keeps the
    /// same stream for its life; the device has [`OWN_STREAMS`] of them,
    /// given out round robin, so threads beyond that share.
    pub fn own_stream(&self) -> Result<OwnStream> {
        let slot = OWN.with_borrow(|own| {
            own.iter()
                .find(|&&(ordinal, _, _)| ordinal == self.ordinal)
                .map(|&(_, slot, _)| slot)
        });
        let slot = match slot {
            Some(slot) => slot,
            None => self.next_own.fetch_add(1, Ordering::Relaxed) % OWN_STREAMS,
        };
        if self.own[slot].get().is_none() {
            let stream = self.ctx.new_stream().map_err(driver_error(|| {
                format!("creating a worker's stream on GPU {}", self.ordinal)
            }))?;
            // Another thread given the same slot may have won the race;
            // then its stream is the slot's and this one is dropped unused.
            let _ = self.own[slot].set(stream);
        }
        OWN.with_borrow_mut(|own| {
            match own
                .iter_mut()
                .find(|(ordinal, _, _)| *ordinal == self.ordinal)
            {
                Some(entry) => entry.2 += 1,
                None => own.push((self.ordinal, slot, 1)),
            }
        });
        Ok(OwnStream {
            ordinal: self.ordinal,
            _not_send: PhantomData,
        })
    }

    /// Waits until all work queued on this device, on every stream, has
    /// finished: memory freed in stream order is then back with the driver.
    pub fn synchronize_device(&self) -> Result<()> {
        self.ctx.synchronize().map_err(|err| Groth16Error::Cuda {
            what: format!("waiting for all work on GPU {}", self.ordinal),
            detail: describe(err),
        })
    }

    /// Free and total device memory in bytes, as the driver reports them
    /// now (other processes' allocations included); under a memory limit
    /// ([`Gpu::set_memory_limit`]), as a card with that much memory would:
    /// see [`limited_mem_info`].
    pub fn mem_info(&self) -> Result<(u64, u64)> {
        let (free, total) = self.driver_mem_info()?;
        let limit = *lock(&self.limit);
        Ok(match limit {
            None => (free, total),
            Some(l) => limited_mem_info(free, total, l.card, l.baseline, self.allocated_bytes()),
        })
    }

    fn driver_mem_info(&self) -> Result<(u64, u64)> {
        let (free, total) = self.ctx.mem_get_info().map_err(driver_error(|| {
            format!("asking GPU {} for its free memory", self.ordinal)
        }))?;
        Ok((free as u64, total as u64))
    }

    /// Makes this device behave as a card with `limit` bytes of memory
    /// (`None`: its own; `Some(0)`: a card with no memory): [`Gpu::mem_info`]
    /// reports that card, and a buffer that would not fit on it fails with
    /// [`Groth16Error::DeviceOutOfMemory`] as on that card. What other
    /// processes and the context hold when it is set counts against the
    /// limit (their later growth only where the real card runs out); what
    /// this crate's buffers hold is counted as they come and go (device
    /// code modules and the driver's own bookkeeping are not). The device
    /// is synchronized first, so memory freed in stream order is back; set
    /// it while the device is idle (when a prover is opened). One limit per
    /// device for the whole process: the latest call sets it.
    pub fn set_memory_limit(&self, limit: Option<u64>) -> Result<()> {
        let mut current = lock(&self.limit);
        let new = match limit {
            None => None,
            Some(limit) => {
                self.synchronize_device()?;
                let (free, total) = self.driver_mem_info()?;
                Some(Limit {
                    card: limit.min(total),
                    baseline: total
                        .saturating_sub(free)
                        .saturating_sub(self.allocated_bytes()),
                })
            }
        };
        if new.is_some() || current.is_some() {
            tracing::info!(ordinal = self.ordinal, ?new, "device memory limit");
        }
        *current = new;
        Ok(())
    }

    /// The limited card's total memory ([`Gpu::set_memory_limit`]'s limit,
    /// or the real card's where that is smaller), if a limit is in force.
    pub fn memory_limit(&self) -> Option<u64> {
        lock(&self.limit).map(|l| l.card)
    }

    /// Bytes this crate's device buffers on this GPU hold now.
    pub fn allocated_bytes(&self) -> u64 {
        self.allocated.load(Ordering::Relaxed)
    }

    /// Counts `bytes` as allocated, unless a memory limit leaves no room
    /// for them: then the error names the limited card's free and total.
    /// Atomic: of two allocations that do not fit together, one gets in.
    pub(crate) fn charge(&self, bytes: u64, what: impl FnOnce() -> String) -> Result<()> {
        let limit = *lock(&self.limit);
        let Some(l) = limit else {
            self.allocated.fetch_add(bytes, Ordering::Relaxed);
            return Ok(());
        };
        let room = l.card.saturating_sub(l.baseline);
        self.allocated
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                held.checked_add(bytes).filter(|&n| n <= room)
            })
            .map(|_| ())
            .map_err(|held| Groth16Error::DeviceOutOfMemory {
                ordinal: self.ordinal,
                what: under_limit(what(), l.card),
                need: bytes,
                free: room.saturating_sub(held),
                total: l.card,
            })
    }

    /// Gives back what [`Gpu::charge`] counted.
    pub(crate) fn uncharge(&self, bytes: u64) {
        self.allocated.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// Fails with [`Groth16Error::DeviceOutOfMemory`] unless `need` bytes
    /// are free on the device now, naming `what` they are for.
    pub fn ensure_free(&self, need: u64, what: impl FnOnce() -> String) -> Result<()> {
        let (free, total) = self.mem_info()?;
        if need > free {
            let what = match self.memory_limit() {
                Some(card) => under_limit(what(), card),
                None => what(),
            };
            return Err(Groth16Error::DeviceOutOfMemory {
                ordinal: self.ordinal,
                what,
                need,
                free,
                total,
            });
        }
        Ok(())
    }

    /// A marker in the calling thread's stream ([`Gpu::stream`]): the time
    /// between two of them ([`GpuEvent::ms_since`]) is the GPU time of the
    /// work queued between.
    pub fn event(&self) -> Result<GpuEvent> {
        let event = self
            .stream()
            .record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(driver_error(|| {
                format!("recording a timing event on GPU {}", self.ordinal)
            }))?;
        Ok(GpuEvent(event))
    }

    /// A timing event recorded on `stream` (another stream of this GPU's
    /// context, e.g. a copy stream).
    pub(crate) fn event_on(&self, stream: &CudaStream) -> Result<GpuEvent> {
        let event = stream
            .record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(driver_error(|| {
                format!("recording a timing event on GPU {}", self.ordinal)
            }))?;
        Ok(GpuEvent(event))
    }

    /// Copies `src` to a new device buffer; returns once the copy is done.
    pub fn upload<T: DeviceElem>(self: &Arc<Self>, src: &[T]) -> Result<DeviceBuffer<T>> {
        let mut buffer = DeviceBuffer::alloc(self, src.len(), false)?;
        buffer.copy_from_host(src)?;
        Ok(buffer)
    }

    /// A device buffer of `len` elements whose bytes are all zero: for the
    /// blstrs types, `0` field elements and identity affine points.
    pub fn alloc_zeros<T: DeviceElem>(self: &Arc<Self>, len: usize) -> Result<DeviceBuffer<T>> {
        DeviceBuffer::alloc(self, len, true)
    }

    /// Loads the embedded module `module` on this device if it is not loaded
    /// yet (milliseconds from a fatbin's machine code; seconds where the
    /// driver has to JIT-compile its PTX, on a GPU newer than the machine
    /// code). Kernels load their module on demand; call this to take that
    /// time out of a measurement.
    pub fn load_module(&self, module: &str) -> Result<()> {
        self.module(&self.embedded(module)?).map(drop)
    }

    /// Loads `module` (embedded or not: a test-only module, say) on this
    /// device if it is not loaded yet; as [`Gpu::load_module`].
    pub fn load(&self, module: &DeviceModule) -> Result<()> {
        self.module(module).map(drop)
    }

    /// Kernel `name` of the embedded module `module`, e.g.
    /// `gpu.kernel("ntt", "ntt_radix2_pass_bls12_381")`. Loads the module on first
    /// use. Errors name the module and the kernel: an unknown module is
    /// [`Groth16Error::UnknownModule`], a kernel the module lacks is
    /// [`Groth16Error::Cuda`] with the driver's `CUDA_ERROR_NOT_FOUND`.
    pub fn kernel(self: &Arc<Self>, module: &str, name: &str) -> Result<Kernel> {
        let module = self.embedded(module)?;
        self.kernel_in(&module, name)
    }

    /// Kernel `name` of `module`, which need not be embedded (a test's own
    /// test-only module or PTX, say). Otherwise as [`Gpu::kernel`].
    pub fn kernel_in(self: &Arc<Self>, module: &DeviceModule, name: &str) -> Result<Kernel> {
        let key = (module.name, module.address(), name.to_owned());
        if let Some(function) = lock(&self.kernels).get(&key) {
            return Ok(Kernel::new(
                Arc::clone(self),
                module.name,
                name,
                function.clone(),
            ));
        }
        let what = || {
            format!(
                "loading kernel {}::{name} on GPU {}",
                module.name, self.ordinal
            )
        };
        if name.contains('\0') {
            return Err(Groth16Error::Cuda {
                what: what(),
                detail: "the kernel name holds a NUL byte".to_owned(),
            });
        }
        let loaded = self.module(module)?;
        let function = loaded.load_function(name).map_err(driver_error(what))?;
        lock(&self.kernels).insert(key, function.clone());
        Ok(Kernel::new(Arc::clone(self), module.name, name, function))
    }

    /// Waits until everything queued on the calling thread's stream
    /// ([`Gpu::stream`]) has finished. An asynchronous failure (a kernel that
    /// faulted) is reported here, naming the latest kernel launched.
    pub fn synchronize(&self) -> Result<()> {
        self.synchronize_for(&format!("waiting for GPU {}", self.ordinal))
    }

    fn embedded(&self, module: &str) -> Result<DeviceModule> {
        modules::find(module)
            .copied()
            .ok_or_else(|| Groth16Error::UnknownModule {
                module: module.to_owned(),
                embedded: modules::embedded_names(),
            })
    }

    /// The loaded module, loading it on first use. The lock is held while
    /// the driver loads (and where it must, compiles), so a module is loaded
    /// once even when several threads ask for it together.
    fn module(&self, module: &DeviceModule) -> Result<Arc<CudaModule>> {
        let mut modules = lock(&self.modules);
        let what = || format!("loading module {} on GPU {}", module.name, self.ordinal);
        let code = module.bytes();
        if let Some(loaded) = modules.get(module.name) {
            if std::ptr::eq(loaded.code, code) || loaded.code == code {
                return Ok(Arc::clone(&loaded.module));
            }
            return Err(Groth16Error::Cuda {
                what: what(),
                detail: "a different module of that name is already loaded".to_owned(),
            });
        }
        let image = match module.image {
            ModuleImage::Ptx(text) => {
                if text.contains('\0') {
                    // cudarc would panic turning it into a C string.
                    return Err(Groth16Error::Cuda {
                        what: what(),
                        detail: "the PTX text holds a NUL byte".to_owned(),
                    });
                }
                cudarc::nvrtc::Ptx::from_src(text)
            }
            ModuleImage::Fatbin(bytes) => {
                if !bytes.starts_with(&modules::FATBIN_MAGIC) {
                    return Err(Groth16Error::Cuda {
                        what: what(),
                        detail: "the module's bytes are not a fatbin (no fatbin magic number)"
                            .to_owned(),
                    });
                }
                // An owned copy: the driver reads the fatbin's header as
                // 8-byte words, and a Vec's allocation is aligned for that
                // where include_bytes! promises nothing.
                cudarc::nvrtc::Ptx::from_binary(bytes.to_vec())
            }
        };
        let _span =
            tracing::debug_span!("module_load", module = module.name, gpu = self.ordinal).entered();
        let start = Instant::now();
        let loaded = self.ctx.load_module(image).map_err(driver_error(what))?;
        tracing::debug!(
            module = module.name,
            gpu = self.ordinal,
            ms = start.elapsed().as_secs_f64() * 1e3,
            "module loaded"
        );
        modules.insert(
            module.name,
            LoadedModule {
                code,
                module: Arc::clone(&loaded),
            },
        );
        Ok(loaded)
    }

    /// Makes this GPU's context current on the calling thread, for driver
    /// calls that cudarc does not wrap.
    pub(crate) fn bind(&self, what: &str) -> Result<()> {
        self.ctx
            .bind_to_thread()
            .map_err(driver_error(|| what.to_owned()))
    }

    /// [`Gpu::synchronize`] with `what` naming the operation waited for.
    pub(crate) fn synchronize_for(&self, what: &str) -> Result<()> {
        self.stream().synchronize().map_err(|err| {
            let what = match lock(&self.last_launch).as_deref() {
                Some(kernel) => format!("{what} (latest kernel launched: {kernel})"),
                None => what.to_owned(),
            };
            Groth16Error::Cuda {
                what,
                detail: describe(err),
            }
        })
    }

    /// Records a launch, for errors reported by later synchronisations.
    pub(crate) fn note_launch(&self, kernel: String) {
        *lock(&self.last_launch) = Some(kernel);
    }

    /// Whether launches wait for their kernel ([`LAUNCH_BLOCKING_ENV`]).
    pub(crate) fn launch_blocking(&self) -> bool {
        self.launch_blocking
    }
}

/// While alive, the calling thread's work on one device goes to the
/// thread's own stream ([`Gpu::own_stream`]). Not `Send`: it belongs to the
/// thread that made it.
#[derive(Debug)]
pub struct OwnStream {
    ordinal: usize,
    _not_send: PhantomData<*const ()>,
}

impl Drop for OwnStream {
    fn drop(&mut self) {
        OWN.with_borrow_mut(|own| {
            if let Some(entry) = own.iter_mut().find(|(o, _, _)| *o == self.ordinal) {
                entry.2 = entry.2.saturating_sub(1);
            }
        });
    }
}

/// A timing event recorded in a [`Gpu`]'s stream by [`Gpu::event`].
pub struct GpuEvent(cudarc::driver::CudaEvent);

impl fmt::Debug for GpuEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("GpuEvent")
    }
}

impl GpuEvent {
    /// Whether the work queued before this event is done (no waiting).
    pub fn is_done(&self) -> bool {
        self.0.is_complete()
    }

    /// Waits until the work queued before this event is done; `what` names
    /// that work in the error.
    pub(crate) fn wait(&self, what: &str) -> Result<()> {
        self.0
            .synchronize()
            .map_err(driver_error(|| format!("waiting for {what}")))
    }

    /// Milliseconds of GPU time from `start` to this event; waits until
    /// this event's work is done.
    pub fn ms_since(&self, start: &GpuEvent) -> Result<f64> {
        start
            .0
            .elapsed_ms(&self.0)
            .map(f64::from)
            .map_err(driver_error(|| {
                "timing GPU work between two events".to_owned()
            }))
    }
}

/// The number of devices the driver sees; `NoGpu` without a driver or
/// without devices.
fn device_count() -> Result<usize> {
    static DRIVER_PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: this only tries to load the driver library under its usual
    // names (libloading); loading it runs libcuda's own initialisers, as any
    // process using CUDA does. No symbol is called. Without this check
    // cudarc panics on the first driver call instead of returning an error.
    let present = *DRIVER_PRESENT.get_or_init(|| unsafe { sys::is_culib_present() });
    if !present {
        return Err(Groth16Error::NoGpu {
            reason: "the CUDA driver library (libcuda) is not installed".to_owned(),
        });
    }
    let no_device = || Groth16Error::NoGpu {
        reason: "the CUDA driver sees no device".to_owned(),
    };
    match result::init() {
        Ok(()) => {}
        Err(DriverError(CUresult::CUDA_ERROR_NO_DEVICE)) => return Err(no_device()),
        Err(err) => {
            return Err(driver_error(|| "initialising the CUDA driver".to_owned())(
                err,
            ));
        }
    }
    match result::device::get_count() {
        Ok(count) if count > 0 => Ok(usize::try_from(count).unwrap_or(0)),
        Ok(_) | Err(DriverError(CUresult::CUDA_ERROR_NO_DEVICE)) => Err(no_device()),
        Err(err) => Err(driver_error(|| "counting CUDA devices".to_owned())(err)),
    }
}

/// Turns a driver error into [`Groth16Error::Cuda`] about `what`.
pub(crate) fn driver_error(
    what: impl FnOnce() -> String,
) -> impl FnOnce(DriverError) -> Groth16Error {
    move |err| Groth16Error::Cuda {
        what: what(),
        detail: describe(err),
    }
}

/// `CUDA_ERROR_NOT_FOUND (named symbol not found)`. Only called for errors
/// the driver returned, so the driver library is loaded.
pub(crate) fn describe(err: DriverError) -> String {
    match err.error_string() {
        Ok(text) => format!("{:?} ({})", err.0, text.to_string_lossy()),
        Err(_) => format!("{:?}", err.0),
    }
}

/// Locks a mutex whose data stays consistent even if a holder panicked
/// (caches and a label), so poisoning is ignored rather than propagated.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::limited_mem_info;

    const GIB: u64 = 1 << 30;

    #[test]
    fn a_limited_card_reports_its_own_total_and_what_is_left_of_it() {
        // 141 GB card, 2 GiB held by others, 5 GiB by cuzk, limit 16 GiB.
        let (free, total) = limited_mem_info(134 * GIB, 141 * GIB, 16 * GIB, 2 * GIB, 5 * GIB);
        assert_eq!((free, total), (9 * GIB, 16 * GIB));
        // Never more free than the real card has.
        assert_eq!(
            limited_mem_info(3 * GIB, 141 * GIB, 16 * GIB, 2 * GIB, 5 * GIB),
            (3 * GIB, 16 * GIB)
        );
        // Over the limit: nothing free, no underflow.
        assert_eq!(
            limited_mem_info(100 * GIB, 141 * GIB, 16 * GIB, 10 * GIB, 9 * GIB),
            (0, 16 * GIB)
        );
        // A limit above the card is the card.
        assert_eq!(
            limited_mem_info(20 * GIB, 24 * GIB, 32 * GIB, GIB, 3 * GIB),
            (20 * GIB, 24 * GIB)
        );
        assert_eq!(limited_mem_info(0, 0, 16 * GIB, 0, 0), (0, 0));
    }
}
