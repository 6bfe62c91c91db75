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
    // Large enough that a card can hold part of the set beside the 256 MiB
    // a set kept in part leaves for its streamed plan (about 600 MB here).
    let spec: CircuitSpec = "porep:20".parse().unwrap();
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
    // A new prover on a card with `extra_mib` over what is held now: its
    // first proof's resident queries (none where it does not fit at all),
    // and the prover, kept on that card.
    let try_card = |extra_mib: u64| {
        let prover = GpuProver::with_options(0, options).unwrap();
        let gpu = Arc::clone(prover.gpu());
        gpu.set_memory_limit(None).unwrap();
        gpu.synchronize_device().unwrap();
        let (free, total) = gpu.mem_info().unwrap();
        gpu.set_memory_limit(Some(total - free + extra_mib * MIB))
            .unwrap();
        let kept = match prover.prove(input, &params, r, s) {
            Ok(p) => {
                let stages: Vec<&str> = p.timings.0.iter().map(|(s, _)| *s).collect();
                assert_eq!(bytes(&p.proof), expected, "{stages:?}");
                resident_queries(&stages)
            }
            Err(_) => Vec::new(),
        };
        (prover, kept)
    };
    // The smallest card (to 16 MiB) that keeps any query: more room never
    // keeps fewer, and the first query kept (A, about a sixth of the set)
    // leaves others out.
    let (mut lo, mut hi) = (0u64, 32 << 10);
    assert_eq!(try_card(hi).1.len(), 5, "a card 32 GiB over keeps the set");
    while hi - lo > 16 {
        let mid = (lo + hi) / 2;
        if try_card(mid).1.is_empty() {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let (prover, kept) = try_card(hi);
    assert!(
        !kept.is_empty() && kept.len() < 5,
        "the smallest card keeping a query ({hi} MiB over) keeps {kept:?}"
    );
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
