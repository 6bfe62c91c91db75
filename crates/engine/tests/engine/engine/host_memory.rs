//! Host memory: the a/b/c buffers a finished job left idle serve the next
//! job, a job's admission leases a/b/c buffers ahead for the partitions in
//! flight as far as the budget has room, a working set with a/b/c on the
//! device holds no a/b/c buffers, and the host witness is freed once the
//! backend holds its own copy.

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

/// A job whose a/b/c wait on the host has its admission lease the a/b/c
/// buffers of the partitions that can be in flight at once (a worker's and
/// `synthesis_ahead`'s: two here) before its first witness, where the
/// budget has room for their whole working sets beside everything else;
/// on a budget with room for one working set, only that one's. The
/// partitions then take them over: nothing is allocated after the
/// admission, nothing freed, and the proofs are made.
#[test]
fn a_jobs_admission_leases_the_abc_buffers_of_its_partitions_in_flight_ahead() {
    let dir = tempfile::tempdir().unwrap();
    let spec = "porep:10";
    let params = ParamsRef::File(params_file(dir.path(), spec));
    let pce = cuzk_synth::Pce::record(builtin(spec, 0)).unwrap();
    let abc = 3 * cuzk_pinned_pool::size_class(pce.num_constraints() * 32).unwrap() as u64;
    let ws = cuzk_engine::working_set_bytes(
        cuzk_engine::pce_file::ShapeCounts::of(&pce),
        &cuzk_groth16_cuda::CpuProver,
    );
    for (budget, sets) in [
        // Room for every working set in flight, and more.
        (need(spec) + 4 * ws, 2u64),
        // Room for one working set, not one beside another's a/b/c.
        (need(spec) + abc / 2, 1),
    ] {
        let engine = engine(budget);
        let config = engine.config();
        assert_eq!(
            config.workers_per_device + config.synthesis_ahead,
            2,
            "the partitions in flight at once this test expects"
        );
        let proofs = engine
            .submit(ProofRequest::new(
                spec,
                params.clone(),
                (0..4).map(|s| builtin(spec, s)).collect(),
            ))
            .unwrap()
            .wait_blocking()
            .unwrap();
        assert_eq!(proofs.len(), 4);
        let pinned = engine.stats().pinned;
        assert_eq!(
            (pinned.allocations, pinned.frees),
            (3 * sets, 0),
            "budget {budget}: {pinned:?}"
        );
        assert_eq!(pinned.bytes_idle as u64, sets * abc, "{pinned:?}");
        let spans = engine.timeline().snapshot().spans;
        let ahead: Vec<_> = spans.iter().filter(|s| s.stage == "abc_ahead").collect();
        assert_eq!(ahead.len(), 1, "one abc_ahead span: {spans:#?}");
        // Every buffer was allocated by the admission, none later.
        let note = ahead[0].note.as_deref().unwrap_or_default();
        assert!(
            note.contains(&format!(
                "of {sets} partitions in flight leased ahead: {} allocated",
                3 * sets
            )),
            "{note}"
        );
        let first_witness = spans
            .iter()
            .filter(|s| s.stage == "witness")
            .map(|s| s.start_us)
            .min()
            .expect("witness spans");
        assert!(
            ahead[0].end_us <= first_witness,
            "{:?} then the first witness at {first_witness}",
            ahead[0]
        );
        let m = engine.memory();
        assert!(m.used_bytes <= m.budget_bytes, "{m:?}");
    }
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

/// The CPU prover as a GPU backend with a/b/c on its device behaves: its
/// staged state keeps its own copy of the witness (as the device copy is),
/// and its kernel region records the witness it was given.
#[derive(Debug, Default)]
struct KeepsWitness {
    inner: cuzk_groth16_cuda::CpuProver,
    given: std::sync::Mutex<Vec<usize>>,
}

impl cuzk_groth16_cuda::Prover for KeepsWitness {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn device_bytes(&self, _pce: &cuzk_synth::Pce) -> u64 {
        0
    }

    fn prepare(
        &self,
        input: cuzk_groth16_cuda::ProverInput<'_>,
        params: &bellperson::groth16::Parameters<cuzk_groth16_cuda::Bls12>,
        timings: &mut cuzk_groth16_cuda::StageTimings,
    ) -> cuzk_groth16_cuda::Result<cuzk_groth16_cuda::Staged> {
        let staged = self.inner.prepare(input, params, timings)?;
        Ok(cuzk_groth16_cuda::Staged::holding_witness((
            staged,
            input.witness.clone(),
        )))
    }

    fn kernel_region(
        &self,
        input: cuzk_groth16_cuda::ProverInput<'_>,
        params: &bellperson::groth16::Parameters<cuzk_groth16_cuda::Bls12>,
        staged: cuzk_groth16_cuda::Staged,
        timings: &mut cuzk_groth16_cuda::StageTimings,
    ) -> cuzk_groth16_cuda::Result<cuzk_groth16_cuda::MsmResults> {
        self.given
            .lock()
            .unwrap()
            .push(input.witness.inputs.len() + input.witness.aux.len());
        let (staged, witness) = staged
            .take::<(cuzk_groth16_cuda::Staged, cuzk_synth::Witness)>()
            .expect("this prover's staged state");
        let input = cuzk_groth16_cuda::ProverInput {
            witness: &witness,
            ..input
        };
        self.inner.kernel_region(input, params, staged, timings)
    }
}

/// A backend whose staged partition holds its own copy of the witness (the
/// GPU's, uploaded in prepare) gets an empty one in its kernel region: the
/// engine frees the host witness (4.2 GB for a 32 GiB PoRep partition) once
/// the partition is prepared instead of after its kernel region. The
/// proofs are bellperson's.
#[test]
fn the_host_witness_is_freed_once_the_backend_holds_its_own() {
    use bellperson::groth16::create_proof;
    use blstrs::Scalar;
    use ff::Field;
    use rand_core::SeedableRng;

    let dir = tempfile::tempdir().unwrap();
    let spec = "porep:9";
    let prover = std::sync::Arc::new(KeepsWitness::default());
    let engine = cuzk_engine::Engine::builder(config(256 << 20))
        .prover(prover.clone())
        .build()
        .unwrap();
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(0x57a9);
    let seeds = [2u64, 7, 1];
    let randomness: Vec<(Scalar, Scalar)> = seeds
        .iter()
        .map(|_| (Scalar::random(&mut rng), Scalar::random(&mut rng)))
        .collect();
    let proofs = engine
        .submit(
            ProofRequest::new(
                spec,
                ParamsRef::File(params_file(dir.path(), spec)),
                seeds.iter().map(|&s| builtin(spec, s)).collect(),
            )
            .with_randomness(randomness.clone()),
        )
        .unwrap()
        .wait_blocking()
        .unwrap();
    let params = params(spec);
    for (i, (&seed, (r, s))) in seeds.iter().zip(&randomness).enumerate() {
        let theirs = create_proof(builtin(spec, seed), &*params, *r, *s).unwrap();
        assert_eq!(bytes(&proofs[i]), bytes(&theirs), "partition {i}");
    }
    assert_eq!(
        *prover.given.lock().unwrap(),
        vec![0; seeds.len()],
        "the witness lengths the kernel regions were given"
    );
}

/// On a budget with room for one working set, the partitions after the
/// first wait for it, and the timeline says so: a noted `budget_wait` span
/// of each partition that waited, from its first refusal to its working
/// set.
#[test]
fn a_partition_that_waits_for_the_budget_says_so_in_the_timeline() {
    let dir = tempfile::tempdir().unwrap();
    let params = ParamsRef::File(params_file(dir.path(), "porep:10"));
    let pce = cuzk_synth::Pce::record(builtin("porep:10", 0)).unwrap();
    let abc = 3 * cuzk_pinned_pool::size_class(pce.num_constraints() * 32).unwrap() as u64;
    let engine = engine(need("porep:10") + abc / 2);
    let proofs = engine
        .submit(ProofRequest::new(
            "porep:10",
            params,
            (0..3).map(|s| builtin("porep:10", s)).collect(),
        ))
        .unwrap()
        .wait_blocking()
        .unwrap();
    assert_eq!(proofs.len(), 3);
    let spans = engine.timeline().snapshot().spans;
    let waits: Vec<_> = spans.iter().filter(|s| s.stage == "budget_wait").collect();
    assert!(!waits.is_empty(), "no budget_wait span: {spans:#?}");
    for w in &waits {
        let note = w.note.as_deref().unwrap_or_default();
        assert!(
            note.contains("no room in the host memory budget for its working set"),
            "{w:?}"
        );
        // Each waited before its witness began.
        let witness = spans
            .iter()
            .find(|s| s.stage == "witness" && s.partition == w.partition)
            .expect("the partition's witness");
        assert!(w.end_us <= witness.start_us, "{w:?} against {witness:?}");
    }
}
