//! The engine on the GPU backend (`backend = "gpu"`): a multi-partition job
//! on two workers per GPU gives proofs byte-identical to bellperson that
//! verify, with a/b/c computed on the GPU and on the CPU, partitions staged
//! on the device and in host memory (`gpu_staging`), every kernel
//! region ran on a GPU lane, and the memory budget returns to idle. Skips without a GPU (fails with CUZK_REQUIRE_GPU=1).
//! With two GPUs (`gpus = [0, 1]`), one job's partitions are proved on both,
//! byte-identical, each GPU holding the parameters (skips with fewer than
//! two; fails instead with CUZK_REQUIRE_GPUS=2).

use crate::common::*;
use bellperson::groth16::{create_proof, prepare_verifying_key, verify_proof};
use blstrs::Scalar;
use cuzk_engine::{
    Auto, Backend, Engine, EngineConfig, GpuStaging, ParamsRef, ProofRequest, ShapeId,
};
use cuzk_gpu_sched::testing::{gpu_or_skip, gpus_or_skip};
use cuzk_synth::Witness;
use ff::Field;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

#[test]
fn gpu_backend_jobs_are_byte_identical_to_bellperson() {
    let Some(_) = gpu_or_skip("gpu_backend_jobs_are_byte_identical_to_bellperson") else {
        return;
    };
    for (gpu_abc, staging, pin_abc) in [
        (true, GpuStaging::Auto, true),
        (false, GpuStaging::Auto, true),
        // Staged in host memory: a/b/c on the CPU even with gpu_abc, the
        // uploads and H's two device vectors in the kernel region; a/b/c
        // in page-locked buffers and in ordinary ones (these, smaller than
        // one bounce buffer, are copied as they are; groth16-cuda's
        // `host_staging_gives_the_same_proofs` bounces pageable ones).
        (true, GpuStaging::Host, true),
        (true, GpuStaging::Host, false),
    ] {
        gpu_backend_job(gpu_abc, staging, pin_abc);
    }
}

fn gpu_backend_job(gpu_abc: bool, staging: GpuStaging, pin_abc: bool) {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::new(EngineConfig {
        backend: Backend::Gpu,
        workers_per_device: Auto::Value(2),
        gpu_abc,
        gpu_staging: staging,
        gpu_pin_abc: pin_abc,
        ..EngineConfig::default()
    })
    .unwrap();
    assert_eq!(engine.config().backend, "cuda");
    let mut rng = ChaCha20Rng::seed_from_u64(21);
    for spec in ["porep:10", "mul-chain:9"] {
        let seeds = [3u64, 1, 4, 1, 5, 9];
        prove_and_check(&engine, dir.path(), spec, &seeds, &mut rng);
        eprintln!(
            "{spec}: {} GPU partitions byte-identical (gpu_abc {gpu_abc}, staged {staging:?}, \
             gpu_pin_abc {pin_abc})",
            seeds.len(),
        );
    }
    let timeline = engine.timeline().snapshot();
    let on_gpu = timeline
        .spans
        .iter()
        .filter(|s| s.stage == "abc on gpu")
        .count();
    let spmv = timeline.spans.iter().filter(|s| s.stage == "spmv").count();
    if gpu_abc && staging != GpuStaging::Host {
        assert_eq!((on_gpu, spmv), (12, 0));
    } else {
        assert_eq!((on_gpu, spmv), (0, 12));
    }
    let summary = timeline.summary();
    assert!(!summary.devices.is_empty());
    assert!(summary.devices.iter().all(|d| d.kernel_regions > 0));
    let stats = engine.stats();
    assert_eq!(stats.memory.working_set_bytes, 0);
    assert_eq!(stats.dispatch_in_flight, 0);
}

/// With `pce_cache_dir`, the GPU that keeps a shape's PCE lets the engine
/// release its host matrices (`release_host_pce`): a `pce_release` span, the
/// cache charged for the PCE without them, and later jobs prove from the
/// GPU's copy without reading the file; every proof bellperson's. (The
/// first job's partitions may all be synthesized before its first puts the
/// PCE on the GPU: the second job's release it.)
#[test]
fn a_pce_the_gpu_keeps_leaves_host_memory() {
    let Some(_) = gpu_or_skip("a_pce_the_gpu_keeps_leaves_host_memory") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::new(EngineConfig {
        backend: Backend::Gpu,
        workers_per_device: Auto::Value(2),
        pce_cache_dir: Some(dir.path().join("pce")),
        ..EngineConfig::default()
    })
    .unwrap();
    let spec = "porep:10";
    let mut rng = ChaCha20Rng::seed_from_u64(23);
    prove_and_check(&engine, dir.path(), spec, &[3, 1, 4, 1, 5, 9], &mut rng);
    prove_and_check(&engine, dir.path(), spec, &[2, 6, 5], &mut rng);
    let whole = cuzk_synth::Pce::record(builtin(spec, 0)).unwrap();
    let unused = cuzk_synth::MatrixSource::new("unused", || Err("unused".into()));
    let light = whole.release_matrices(unused).bytes() as u64;
    let pces = engine.status().pces;
    assert_eq!((pces.len(), pces[0].bytes), (1, light), "{pces:?}");
    let spans = engine.timeline().snapshot().spans;
    let released = spans
        .iter()
        .filter(|s| s.stage == cuzk_engine::timeline::PCE_RELEASE)
        .count();
    assert_eq!(released, 1);
    let loads = engine.stats().pce_loaded_from_disk;
    prove_and_check(&engine, dir.path(), spec, &[2, 7, 1, 8], &mut rng);
    assert_eq!(engine.stats().pce_loaded_from_disk, loads);
    assert_eq!(engine.status().pces[0].bytes, light);
}

/// Two GPUs: one engine with `gpus = [0, 1]` and two workers per GPU proves
/// a 12-partition job; every proof equals bellperson's `create_proof` with
/// the same r and s and verifies, both GPUs ran kernel regions, and each
/// holds the parameter set afterwards (each GPU proves whole partitions, so
/// each needs its own copy).
#[test]
fn two_gpus_prove_one_jobs_partitions_byte_identical() {
    let name = "two_gpus_prove_one_jobs_partitions_byte_identical";
    let Some(devices) = gpus_or_skip(name, 2) else {
        return;
    };
    let ordinals: Vec<usize> = devices.iter().take(2).map(|d| d.ordinal).collect();
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::new(EngineConfig {
        backend: Backend::Gpu,
        gpus: Some(ordinals.clone()),
        workers_per_device: Auto::Value(2),
        ..EngineConfig::default()
    })
    .unwrap();
    let spec = "porep:10";
    let seeds: Vec<u64> = (1..=12).collect();
    prove_and_check(
        &engine,
        dir.path(),
        spec,
        &seeds,
        &mut ChaCha20Rng::seed_from_u64(22),
    );
    let summary = engine.timeline().snapshot().summary();
    let mut ran: Vec<usize> = summary
        .devices
        .iter()
        .filter(|d| d.kernel_regions > 0)
        .map(|d| d.device)
        .collect();
    ran.sort_unstable();
    assert_eq!(
        ran, ordinals,
        "kernel regions per device: {:?}",
        summary.devices
    );
    let status = engine.status();
    assert_eq!(status.devices.len(), 2, "{:?}", status.devices);
    for d in &status.devices {
        assert!(
            d.held_bytes > 0,
            "GPU {} holds no parameters: {d:?}",
            d.ordinal
        );
    }
    eprintln!(
        "{spec}: 12 partitions on GPUs {ordinals:?}, byte-identical; regions {:?}",
        summary
            .devices
            .iter()
            .map(|d| (d.device, d.kernel_regions))
            .collect::<Vec<_>>()
    );
}

/// Submits one job of `spec`'s built-in circuit (a partition per seed, r
/// and s from `rng`) and checks every proof equals bellperson's
/// `create_proof` with the same r and s and verifies.
fn prove_and_check(
    engine: &Engine,
    dir: &std::path::Path,
    spec: &str,
    seeds: &[u64],
    rng: &mut ChaCha20Rng,
) {
    let params = params(spec);
    let path = params_file(dir, spec);
    let randomness: Vec<(Scalar, Scalar)> = seeds
        .iter()
        .map(|_| (Scalar::random(&mut *rng), Scalar::random(&mut *rng)))
        .collect();
    let proofs = engine
        .submit(
            ProofRequest::new(
                ShapeId(spec.into()),
                ParamsRef::File(path),
                seeds.iter().map(|&s| builtin(spec, s)).collect(),
            )
            .with_randomness(randomness.clone()),
        )
        .unwrap()
        .wait_blocking()
        .unwrap();
    let pvk = prepare_verifying_key(&params.vk);
    for (i, (&seed, (r, s))) in seeds.iter().zip(&randomness).enumerate() {
        let theirs = create_proof(builtin(spec, seed), &*params, *r, *s).unwrap();
        assert_eq!(bytes(&proofs[i]), bytes(&theirs), "{spec} partition {i}");
        let witness = Witness::synthesize(builtin(spec, seed)).unwrap();
        assert!(verify_proof(&pvk, &proofs[i], witness.public_inputs()).unwrap());
    }
}

/// `backend = "gpu"` without a GPU is refused at start with the reason;
/// with one, `gpus` naming a GPU that is not there is refused too.
#[test]
fn the_gpu_backend_is_refused_with_a_reason_when_unusable() {
    let config = EngineConfig {
        backend: Backend::Gpu,
        gpus: Some(vec![4096]),
        ..EngineConfig::default()
    };
    let err = Engine::new(config).unwrap_err().to_string();
    assert!(
        err.contains("gpu") && (err.contains("GPU 4096") || err.contains("no GPU")),
        "{err}"
    );
}
