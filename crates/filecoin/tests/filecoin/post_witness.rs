//! A PoSt partition's witness made in parts on every core
//! (`post::witness`) is exactly storage-proofs' sequential one: WinningPoSt
//! and WindowPoSt of the sealed 2 KiB sector and of synthetic 8 MiB
//! sectors, with the witness size known (parts written in place) and
//! unknown (parts joined), against `Witness::synthesize_with_capacity`
//! (what bellperson's prover and the PCE recorder see) and against
//! `FallbackPoStCircuit`'s sequential path on a system that is not
//! extensible; the blank PCE is satisfied by it; a wrong size is refused.
//! Each way with the inclusion paths' Poseidon made natively (the default)
//! and by storage-proofs' gadget (`post::witness_with`, and the process
//! switch `post::set_native_poseidon`).

use crate::common;
use std::time::Instant;

use bellperson::{Circuit, ConstraintSystem, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use cuzk_filecoin::post::{self, PostCircuit};
use cuzk_filecoin::{PostKind, PostProof, synthetic};
use cuzk_synth::{Pce, SynthError, Witness, WitnessCs};
use filecoin_proofs::{SectorShape2KiB, SectorShape8MiB};
use storage_proofs_core::merkle::MerkleTreeTrait;

/// `WitnessCs` seen as not extensible: `FallbackPoStCircuit` then takes
/// its sequential path (`synthesize_default`), one sector after the other.
struct SequentialCs(WitnessCs);

impl ConstraintSystem<Scalar> for SequentialCs {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, a: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.0.alloc(a, f)
    }

    fn alloc_input<F, A, AR>(&mut self, a: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.0.alloc_input(a, f)
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, _: LA, _: LB, _: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
    }

    fn push_namespace<NR, N>(&mut self, _: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}

fn sequential<Tree: 'static + MerkleTreeTrait>(circuit: PostCircuit<Tree>) -> Witness {
    let mut cs = SequentialCs(WitnessCs::with_capacity(0, 0));
    circuit.synthesize(&mut cs).unwrap();
    cs.0.into_witness()
}

fn parts_equal_sequential<Tree: 'static + MerkleTreeTrait>(
    what: &str,
    circuits: Vec<PostCircuit<Tree>>,
    pce: &Pce,
) {
    for (k, circuit) in circuits.into_iter().enumerate() {
        let what = format!("{what} partition {k}");
        let start = Instant::now();
        let reference = Witness::synthesize_with_capacity(circuit.clone(), 0, 0).unwrap();
        let t_ref = start.elapsed();
        assert_eq!(reference.inputs.len(), pce.num_inputs, "{what}: inputs");
        assert_eq!(reference.aux.len(), pce.num_aux, "{what}: aux");
        assert!(
            sequential(circuit.clone()) == reference,
            "{what}: storage-proofs' sequential path differs from its extensible one"
        );
        let paths: usize = circuit.sectors().iter().map(|s| s.paths.len()).sum();
        assert_eq!(
            reference.inputs.len(),
            1 + circuit.sectors().len() + paths,
            "{what}: ONE, each sector's comm_r and each path's packed index"
        );

        let start = Instant::now();
        let known = post::witness(circuit.clone(), pce.num_inputs, pce.num_aux).unwrap();
        let t_par = start.elapsed();
        assert_eq!(known.inputs, reference.inputs, "{what}: inputs, size known");
        assert!(known.aux == reference.aux, "{what}: aux, size known");
        let unknown = post::witness(circuit.clone(), 0, 0).unwrap();
        assert!(unknown == reference, "{what}: size unknown");
        // Both ways whatever the process switch says.
        let start = Instant::now();
        let native = post::witness_with(circuit.clone(), pce.num_inputs, pce.num_aux, true);
        let t_native = start.elapsed();
        assert!(native.unwrap() == reference, "{what}: native Poseidon");
        let native = post::witness_with(circuit.clone(), 0, 0, true).unwrap();
        assert!(native == reference, "{what}: native Poseidon, size unknown");
        let start = Instant::now();
        let gadget = post::witness_with(circuit.clone(), pce.num_inputs, pce.num_aux, false);
        let t_gadget = start.elapsed();
        assert!(gadget.unwrap() == reference, "{what}: Poseidon gadget");
        eprintln!(
            "{what}: {} sectors, {} aux; storage-proofs {t_ref:.2?}, parts {t_par:.2?} (native \
             Poseidon {t_native:.2?}, gadget {t_gadget:.2?}) on {} threads",
            circuit.sectors().len(),
            reference.aux.len(),
            rayon::current_num_threads()
        );

        let abc = cuzk_synth::evaluate(pce, &known).unwrap();
        cuzk_synth::check_satisfied(pce, &abc.a, &abc.b, &abc.c).unwrap();

        // A size that is not this circuit's is refused, never filled.
        for aux in [pce.num_aux + 1, pce.num_aux - 1] {
            let e = post::witness(circuit.clone(), pce.num_inputs, aux).unwrap_err();
            assert!(
                matches!(e, SynthError::PartMismatch { .. }),
                "{what}: aux {aux}: {e:?}"
            );
        }
    }
}

fn sealed_2kib(kind: PostKind) {
    let dir = common::init();
    let proof = common::post_proof(kind);
    let vanilla = common::post_vanilla(proof, [9; 32]);
    let sealed = common::sealed_2kib();
    let partitions = post::partitions(proof, &[9; 32], sealed.prover_id, &vanilla, dir).unwrap();
    let pce = post::blank_pce(proof).unwrap().pce;
    parts_equal_sequential(&proof.to_string(), partitions.circuits, &pce);
}

#[test]
fn winning_post_2kib_parts_witness_is_storage_proofs() {
    sealed_2kib(PostKind::Winning);
}

#[test]
fn window_post_2kib_parts_witness_is_storage_proofs() {
    sealed_2kib(PostKind::Window);
}

/// Synthetic 8 MiB sectors: WindowPoSt over 3 sectors (two partitions of
/// two, the second padded as filecoin-proofs pads it), WinningPoSt over
/// one.
#[test]
fn post_8mib_parts_witness_is_storage_proofs() {
    let dir = common::init();
    for (name, sectors) in [
        ("StackedDrgWindow8MiBV1_1", 3),
        ("StackedDrgWinning8MiBV1", 1),
    ] {
        let proof: PostProof = name.parse().unwrap();
        let s = synthetic::post_vanilla::<SectorShape8MiB>(proof, sectors, 11).unwrap();
        let partitions =
            post::partitions(proof, &s.randomness, s.prover_id, &s.vanilla, dir).unwrap();
        if proof.kind == PostKind::Window {
            assert_eq!(partitions.circuits.len(), 2, "{name}: partitions");
        }
        let pce = post::blank_pce(proof).unwrap().pce;
        parts_equal_sequential(name, partitions.circuits, &pce);
    }
}

/// Sectors with unequal challenge counts cannot be cut into parts of
/// known size: refused, and joined correctly when the size is unknown.
#[test]
fn post_parts_of_unequal_sectors_are_refused_in_place_and_joined_otherwise() {
    common::init();
    let proof = common::post_proof(PostKind::Window);
    let s = synthetic::post_vanilla::<SectorShape2KiB>(proof, 2, 12).unwrap();
    let mut circuit = post::partitions(
        proof,
        &s.randomness,
        s.prover_id,
        &s.vanilla,
        common::init(),
    )
    .unwrap()
    .circuits
    .remove(0);
    circuit.truncate_challenges(1, 3);
    assert_eq!(circuit.sectors()[1].leafs.len(), 3);
    assert_eq!(circuit.sectors()[1].paths.len(), 3);
    let reference = Witness::synthesize_with_capacity(circuit.clone(), 0, 0).unwrap();
    assert!(post::witness(circuit.clone(), 0, 0).unwrap() == reference);
    for native in [true, false] {
        let w = post::witness_with(circuit.clone(), 0, 0, native).unwrap();
        assert!(w == reference, "native {native}");
    }
    let e = post::witness(circuit, reference.inputs.len(), reference.aux.len()).unwrap_err();
    assert!(matches!(e, SynthError::PartMismatch { .. }), "{e:?}");
}

/// The process switch: with the native Poseidon off (storage-proofs'
/// gadget for every path) the witness is the same, the partition cut to
/// fewer sectors too.
#[test]
fn post_witness_with_native_poseidon_off_is_the_same() {
    let dir = common::init();
    let proof = common::post_proof(PostKind::Window);
    let s = synthetic::post_vanilla::<SectorShape2KiB>(proof, 2, 13).unwrap();
    let mut circuit = post::partitions(proof, &s.randomness, s.prover_id, &s.vanilla, dir)
        .unwrap()
        .circuits
        .remove(0);
    assert_eq!(circuit.sectors().len(), 2);
    circuit.truncate_sectors(1);
    assert_eq!(circuit.sectors().len(), 1);
    let reference = Witness::synthesize_with_capacity(circuit.clone(), 0, 0).unwrap();
    let (inputs, aux) = (reference.inputs.len(), reference.aux.len());
    let was = post::native_poseidon();
    post::set_native_poseidon(false);
    assert!(!post::native_poseidon());
    let off = post::witness(circuit.clone(), inputs, aux);
    let off_unknown = post::witness(circuit.clone(), 0, 0);
    post::set_native_poseidon(true);
    assert!(post::native_poseidon());
    let on = post::witness(circuit.clone(), inputs, aux);
    post::set_native_poseidon(was);
    assert!(off.unwrap() == reference, "switch off, size known");
    assert!(
        off_unknown.unwrap() == reference,
        "switch off, size unknown"
    );
    assert!(on.unwrap() == reference, "switch on");
}
