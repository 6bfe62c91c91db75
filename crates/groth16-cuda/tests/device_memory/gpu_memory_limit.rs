//! A device memory limit makes the GPU behave as a smaller card: its free
//! and total memory are that card's, a buffer that does not fit on it fails
//! with a clear out-of-memory error, what is freed comes back, and a proof
//! that does not fit fails cleanly and leaves the prover working. The limit
//! is per device and process, and the test checks exact free figures, so
//! it runs in the `device_memory` test executable, alone on the device.
//! Skips without a GPU.

use std::sync::Arc;

use bellperson::groth16::Proof;
use blstrs::Scalar;
use cuzk_gpu_sched::testing::gpu_or_skip;
use cuzk_groth16_cuda::{
    AbcInput, Bls12, GpuOptions, GpuProver, Groth16Error, Prover, ProverInput,
};
use cuzk_synth::circuits::CircuitSpec;
use cuzk_synth::{Pce, Witness};

const MIB: u64 = 1 << 20;

fn bytes(p: &Proof<Bls12>) -> Vec<u8> {
    let mut v = Vec::with_capacity(192);
    p.write(&mut v).unwrap();
    v
}

#[test]
fn a_memory_limit_is_a_smaller_card() {
    let _device = crate::device();
    let Some(_) = gpu_or_skip("a_memory_limit_is_a_smaller_card") else {
        return;
    };
    let prover = GpuProver::with_options(0, GpuOptions::default()).unwrap();
    let gpu = Arc::clone(prover.gpu());
    assert_eq!(gpu.memory_limit(), None);

    // A card with 256 MiB more than is held now: once every stream is done,
    // so what a test before this one freed in stream order (gpu_evict's
    // 925 MB set, on another thread's stream) is back with the driver
    // before the figure is read, as set_memory_limit reads it.
    gpu.synchronize_device().unwrap();
    let (free, total) = gpu.mem_info().unwrap();
    let limit = total - free + 256 * MIB;
    gpu.set_memory_limit(Some(limit)).unwrap();
    assert_eq!(gpu.memory_limit(), Some(limit));
    assert_eq!(gpu.mem_info().unwrap(), (256 * MIB, limit));

    // Buffers are counted as they come and go.
    let held = gpu.allocated_bytes();
    let a = gpu
        .alloc_zeros::<Scalar>((128 * MIB / 32) as usize)
        .unwrap();
    assert_eq!(gpu.allocated_bytes(), held + 128 * MIB);
    assert_eq!(gpu.mem_info().unwrap().0, 128 * MIB);
    let err = gpu
        .alloc_zeros::<Scalar>((200 * MIB / 32) as usize)
        .unwrap_err();
    match &err {
        Groth16Error::DeviceOutOfMemory {
            need, free, total, ..
        } => {
            assert_eq!((*need, *free, *total), (200 * MIB, 128 * MIB, limit));
        }
        other => panic!("expected DeviceOutOfMemory, got {other}"),
    }
    assert!(err.to_string().contains("device memory limit"), "{err}");
    assert_eq!(
        gpu.allocated_bytes(),
        held + 128 * MIB,
        "a refusal is not counted"
    );
    drop(a);
    assert_eq!(gpu.allocated_bytes(), held);
    let b = gpu
        .alloc_zeros::<Scalar>((200 * MIB / 32) as usize)
        .unwrap();
    drop(b);

    // A proof, unlimited; then on a card with no room: a clear error, and
    // the prover still proves (the same bytes) once the limit is lifted.
    gpu.set_memory_limit(None).unwrap();
    let spec: CircuitSpec = "porep:16".parse().unwrap();
    let pce = Pce::record(spec.build(0)).unwrap();
    let params = cuzk_groth16_cuda::fake::fake_params(&pce, 3);
    let witness = Witness::synthesize(spec.build(1)).unwrap();
    let input = ProverInput {
        pce: &pce,
        witness: &witness,
        abc: AbcInput::FromPce,
    };
    let (r, s) = (Scalar::from(5u64), Scalar::from(9u64));
    let expected = bytes(&prover.prove(input, &params, r, s).unwrap().proof);
    let other = cuzk_groth16_cuda::fake::fake_params(&pce, 4);
    gpu.synchronize().unwrap();
    let (free, total) = gpu.mem_info().unwrap();
    gpu.set_memory_limit(Some(total - free + MIB)).unwrap();
    let err = prover.prove(input, &other, r, s).unwrap_err();
    assert!(
        matches!(err, Groth16Error::DeviceOutOfMemory { .. }),
        "expected DeviceOutOfMemory, got {err}"
    );
    gpu.set_memory_limit(None).unwrap();
    let again = bytes(&prover.prove(input, &params, r, s).unwrap().proof);
    assert_eq!(again, expected);
}
