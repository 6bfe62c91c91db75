//! Device memory as a prover declares it: what it holds once for a shape is
//! reserved once per device, what it keeps across proofs stays reserved
//! until evicted, and held memory is given back when a partition needs room.

use crate::common::*;
use cuzk_engine::{ParamsRef, ProofRequest};

use super::MIB;

/// The CPU prover, declaring device memory as a GPU backend does: `own`
/// bytes per partition in flight and, held once for a shape, 40 MiB (or 70
/// MiB for shapes of more than 2,000 constraints).
#[derive(Debug, Default)]
struct Sharing {
    inner: cuzk_groth16_cuda::CpuProver,
}

impl cuzk_groth16_cuda::Prover for Sharing {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn device_bytes(&self, _pce: &cuzk_synth::Pce) -> u64 {
        10 * MIB
    }

    fn shared_device_bytes(&self, pce: &cuzk_synth::Pce) -> u64 {
        if pce.num_constraints() > 2000 {
            70 * MIB
        } else {
            40 * MIB
        }
    }

    fn prepare(
        &self,
        input: cuzk_groth16_cuda::ProverInput<'_>,
        params: &bellperson::groth16::Parameters<cuzk_groth16_cuda::Bls12>,
        timings: &mut cuzk_groth16_cuda::StageTimings,
    ) -> cuzk_groth16_cuda::Result<cuzk_groth16_cuda::Staged> {
        self.inner.prepare(input, params, timings)
    }

    fn kernel_region(
        &self,
        input: cuzk_groth16_cuda::ProverInput<'_>,
        params: &bellperson::groth16::Parameters<cuzk_groth16_cuda::Bls12>,
        staged: cuzk_groth16_cuda::Staged,
        timings: &mut cuzk_groth16_cuda::StageTimings,
    ) -> cuzk_groth16_cuda::Result<cuzk_groth16_cuda::MsmResults> {
        self.inner.kernel_region(input, params, staged, timings)
    }
}

/// What a prover holds once for a shape is one standing reservation per
/// device, not part of every partition's: on a 64 MiB device, partitions of
/// 10 MiB beside 40 MiB held once prove (and the 40 MiB stay reserved after
/// the job, as the prover keeps them); a shape whose shared part can never
/// fit fails with the bytes named, and the engine goes on serving.
#[test]
fn what_a_prover_holds_once_is_reserved_once_per_device() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(512 * MIB);
    config.device_memory_margin = cuzk_engine::ByteSize(MIB);
    let engine = cuzk_engine::Engine::builder(config)
        .prover(std::sync::Arc::new(Sharing::default()))
        .devices(vec![cuzk_gpu_sched::DeviceSpec {
            ordinal: 0,
            capacity_bytes: 64 * MIB,
        }])
        .build()
        .unwrap();
    let reserved = || engine.status().devices[0].reserved_bytes;
    assert_eq!(reserved(), 0);
    let small = ParamsRef::File(params_file(dir.path(), "mul-chain:10"));
    let proofs = engine
        .submit(ProofRequest::new(
            "mul-chain:10",
            small.clone(),
            (1..=4).map(|s| builtin("mul-chain:10", s)).collect(),
        ))
        .unwrap()
        .wait_blocking()
        .unwrap();
    assert_eq!(proofs.len(), 4);
    assert_eq!(reserved(), 40 * MIB, "the shared part stays reserved, once");

    // 70 MiB never fit in 63 usable: a clear error, the job fails alone.
    let big = ParamsRef::File(params_file(dir.path(), "porep:12"));
    let err = engine
        .submit(ProofRequest::new(
            "porep:12",
            big,
            vec![builtin("porep:12", 1)],
        ))
        .unwrap()
        .wait_blocking()
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains(&(70 * MIB).to_string()), "{text}");
    assert_eq!(reserved(), 40 * MIB);
    // Still serving.
    let proofs = engine
        .submit(ProofRequest::new(
            "mul-chain:10",
            small,
            vec![builtin("mul-chain:10", 9)],
        ))
        .unwrap()
        .wait_blocking()
        .unwrap();
    assert_eq!(proofs.len(), 1);
}

/// The CPU prover, holding device memory across proofs as the GPU backend
/// does with a resident parameter set: `hold` bytes from its first kernel
/// region on, until it is asked to let go of what no proof uses.
#[derive(Debug, Default)]
struct Holding {
    inner: cuzk_groth16_cuda::CpuProver,
    hold: u64,
    held: std::sync::atomic::AtomicU64,
    released: std::sync::atomic::AtomicU64,
}

impl cuzk_groth16_cuda::Prover for Holding {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn device_bytes(&self, _pce: &cuzk_synth::Pce) -> u64 {
        10 * MIB
    }

    fn held_device_bytes(&self) -> u64 {
        self.held.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn release_idle(&self) -> u64 {
        self.released
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.held.swap(0, std::sync::atomic::Ordering::SeqCst)
    }

    fn prepare(
        &self,
        input: cuzk_groth16_cuda::ProverInput<'_>,
        params: &bellperson::groth16::Parameters<cuzk_groth16_cuda::Bls12>,
        timings: &mut cuzk_groth16_cuda::StageTimings,
    ) -> cuzk_groth16_cuda::Result<cuzk_groth16_cuda::Staged> {
        self.inner.prepare(input, params, timings)
    }

    fn kernel_region(
        &self,
        input: cuzk_groth16_cuda::ProverInput<'_>,
        params: &bellperson::groth16::Parameters<cuzk_groth16_cuda::Bls12>,
        staged: cuzk_groth16_cuda::Staged,
        timings: &mut cuzk_groth16_cuda::StageTimings,
    ) -> cuzk_groth16_cuda::Result<cuzk_groth16_cuda::MsmResults> {
        self.held
            .store(self.hold, std::sync::atomic::Ordering::SeqCst);
        self.inner.kernel_region(input, params, staged, timings)
    }
}

/// What a prover holds across proofs (a resident parameter set, device
/// PCEs) is a standing reservation on its device from the phase that
/// allocated it until it is freed: after a job the 20 MiB stay reserved;
/// `evict_idle` frees them and the reservation goes with them.
#[test]
fn what_a_prover_keeps_on_the_device_is_reserved_until_evicted() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(512 * MIB);
    config.device_memory_margin = cuzk_engine::ByteSize(MIB);
    let prover = std::sync::Arc::new(Holding {
        hold: 20 * MIB,
        ..Holding::default()
    });
    let engine = cuzk_engine::Engine::builder(config)
        .prover(prover.clone())
        .devices(vec![cuzk_gpu_sched::DeviceSpec {
            ordinal: 0,
            capacity_bytes: 64 * MIB,
        }])
        .build()
        .unwrap();
    let reserved = || engine.status().devices[0].reserved_bytes;
    assert_eq!(reserved(), 0);
    let params = ParamsRef::File(params_file(dir.path(), "mul-chain:10"));
    let proofs = engine
        .submit(ProofRequest::new(
            "mul-chain:10",
            params.clone(),
            (1..=3).map(|s| builtin("mul-chain:10", s)).collect(),
        ))
        .unwrap()
        .wait_blocking()
        .unwrap();
    assert_eq!(proofs.len(), 3);
    assert_eq!(reserved(), 20 * MIB, "what the prover keeps stays reserved");
    engine.evict_idle();
    assert_eq!(cuzk_groth16_cuda::Prover::held_device_bytes(&*prover), 0);
    assert_eq!(reserved(), 0, "freed, and no longer reserved");
    // Held again by the next job's kernel region.
    engine
        .submit(ProofRequest::new(
            "mul-chain:10",
            params,
            vec![builtin("mul-chain:10", 7)],
        ))
        .unwrap()
        .wait_blocking()
        .unwrap();
    assert_eq!(reserved(), 20 * MIB);
}

/// Held memory yields to work: with 55 MiB held on a 64 MiB device, a
/// 10 MiB partition does not fit beside it, so each time the device goes
/// idle with one waiting, the prover is asked to free what no proof uses,
/// and every partition is proved (none refused, none left waiting).
#[test]
fn held_device_memory_is_given_back_when_it_is_in_the_way() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(512 * MIB);
    config.device_memory_margin = cuzk_engine::ByteSize(MIB);
    let prover = std::sync::Arc::new(Holding {
        hold: 55 * MIB,
        ..Holding::default()
    });
    let engine = cuzk_engine::Engine::builder(config)
        .prover(prover.clone())
        .devices(vec![cuzk_gpu_sched::DeviceSpec {
            ordinal: 0,
            capacity_bytes: 64 * MIB,
        }])
        .build()
        .unwrap();
    let params = ParamsRef::File(params_file(dir.path(), "mul-chain:10"));
    let proofs = engine
        .submit(ProofRequest::new(
            "mul-chain:10",
            params,
            (1..=4).map(|s| builtin("mul-chain:10", s)).collect(),
        ))
        .unwrap()
        .wait_blocking()
        .unwrap();
    assert_eq!(proofs.len(), 4);
    let released = prover.released.load(std::sync::atomic::Ordering::SeqCst);
    assert!(released >= 1, "the held memory was never asked back");
    assert_eq!(engine.status().devices[0].reserved_bytes, 55 * MIB);
}
