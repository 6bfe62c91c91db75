//! `release_host_pce`: a PCE whose matrices every device keeps leaves host
//! memory, and comes back from `pce_cache_dir` where the host needs it (a
//! device that freed its copy, a job whose a/b/c the host evaluates), with
//! every proof still bellperson's.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::common::*;
use bellperson::groth16::{Parameters, create_proof};
use blstrs::Scalar;
use cuzk_engine::timeline::PCE_RELEASE;
use cuzk_engine::{Engine, EngineConfig, ParamsRef, ProofRequest};
use cuzk_groth16_cuda::{
    AbcInput, AbcPlacement, Bls12, CpuProver, MsmResults, Prover, ProverInput, StageTimings, Staged,
};
use cuzk_synth::Pce;
use ff::Field;
use rand_core::SeedableRng;

use super::MIB;

/// The CPU prover as the GPU backend keeps PCEs: a/b/c evaluated "on the
/// device" (in prepare) from its own whole copy of the PCE, made by the
/// first partition that needs it ([`Pce::with_matrices`]: read again when
/// the engine's PCE was released); `on_device` false puts a/b/c on the host.
#[derive(Debug)]
struct KeepsPce {
    on_device: AtomicBool,
    copies: Mutex<Vec<Arc<Pce>>>,
    /// Copies made, and of them, those read again from a released PCE.
    uploads: AtomicUsize,
    reloads: AtomicUsize,
}

impl KeepsPce {
    fn new() -> Self {
        KeepsPce {
            on_device: AtomicBool::new(true),
            copies: Mutex::new(Vec::new()),
            uploads: AtomicUsize::new(0),
            reloads: AtomicUsize::new(0),
        }
    }

    fn copy_of(&self, pce: &Pce) -> Option<Arc<Pce>> {
        let print = pce.fingerprint();
        let copies = self.copies.lock().unwrap();
        copies.iter().find(|c| c.fingerprint() == print).cloned()
    }

    fn counts(&self) -> (usize, usize) {
        (
            self.uploads.load(Ordering::SeqCst),
            self.reloads.load(Ordering::SeqCst),
        )
    }
}

impl Prover for KeepsPce {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn abc_placement(&self, _pce: &Pce) -> AbcPlacement {
        if self.on_device.load(Ordering::SeqCst) {
            AbcPlacement::device("the PCE is kept on the device")
        } else {
            AbcPlacement::host("the device has no room for the PCE")
        }
    }

    fn holds_pce(&self, pce: &Pce) -> bool {
        self.copy_of(pce).is_some()
    }

    fn prepare(
        &self,
        input: ProverInput<'_>,
        params: &Parameters<Bls12>,
        timings: &mut StageTimings,
    ) -> cuzk_groth16_cuda::Result<Staged> {
        if !matches!(input.abc, AbcInput::FromPce) {
            return CpuProver.prepare(input, params, timings);
        }
        let copy = match self.copy_of(input.pce) {
            Some(c) => c,
            None => {
                if input.pce.is_released() {
                    self.reloads.fetch_add(1, Ordering::SeqCst);
                }
                let whole = Arc::new(input.pce.with_matrices()?.into_owned());
                assert!(!whole.is_released());
                self.uploads.fetch_add(1, Ordering::SeqCst);
                self.copies.lock().unwrap().push(Arc::clone(&whole));
                whole
            }
        };
        CpuProver.prepare(
            ProverInput {
                pce: &copy,
                ..input
            },
            params,
            timings,
        )
    }

    fn kernel_region(
        &self,
        input: ProverInput<'_>,
        params: &Parameters<Bls12>,
        staged: Staged,
        timings: &mut StageTimings,
    ) -> cuzk_groth16_cuda::Result<MsmResults> {
        CpuProver.kernel_region(input, params, staged, timings)
    }
}

const SPEC: &str = "chain:300";

/// The host bytes the engine charges for its PCE of `SPEC` now.
fn cached_pce_bytes(engine: &Engine) -> u64 {
    let pces = engine.status().pces;
    assert_eq!(pces.len(), 1, "{pces:?}");
    pces[0].bytes
}

/// Proves `seeds` and checks every proof against bellperson's.
fn prove(engine: &Engine, seeds: std::ops::Range<u64>, what: &str) {
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seeds.start);
    let randomness: Vec<(Scalar, Scalar)> = seeds
        .clone()
        .map(|_| (Scalar::random(&mut rng), Scalar::random(&mut rng)))
        .collect();
    let proofs = engine
        .submit(
            ProofRequest::new(
                SPEC,
                ParamsRef::Key(SPEC.into()),
                seeds.clone().map(|s| Chain::good(300, s)).collect(),
            )
            .with_randomness(randomness.clone()),
        )
        .unwrap()
        .wait_blocking()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let params = params(SPEC);
    for (i, (seed, (r, s))) in seeds.zip(&randomness).enumerate() {
        let theirs = create_proof(Chain::good(300, seed), &*params, *r, *s).unwrap();
        assert_eq!(bytes(&proofs[i]), bytes(&theirs), "{what}: partition {i}");
    }
}

fn engine_with(prover: &Arc<KeepsPce>, cfg: EngineConfig) -> Engine {
    let engine = Engine::builder(cfg).prover(prover.clone()).build().unwrap();
    engine.register_params(SPEC, params(SPEC)).unwrap();
    engine
}

#[test]
fn a_pce_every_device_keeps_leaves_host_memory_and_comes_back_where_the_host_needs_it() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = EngineConfig {
        pce_cache_dir: Some(dir.path().to_owned()),
        ..config(256 * MIB)
    };
    let whole = Pce::record(Chain::good(300, 0)).unwrap();
    let unused = cuzk_synth::MatrixSource::new("unused", || Err("unused".into()));
    let light = whole.release_matrices(unused).bytes() as u64;
    assert!(whole.matrix_bytes() > 8 * (whole.bytes() - whole.matrix_bytes()));

    let prover = Arc::new(KeepsPce::new());
    let engine = engine_with(&prover, cfg.clone());
    // The first partition puts the PCE on the device; a later one finds it
    // there and releases the host's matrices.
    prove(&engine, 0..4, "first job");
    assert_eq!(prover.counts(), (1, 0), "one upload, from the whole PCE");
    assert_eq!(cached_pce_bytes(&engine), light);
    let spans = engine.timeline().snapshot().spans;
    let released: Vec<_> = spans.iter().filter(|s| s.stage == PCE_RELEASE).collect();
    assert_eq!(released.len(), 1, "released once");
    let note = released[0].note.as_deref().unwrap();
    assert!(note.contains("every device keeps the PCE"), "{note}");

    // The next job proves from the device's copy: nothing read again.
    prove(&engine, 10..13, "second job");
    assert_eq!(prover.counts(), (1, 0));
    assert_eq!(engine.stats().pce_loaded_from_disk, 0);

    // The device frees its copy (as under memory pressure): the next
    // upload reads the file again.
    prover.copies.lock().unwrap().clear();
    prove(&engine, 20..22, "after the device freed its copy");
    assert_eq!(prover.counts(), (2, 1), "uploaded again, from the file");

    // A job whose a/b/c the host evaluates gets the matrices again at
    // admission (from the file), and the cache holds them again.
    prover.on_device.store(false, Ordering::SeqCst);
    let loaded = engine.stats().pce_loaded_from_disk;
    prove(&engine, 30..33, "a/b/c on the host");
    assert_eq!(engine.stats().pce_loaded_from_disk, loaded + 1);
    assert!(cached_pce_bytes(&engine) > light);

    // Off: the matrices stay.
    let prover = Arc::new(KeepsPce::new());
    let engine = engine_with(
        &prover,
        EngineConfig {
            release_host_pce: false,
            ..cfg.clone()
        },
    );
    prove(&engine, 40..43, "release_host_pce = false");
    assert!(cached_pce_bytes(&engine) > light);

    // Without a PCE file to read them from again, they stay too.
    let prover = Arc::new(KeepsPce::new());
    let engine = engine_with(&prover, config(256 * MIB));
    prove(&engine, 50..53, "no pce_cache_dir");
    assert!(cached_pce_bytes(&engine) > light);
    assert_eq!(prover.counts(), (1, 0));
}
