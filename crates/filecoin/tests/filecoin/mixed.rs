//! A WindowPoSt (HIGH) submitted while a 2 KiB PoRep C2 (NORMAL) proves and
//! a second one waits admitted behind it, on a host budget of one PoRep job
//! and one more working set: the queued PoRep job parks (gives its reserved
//! working set and its holds on parameters and PCE up) so the WindowPoSt is
//! admitted at once and ends before it; the parked job is admitted again
//! and finishes. Every proof verifies with filecoin-proofs' verifiers.
//!
//! At 2 KiB on the CPU backend a PoRep job's working set (about 1 GB: a
//! domain of 2^22) is larger than the whole WindowPoSt set, so the park
//! alone makes room and nothing is evicted (two parameter loads, one at a
//! time); the eviction and reload of a set are tested in the engine's
//! `mixed` tests, whose parameters outweigh their working sets as the
//! 32 GiB ones do.

use crate::common;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cuzk_engine::pce_file::ShapeCounts;
use cuzk_engine::timeline::{PARAMS_LOAD, PARKED};
use cuzk_engine::{Auto, Backend, ByteSize, Engine, EngineConfig, JobHandle, JobPhase};
use cuzk_filecoin::post::PostInput;
use cuzk_filecoin::{C1Output, PostKind, VanillaEncoding, porep, post, proofs_to_bytes};
use filecoin_proofs::{PublicReplicaInfo, SectorShape2KiB};

const RANDOMNESS: [u8; 32] = [3; 32];

/// PCE file + parameter file + one CPU working set: what admission charges
/// for a job of this circuit (the PCE read from `pce_dir`).
fn need(
    blank: &cuzk_filecoin::BlankPce,
    pce_dir: &std::path::Path,
    params: &std::path::Path,
) -> (u64, u64) {
    let pce_file = blank.write_to(pce_dir).unwrap();
    let len = |p: &std::path::Path| std::fs::metadata(p).unwrap().len();
    let ws =
        cuzk_engine::working_set_bytes(ShapeCounts::of(&blank.pce), &cuzk_groth16_cuda::CpuProver);
    (len(&pce_file) + len(params) + ws, ws)
}

type Waited = (
    cuzk_engine::Result<Vec<bellperson::groth16::Proof<blstrs::Bls12>>>,
    Instant,
);

fn wait_in_thread(job: JobHandle) -> std::thread::JoinHandle<Waited> {
    std::thread::spawn(move || {
        let r = job.wait_blocking();
        (r, Instant::now())
    })
}

#[test]
fn window_post_is_admitted_at_once_behind_porep_by_parking_the_queued_porep_job() {
    let started = Instant::now();
    let dir = common::init();
    let sealed = common::sealed_2kib();
    let window = common::post_proof(PostKind::Window);
    porep::generate_test_params(sealed.proof, dir, common::PARAM_SEED).unwrap();
    post::generate_test_params(window, dir, common::PARAM_SEED).unwrap();

    let c1 = C1Output::from_json(&sealed.c1_json().unwrap(), None).unwrap();
    let vanilla = common::post_vanilla(window, RANDOMNESS);
    let json = PostInput::request_json(
        window,
        RANDOMNESS,
        sealed.prover_id,
        &vanilla,
        VanillaEncoding::Json,
    )
    .unwrap();
    let input = PostInput::from_json(&json, Some(PostKind::Window)).unwrap();

    // The PCEs from the blank circuits, in the engine's PCE directory.
    let pce_dir = tempfile::tempdir().unwrap();
    let porep_params = c1.param_files(dir).unwrap().params;
    let post_params = input.param_files(dir).unwrap().params;
    let (need_porep, ws_porep) = need(
        &porep::blank_pce(sealed.proof).unwrap(),
        pce_dir.path(),
        &porep_params,
    );
    let (need_post, _) = need(
        &post::blank_pce(window).unwrap(),
        pce_dir.path(),
        &post_params,
    );
    // Both PoRep jobs admitted leave half of what the WindowPoSt needs; the
    // queued one's working set, given back, is enough.
    let budget = need_porep + ws_porep + need_post / 2;
    assert!(
        ws_porep >= need_post / 2 + need_post % 2,
        "{ws_porep} < {need_post} / 2"
    );

    // One partition in flight at a time: the second PoRep job's waits
    // queued while the first one's proves.
    let engine = Arc::new(
        Engine::new(EngineConfig {
            backend: Backend::Cpu,
            params_subgroup_check: false,
            pce_cache_dir: Some(pce_dir.path().to_owned()),
            host_memory_budget: Auto::Value(ByteSize(budget)),
            synthesis_concurrency: Auto::Value(1),
            dispatch_bound: Auto::Value(1),
            ..EngineConfig::default()
        })
        .unwrap(),
    );

    // The budget is never exceeded; every waiting reason is kept.
    let done = Arc::new(AtomicBool::new(false));
    let seen: Arc<Mutex<BTreeSet<(u64, String)>>> = Arc::default();
    let monitor = {
        let (engine, done, seen) = (Arc::clone(&engine), Arc::clone(&done), Arc::clone(&seen));
        std::thread::spawn(move || {
            while !done.load(Ordering::SeqCst) {
                let m = engine.memory();
                assert!(m.used_bytes <= m.budget_bytes, "over budget: {m:?}");
                for j in engine.status().jobs {
                    if let Some(w) = j.waiting {
                        seen.lock().unwrap().insert((j.id, w));
                    }
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };

    let porep1 = c1
        .submit(&engine, dir, Some(common::randomness(1, 1)), None)
        .unwrap();
    let porep2 = c1
        .submit(&engine, dir, Some(common::randomness(1, 2)), None)
        .unwrap();
    let ids = (porep1.id().0, porep2.id().0);
    // The first proves, the second is admitted with its partition queued
    // (jobs of one priority are admitted in the order they were submitted).
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        let status = engine.status();
        let job = |id| status.jobs.iter().find(|j| j.id == id).unwrap();
        let (first, second) = (job(ids.0), job(ids.1));
        if first.queued == 0 && second.phase == JobPhase::Running && second.queued == 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{status:#?}\nwaiting reasons seen: {:#?}",
            seen.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let post_job = input.submit(&engine, dir, None, None).unwrap();
    let post_id = post_job.id().0;
    let [porep1, porep2, post_job] = [porep1, porep2, post_job].map(wait_in_thread);
    let (porep1, _) = porep1.join().unwrap();
    let (porep2, porep2_end) = porep2.join().unwrap();
    let (post_out, post_end) = post_job.join().unwrap();
    done.store(true, Ordering::SeqCst);
    monitor.join().unwrap();

    // Every proof verifies with filecoin-proofs.
    for proofs in [porep1.unwrap(), porep2.unwrap()] {
        let accepted = sealed.verify_seal(&proofs_to_bytes(&proofs)).unwrap();
        assert!(accepted, "verify_seal refused a PoRep C2 of the mixed run");
    }
    let replicas = BTreeMap::from([(
        sealed.sector_id,
        PublicReplicaInfo::new(sealed.pre_commit.comm_r).unwrap(),
    )]);
    let accepted = filecoin_proofs::verify_window_post::<SectorShape2KiB>(
        &window.config(),
        &RANDOMNESS,
        &replicas,
        sealed.prover_id,
        &proofs_to_bytes(&post_out.unwrap()),
    )
    .unwrap();
    assert!(
        accepted,
        "verify_window_post refused the mixed run's WindowPoSt"
    );

    // The queued PoRep job parked for the WindowPoSt, which ended first.
    assert!(
        post_end < porep2_end,
        "the WindowPoSt ended after the queued PoRep"
    );
    let stats = engine.stats();
    assert_eq!(stats.parks, 1, "{stats:#?}");
    let parked = format!("parked: parameters yielded to job {post_id} (high)");
    let seen = seen.lock().unwrap().clone();
    assert!(
        seen.iter()
            .any(|(id, w)| *id == ids.1 && w.starts_with(&parked)),
        "{seen:#?}"
    );
    let timeline = engine.timeline().snapshot().spans;
    assert!(timeline.iter().any(|s| s.job == ids.1 && s.stage == PARKED));

    // Each set loaded once, never two loads at once.
    assert_eq!(stats.params_loads, 2, "{stats:#?}");
    let mut loads: Vec<(u64, u64)> = timeline
        .iter()
        .filter(|s| s.stage == PARAMS_LOAD)
        .map(|s| (s.start_us, s.end_us))
        .collect();
    loads.sort_unstable();
    assert!(loads.windows(2).all(|w| w[0].1 <= w[1].0), "{loads:?}");
    assert_eq!(stats.memory.working_set_bytes, 0);
    eprintln!(
        "mixed 2 KiB: budget {budget} bytes (PoRep job {need_porep}, WindowPoSt job {need_post}), \
         {} parks, {} loads, {:.1?}",
        stats.parks,
        stats.params_loads,
        started.elapsed()
    );
}
