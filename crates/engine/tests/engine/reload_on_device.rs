//! mixed_bench's order of jobs as it ran on the GPU: loader-registered
//! sets, PCEs read back from `pce_cache_dir` after an eviction, the HIGH
//! set preloaded, witnesses made through the parts gate, and a prover that
//! keeps each shape's PCE on a device of limited memory (a/b/c evaluated
//! there). Every job must finish: a hang fails within a deadline.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::*;
use bellperson::groth16::Parameters;
use blstrs::Scalar;
use cuzk_engine::cache::params_bytes;
use cuzk_engine::pce_file::ShapeCounts;
use cuzk_engine::{ByteSize, Engine, JobHandle, ParamsLoader, ParamsRef, Priority, ProofRequest};
use cuzk_groth16_cuda::{
    AbcInput, AbcPlacement, Bls12, CpuProver, MsmResults, Prover, ProverInput, StageTimings, Staged,
};
use cuzk_synth::{PartsGate, Pce, SynthError, Witness};
use ff::Field;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

const MIB: u64 = 1 << 20;
const LOW: &str = "chain:2000";
const HIGH: &str = "chain:1500";
const LOW_PARTS: usize = 10;

/// The CPU prover declaring device memory as the GPU backend does: each
/// partition reserves 20 MiB, a shape's shared part 30 MiB or 20 MiB (held
/// once, grown to the largest),
/// and a shape's PCE, put on the device by its first partition's prepare
/// (a/b/c evaluated there), stays held (25 MiB) until released while no
/// partition of that shape is in flight.
#[derive(Debug, Default)]
struct DevicePces {
    inner: CpuProver,
    /// Resident PCEs: constraints and partitions in flight using it.
    resident: Mutex<Vec<(usize, u64)>>,
    released: AtomicU64,
    /// Extra milliseconds each kernel region sleeps beyond 30.
    slower_ms: u64,
    /// Room for one PCE only: a shape's PCE does not fit while another
    /// shape's is held ([`AbcPlacement::host_short_of_room`]).
    room_for_one_pce: bool,
    /// Constraints of each partition prepared with a/b/c from the PCE
    /// (evaluated on the device).
    from_pce: Mutex<Vec<usize>>,
}

const PCE_ON_DEVICE: u64 = 25 * MIB;

impl Prover for DevicePces {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn device_bytes(&self, _pce: &Pce) -> u64 {
        20 * MIB
    }

    fn shared_device_bytes(&self, pce: &Pce) -> u64 {
        if pce.num_constraints() > 1800 {
            30 * MIB
        } else {
            20 * MIB
        }
    }

    fn abc_placement(&self, pce: &Pce) -> AbcPlacement {
        let resident = self
            .resident
            .lock()
            .unwrap()
            .iter()
            .any(|(n, _)| *n == pce.num_constraints());
        if resident {
            AbcPlacement::device("the PCE is resident on the device")
        } else if self.room_for_one_pce && !self.resident.lock().unwrap().is_empty() {
            AbcPlacement::host_short_of_room("another shape's PCE holds the room")
        } else {
            AbcPlacement::device("the PCE fits beside two partitions")
        }
    }

    fn held_device_bytes(&self) -> u64 {
        self.resident.lock().unwrap().len() as u64 * PCE_ON_DEVICE
    }

    fn release_idle(&self) -> u64 {
        let mut resident = self.resident.lock().unwrap();
        let before = resident.len();
        resident.retain(|(_, users)| *users > 0);
        let freed = (before - resident.len()) as u64 * PCE_ON_DEVICE;
        self.released.fetch_add(freed, Ordering::SeqCst);
        freed
    }

    fn prepare(
        &self,
        input: ProverInput<'_>,
        params: &Parameters<Bls12>,
        timings: &mut StageTimings,
    ) -> cuzk_groth16_cuda::Result<Staged> {
        if matches!(input.abc, AbcInput::FromPce) {
            let n = input.pce.num_constraints();
            self.from_pce.lock().unwrap().push(n);
            let mut resident = self.resident.lock().unwrap();
            match resident.iter_mut().find(|(m, _)| *m == n) {
                Some((_, users)) => *users += 1,
                None => resident.push((n, 1)),
            }
        }
        self.inner.prepare(input, params, timings)
    }

    fn kernel_region(
        &self,
        input: ProverInput<'_>,
        params: &Parameters<Bls12>,
        staged: Staged,
        timings: &mut StageTimings,
    ) -> cuzk_groth16_cuda::Result<MsmResults> {
        let n = input.pce.num_constraints();
        // The GPU is the bottleneck: witnesses wait for it.
        std::thread::sleep(Duration::from_millis(30 + self.slower_ms));
        let out = self.inner.kernel_region(input, params, staged, timings);
        if let Some((_, users)) = self
            .resident
            .lock()
            .unwrap()
            .iter_mut()
            .find(|(m, _)| *m == n)
        {
            *users = users.saturating_sub(1);
        }
        out
    }
}

/// A chain's witness made through the process-wide parts gate, as PoRep's
/// and WindowPoSt's are (so the engine's pacing counts it).
fn gated(circuit: Chain, inputs: usize, aux: usize) -> std::result::Result<Witness, SynthError> {
    let pass = PartsGate::global().enter(1);
    let w = Witness::synthesize_with_capacity(circuit, inputs, aux);
    pass.part_done();
    w
}

fn loader(spec: &'static str) -> ParamsLoader {
    Arc::new(move || Ok((*params(spec)).clone()))
}

fn request(spec: &str, parts: usize, first: u64, priority: Priority) -> ProofRequest<Chain> {
    let n: usize = spec.strip_prefix("chain:").unwrap().parse().unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(first);
    let randomness = (0..parts)
        .map(|_| (Scalar::random(&mut rng), Scalar::random(&mut rng)))
        .collect();
    ProofRequest::new(
        spec,
        ParamsRef::Key(spec.to_owned()),
        (first..first + parts as u64)
            .map(|s| Chain::good(n, s))
            .collect(),
    )
    .with_priority(priority)
    .with_randomness(randomness)
    .with_witness(gated)
}

/// `wait_blocking` with a deadline, the engine's stats in the failure.
fn wait_within(engine: &Engine, job: JobHandle, secs: u64, what: &str) -> usize {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(job.wait_blocking());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(proofs) => proofs.unwrap().len(),
        Err(_) => panic!(
            "{what}: no result within {secs} s\n{:#?}\n{:#?}",
            engine.stats(),
            engine.status()
        ),
    }
}

/// PCE + set + one working set of `spec` on this prover, the working set
/// alone, and the working set with a/b/c on the device (the witness).
fn need_of(spec: &str, prover: &DevicePces) -> (u64, u64, u64) {
    let n = spec.strip_prefix("chain:").unwrap().parse().unwrap();
    let pce = Pce::record(Chain::good(n, 0)).unwrap();
    let ws = cuzk_engine::working_set_bytes(ShapeCounts::of(&pce), prover);
    let witness = cuzk_engine::working_set_bytes_for(ShapeCounts::of(&pce), prover, true);
    // The PCE file read back may be charged a little more than the
    // recording: room for that.
    (
        pce.bytes() as u64 * 5 / 4 + params_bytes(&params(spec)) + ws,
        ws,
        witness,
    )
}

/// An engine on `prover` with one device of 100 MiB (1 MiB margin), PCEs
/// kept in `dir`, and loaders registered for `specs`.
fn on_device(
    mut config: cuzk_engine::EngineConfig,
    prover: &Arc<DevicePces>,
    dir: &std::path::Path,
    specs: [&'static str; 2],
) -> Engine {
    config.pce_cache_dir = Some(dir.to_owned());
    config.device_memory_margin = ByteSize(MIB);
    let engine = Engine::builder(config)
        .prover(prover.clone())
        .devices(vec![cuzk_gpu_sched::DeviceSpec {
            ordinal: 0,
            capacity_bytes: 100 * MIB,
        }])
        .build()
        .unwrap();
    for spec in specs {
        engine
            .register_params_loader(spec, params_bytes(&params(spec)), loader(spec))
            .unwrap();
    }
    engine
}

/// (a) HIGH jobs on a preloaded set, (b) a NORMAL job on the other set
/// with a HIGH job submitted mid-way, (c) the NORMAL set's job again: each
/// needs the set and PCE the one before evicted, every job finishes.
#[test]
fn mixed_bench_order_with_loaders_pce_files_and_device_pces_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let prover = Arc::new(DevicePces::default());
    let (need_low, _, witness_low) = need_of(LOW, &prover);
    let (need_high, _, _) = need_of(HIGH, &prover);
    // One set and PCE at a time (with a/b/c on the device a working set is
    // its witness: a few more of those).
    let mut config = config(need_low.max(need_high) + 2 * witness_low);
    config.synthesis_concurrency = cuzk_engine::Auto::Value(16);
    let engine = on_device(config, &prover, dir.path(), [LOW, HIGH]);
    // Both PCEs on disk already, as mixed_bench's PCE directory holds them.
    for spec in [LOW, HIGH] {
        let n = spec.strip_prefix("chain:").unwrap().parse().unwrap();
        let pce = Pce::record(Chain::good(n, 0)).unwrap();
        let path = dir.path().join(cuzk_engine::pce_file::file_name(spec));
        cuzk_engine::pce_file::write_pce(&path, spec, &pce).unwrap();
    }
    let high = ParamsRef::Key(HIGH.to_owned());
    engine.preload_params(&high).unwrap();
    // (a)
    for seed in [1, 2] {
        let job = engine
            .submit(request(HIGH, 1, seed, Priority::High))
            .unwrap();
        assert_eq!(wait_within(&engine, job, 120, "(a) a HIGH job"), 1);
    }
    // (b)
    let low = engine
        .submit(request(LOW, LOW_PARTS, 10, Priority::Normal))
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while low.progress().proved < 3 || engine.stats().queued_partitions > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "(b) no 3 proofs: {:#?}",
            engine.stats()
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    let mid = engine.submit(request(HIGH, 1, 3, Priority::High)).unwrap();
    assert_eq!(wait_within(&engine, mid, 120, "(b) the HIGH job"), 1);
    assert_eq!(
        wait_within(&engine, low, 120, "(b) the NORMAL job"),
        LOW_PARTS
    );
    // (c)
    let again = engine
        .submit(request(LOW, LOW_PARTS, 30, Priority::Normal))
        .unwrap();
    assert_eq!(
        wait_within(&engine, again, 120, "(c) the NORMAL job again"),
        LOW_PARTS
    );
    // mixed_bench's counts: the HIGH set preloaded, the NORMAL set loaded,
    // each reloaded once; every PCE read from disk; nobody parked.
    let stats = engine.stats();
    assert_eq!(
        (
            stats.params_loads,
            stats.params_evicted,
            stats.pce_loaded_from_disk
        ),
        (4, 3, 4),
        "{stats:#?}"
    );
    // Both shapes' PCEs held on the device were in the way of a partition
    // at least once, and given back.
    assert!(prover.released.load(Ordering::SeqCst) > 0);
    assert_eq!(stats.memory.working_set_bytes, 0, "{stats:#?}");
    assert_eq!(stats.dispatch_in_flight, 0);
    assert_eq!(stats.ready_partitions, 0);
}

/// A job whose PCE does not fit on the device beside another shape's PCE
/// that no job uses any more (what a swap leaves there) still gets its
/// a/b/c evaluated on the device: its admission frees the idle device
/// memory first. (At 41cd267 on an H100, a PoRep job after a WindowPoSt
/// swap ran with a/b/c on the host instead: 0.362 partitions/s against
/// 0.472.)
#[test]
fn an_idle_pce_in_the_way_is_freed_before_abc_go_to_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let prover = Arc::new(DevicePces {
        room_for_one_pce: true,
        ..DevicePces::default()
    });
    let (need_low, _, _) = need_of(LOW, &prover);
    let (need_high, _, _) = need_of(HIGH, &prover);
    // Both sets fit the host budget: nothing is evicted there.
    let engine = on_device(
        config(4 * (need_low + need_high)),
        &prover,
        dir.path(),
        [LOW, HIGH],
    );
    let first = engine
        .submit(request(HIGH, 2, 1, Priority::Normal))
        .unwrap();
    assert_eq!(wait_within(&engine, first, 120, "the first job"), 2);
    let n = |spec: &str| {
        let n = spec.strip_prefix("chain:").unwrap().parse().unwrap();
        Pce::record(Chain::good(n, 0)).unwrap().num_constraints()
    };
    // Its PCE stays on the device, used by nobody.
    assert_eq!(
        *prover.resident.lock().unwrap(),
        vec![(n(HIGH), 0)],
        "the first job's PCE is held on the device"
    );
    let second = engine.submit(request(LOW, 3, 7, Priority::Normal)).unwrap();
    assert_eq!(wait_within(&engine, second, 120, "the second job"), 3);
    let on_device = prover
        .from_pce
        .lock()
        .unwrap()
        .iter()
        .filter(|&&m| m == n(LOW))
        .count();
    assert_eq!(on_device, 3, "the second job's a/b/c went to the host");
    assert_eq!(
        prover.released.load(Ordering::SeqCst),
        PCE_ON_DEVICE,
        "the first job's idle PCE was not freed"
    );
}

/// [`gated`] through [`PartsGate::try_enter`], as the Filecoin witnesses
/// enter: a witness kept waiting gives its turn up when its job is to
/// yield.
fn gated_yielding(
    circuit: Chain,
    inputs: usize,
    aux: usize,
) -> std::result::Result<Witness, SynthError> {
    let pass = PartsGate::global().try_enter(1)?;
    let w = Witness::synthesize_with_capacity(circuit, inputs, aux);
    pass.part_done();
    w
}

/// Witnesses started by [`gated_yielding_together`] since the test last
/// cleared it.
static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
/// How many witnesses [`gated_yielding_together`] waits for.
const TOGETHER: usize = 12;

/// [`gated_yielding`] once [`TOGETHER`] witnesses have started (or 2 s have
/// passed): every one of them has decided whether it works on a copy of its
/// circuit before any reaches the gate, as when a 32 GiB PoRep job's ten
/// witnesses started at one instant on the GPU (6face44).
fn gated_yielding_together(
    circuit: Chain,
    inputs: usize,
    aux: usize,
) -> std::result::Result<Witness, SynthError> {
    use std::sync::atomic::Ordering;
    STARTED.fetch_add(1, Ordering::SeqCst);
    let until = std::time::Instant::now() + Duration::from_secs(2);
    while STARTED.load(Ordering::SeqCst) < TOGETHER && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(1));
    }
    gated_yielding(circuit, inputs, aux)
}

/// mixed_bench's (b) as the GPU ran it at 8662965: every partition of the
/// NORMAL job is taken by a synthesis thread at once and most wait at the
/// gate (`synthesis_ahead` 1). When a HIGH job on the other set waits for
/// memory, those waiting give their turn up and go back into the queue, so
/// the NORMAL job parks after the partitions already past the gate
/// (before, all of them were in flight and the HIGH job waited for every
/// one). Its proofs are the ones it makes alone. The witnesses start
/// together ([`gated_yielding_together`]), so they must share the room
/// under `synthesis_ahead` out as they start: each seeing all of it, none
/// would work on a copy, and none could yield (6face44 on the GPU).
#[test]
fn waiting_witnesses_go_back_to_the_queue_for_a_high_job() {
    // A small NORMAL shape and a large HIGH one: every NORMAL witness fits
    // beside its set, the HIGH set does not.
    const LOW: &str = "chain:500";
    const HIGH: &str = "chain:1500";
    const PARTS: usize = TOGETHER;
    let dir = tempfile::tempdir().unwrap();
    // Kernel regions of 100 ms: the HIGH job's admission starts waiting
    // while most NORMAL witnesses still wait at the gate, however slow the
    // machine's CPU side.
    let prover = Arc::new(DevicePces {
        slower_ms: 70,
        ..DevicePces::default()
    });
    let (need_low, _, witness_low) = need_of(LOW, &prover);
    let (need_high, _, _) = need_of(HIGH, &prover);
    // Room for every partition's witness at once (so all are taken by
    // synthesis threads, as on the GPU), not for both sets.
    let budget = need_low + PARTS as u64 * witness_low;
    assert!(
        need_high > (PARTS as u64 + 1) * witness_low && need_high <= budget,
        "{need_low} {need_high} {witness_low}"
    );
    let mut config = config(budget);
    config.synthesis_concurrency = cuzk_engine::Auto::Value(PARTS);
    config.synthesis_ahead = cuzk_engine::Auto::Value(1);
    let engine = on_device(config, &prover, dir.path(), [LOW, HIGH]);
    let normal = || request(LOW, PARTS, 10, Priority::Normal).with_witness(gated_yielding_together);
    let proofs = |job: JobHandle| -> Vec<Vec<u8>> {
        job.wait_blocking().unwrap().iter().map(bytes).collect()
    };
    // Alone: the reference (and the NORMAL set loaded).
    let alone = proofs(engine.submit(normal()).unwrap());
    assert_eq!(alone.len(), PARTS);
    assert_eq!(engine.stats().parks, 0);

    STARTED.store(0, std::sync::atomic::Ordering::SeqCst);
    let low = engine.submit(normal()).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while low.progress().proved < 1 || engine.stats().queued_partitions > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "{:#?}",
            engine.stats()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let low_id = low.id().0;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(proofs(low));
    });
    let high = engine.submit(request(HIGH, 1, 3, Priority::High)).unwrap();
    assert_eq!(wait_within(&engine, high, 120, "the HIGH job"), 1);
    // The NORMAL job had partitions left when the HIGH job's proof was out:
    // it parked for it.
    let normal_left = engine
        .status()
        .jobs
        .iter()
        .filter(|j| j.id == low_id)
        .map(|j| PARTS - j.proved)
        .sum::<usize>();
    let stats = engine.stats();
    assert!(normal_left > 0, "the NORMAL job never yielded: {stats:#?}");
    assert_eq!(stats.parks, 1, "{stats:#?}");
    let again = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("the NORMAL job after the HIGH one");
    assert_eq!(again, alone);
    let stats = engine.stats();
    assert_eq!(stats.memory.working_set_bytes, 0, "{stats:#?}");
    assert_eq!((stats.dispatch_in_flight, stats.ready_partitions), (0, 0));
}
