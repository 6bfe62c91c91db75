//! A SnapDeals partition's witness made in parts on every core
//! (`update::witness`) is exactly storage-proofs-update's sequential one
//! (`Witness::synthesize_with_capacity`, what bellperson's prover and the
//! PCE recorder see), value for value, on synthetic 2 KiB and 8 MiB
//! updates: with the witness size known (parts written in place) and
//! unknown (parts joined), the Poseidon and SHA-256 hashes made natively
//! and by the gadgets, and through the process switch; the blank PCE is satisfied by
//! it; a wrong size or a circuit storage-proofs-update would assert on is
//! refused with an error.

use crate::common;
use std::time::Instant;

use cuzk_filecoin::update::{self, UpdateCircuit};
use cuzk_filecoin::{SectorSize, UpdateProof, post, synthetic};
use cuzk_synth::{Pce, SynthError, Witness};
use filecoin_proofs::{PartitionProof, SectorShape2KiB, SectorShape8MiB};
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_update::constants::TreeRHasher;

/// The partition circuits of a synthetic update of `size` from `seed`.
fn circuits<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    size: SectorSize,
    seed: u64,
) -> (UpdateProof, Vec<UpdateCircuit<Tree>>) {
    let dir = common::init();
    let proof = UpdateProof::new(size).unwrap();
    let s = synthetic::update_json(proof, seed).unwrap();
    let request: serde_json::Value = serde_json::from_slice(&s.json).unwrap();
    let vanilla: Vec<PartitionProof<Tree>> =
        serde_json::from_value(request["vanilla_proofs"].clone()).unwrap();
    let partitions = update::partitions(
        proof,
        s.comm_r_old,
        s.comm_r_new,
        s.comm_d_new,
        &vanilla,
        dir,
    )
    .unwrap();
    (proof, partitions.circuits)
}

fn parts_equal_sequential<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    what: &str,
    circuits: Vec<(usize, UpdateCircuit<Tree>)>,
    pce: &Pce,
) {
    for (k, circuit) in circuits {
        let what = format!("{what} partition {k}");
        let start = Instant::now();
        let reference = Witness::synthesize_with_capacity(circuit.clone(), 0, 0).unwrap();
        let t_ref = start.elapsed();
        let (inputs, aux) = (pce.num_inputs, pce.num_aux);
        assert_eq!(reference.inputs.len(), inputs, "{what}: inputs");
        assert_eq!(reference.aux.len(), aux, "{what}: aux");
        assert_eq!(
            reference.inputs.len(),
            5,
            "{what}: ONE, k_and_h_select, comm_r_old, comm_d_new, comm_r_new"
        );

        let start = Instant::now();
        let native = update::witness_with(circuit.clone(), inputs, aux, true).unwrap();
        let t_native = start.elapsed();
        assert_eq!(
            native.inputs, reference.inputs,
            "{what}: inputs, size known"
        );
        assert!(native.aux == reference.aux, "{what}: aux, size known");
        let native = update::witness_with(circuit.clone(), 0, 0, true).unwrap();
        assert!(native == reference, "{what}: size unknown");
        let start = Instant::now();
        let gadget = update::witness_with(circuit.clone(), inputs, aux, false).unwrap();
        let t_gadget = start.elapsed();
        assert!(gadget == reference, "{what}: gadgets, size known");
        let gadget = update::witness_with(circuit.clone(), 0, 0, false).unwrap();
        assert!(gadget == reference, "{what}: gadgets, size unknown");
        let switched = update::witness(circuit.clone(), inputs, aux).unwrap();
        assert!(switched == reference, "{what}: update::witness");
        eprintln!(
            "{what}: {aux} aux; storage-proofs {t_ref:.2?}, parts: native {t_native:.2?}, \
             gadgets {t_gadget:.2?} on {} threads",
            rayon::current_num_threads()
        );

        let abc = cuzk_synth::evaluate(pce, &native).unwrap();
        cuzk_synth::check_satisfied(pce, &abc.a, &abc.b, &abc.c).unwrap();

        // A size that is not this circuit's is refused, never filled.
        for aux in [aux + 1, aux - 1, aux + 10] {
            let e = update::witness_with(circuit.clone(), inputs, aux, true).unwrap_err();
            assert!(
                matches!(e, SynthError::PartMismatch { .. }),
                "{what}: aux {aux}: {e:?}"
            );
        }
    }
}

#[test]
fn update_2kib_parts_witness_is_storage_proofs() {
    let (proof, circuits) = circuits::<SectorShape2KiB>(SectorSize::KIB2, 21);
    let pce = update::blank_pce(proof).unwrap().pce;
    parts_equal_sequential(
        &proof.to_string(),
        circuits.into_iter().enumerate().collect(),
        &pce,
    );
}

/// A synthetic 8 MiB update: 4 partitions of 10 challenges; the last is
/// compared (a partition index that is not 0, in the challenges' bits).
#[test]
fn update_8mib_parts_witness_is_storage_proofs() {
    let (proof, mut circuits) = circuits::<SectorShape8MiB>(SectorSize::MIB8, 22);
    assert_eq!(circuits.len(), 4);
    let last = circuits.pop().unwrap();
    let pce = update::blank_pce(proof).unwrap().pce;
    parts_equal_sequential(&proof.to_string(), vec![(3, last)], &pce);
}

/// The process switch: with the native Poseidon off, `update::witness` is
/// storage-proofs-update's sequential synthesis; the same witness either
/// way.
#[test]
fn update_witness_follows_the_native_poseidon_switch() {
    let (_, mut circuits) = circuits::<SectorShape2KiB>(SectorSize::KIB2, 23);
    let circuit = circuits.remove(0);
    let reference = Witness::synthesize_with_capacity(circuit.clone(), 0, 0).unwrap();
    let (inputs, aux) = (reference.inputs.len(), reference.aux.len());
    let was = post::native_poseidon();
    post::set_native_poseidon(false);
    let off = update::witness(circuit.clone(), inputs, aux);
    let off_unknown = update::witness(circuit.clone(), 0, 0);
    post::set_native_poseidon(true);
    let on = update::witness(circuit.clone(), inputs, aux);
    post::set_native_poseidon(was);
    assert!(off.unwrap() == reference, "switch off, size known");
    assert!(
        off_unknown.unwrap() == reference,
        "switch off, size unknown"
    );
    assert!(on.unwrap() == reference, "switch on");
}

/// What storage-proofs-update asserts on (and panics) is an error here:
/// a new label that is not old + data × rho, a missing apex leaf.
#[test]
fn update_parts_refuse_what_storage_proofs_asserts_on() {
    let (_, mut circuits) = circuits::<SectorShape2KiB>(SectorSize::KIB2, 24);
    let circuit = circuits.remove(0);
    update::witness_with(circuit.clone(), 0, 0, true).unwrap();

    let mut bad = circuit.clone();
    let leaf = &mut bad.0.priv_inputs.challenge_proofs[1].leaf_r_new;
    *leaf = leaf.map(|v| v + blstrs::Scalar::from(1u64));
    for native in [true, false] {
        let e = update::witness_with(bad.clone(), 0, 0, native).unwrap_err();
        assert!(format!("{e}").contains("leaf_r_new"), "{e}");
    }

    let mut bad = circuit;
    bad.0.priv_inputs.apex_leafs.pop();
    assert!(update::witness_with(bad, 0, 0, true).is_err());
}
