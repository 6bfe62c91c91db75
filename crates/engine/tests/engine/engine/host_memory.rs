//! Host memory: the a/b/c buffers a finished job left idle serve the next
//! job, and a working set with a/b/c on the device holds no a/b/c buffers.

use crate::common::*;
use cuzk_engine::{ParamsRef, ProofRequest};

/// On a budget with room for one working set, the a/b/c buffers a finished
/// job left idle in the pinned pool serve the next job: its working-set
/// charge takes them over instead of having the budget free them to make
/// room (and the pool page-lock new ones, seconds at full size).
#[test]
fn the_next_job_reuses_the_abc_buffers_a_finished_job_left_idle() {
    let dir = tempfile::tempdir().unwrap();
    let params = ParamsRef::File(params_file(dir.path(), "porep:10"));
    let pce = cuzk_synth::Pce::record(builtin("porep:10", 0)).unwrap();
    let abc = 3 * cuzk_pinned_pool::size_class(pce.num_constraints() * 32).unwrap() as u64;
    // One working set fits, not one beside another's idle a/b/c buffers.
    let budget = need("porep:10") + abc / 2;
    let engine = engine(budget);
    let run = |seed: u64| {
        engine
            .submit(ProofRequest::new(
                "porep:10",
                params.clone(),
                (0..3).map(|s| builtin("porep:10", seed + s)).collect(),
            ))
            .unwrap()
            .wait_blocking()
            .unwrap()
    };
    assert_eq!(run(0).len(), 3);
    let first = engine.stats().pinned;
    assert_eq!(first.bytes_idle as u64, abc, "{first:?}");
    assert_eq!(run(10).len(), 3);
    let second = engine.stats().pinned;
    assert_eq!(
        (second.allocations, second.frees),
        (first.allocations, first.frees),
        "the second job allocated or freed: {first:?} then {second:?}"
    );
    assert!(second.reuses >= first.reuses + 3, "{second:?}");
    assert_eq!(second.bytes_idle as u64, abc, "{second:?}");
    let m = engine.memory();
    assert!(m.used_bytes <= m.budget_bytes, "{m:?}");
}

/// A partition whose a/b/c the backend evaluates on its device holds no
/// a/b/c buffers on the host: its working set is the rest, exactly.
#[test]
fn a_working_set_with_abc_on_the_device_has_no_abc_buffers() {
    let counts = cuzk_engine::pce_file::ShapeCounts {
        num_inputs: 5,
        num_aux: 1_000,
        num_constraints: 3_000,
    };
    let prover = cuzk_groth16_cuda::CpuProver;
    let host = cuzk_engine::working_set_bytes_for(counts, &prover, false);
    let device = cuzk_engine::working_set_bytes_for(counts, &prover, true);
    assert_eq!(host, cuzk_engine::working_set_bytes(counts, &prover));
    let abc = 3 * cuzk_pinned_pool::size_class(3_000 * 32).unwrap() as u64;
    assert_eq!(host - device, abc);
    assert!(device >= 1_005 * 32, "the witness is in it");
}
