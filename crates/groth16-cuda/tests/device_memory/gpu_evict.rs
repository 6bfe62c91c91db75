//! A parameter set's device copy lives as long as its owner holds the set
//! (and the shape's PCE until everything idle is let go):
//! the prover keeps no host copy of its own, frees the device copy once the
//! set is dropped (`Prover::release_unused`, which the engine calls when it
//! evicts a set), and a set reloaded after the old one was dropped replaces
//! the old copy instead of sitting beside it. Device memory is read with
//! cuMemGetInfo, so this runs in the `device_memory` test executable,
//! alone on the device (no other test allocating meanwhile). Skips without
//! a GPU.
//!
//! Allocations come from the driver's stream-ordered pool, which gives
//! freed memory back at the next synchronization in whole blocks: a block
//! shared with memory still in use stays (on the H200, 32 of a 2^17 set's
//! 55 MiB came back). The set is 2^21 constraints (about 925 MB on the
//! device) and every comparison allows `POOL_SLACK` for that.

use std::sync::Arc;

use bellperson::groth16::{Parameters, Proof};
use blstrs::Scalar;
use cuzk_gpu_sched::testing::gpu_or_skip;
use cuzk_groth16_cuda::{
    AbcInput, Bls12, GpuOptions, GpuProver, ParamsPlacement, Prover, ProverInput,
    params_device_bytes,
};
use cuzk_synth::circuits::CircuitSpec;
use cuzk_synth::{Pce, Witness};

/// What the pool may keep of a freed set, or add for a new one, beyond its
/// bytes (block granularity).
const POOL_SLACK: u64 = 64 << 20;

fn bytes(p: &Proof<Bls12>) -> Vec<u8> {
    let mut v = Vec::with_capacity(192);
    p.write(&mut v).unwrap();
    v
}

/// A copy of `p` with vectors of its own (what loading the file again
/// gives).
fn reloaded(p: &Parameters<Bls12>) -> Parameters<Bls12> {
    Parameters {
        vk: p.vk.clone(),
        h: Arc::new((*p.h).clone()),
        l: Arc::new((*p.l).clone()),
        a: Arc::new((*p.a).clone()),
        b_g1: Arc::new((*p.b_g1).clone()),
        b_g2: Arc::new((*p.b_g2).clone()),
    }
}

#[test]
fn dropped_parameters_free_their_device_copy_and_a_reload_replaces_it() {
    let _device = crate::device();
    let Some(_) = gpu_or_skip("dropped_parameters_free_their_device_copy_and_a_reload_replaces_it")
    else {
        return;
    };
    let prover = GpuProver::with_options(
        0,
        GpuOptions {
            params: ParamsPlacement::Resident,
            ..GpuOptions::default()
        },
    )
    .unwrap();
    let gpu = Arc::clone(prover.gpu());
    let free = || {
        gpu.synchronize_device().unwrap();
        gpu.mem_info().unwrap().0
    };
    let spec: CircuitSpec = "porep:21".parse().unwrap();
    let pce = Pce::record(spec.build(0)).unwrap();
    // Fake parameters (pseudo-random points of the right counts): quick to
    // make at this size; the proofs are compared with each other.
    let first: Parameters<Bls12> = cuzk_groth16_cuda::fake::fake_params(&pce, 5);
    let set_bytes = params_device_bytes(&first);
    assert!(set_bytes > 8 * POOL_SLACK, "{set_bytes} bytes");
    let witness = Witness::synthesize(spec.build(3)).unwrap();
    let input = ProverInput {
        pce: &pce,
        witness: &witness,
        abc: AbcInput::FromPce,
    };
    let (r, s) = (Scalar::from(7u64), Scalar::from(11u64));
    let expected = bytes(&prover.prove(input, &first, r, s).unwrap().proof);
    // Every later proof, whichever copy of the set it used, is the same.
    let prove = |p: &Parameters<Bls12>| {
        let out = prover.prove(input, p, r, s).unwrap();
        assert_eq!(
            bytes(&out.proof),
            expected,
            "another proof from the same set"
        );
    };
    let near = |got: u64, want: u64, what: &str| {
        assert!(
            got + POOL_SLACK >= want && got <= want + POOL_SLACK,
            "{what}: {got} bytes, expected {want} give or take {POOL_SLACK}"
        );
    };

    // The first proof uploaded the set (and the shape's own device state:
    // its PCE, densities), all of which the prover reports it holds.
    let pce_bytes = cuzk_groth16_cuda::spmv::device_bytes(&pce);
    let held = prover.held_device_bytes();
    assert!(
        held >= set_bytes + pce_bytes && held <= set_bytes + pce_bytes + POOL_SLACK,
        "held {held}: the set {set_bytes} and the PCE {pce_bytes}"
    );
    assert_eq!(
        Arc::strong_count(&first.h),
        1,
        "the prover keeps a host copy of the parameters"
    );
    assert_eq!(prover.release_unused(), 0, "freed a set still held");
    let one = free();

    // The same vectors again: no new upload.
    prove(&first);
    near(one.abs_diff(free()), 0, "a second proof with the same set");

    // A reload while the first set is still held: two sets, two copies.
    let second = reloaded(&first);
    prove(&second);
    let two = free();
    near(one.abs_diff(two), set_bytes, "a second set's upload");

    // The first set dropped: its copy is freed, the second stays.
    drop(first);
    assert_eq!(prover.release_unused(), set_bytes);
    near(free().abs_diff(two), set_bytes, "device memory given back");
    assert_eq!(prover.release_unused(), 0);
    prove(&second);

    // Dropped, then reloaded: the old copy goes before the new one is
    // uploaded, so device memory stays where it was.
    let before = free();
    let third = reloaded(&second);
    drop(second);
    prove(&third);
    near(
        before.abs_diff(free()),
        0,
        "a reload after the old set was dropped",
    );
    drop(third);
    assert_eq!(prover.release_unused(), set_bytes);
    let tables = prover.held_device_bytes();
    assert!(tables >= pce_bytes, "the PCE is still held: {tables} bytes");
    // Everything idle: the PCE and the shape's tables go too.
    let before = free();
    assert_eq!(prover.release_idle(), tables);
    assert_eq!(prover.held_device_bytes(), 0);
    near(free().abs_diff(before), tables, "the PCE given back");
    eprintln!(
        "a set of {set_bytes} device bytes: {:.1} MiB free after the last release",
        free() as f64 / (1u64 << 20) as f64
    );
}
