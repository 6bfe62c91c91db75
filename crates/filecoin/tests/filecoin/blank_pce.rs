//! PCEs of Filecoin's circuits recorded without a sector, from
//! storage-proofs' blank circuits: equal to the PCE of a real partition
//! circuit (2 KiB PoRep, WindowPoSt and SnapDeals), and an engine given the
//! PoRep one in its PCE directory proves a C2 from it (read from disk,
//! nothing recorded) that verify_seal accepts.

use crate::common;
use cuzk_engine::{Backend, Engine, EngineConfig};
use cuzk_filecoin::{C1Output, PostKind, SectorSize, UpdateProof, porep, post, shape_id, update};
use cuzk_synth::Pce;

/// Every part of two PCEs that the prover reads.
fn assert_same(what: &str, blank: &Pce, real: &Pce) {
    assert_eq!(blank.num_inputs, real.num_inputs, "{what}: inputs");
    assert_eq!(blank.num_aux, real.num_aux, "{what}: aux");
    assert!(blank.a == real.a, "{what}: A differs");
    assert!(blank.b == real.b, "{what}: B differs");
    assert!(blank.c == real.c, "{what}: C differs");
    assert!(
        blank.coeff_table == real.coeff_table,
        "{what}: coefficients differ"
    );
    assert!(blank.a_aux_density == real.a_aux_density, "{what}");
    assert!(blank.b_input_density == real.b_input_density, "{what}");
    assert!(blank.b_aux_density == real.b_aux_density, "{what}");
}

#[test]
fn porep_pce_from_the_blank_circuit_is_the_real_one_and_proves_from_disk() {
    let dir = common::init();
    let sealed = common::sealed_2kib();
    let proof = sealed.proof;
    porep::generate_test_params(proof, dir, common::PARAM_SEED).unwrap();

    let blank = porep::blank_pce(proof).unwrap();
    let partitions = porep::partitions(&sealed.c1, proof, dir).unwrap();
    assert_eq!(blank.shape, shape_id(&partitions.params));
    let real = Pce::record(partitions.circuits[0].clone()).unwrap();
    assert_same("PoRep 2 KiB", &blank.pce, &real);
    eprintln!(
        "PoRep 2 KiB blank PCE: {} constraints in {:.3} s",
        blank.pce.num_constraints(),
        blank.record_seconds
    );

    // An engine that finds it in its PCE directory reads it, records
    // nothing, and its C2 verifies.
    let pce_dir = tempfile::tempdir().unwrap();
    let path = blank.write_to(pce_dir.path()).unwrap();
    assert!(path.starts_with(pce_dir.path()) && path.is_file());
    let engine = Engine::new(EngineConfig {
        backend: Backend::Auto,
        params_subgroup_check: false,
        pce_cache_dir: Some(pce_dir.path().to_owned()),
        ..EngineConfig::default()
    })
    .unwrap();
    let c1 = C1Output::from_json(&sealed.c1_json().unwrap(), None).unwrap();
    let c2 = c1.prove(&engine, dir, None).unwrap();
    let stats = engine.stats();
    assert_eq!(
        (stats.pce_loaded_from_disk, stats.pce_recorded),
        (1, 0),
        "{stats:?}"
    );
    let accepted = sealed.verify_seal(&c2.bytes).unwrap();
    assert!(
        accepted,
        "verify_seal refused a C2 proved with the blank PCE"
    );
}

#[test]
fn post_and_update_pces_from_blank_circuits_are_the_real_ones() {
    let dir = common::init();
    let sealed = common::sealed_2kib();
    let randomness = [3u8; 32];
    for kind in [PostKind::Window, PostKind::Winning] {
        let proof = common::post_proof(kind);
        let vanilla = common::post_vanilla(proof, randomness);
        let partitions =
            post::partitions(proof, &randomness, sealed.prover_id, &vanilla, dir).unwrap();
        let blank = post::blank_pce(proof).unwrap();
        assert_eq!(blank.shape, shape_id(&partitions.params), "{proof}");
        let real = Pce::record(partitions.circuits[0].clone()).unwrap();
        assert_same(&proof.to_string(), &blank.pce, &real);
    }

    let updated = common::updated_2kib();
    let proof = UpdateProof::new(SectorSize::KIB2).unwrap();
    let partitions = update::partitions(
        proof,
        updated.comm_r_old,
        updated.comm_r_new,
        updated.comm_d_new,
        &updated.vanilla_proofs,
        dir,
    )
    .unwrap();
    let blank = update::blank_pce(proof).unwrap();
    assert_eq!(blank.shape, shape_id(&partitions.params));
    let real = Pce::record(partitions.circuits[0].clone()).unwrap();
    assert_same("SnapDeals 2 KiB", &blank.pce, &real);
}
