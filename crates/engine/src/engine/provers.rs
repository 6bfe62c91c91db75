//! The prover of each device: which backend and GPUs a configuration gets,
//! and the standing reservations of device memory the provers hold.

use super::*;

/// Each device's standing reservation for what its prover holds once,
/// whatever the partitions in flight ([`Prover::shared_device_bytes`]),
/// grown to the largest shape proved so far: partitions then reserve only
/// their own buffers ([`Prover::device_bytes`]), so two in flight on one
/// GPU count the shared part once.
#[derive(Default)]
pub(crate) struct HeldOnce {
    /// Per device (scheduler order), reservations adding up to what is held.
    by_device: Mutex<Vec<Vec<Reservation>>>,
}

impl HeldOnce {
    /// Makes every device's standing reservations add up to at least
    /// `bytes`, waiting for room (no new partition starts on a device
    /// meanwhile); what is held already stays held on error.
    ///
    /// # Errors
    /// [`GpuSchedError::ReservationNeverFits`] naming `bytes` and the
    /// device's usable bytes when a device can never hold them.
    pub(crate) fn ensure(&self, scheduler: &Scheduler, bytes: u64) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        let mut held = self
            .by_device
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let devices = scheduler.devices().len();
        if held.len() < devices {
            held.resize_with(devices, Vec::new);
        }
        for (index, parts) in held.iter_mut().enumerate() {
            let have: u64 = parts.iter().map(Reservation::bytes).sum();
            if have >= bytes {
                continue;
            }
            let memory = scheduler.device_memory(index)?;
            let more = bytes - have;
            let reserved = memory.try_reserve(more).transpose().unwrap_or_else(|| {
                tracing::info!(
                    ordinal = memory.ordinal(),
                    bytes = more,
                    "waiting for device memory to hold a kernel region's scratch across proofs"
                );
                memory.reserve(more, &CancelToken::new())
            });
            match reserved {
                Ok(more) => parts.push(more),
                Err(GpuSchedError::ReservationNeverFits { ordinal, .. }) => {
                    return Err(GpuSchedError::ReservationNeverFits {
                        ordinal,
                        need_bytes: bytes,
                        usable_bytes: memory.usable_bytes(),
                    }
                    .into());
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}
/// The prover of each device: one CUDA prover per GPU, or one prover shared
/// by every device.
pub(crate) struct Provers {
    pub(super) first: Arc<dyn Prover>,
    by_device: Vec<(usize, Arc<dyn Prover>)>,
    /// Per device ordinal, a standing reservation of what its prover holds
    /// across proofs ([`Prover::held_device_bytes`]: resident parameters,
    /// device PCEs), kept equal to it by [`Provers::account`].
    held: Mutex<Vec<(usize, Reservation)>>,
}

impl Provers {
    fn new(first: Arc<dyn Prover>, by_device: Vec<(usize, Arc<dyn Prover>)>) -> Self {
        Provers {
            first,
            by_device,
            held: Mutex::new(Vec::new()),
        }
    }

    pub(super) fn one(prover: Arc<dyn Prover>) -> Self {
        Self::new(prover, Vec::new())
    }

    /// Every device's prover frees what it keeps for parameter sets nobody
    /// holds any more; the bytes freed.
    pub(crate) fn release_unused(&self) -> u64 {
        if self.by_device.is_empty() {
            return self.first.release_unused();
        }
        self.by_device.iter().map(|(_, p)| p.release_unused()).sum()
    }

    /// Whether every device's prover keeps `pce`'s matrices on its device
    /// ([`Prover::holds_pce`]).
    pub(crate) fn hold_pce(&self, pce: &Pce) -> bool {
        if self.by_device.is_empty() {
            return self.first.holds_pce(pce);
        }
        self.by_device.iter().all(|(_, p)| p.holds_pce(pce))
    }

    /// Every device's prover frees all it keeps that no proof is using
    /// ([`Prover::release_idle`]); the bytes freed.
    pub(crate) fn release_idle(&self) -> u64 {
        if self.by_device.is_empty() {
            return self.first.release_idle();
        }
        self.by_device.iter().map(|(_, p)| p.release_idle()).sum()
    }

    /// Device `ordinal`'s prover frees all it keeps that no proof is using;
    /// the bytes freed.
    pub(crate) fn release_idle_on(&self, ordinal: usize) -> u64 {
        self.get(ordinal).release_idle()
    }

    /// Brings device `ordinal`'s standing reservation to what its prover
    /// holds now. The new size is held before the old is let go (the
    /// memory is allocated already, so it is held even past what fits:
    /// partitions that no longer fit beside it wait).
    pub(crate) fn account(&self, ordinal: usize, memory: &DeviceMemory) {
        // Read under the lock: two callers never install sizes out of order.
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let bytes = self.get(ordinal).held_device_bytes();
        let current = held.iter().position(|(o, _)| *o == ordinal);
        if current.map_or(0, |i| held[i].1.bytes()) == bytes {
            return;
        }
        let new = match bytes {
            0 => None,
            _ => match memory.hold(bytes) {
                Ok(r) => Some(r),
                Err(e) => {
                    tracing::warn!(ordinal, bytes, "holding the prover's device memory: {e}");
                    return;
                }
            },
        };
        if let Some(i) = current {
            held.swap_remove(i);
        }
        if let Some(r) = new {
            held.push((ordinal, r));
        }
    }

    /// [`Provers::account`] for every device of `scheduler`.
    pub(crate) fn account_all(&self, scheduler: &Scheduler) {
        for (index, spec) in scheduler.devices().iter().enumerate() {
            if let Ok(memory) = scheduler.device_memory(index) {
                self.account(spec.ordinal, &memory);
            }
        }
    }

    /// The prover of device `ordinal`.
    pub(crate) fn get(&self, ordinal: usize) -> &Arc<dyn Prover> {
        self.by_device
            .iter()
            .find(|(o, _)| *o == ordinal)
            .map_or(&self.first, |(_, p)| p)
    }
}

/// A CUDA prover and a device spec for every GPU the config selects (all
/// the driver sees, or `only`'s ordinals); the reason when there is none.
fn open_gpus(
    config: &EngineConfig,
    only: Option<&[DeviceSpec]>,
) -> std::result::Result<(Provers, Vec<DeviceSpec>), String> {
    let found = cuzk_gpu_sched::discover().map_err(|e| e.to_string())?;
    if found.is_empty() {
        return Err("the CUDA driver sees no GPU (or is not installed)".into());
    }
    let wanted = |ordinal: usize| {
        only.is_none_or(|d| d.iter().any(|s| s.ordinal == ordinal))
            && config.gpus.as_ref().is_none_or(|g| g.contains(&ordinal))
    };
    if let Some(g) = &config.gpus
        && let Some(missing) = g.iter().find(|o| !found.iter().any(|d| d.ordinal == **o))
    {
        return Err(format!(
            "gpus names GPU {missing}, but the driver sees {} (numbered from 0)",
            found.len()
        ));
    }
    let options = GpuOptions {
        params: match config.gpu_params {
            GpuParams::Auto => ParamsPlacement::Auto,
            GpuParams::Resident => ParamsPlacement::Resident,
            GpuParams::Streamed => ParamsPlacement::Streamed,
            GpuParams::Queries(q) => ParamsPlacement::Queries(q),
        },
        gpu_abc: config.gpu_abc,
        pin_streamed: config.gpu_pin_streamed,
        bounce_bytes: config
            .gpu_pinned_uploads
            .then_some(usize::try_from(config.gpu_upload_buffer.0).unwrap_or(usize::MAX)),
        stream_per_worker: config.gpu_stream_per_worker,
        memory_limit: config.device_memory_limit.map(|b| b.0),
        staging: match config.gpu_staging {
            GpuStaging::Auto => Staging::Auto,
            GpuStaging::Device => Staging::Device,
            GpuStaging::Host => Staging::Host,
        },
        window_multiples: config.gpu_window_multiples,
        ..GpuOptions::default()
    };
    let mut by_device = Vec::new();
    let mut specs = Vec::new();
    for info in found.iter().filter(|d| wanted(d.ordinal)) {
        let prover = GpuProver::with_options(info.ordinal, options)
            .map_err(|e| format!("GPU {} ({}): {e}", info.ordinal, info.name))?;
        by_device.push((info.ordinal, Arc::new(prover) as Arc<dyn Prover>));
        specs.push(limited_spec(
            only.and_then(|d| d.iter().find(|s| s.ordinal == info.ordinal).copied())
                .unwrap_or(DeviceSpec::from(info)),
            config.device_memory_limit,
        ));
    }
    let Some((_, first)) = by_device.first() else {
        return Err("no GPU is left after the gpus setting and the requested devices".into());
    };
    Ok((Provers::new(Arc::clone(first), by_device), specs))
}

/// A device as the scheduler sees it under `device_memory_limit`: no more
/// memory than the limit.
fn limited_spec(spec: DeviceSpec, limit: Option<ByteSize>) -> DeviceSpec {
    DeviceSpec {
        capacity_bytes: limit.map_or(spec.capacity_bytes, |l| l.0.min(spec.capacity_bytes)),
        ..spec
    }
}

/// The provers of `config.backend` and the devices they run on (`None`:
/// the CPU pseudo-device, or `devices` as given).
pub(super) fn choose_provers(
    config: &EngineConfig,
    devices: Option<Vec<DeviceSpec>>,
) -> Result<(Provers, Option<Vec<DeviceSpec>>)> {
    // A mistake in the limit is the user's to fix, not a reason to fall
    // back to the CPU.
    if let Some(limit) = config.device_memory_limit
        && limit.0 <= config.device_memory_margin.0
    {
        return Err(EngineError::Config(format!(
            "device_memory_limit {limit} leaves nothing above device_memory_margin {}",
            config.device_memory_margin
        )));
    }
    if config.gpu_pinned_uploads && config.gpu_upload_buffer.0 < 1 << 20 {
        return Err(EngineError::Config(format!(
            "gpu_upload_buffer {} is below 1 MiB: pieces that small cost more in waits \
             than they save (set gpu_pinned_uploads = false for pageable uploads)",
            config.gpu_upload_buffer
        )));
    }
    Ok(match config.backend {
        Backend::Cpu => (Provers::one(Arc::new(CpuProver)), devices),
        Backend::Gpu => match open_gpus(config, devices.as_deref()) {
            Ok((provers, devices)) => (provers, Some(devices)),
            Err(reason) => {
                return Err(EngineError::BackendUnavailable {
                    backend: "gpu",
                    reason,
                });
            }
        },
        Backend::Auto => match open_gpus(config, devices.as_deref()) {
            Ok((provers, devices)) => (provers, Some(devices)),
            Err(reason) => {
                tracing::info!(%reason, "no usable GPU: proving on the CPU");
                (Provers::one(Arc::new(CpuProver)), devices)
            }
        },
    })
}

/// The prover an engine built with `config` proves with on its first
/// device, chosen the same way (`backend`, `gpus`, `gpu_params`,
/// `gpu_abc`): for one-shot callers that prove single partitions with
/// [`prove_partition`] rather than through an engine.
///
/// # Errors
/// [`EngineError::BackendUnavailable`] for `backend = "gpu"` without a
/// usable GPU.
pub fn open_prover(config: &EngineConfig) -> Result<Arc<dyn Prover>> {
    Ok(choose_provers(config, None)?.0.first)
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_memory_limit_caps_what_the_scheduler_sees() {
        let card = DeviceSpec {
            ordinal: 1,
            capacity_bytes: 80 << 30,
        };
        assert_eq!(limited_spec(card, None), card);
        let small = limited_spec(card, Some(ByteSize(16 << 30)));
        assert_eq!(small.capacity_bytes, 16 << 30);
        assert_eq!(small.ordinal, 1);
        // A limit above the card changes nothing.
        assert_eq!(limited_spec(card, Some(ByteSize(200 << 30))), card);
    }

    #[test]
    fn a_device_memory_limit_within_the_margin_is_a_config_error() {
        let config = EngineConfig {
            backend: Backend::Cpu,
            device_memory_limit: Some(ByteSize(1 << 30)),
            device_memory_margin: ByteSize(1 << 30),
            ..EngineConfig::default()
        };
        let Err(err) = choose_provers(&config, None) else {
            panic!("a 1 GiB limit with a 1 GiB margin was accepted");
        };
        assert!(matches!(err, EngineError::Config(_)), "{err}");
        assert!(err.to_string().contains("device_memory_limit"), "{err}");
    }

    #[test]
    fn an_upload_buffer_below_a_mebibyte_is_a_config_error() {
        let config = |bytes, pinned| EngineConfig {
            backend: Backend::Cpu,
            gpu_upload_buffer: ByteSize(bytes),
            gpu_pinned_uploads: pinned,
            ..EngineConfig::default()
        };
        let Err(err) = choose_provers(&config(4096, true), None) else {
            panic!("a 4 KiB upload buffer was accepted");
        };
        assert!(err.to_string().contains("gpu_upload_buffer"), "{err}");
        // Unused without bounce buffers; 1 MiB is the least taken.
        assert!(choose_provers(&config(0, false), None).is_ok());
        assert!(choose_provers(&config(1 << 20, true), None).is_ok());
    }
}
