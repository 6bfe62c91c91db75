//! Building an engine: the configuration resolved ("auto" settings made
//! concrete), the shared state put together and the engine's threads started.

use super::*;

/// Capacity of the CPU backend's pseudo-device: it reserves no device
/// memory (its `device_bytes` is 0), so anything large works.
const CPU_DEVICE_CAPACITY: u64 = 1 << 50;
/// The configuration as the engine runs it, "auto" resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResolvedConfig {
    /// The prover's name (`cpu`, `cuda`).
    pub backend: &'static str,
    /// (ordinal, capacity) of each device; the CPU backend has one
    /// pseudo-device.
    pub devices: Vec<(usize, u64)>,
    pub workers_per_device: usize,
    pub synthesis_concurrency: usize,
    pub dispatch_bound: usize,
    /// Partitions whose witness is made in parallel parts, admitted to
    /// synthesis or finished and not yet taken by a worker, at most (per
    /// priority class and those above it).
    pub synthesis_ahead: usize,
    pub host_memory_budget: u64,
    pub pce_cache_dir: Option<PathBuf>,
    /// Drop a PCE's matrices from host memory while every device keeps
    /// them (read again from `pce_cache_dir` where needed).
    pub release_host_pce: bool,
    pub params_subgroup_check: bool,
}
/// Builds an [`Engine`] with a given prover and devices (the GPU backend
/// plugs in here).
pub struct EngineBuilder {
    config: EngineConfig,
    prover: Option<Arc<dyn Prover>>,
    devices: Option<Vec<DeviceSpec>>,
}

impl fmt::Debug for EngineBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EngineBuilder")
            .field("config", &self.config)
            .field("prover", &self.prover)
            .field("devices", &self.devices)
            .finish()
    }
}

impl EngineBuilder {
    /// A builder with `config` and the backend it names.
    pub fn new(config: EngineConfig) -> Self {
        EngineBuilder {
            config,
            prover: None,
            devices: None,
        }
    }

    /// Proves with `prover` instead of the configured backend.
    pub fn prover(mut self, prover: Arc<dyn Prover>) -> Self {
        self.prover = Some(prover);
        self
    }

    /// Runs on these devices (GPU mode: two workers per device by default,
    /// pinned host buffers) instead of the CPU pseudo-device.
    pub fn devices(mut self, devices: Vec<DeviceSpec>) -> Self {
        self.devices = Some(devices);
        self
    }

    /// Starts the engine's threads.
    pub fn build(self) -> Result<Engine> {
        let EngineBuilder {
            config,
            prover,
            devices,
        } = self;
        let (provers, devices) = match prover {
            Some(p) => (Provers::one(p), devices),
            None => choose_provers(&config, devices)?,
        };
        let prover = Arc::clone(&provers.first);
        let gpu_mode = devices.is_some();
        let devices = devices.unwrap_or_else(|| {
            vec![DeviceSpec {
                ordinal: 0,
                capacity_bytes: CPU_DEVICE_CAPACITY,
            }]
        });
        let Some(first) = devices.first().copied() else {
            return Err(EngineError::Config(
                "the engine needs at least one device".into(),
            ));
        };
        let positive = |name: &str, v: usize| {
            if v == 0 {
                Err(EngineError::Config(format!("{name} must be at least 1")))
            } else {
                Ok(v)
            }
        };
        let workers = positive(
            "workers_per_device",
            config
                .workers_per_device
                .or_else(|| if gpu_mode { 2 } else { 1 }),
        )?;
        let synthesis = positive(
            "synthesis_concurrency",
            config.synthesis_concurrency.or_else(|| {
                if gpu_mode {
                    let cores = thread::available_parallelism().map_or(4, |n| n.get());
                    cores.max(2)
                } else {
                    1
                }
            }),
        )?;
        let bound = positive(
            "dispatch_bound",
            config
                .dispatch_bound
                .or_else(|| workers * devices.len() + synthesis),
        )?;
        let ahead = positive(
            "synthesis_ahead",
            config
                .synthesis_ahead
                // One a device: on a 32 GiB PoRep stream on an H100 as fast
                // as one a worker, with 3.5 GiB less peak RSS (BENCHMARKS,
                // 21bd5bf); one a worker was as fast as two, with 7.6 GiB
                // less (42f59a3). A witness made on every core is done well
                // before the GPU's other worker frees it.
                .or_else(|| devices.len()),
        )?;
        let budget_bytes = config.host_budget_bytes()?;
        if let Some(dir) = &config.pce_cache_dir {
            std::fs::create_dir_all(dir).map_err(|source| EngineError::PceIo {
                path: dir.clone(),
                source,
            })?;
        }
        // a/b/c evaluated on the CPU live in this pool's buffers.
        let pool = if gpu_mode && config.gpu_pin_abc {
            Pool::pinned_or_fallback(first.ordinal, PoolConfig::unbounded())
                .map_err(EngineError::PinnedPool)?
        } else {
            Pool::fallback(PoolConfig::unbounded())
        };
        let scheduler = Scheduler::new(
            SchedulerConfig {
                workers_per_device: workers,
                memory_margin_bytes: if gpu_mode {
                    config.device_memory_margin.0
                } else {
                    0
                },
            },
            devices.clone(),
        )?;
        let signal = Arc::new(Signal::default());
        let budget = MemoryBudget::with_signal(budget_bytes, Arc::clone(&signal));
        let pces = Arc::new(Cache::new());
        let params = Arc::new(Cache::new());
        let reclaimer = Arc::new(Reclaimer {
            pool: pool.clone(),
            pces: Arc::clone(&pces),
            params: Arc::clone(&params),
            on_evict: std::sync::OnceLock::new(),
        });
        let weak: Weak<dyn Reclaim> = Arc::downgrade(&(Arc::clone(&reclaimer) as Arc<dyn Reclaim>));
        budget.set_reclaimer(weak);
        let resolved = ResolvedConfig {
            backend: prover.name(),
            devices: devices
                .iter()
                .map(|d| (d.ordinal, d.capacity_bytes))
                .collect(),
            workers_per_device: workers,
            synthesis_concurrency: synthesis,
            dispatch_bound: bound,
            synthesis_ahead: ahead,
            host_memory_budget: budget_bytes,
            pce_cache_dir: config.pce_cache_dir.clone(),
            release_host_pce: config.release_host_pce,
            params_subgroup_check: config.params_subgroup_check,
        };
        tracing::info!(config = ?resolved, "engine starting");
        let ready = Arc::new(Ready::new(ahead));
        let provers = Arc::new(provers);
        // Held device memory (resident parameters, PCEs) in the way of the
        // next partition on an idle device: what no proof uses is freed.
        {
            let provers = Arc::clone(&provers);
            scheduler.on_memory_pressure(Arc::new(move |memory: &DeviceMemory| {
                let ordinal = memory.ordinal();
                tracing::debug!(
                    ordinal,
                    "device memory pressure: freeing what no proof uses"
                );
                let freed = provers.release_idle_on(ordinal);
                provers.account(ordinal, memory);
                tracing::info!(
                    ordinal,
                    freed,
                    "device memory held across proofs was in the way of the next partition"
                );
            }));
        }
        let shared = Arc::new(Shared {
            config: resolved,
            signal,
            budget,
            timeline: Arc::new(Timeline::new(config.timeline_capacity)),
            prover,
            provers: Arc::clone(&provers),
            pool,
            pces,
            params,
            _reclaimer: reclaimer,
            admission: Admission::default(),
            state: Mutex::new(State {
                idle_synthesis: synthesis,
                unbound_permit: None,
                ..State::default()
            }),
            bound: DispatchBound::new(bound)?,
            ready,
            stop: CancelToken::new(),
            scheduler,
            held_once: HeldOnce::default(),
            loads: Loads::default(),
            loaders: Loaders::default(),
            host_spmv: Mutex::new(()),
        });
        let weak = Arc::downgrade(&shared);
        let hook: EvictHook = Box::new(move |what, bytes, at| {
            if let Some(shared) = weak.upgrade() {
                on_evict(&shared, what, bytes, at);
            }
        });
        // Set once, just made: cannot be set already.
        let _ = shared._reclaimer.on_evict.set(hook);
        let mut engine = Engine {
            shared,
            threads: Vec::new(),
        };
        let spawn = |name: String, what, f: Box<dyn FnOnce() + Send>| {
            thread::Builder::new()
                .name(name)
                .spawn(f)
                .map_err(|source| EngineError::Spawn { what, source })
        };
        let s = Arc::clone(&engine.shared);
        engine.threads.push(spawn(
            "cuzk-dispatch".into(),
            "dispatcher",
            Box::new(move || dispatcher_main(&s)),
        )?);
        for index in 0..synthesis {
            let s = Arc::clone(&engine.shared);
            engine.threads.push(spawn(
                format!("cuzk-synth-{index}"),
                "synthesis",
                Box::new(move || synthesis_main(&s, index)),
            )?);
        }
        Ok(engine)
    }
}
