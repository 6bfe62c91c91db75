//! Proofs: multi-partition jobs byte-identical to bellperson (with the
//! progress events in order), and the async wait giving each job's proofs in
//! partition order.

use crate::common::*;
use bellperson::groth16::{create_proof, prepare_verifying_key, verify_proof};
use blstrs::Scalar;
use cuzk_engine::{ParamsRef, Priority, ProgressStage, ProofRequest};
use cuzk_synth::Witness;
use ff::Field;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

use super::MIB;

#[test]
fn multi_partition_jobs_are_byte_identical_to_bellperson() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(512 * MIB);
    let mut rng = ChaCha20Rng::seed_from_u64(11);
    for spec in ["porep:9", "mul-chain:8"] {
        let params = params(spec);
        let path = params_file(dir.path(), spec);
        let seeds = [3u64, 1, 4, 1, 5];
        let randomness: Vec<(Scalar, Scalar)> = seeds
            .iter()
            .map(|_| (Scalar::random(&mut rng), Scalar::random(&mut rng)))
            .collect();
        let mut job = engine
            .submit(
                ProofRequest::new(
                    spec,
                    ParamsRef::File(path),
                    seeds.iter().map(|&s| builtin(spec, s)).collect(),
                )
                .with_randomness(randomness.clone()),
            )
            .unwrap();
        let mut events = job.take_events().unwrap();
        let proofs = job.wait_blocking().unwrap();
        assert_eq!(proofs.len(), seeds.len());
        let pvk = prepare_verifying_key(&params.vk);
        for (i, (&seed, (r, s))) in seeds.iter().zip(&randomness).enumerate() {
            let theirs = create_proof(builtin(spec, seed), &*params, *r, *s).unwrap();
            assert_eq!(bytes(&proofs[i]), bytes(&theirs), "{spec} partition {i}");
            let witness = Witness::synthesize(builtin(spec, seed)).unwrap();
            assert!(verify_proof(&pvk, &proofs[i], witness.public_inputs()).unwrap());
        }
        let mut stages = Vec::new();
        while let Ok(e) = events.try_recv() {
            stages.push(e.stage);
        }
        assert_eq!(stages.first(), Some(&ProgressStage::Admitted), "{stages:?}");
        assert_eq!(stages.last(), Some(&ProgressStage::Finished), "{stages:?}");
        let proved = stages
            .iter()
            .filter(|s| **s == ProgressStage::Proved)
            .count();
        assert_eq!(proved, seeds.len());
        eprintln!(
            "{spec}: {} partitions byte-identical to bellperson",
            seeds.len()
        );
    }
    let stats = engine.stats();
    assert_eq!((stats.cached_shapes, stats.resident_params), (2, 2));
    assert_eq!(stats.memory.working_set_bytes, 0);
    assert_eq!(stats.dispatch_in_flight, 0);
}

#[test]
fn the_async_wait_gives_proofs_in_partition_order() {
    let engine = engine(256 * MIB);
    engine.register_params("chain", params("chain:40")).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let seeds: Vec<u64> = (0..6).collect();
    let job = |priority| {
        engine
            .submit(
                ProofRequest::new(
                    "chain:40",
                    ParamsRef::Key("chain".into()),
                    seeds.iter().map(|&s| Chain::good(40, s)).collect(),
                )
                .with_priority(priority),
            )
            .unwrap()
    };
    let (a, b) = (job(Priority::Low), job(Priority::Critical));
    let (a, b) = runtime.block_on(async { tokio::join!(a.wait(), b.wait()) });
    let pvk = prepare_verifying_key(&params("chain:40").vk);
    for proofs in [a.unwrap(), b.unwrap()] {
        for (seed, proof) in seeds.iter().zip(&proofs) {
            let out = Chain::good(40, *seed).output();
            assert!(verify_proof(&pvk, proof, &[out]).unwrap(), "seed {seed}");
        }
    }
}
