//! A set kept in part (`ParamsPlacement::Auto` on a card where it does not
//! fit whole) takes the queries that fit once room opens up, in a later
//! kernel region, and the proofs stay the same bytes. Skips without a GPU.

use std::sync::Arc;

use bellperson::groth16::Proof;
use blstrs::Scalar;
use cuzk_gpu_sched::testing::gpu_or_skip;
use cuzk_groth16_cuda::{
    AbcInput, Bls12, GpuOptions, GpuProver, Prover, ProverInput, Query, Staging,
};
use cuzk_synth::circuits::CircuitSpec;
use cuzk_synth::{Pce, Witness};

const MIB: u64 = 1 << 20;

fn bytes(p: &Proof<Bls12>) -> Vec<u8> {
    let mut v = Vec::with_capacity(192);
    p.write(&mut v).unwrap();
    v
}

/// The queries whose MSM ran against resident bases in a proof's stages.
fn resident_queries(stages: &[&str]) -> Vec<Query> {
    Query::ALL
        .into_iter()
        .filter(|q| stages.contains(&format!("msm {}", q.name()).as_str()))
        .collect()
}

#[test]
fn a_set_kept_in_part_takes_more_queries_once_room_opens() {
    let _device = crate::device();
    let Some(_) = gpu_or_skip("a_set_kept_in_part_takes_more_queries_once_room_opens") else {
        return;
    };
    let spec: CircuitSpec = "porep:16".parse().unwrap();
    let pce = Pce::record(spec.build(0)).unwrap();
    let params = cuzk_groth16_cuda::fake::fake_params(&pce, 5);
    let witness = Witness::synthesize(spec.build(2)).unwrap();
    let input = ProverInput {
        pce: &pce,
        witness: &witness,
        abc: AbcInput::FromPce,
    };
    let (r, s) = (Scalar::from(3u64), Scalar::from(11u64));
    let options = GpuOptions {
        staging: Staging::Device,
        ..GpuOptions::default()
    };
    let expected = {
        let whole = GpuProver::with_options(0, options).unwrap();
        let p = whole.prove(input, &params, r, s).unwrap();
        let stages: Vec<&str> = p.timings.0.iter().map(|(s, _)| *s).collect();
        assert_eq!(resident_queries(&stages).len(), 5, "{stages:?}");
        bytes(&p.proof)
    };
    // Cards with more and more room over what is held now, each with a new
    // prover, until one keeps the set in part.
    let mut found = None;
    for extra_mib in (8..=1024).step_by(8) {
        let prover = GpuProver::with_options(0, options).unwrap();
        let gpu = Arc::clone(prover.gpu());
        gpu.synchronize_device().unwrap();
        let (free, total) = gpu.mem_info().unwrap();
        gpu.set_memory_limit(Some(total - free + extra_mib * MIB))
            .unwrap();
        let Ok(p) = prover.prove(input, &params, r, s) else {
            gpu.set_memory_limit(None).unwrap();
            continue;
        };
        let stages: Vec<&str> = p.timings.0.iter().map(|(s, _)| *s).collect();
        let kept = resident_queries(&stages);
        if kept.len() == 5 {
            gpu.set_memory_limit(None).unwrap();
            break;
        }
        assert_eq!(bytes(&p.proof), expected, "{kept:?} resident");
        if !kept.is_empty() {
            found = Some((prover, kept));
            break;
        }
        gpu.set_memory_limit(None).unwrap();
    }
    let (prover, kept) =
        found.expect("some card between 8 MiB and 1 GiB over keeps the set in part");
    let held = prover.held_device_bytes();
    // The same card: the set stays as it is.
    let p = prover.prove(input, &params, r, s).unwrap();
    let stages: Vec<&str> = p.timings.0.iter().map(|(s, _)| *s).collect();
    assert_eq!(resident_queries(&stages), kept, "{stages:?}");
    assert_eq!(bytes(&p.proof), expected);
    // Room opens up: the next kernel region keeps every query.
    prover.gpu().set_memory_limit(None).unwrap();
    let p = prover.prove(input, &params, r, s).unwrap();
    let stages: Vec<&str> = p.timings.0.iter().map(|(s, _)| *s).collect();
    assert_eq!(
        resident_queries(&stages).len(),
        5,
        "kept before {kept:?}: {stages:?}"
    );
    assert_eq!(bytes(&p.proof), expected);
    assert!(
        prover.held_device_bytes() > held,
        "the queries added are counted: {} against {held}",
        prover.held_device_bytes()
    );
}
